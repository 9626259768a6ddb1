"""Developer tooling shipped for `make up` / `zonda up`: the local control plane and the main job."""
