"""Packs one static binary as a single-layer OCI image archive (the pause image).

Why by hand: the OCI image layout is four small JSON documents and a tar; writing them here keeps
the node's sandbox image free of any image tool and byte-for-byte reproducible (fixed mtimes), so
the cached archive only changes when the binary does. `ctr images import` reads the name from the
index's `io.containerd.image.name` annotation.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tarfile
from pathlib import Path


def _blob(tar: tarfile.TarFile, data: bytes) -> tuple[str, int]:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return f"sha256:{digest}", len(data)


def _layer(binary: Path, path: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as layer:
        data = binary.read_bytes()
        info = tarfile.TarInfo(path.lstrip("/"))
        info.size, info.mode = len(data), 0o755
        layer.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def pack(binary: Path, path: str, name: str, user: str, output: Path) -> None:
    """Writes an OCI archive whose image runs `path` (the binary) as `user`."""
    layer = _layer(binary, path)
    diff_id = f"sha256:{hashlib.sha256(layer).hexdigest()}"
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": [path], "User": user},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    with tarfile.open(output, mode="w", format=tarfile.PAX_FORMAT) as tar:
        layer_digest, layer_size = _blob(tar, layer)
        config_digest, config_size = _blob(tar, json.dumps(config).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": config_size,
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": layer_digest,
                    "size": layer_size,
                }
            ],
        }
        manifest_digest, manifest_size = _blob(tar, json.dumps(manifest).encode())
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": manifest_digest,
                    "size": manifest_size,
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
                    },
                }
            ],
        }
        for file_name, document in (
            ("oci-layout", {"imageLayoutVersion": "1.0.0"}),
            ("index.json", index),
        ):
            data = json.dumps(document).encode()
            info = tarfile.TarInfo(file_name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--binary", type=Path, required=True)
    parser.add_argument("--path", required=True, help="where the binary lives in the image")
    parser.add_argument("--name", required=True, help="image reference, e.g. registry.k8s.io/pause:3.10.2")
    parser.add_argument("--user", default="65535:65535")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    pack(args.binary, args.path, args.name, args.user, args.output)


if __name__ == "__main__":
    main()
