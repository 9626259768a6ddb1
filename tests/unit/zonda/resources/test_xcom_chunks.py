"""The Kubernetes XCom backend's objects: names, chunking, references, and the kubeconfig it reads.

The writes and reads themselves run against the real apiserver in tests/cluster/test_xcom.py.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from controller.kube import rest
from zonda.resources import xcom_chunks
from zonda.resources.xcom_chunks import ChunkError, XComChunkSpec

#: A Kubernetes object name: a DNS subdomain of at most 253 characters.
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def specs_of(data: bytes, chunk_bytes: int = xcom_chunks.CHUNK_BYTES) -> list[XComChunkSpec]:
    pieces = xcom_chunks.split(data, chunk_bytes)
    return [
        XComChunkSpec(
            dag_run="r", task_id="t", key="k", try_number=1, index=i, count=len(pieces), size=len(data),
            data=base64.b64encode(piece).decode(),
        )
        for i, piece in enumerate(pieces)
    ]  # fmt: skip


@given(st.binary(max_size=3000), st.integers(min_value=1, max_value=700))
def test_chunks_join_back_to_the_value(data: bytes, chunk_bytes: int) -> None:
    specs = specs_of(data, chunk_bytes)
    assert all(len(base64.b64decode(s.data)) <= chunk_bytes for s in specs)
    url = xcom_chunks.reference_url("ns", "base", len(specs))
    assert xcom_chunks.join(url, specs, len(data)) == data


def test_a_3_mb_value_takes_4_chunks_each_under_etcds_request_limit() -> None:
    specs = xcom_chunks.chunk_specs(
        b"x" * 3_000_000, run_name="etl-manual-1", task_id="extract", map_index=-1, try_number=1, key="k"
    )
    assert [(s.index, s.count, s.size) for s in specs] == [(i, 4, 3_000_000) for i in range(4)]
    body = xcom_chunks.manifest("team-a", "etl-manual-1-abc", specs[0], "etl-manual-1", "uid-1")
    assert len(json.dumps(body)) < 1.5 * 1024 * 1024 - 100_000  # room for the apiserver's metadata
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "zonda.dev/v1alpha1", "kind": "DagRun", "name": "etl-manual-1", "uid": "uid-1"}
    ]
    assert body["metadata"]["name"] == "etl-manual-1-abc-0"


@given(
    run=st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", fullmatch=True).filter(SUBDOMAIN.match),
    task_id=st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,40}", fullmatch=True),
    map_index=st.integers(min_value=-1, max_value=5000),
    key=st.text(min_size=1, max_size=30),
)
def test_chunk_names_are_valid_kubernetes_names(run: str, task_id: str, map_index: int, key: str) -> None:
    base = xcom_chunks.base_name(run, task_id, map_index, 1, key)
    name = xcom_chunks.chunk_name(base, 99)
    assert len(name) <= 253 and SUBDOMAIN.match(name), name


def test_each_run_task_map_index_try_and_key_has_its_own_chunks() -> None:
    identities = [
        ("r", "t", -1, 1, "return_value"), ("r", "t", 0, 1, "return_value"), ("r", "t", 1, 1, "return_value"),
        ("r", "t", -1, 2, "return_value"), ("r", "t", -1, 1, "rows"), ("r", "u", -1, 1, "return_value"),
        ("s", "t", -1, 1, "return_value"),
    ]  # fmt: skip
    names = {xcom_chunks.base_name(*identity) for identity in identities}
    assert len(names) == len(identities)
    assert xcom_chunks.base_name(*identities[0]) == xcom_chunks.base_name(*identities[0])  # a retry rewrites


def test_references_parse_back_and_other_urls_are_refused() -> None:
    url = xcom_chunks.reference_url("team-a", "etl-manual-1-0123456789abcdef", 3)
    assert url == "xcomchunks://team-a/etl-manual-1-0123456789abcdef?chunks=3"
    assert xcom_chunks.is_chunk_url(url) and not xcom_chunks.is_chunk_url("s3://b/x.json")
    assert xcom_chunks.parse_url(url) == ("team-a", "etl-manual-1-0123456789abcdef", 3)
    for bad in (
        "s3://b/x.json",
        "xcomchunks://ns/base",
        "xcomchunks:///base?chunks=1",
        "xcomchunks://ns?chunks=1",
    ):
        with pytest.raises(ChunkError, match="not an XComChunk reference"):
            xcom_chunks.parse_url(bad)


def test_missing_misplaced_or_short_chunks_are_refused_naming_them() -> None:
    specs = specs_of(b"abcdefgh", 3)
    url = xcom_chunks.reference_url("ns", "base", 3)
    with pytest.raises(ChunkError, match="2 of 3 chunks"):
        xcom_chunks.join(url, specs[:2])
    with pytest.raises(ChunkError, match="base-0 is chunk 1 of 3, not 0 of 3"):
        xcom_chunks.join(url, [specs[1], specs[0], specs[2]])
    with pytest.raises(ChunkError, match="the chunks hold 8 bytes, the value has 9"):
        xcom_chunks.join(url, specs, 9)


def write_kubeconfig(path: Path, cluster: dict[str, object], user: dict[str, object]) -> Path:
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [
            {"name": "other", "cluster": {"server": "https://wrong"}}, {"name": "k", "cluster": cluster},
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }  # fmt: skip
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_kubeconfig_gives_the_current_contexts_server_ca_and_token(tmp_path: Path) -> None:
    path = write_kubeconfig(
        tmp_path / "config",
        {"server": "https://127.0.0.1:6443", "certificate-authority": "ca.crt"},
        {"token": "t0k"},
    )
    creds = rest.from_kubeconfig(str(path))
    assert (creds.server, creds.ca_file, creds.bearer()) == (
        "https://127.0.0.1:6443",
        str(tmp_path / "ca.crt"),
        "t0k",
    )


def test_inline_certificate_data_is_written_to_private_files(tmp_path: Path) -> None:
    data = base64.b64encode(b"PEM").decode()
    path = write_kubeconfig(
        tmp_path / "config",
        {"server": "https://k:6443", "certificate-authority-data": data},
        {"client-certificate-data": data, "client-key-data": data},
    )
    creds = rest.from_kubeconfig(str(path))
    for file in (creds.ca_file, creds.client_cert_file, creds.client_key_file):
        assert file is not None and Path(file).read_bytes() == b"PEM"
        assert Path(file).stat().st_mode & 0o077 == 0


def test_exec_credentials_are_refused_saying_so(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "config", {"server": "https://k"}, {"exec": {"command": "aws"}})
    with pytest.raises(rest.KubeRestError, match="exec and auth-provider credentials are not supported"):
        rest.from_kubeconfig(str(path))
