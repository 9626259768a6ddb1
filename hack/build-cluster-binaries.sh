#!/usr/bin/env bash
# Builds the local control plane's binaries from Go modules (no Docker, no download site needed):
# etcd, kube-apiserver, kubectl, kube-controller-manager, kube-scheduler, kwok and helm.
#
#   build-cluster-binaries.sh                      all seven (what `make test` needs)
#   build-cluster-binaries.sh etcd kube-apiserver kubectl   only these (`zonda up`'s local executor)
#   build-cluster-binaries.sh --print-dir          print the cache directory; build nothing
#
# Versions are pinned by the go.mod/go.sum files under hack/tools/. The binaries are cached outside
# the repo in $ZONDA_CACHE_DIR (default ~/.cache/zonda) under a key derived from those files, so a
# second run finds them and returns in well under a second. Binaries are built one at a time in the
# fixed order below (what the main job's first screen needs first), each line saying what remains.
# Prints the bin directory on stdout (last line).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tools="$here/tools"
cache_root="${ZONDA_CACHE_DIR:-$HOME/.cache/zonda}"
k8s_version="v1.36.3"
helm_version="v3.21.4"

# The cache key covers what decides the binaries: the pinned modules and the version stamps.
key="$( (cat "$tools"/*/go.mod "$tools"/*/go.sum; echo "$k8s_version $helm_version") | sha256sum | cut -c1-16)"
bin="$cache_root/bin/$key"
order=(etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kwok helm)

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$bin"
  exit 0
fi
wanted=()
if [[ $# -eq 0 ]]; then
  wanted=("${order[@]}")
else
  for b in "${order[@]}"; do
    for arg in "$@"; do [[ "$arg" == "$b" ]] && wanted+=("$b"); done
  done
  for arg in "$@"; do
    [[ " ${order[*]} " == *" $arg "* ]] || { echo "unknown binary $arg (known: ${order[*]})" >&2; exit 2; }
  done
fi

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

missing=()
for b in "${wanted[@]}"; do [[ -x "$bin/$b" ]] || missing+=("$b"); done

module_of() {  # the hack/tools module directory a binary is built from
  case "$1" in kwok) echo kwok ;; helm) echo helm ;; *) echo kubernetes ;; esac
}

build() {  # build <binary name>
  local name="$1" dir pkg ldflags="-s -w"
  dir="$(module_of "$name")"
  case "$name" in
    etcd) pkg=go.etcd.io/etcd/server/v3 ;;
    kwok) pkg=sigs.k8s.io/kwok/cmd/kwok; ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v0.8.0" ;;
    helm) pkg=helm.sh/helm/v3/cmd/helm; ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version" ;;
    *) pkg="k8s.io/kubernetes/cmd/$name"; ldflags="$k8s_ldflags" ;;
  esac
  local t0; t0=$(date +%s)
  (cd "$tools/$dir" && go build -ldflags "$ldflags" -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
  log "built $name in $(( $(date +%s) - t0 ))s"
}

dirs=()
for b in "${missing[@]}"; do
  d="$(module_of "$b")"
  [[ " ${dirs[*]} " == *" $d "* ]] || dirs+=("$d")
done
log "building ${#missing[@]} binaries, one at a time (on 2 busy cores 1-3 min each, kube-apiserver up to 16): ${missing[*]}"
log "downloading modules for ${dirs[*]} (cached in $(go env GOMODCACHE)) ..."
for d in "${dirs[@]}"; do (cd "$tools/$d" && go mod download); done

i=0
for b in "${missing[@]}"; do
  i=$((i + 1))
  rest=("${missing[@]:$i}")
  log "[$i/${#missing[@]}] building $b ...${rest[*]:+ (then: ${rest[*]})}"
  build "$b"
done

log "${wanted[*]} ready in $bin after $(( $(date +%s) - start ))s"
echo "$bin"
