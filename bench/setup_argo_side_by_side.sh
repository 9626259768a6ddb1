#!/usr/bin/env bash
# Builds what bench/bench_argo_side_by_side.py compares Zonda with: Argo Workflows' workflow-controller,
# newest 4.x, from its Go module (the Go module proxy), into a cache outside the repository, with the
# CRDs the module ships (manifests/base/crds/full, what its cluster-install applies) copied beside it.
# Nothing of Argo is committed here. Not part of CI; run by hand before the bench:
#
#     bench/setup_argo_side_by_side.sh        # ~/.cache/zonda/argo/v4.0.5/{bin/workflow-controller,crds/}
#
# Security flaws are reported against Argo Workflows 4.x: the bench runs this controller only inside a
# network namespace of its own with nothing but loopback (its health server binds :6060 on every
# interface, hard-coded), against the local control plane, and never exposes it.
# Measured on 2 busy cores: about 10-20 minutes cold (the module's dependencies and the build).
set -euo pipefail

ARGO_VERSION=${ARGO_VERSION:-v4.0.5}
MODULE=github.com/argoproj/argo-workflows/v4
DIR=${ARGO_DIR:-$HOME/.cache/zonda/argo/$ARGO_VERSION}

if [ ! -x "$DIR/bin/workflow-controller" ]; then
    mkdir -p "$DIR/bin"
    # go install MODULE@VERSION builds outside any module of ours, with the module's own go.sum; the
    # version is stamped as Argo's Makefile does (the default executor image's tag is derived from it)
    GOBIN="$DIR/bin" GOFLAGS=-buildvcs=false go install -ldflags "-X $MODULE.version=$ARGO_VERSION" \
        "$MODULE/cmd/workflow-controller@$ARGO_VERSION"
fi
if [ ! -f "$DIR/crds/argoproj.io_workflows.yaml" ]; then
    source_dir=$(go mod download -json "$MODULE@$ARGO_VERSION" | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
    mkdir -p "$DIR/crds"
    cp "$source_dir"/manifests/base/crds/full/argoproj.io_*.yaml "$DIR/crds/"
    chmod u+w "$DIR"/crds/*.yaml
fi
"$DIR/bin/workflow-controller" version 2>/dev/null | head -3 || true
echo "Argo Workflows $ARGO_VERSION: $DIR; run: python bench/bench_argo_side_by_side.py"
