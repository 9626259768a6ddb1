#!/usr/bin/env bash
# Builds and installs what a real Kubernetes node needs on this machine, with no registry and no
# download site: Debian's containerd, runc and CNI plugins (apt), the kubelet and kube-proxy (Go
# modules pinned by hack/node/go.mod, the control plane's Kubernetes version) and the pause image
# (the static `pause` program from the Kubernetes module's build/pause/linux/pause.c, packed as an
# OCI archive that the node imports into containerd).
#
# Why a 1.36 kubelet with containerd 1.6: a 1.36 kubelet still falls back to its own `cgroupDriver`
# when the runtime lacks the RuntimeConfig CRI call (the removal moved to 1.38, kubernetes#136846),
# and `failCgroupV1: false` keeps it running on this machine's cgroup v1. Building containerd 2.x
# from Go would add a second large build for nothing (docs/decisions.md).
#
# Everything is cached in $ZONDA_CACHE_DIR (default ~/.cache/zonda)/node/<key>, the key derived from
# the inputs (go.mod/go.sum, pause.c, this script), so a second run returns at once. Prints the node
# directory on stdout (last line): bin/{kubelet,kube-proxy,pause}, pause.oci.tar, PAUSE_IMAGE.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${ZONDA_CACHE_DIR:-$HOME/.cache/zonda}"
k8s_version="v1.36.3"
pause_version="3.10.2"
pause_image="registry.k8s.io/pause:$pause_version"
log() { echo "[build-node] $(date +%H:%M:%S) $*" >&2; }

# Debian packages (installed only if missing: apt is slow even when there is nothing to do).
need_apt=()
for pair in containerd:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins \
            buildah:buildah debootstrap:debootstrap gcc:gcc iptables:iptables; do
  tool="${pair%%:*}" pkg="${pair#*:}"
  if [[ "$tool" == /* ]]; then [[ -e "$tool" ]] || need_apt+=("$pkg")
  else command -v "$tool" >/dev/null || need_apt+=("$pkg"); fi
done
if ((${#need_apt[@]})); then
  log "installing ${need_apt[*]} with apt ..."
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >&2
fi

k8s_src="$(cd "$here" && go mod download -json "k8s.io/kubernetes@$k8s_version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
pause_c="$k8s_src/build/pause/linux/pause.c"
key="$( (cat "$here/go.mod" "$here/go.sum" "$pause_c" "${BASH_SOURCE[0]}"; echo "$k8s_version $pause_version") | sha256sum | cut -c1-16)"
out="$cache_root/node/$key"
bin="$out/bin"

if [[ -x "$bin/kubelet" && -x "$bin/kube-proxy" && -f "$out/pause.oci.tar" ]]; then
  echo "$out"
  exit 0
fi
mkdir -p "$bin"
start=$(date +%s)

minor="${k8s_version#v1.}"; minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -trimpath -buildvcs=false"
for name in kubelet kube-proxy; do
  [[ -x "$bin/$name" ]] && continue
  log "building $name $k8s_version (go, one binary at a time: the link takes ~2 GiB) ..."
  t0=$(date +%s)
  (cd "$here" && nice go build -ldflags "$ldflags" -o "$bin/$name.tmp" "k8s.io/kubernetes/cmd/$name")
  mv "$bin/$name.tmp" "$bin/$name"
  log "built $name in $(( $(date +%s) - t0 ))s"
done

# The pause program, static as upstream builds it (build/pause/Makefile), as an OCI archive.
if [[ ! -f "$out/pause.oci.tar" ]]; then
  log "building $pause_image from $pause_c ..."
  gcc -Os -Wall -Werror -static -DVERSION="v$pause_version" -o "$bin/pause" "$pause_c"
  strip "$bin/pause"
  python3 "$here/oci_archive.py" --binary "$bin/pause" --path /pause --name "$pause_image" \
    --user 65535:65535 --output "$out/pause.oci.tar.tmp"
  mv "$out/pause.oci.tar.tmp" "$out/pause.oci.tar"
fi
echo "$pause_image" > "$out/PAUSE_IMAGE"
log "node pieces ready in $out after $(( $(date +%s) - start ))s"
echo "$out"
