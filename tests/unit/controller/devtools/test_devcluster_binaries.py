"""`binaries_dir()` only finds binaries unless asked to build: an empty cache fails fast, saying how."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from controller.devtools.control_plane_files import API_BINARIES, ClusterError, binaries_dir


def test_an_empty_cache_fails_at_once_with_the_command_that_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ZONDA_BIN_DIR", raising=False)
    monkeypatch.setenv("ZONDA_CACHE_DIR", str(tmp_path))
    t0 = time.monotonic()
    with pytest.raises(ClusterError) as error:
        binaries_dir()
    assert time.monotonic() - t0 < 10, "found nothing, so it must not have built anything"
    message = str(error.value)
    assert "bash hack/build-cluster-binaries.sh etcd kube-apiserver kubectl" in message
    assert str(tmp_path) in message and "make binaries" in message
    assert not list(tmp_path.rglob("etcd*")), "nothing was built"


def test_zonda_bin_dir_must_hold_what_is_required(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in API_BINARIES:
        (tmp_path / name).write_text("#!/bin/sh\n")
    monkeypatch.setenv("ZONDA_BIN_DIR", str(tmp_path))
    assert binaries_dir(API_BINARIES) == tmp_path
    with pytest.raises(ClusterError, match="helm missing in \\$ZONDA_BIN_DIR"):
        binaries_dir()


def test_the_cache_dir_found_holds_the_required_binaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ZONDA_BIN_DIR", raising=False)
    monkeypatch.setenv("ZONDA_CACHE_DIR", str(tmp_path))
    with pytest.raises(ClusterError) as error:
        binaries_dir(["kubectl"])
    cache = Path(str(error.value).split("(", 1)[1].split(")", 1)[0])
    assert cache.is_relative_to(tmp_path)
    cache.mkdir(parents=True)
    (cache / "kubectl").write_text("#!/bin/sh\n")
    assert binaries_dir(["kubectl"]) == cache
