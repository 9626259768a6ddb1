"""The real node's pure helpers: which example DAGs can run on it, the pause image's OCI archive."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

from controller.devtools import up
from tests.paths import REPO_ROOT

REPO_ROOT = REPO_ROOT


def _dag(path: Path, *images: str) -> Path:
    tasks = [{"id": "bash", "operator": "BashOperator"}]
    tasks += [{"id": f"c{i}", "container": {"image": image}} for i, image in enumerate(images)]
    path.write_text(json.dumps({"kind": "DAG", "metadata": {"name": path.stem}, "spec": {"tasks": tasks}}))
    return path


def test_dags_whose_container_images_are_not_on_the_node_are_left_out_with_the_reason(tmp_path: Path) -> None:
    operators_only = _dag(tmp_path / "operators.yaml")
    loaded = _dag(tmp_path / "loaded.yaml", "localhost/zonda:dev", "busybox")
    missing = _dag(tmp_path / "missing.yaml", "alpine:3.20")
    said: list[str] = []
    kept = up.runnable_dags(
        [operators_only, loaded, missing],
        ["localhost/zonda:dev", "docker.io/library/busybox:latest", "busybox"],
        said.append,
    )
    assert kept == [operators_only, loaded]
    assert len(said) == 1 and "missing.yaml" in said[0] and "alpine:3.20" in said[0]


def test_the_pause_archive_is_an_oci_layout_naming_its_image(tmp_path: Path) -> None:
    binary = tmp_path / "pause"
    binary.write_bytes(b"\x7fELF not really")
    archive = tmp_path / "pause.oci.tar"
    subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "hack/node/oci_archive.py"),
            "--binary",
            str(binary),
            "--path",
            "/pause",
            "--name",
            "registry.k8s.io/pause:3.10.2",
            "--output",
            str(archive),
        ],
        check=True,
    )
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        manifest_digest = index["manifests"][0]["digest"].split(":")[1]
        manifest = json.load(tar.extractfile(f"blobs/sha256/{manifest_digest}"))  # type: ignore[arg-type]
        config = json.load(tar.extractfile(f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"))  # type: ignore[arg-type]
        layer = tar.extractfile(f"blobs/sha256/{manifest['layers'][0]['digest'].split(':')[1]}")
        assert layer is not None
        with tarfile.open(fileobj=layer) as files:
            assert files.getnames() == ["pause"]
    assert "oci-layout" in names
    assert index["manifests"][0]["annotations"]["io.containerd.image.name"] == "registry.k8s.io/pause:3.10.2"
    assert config["config"] == {"Entrypoint": ["/pause"], "User": "65535:65535"}
