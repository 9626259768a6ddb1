#!/usr/bin/env bash
# Builds the local control plane's binaries from Go modules (no Docker, no download site needed):
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok and helm.
#
# Versions are pinned by the go.mod/go.sum files under hack/tools/. The binaries are cached outside
# the repo in $ZONDA_CACHE_DIR (default ~/.cache/zonda) under a key derived from those files, so a
# second run finds them and returns in well under a second. Prints the bin directory on stdout (last line).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tools="$here/tools"
cache_root="${ZONDA_CACHE_DIR:-$HOME/.cache/zonda}"
k8s_version="v1.36.3"
helm_version="v3.21.4"

# The cache key covers what decides the binaries: the pinned modules and the version stamps.
key="$( (cat "$tools"/*/go.mod "$tools"/*/go.sum; echo "$k8s_version $helm_version") | sha256sum | cut -c1-16)"
bin="$cache_root/bin/$key"
wanted=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm)

all_present() {
  local b
  for b in "${wanted[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
}

if all_present; then
  echo "$bin"
  exit 0
fi

log() { echo "[build-cluster-binaries] $(date +%H:%M:%S) $*" >&2; }
mkdir -p "$bin"
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -trimpath -buildvcs=false"
# Linking kube-apiserver takes ~2 GiB; two cores: build one binary at a time, packages in parallel.
start=$(date +%s)

minor="${k8s_version#v1.}"; minor="${minor%%.*}"
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build() {  # build <module dir> <binary name> <package> [ldflags]
  local dir="$1" name="$2" pkg="$3" ldflags="${4:--s -w}"
  if [[ -x "$bin/$name" ]]; then return 0; fi
  log "building $name ($pkg) ..."
  local t0; t0=$(date +%s)
  (cd "$tools/$dir" && go build -ldflags "$ldflags" -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
  log "built $name in $(( $(date +%s) - t0 ))s"
}

log "downloading modules (cached in $(go env GOMODCACHE)) ..."
for d in kubernetes kwok helm; do (cd "$tools/$d" && go mod download); done

build kubernetes etcd go.etcd.io/etcd/server/v3
build kubernetes kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$k8s_ldflags"
build kwok kwok sigs.k8s.io/kwok/cmd/kwok "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v0.8.0"
build kubernetes kubectl k8s.io/kubernetes/cmd/kubectl "$k8s_ldflags"
build kubernetes kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$k8s_ldflags"
build kubernetes kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$k8s_ldflags"
build helm helm helm.sh/helm/v3/cmd/helm "-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"

log "all binaries ready in $bin after $(( $(date +%s) - start ))s"
echo "$bin"
