"""Import a name by path: how DAG specs name operators, callables and triggers.

One implementation for all of them, accepting Airflow's dotted form (`pkg.mod.Class`) and the
entry-point form (`pkg.mod:function`), with errors that name the path.
"""

from __future__ import annotations

import importlib
from typing import Any


def import_string(path: str) -> Any:
    """Import `pkg.mod:name` or `pkg.mod.name` (Airflow's `import_string`, plus the colon form)."""
    module_name, separator, attribute = path.partition(":")
    if not separator:
        module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        raise ImportError(f"{path!r} is not an import path: expected 'pkg.module:name' or 'pkg.module.name'")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ImportError(f"module {module_name!r} has no attribute {attribute!r}") from None
