"""Count the import cycles between Zonda's modules: `python hack/import_cycles.py [--runtime]`.

A cycle is a strongly connected group of modules (each reaches the others through imports, lazy ones
inside functions included). `--runtime` leaves out imports under `if TYPE_CHECKING:`, which type
annotations need but which never run. Airflow's own API implies one group (a DAG's operators know
their DAG, the DAG knows its operators: `zonda.authoring` and `zonda.operators`), named as expected;
any other group is printed and the exit code is 1.
"""

from __future__ import annotations

import sys

import grimp

#: Airflow's API: `BaseOperator` knows `DAG` and `TaskGroup` (`>>`, `dag=`), they know operators.
EXPECTED_PACKAGES = ("zonda.authoring", "zonda.operators", "zonda.sensors", "zonda.utils", "zonda.decorators")
#: Joined to that group by the one import `.importlinter` lets point up: a template's `dagfile:` macro
#: is loaded from the user's DAG file (`zonda.tries.templating` -> `zonda.authoring.dag_files`, lazily).
EXPECTED_MODULES = frozenset({"zonda.tries.templating"})


def strongly_connected(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """Tarjan's algorithm over the module graph: every group of two or more modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    sys.setrecursionlimit(10_000)

    def visit(module: str) -> None:
        nonlocal counter
        index[module] = low[module] = counter
        counter += 1
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in modules:
                continue
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(modules):
        if module not in index:
            visit(module)
    return groups


def main(argv: list[str]) -> int:
    runtime = "--runtime" in argv
    graph = grimp.build_graph("zonda", "controller", exclude_type_checking_imports=runtime, cache_dir=None)
    modules = {m for m in graph.modules if m.startswith(("zonda", "controller"))}
    unexpected = 0
    groups = strongly_connected(graph, modules)
    for group in groups:
        expected = all(m.startswith(EXPECTED_PACKAGES) or m in EXPECTED_MODULES for m in group)
        unexpected += not expected
        label = "expected (Airflow's API)" if expected else "CYCLE"
        print(f"{label}: {len(group)} modules: {', '.join(group)}")
    kind = "runtime imports" if runtime else "all imports, TYPE_CHECKING included"
    print(f"{len(groups)} import cycle group(s) ({kind}), {unexpected} outside Airflow's API")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
