"""`crds/` is generated from the pydantic models; the committed files must match the models."""

from __future__ import annotations

import yaml

from tests.paths import REPO_ROOT
from zonda.resources import crds

REPO = REPO_ROOT


def test_committed_crds_equal_the_ones_the_models_generate() -> None:
    generated = crds.generate()
    committed = sorted(p.name for p in (REPO / "crds").glob("*.yaml"))
    assert committed == sorted(generated), "run: python -m zonda.resources.crds crds/"
    for name, crd in generated.items():
        assert (REPO / "crds" / name).read_text() == crds.render(crd), (
            f"{name} is stale: python -m zonda.resources.crds crds/"
        )


def test_schemas_are_structural() -> None:
    """Every schema node has a type or preserves unknown fields, and no $ref/anyOf survives."""

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            assert "$ref" not in node and "anyOf" not in node, path
            if "properties" in node or "items" in node:
                assert node.get("type") in ("object", "array"), path
            for key, value in node.items():
                walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]")

    for name in crds.generate():
        walk(yaml.safe_load((REPO / "crds" / name).read_text()), name)


def test_a_runs_task_instances_are_stored_whole_not_walked_field_by_field() -> None:
    """The status map the controller rewrites on every pass has no per-field schema and one managed
    field: typed, it cost the apiserver 22-29 ms of CPU per 20-task status PUT, 6-8 ms stored whole
    (docs/decisions.md, "A run's task instances are one value to the apiserver")."""
    for name in ("dagruns.zonda.dev.yaml", "dagrunshards.zonda.dev.yaml"):
        version = crds.generate()[name]["spec"]["versions"][0]
        task_instances = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"][
            "taskInstances"
        ]
        assert task_instances == {
            "description": crds.TASK_INSTANCES_DOC,
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "x-kubernetes-map-type": "atomic",
        }, name
