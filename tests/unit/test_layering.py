"""The architecture's rules, checked on the source: `zonda/` is pure, arrows point one way.

- `zonda/` imports nothing from Kubernetes clients, kopf or `controller`.
- The clock is read in exactly the functions named below (each pinnable in tests); anywhere else in
  `zonda/` a call such as `datetime.now()` is a hidden clock and fails this test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ZONDA = Path(__file__).resolve().parents[2] / "zonda"
FORBIDDEN_IMPORTS = ("kubernetes", "kubernetes_asyncio", "kopf", "controller", "aiohttp")
#: (module, function) pairs allowed to read the wall clock, each injectable.
CLOCK_READERS = {
    ("zonda/timetables/base.py", "utcnow"),  # pinned by zonda.schedules.scheduling (contextvar)
    ("zonda/sensors/base.py", "utcnow"),  # run time, in the task's pod; tests pin it
    ("zonda/triggers/timezone.py", "system_clock"),  # run time, in the triggerer; use_clock() replaces it
    ("zonda/tries/templating.py", "render_clock"),  # a template's time limit (monotonic), where it renders
}
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic"}
CLOCK_OWNERS = {"datetime", "pendulum", "time", "date", "DateTime", "Date"}


def modules() -> list[Path]:
    return sorted(ZONDA.rglob("*.py"))


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ZONDA.parent)))
def test_the_domain_imports_nothing_that_talks_to_kubernetes(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            assert name.split(".")[0] not in FORBIDDEN_IMPORTS, f"{path.name} imports {name}"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ZONDA.parent)))
def test_the_clock_is_read_only_through_pinnable_functions(path: Path) -> None:
    relative = str(path.relative_to(ZONDA.parent))
    tree = ast.parse(path.read_text())
    for function in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)] + [
        tree
    ]:
        body = (
            function.body
            if not isinstance(function, ast.Module)
            else [
                n
                for n in function.body
                if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            ]
        )
        for node in (n for stmt in body for n in ast.walk(stmt)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner = node.func.value
            owner_name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
            if node.func.attr in CLOCK_CALLS and owner_name in CLOCK_OWNERS:
                name = getattr(function, "name", "<module>")
                assert (relative, name) in CLOCK_READERS, (
                    f"{relative}:{node.lineno} reads the clock in {name}()"
                )


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ZONDA.parent)))
def test_the_domain_names_no_controller_module_even_by_string(path: Path) -> None:
    """A class named by import path is an import import-linter cannot see: providers register instead."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert not node.value.startswith("controller."), f"{path.name}:{node.lineno} names {node.value!r}"


def test_providers_register_their_operators_by_entry_point() -> None:
    """Zonda's Kubernetes provider is found through the `zonda.operators` entry-point group."""
    import importlib

    from controller.providers.kubernetes.sensors import WaitForObjectSensor
    from zonda.specs import operator_registry

    classpath = operator_registry.operator_classpath("WaitForObjectSensor")
    module, _, name = classpath.rpartition(".")
    assert getattr(importlib.import_module(module), name) is WaitForObjectSensor
