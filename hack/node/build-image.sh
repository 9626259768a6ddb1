#!/usr/bin/env bash
# Builds Zonda's image from the project's own Dockerfile with no registry: a Debian bookworm root
# filesystem from debootstrap (python3.11 + pip) becomes the local base image that the Dockerfile's
# PYTHON_IMAGE argument points at, then `buildah bud --isolation chroot` builds the Dockerfile (pip
# reaches PyPI) and the result is written as an OCI archive the real node imports into containerd.
#
# Cached in $ZONDA_CACHE_DIR (default ~/.cache/zonda):
#   base/<key>/rootfs.tar      keyed by the suite, the package list and this script
#   image/<key>/zonda.oci.tar  keyed by the base, the Dockerfile and the build context's files
# so a second run with unchanged inputs returns at once. Prints the image archive path (last line);
# the image's name is in IMAGE next to it. With --examples it then builds hack/node/examples.Dockerfile
# (FROM that image, plus the repository's examples/ package) and prints that archive's path too.
#
#   hack/node/build-image.sh [--examples]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache_root="${ZONDA_CACHE_DIR:-$HOME/.cache/zonda}"
tag="localhost/zonda:dev"
examples_tag="localhost/zonda-examples:dev"
with_examples=false
[[ "${1:-}" == "--examples" ]] && with_examples=true
suite="bookworm"
mirror="${ZONDA_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
packages="python3,python3-pip,ca-certificates"
log() { echo "[build-image] $(date +%H:%M:%S) $*" >&2; }

missing=()
for pair in buildah:buildah debootstrap:debootstrap; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]} with apt ..."
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi

# A private buildah store, so the builds neither need nor touch a system-wide one.
store="$cache_root/buildah"
bah() { buildah --root "$store/storage" --runroot "$store/run" --storage-driver vfs "$@"; }

# ------------------------------------------------------------------------------------------- base
base_key="$( (echo "$suite $mirror $packages"; sed -n '/^# ---* base/,/^# ---* image/p' "${BASH_SOURCE[0]}") \
  | sha256sum | cut -c1-16)"
base_dir="$cache_root/base/$base_key"
base_image="localhost/zonda-python:3.11-$suite-$base_key"
if [[ ! -f "$base_dir/rootfs.tar" ]]; then
  log "debootstrap $suite ($packages) ..."
  t0=$(date +%s)
  rm -rf "$base_dir/rootfs" && mkdir -p "$base_dir"
  nice debootstrap --variant=minbase --include="$packages" "$suite" "$base_dir/rootfs" "$mirror" \
    > "$base_dir/debootstrap.log" 2>&1 || { log "debootstrap failed: see $base_dir/debootstrap.log"; exit 1; }
  rootfs="$base_dir/rootfs"
  # An image, not a machine: no apt lists or caches, no docs. pip may install into the system
  # Python (PEP 668's marker would refuse it), as it does in the python:3.11-slim image.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/* "$rootfs"/var/log/*.log
  rm -f "$rootfs"/usr/lib/python3.*/EXTERNALLY-MANAGED
  [[ -e "$rootfs/usr/bin/python" ]] || ln -s python3 "$rootfs/usr/bin/python"
  [[ -e "$rootfs/usr/bin/pip" ]] || ln -s pip3 "$rootfs/usr/bin/pip"
  tar --numeric-owner -C "$rootfs" -cf "$base_dir/rootfs.tar.tmp" .
  mv "$base_dir/rootfs.tar.tmp" "$base_dir/rootfs.tar"
  rm -rf "$rootfs"
  log "base root filesystem ready in $(( $(date +%s) - t0 ))s ($(du -h "$base_dir/rootfs.tar" | cut -f1))"
fi
if ! bah inspect --type image "$base_image" >/dev/null 2>&1; then
  log "importing the base root filesystem as $base_image ..."
  ctr_id="$(bah from --pull=never scratch)"
  bah add "$ctr_id" "$base_dir/rootfs.tar" / >/dev/null
  bah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
    --cmd python3 "$ctr_id"
  bah commit --quiet --rm "$ctr_id" "$base_image" >/dev/null
fi
# ------------------------------------------------------------------------------------------ image
context_files="$(cd "$repo" && git ls-files -co --exclude-standard pyproject.toml README.md Dockerfile zonda controller \
  | grep -v -e '__pycache__' -e '\.pyc$' | LC_ALL=C sort)"
image_key="$( (echo "$base_key $tag"; cd "$repo" && echo "$context_files" | xargs sha256sum) | sha256sum | cut -c1-16)"
image_dir="$cache_root/image/$image_key"
if [[ ! -f "$image_dir/zonda.oci.tar" ]]; then
  log "buildah bud Dockerfile (PYTHON_IMAGE=$base_image) -> $tag ..."
  t0=$(date +%s)
  mkdir -p "$image_dir"
  # The build's pip trusts what this machine trusts (a TLS-intercepting proxy's CA, say): the host's
  # CA bundle is mounted for RUN steps only, never copied into a layer.
  ca_mount=()
  ca_bundle="${ZONDA_BUILD_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
  [[ -f "$ca_bundle" ]] && ca_mount=(--volume "$ca_bundle:/etc/ssl/certs/ca-certificates.crt:ro")
  nice buildah --root "$store/storage" --runroot "$store/run" --storage-driver vfs bud \
    --isolation chroot --pull=never --layers=false "${ca_mount[@]}" \
    --build-arg "PYTHON_IMAGE=$base_image" -t "$tag" -f "$repo/Dockerfile" "$repo" \
    > "$image_dir/build.log" 2>&1 || { log "buildah bud failed: see $image_dir/build.log"; tail -20 "$image_dir/build.log" >&2; exit 1; }
  bah push --quiet "$tag" "oci-archive:$image_dir/zonda.oci.tar.tmp:$tag" >&2
  mv "$image_dir/zonda.oci.tar.tmp" "$image_dir/zonda.oci.tar"
  echo "$tag" > "$image_dir/IMAGE"
  # Every source change makes a new image: keep the store and the cache from growing without end
  # (the three newest archives stay, for switching branches back and forth).
  bah rmi --prune >/dev/null 2>&1 || true
  ls -1dt "$cache_root"/image/*/ | tail -n +4 | xargs -r rm -rf
  log "image $tag built in $(( $(date +%s) - t0 ))s ($(du -h "$image_dir/zonda.oci.tar" | cut -f1) archive)"
fi
echo "$image_dir/zonda.oci.tar"
$with_examples || exit 0
# --------------------------------------------------------------------------------------- examples
examples_key="$( (echo "$image_key $examples_tag"; cd "$repo" && git ls-files -co --exclude-standard examples \
  hack/node/examples.Dockerfile | grep -v -e '__pycache__' -e '\.pyc$' | LC_ALL=C sort | xargs sha256sum) \
  | sha256sum | cut -c1-16)"
examples_dir="$cache_root/image-examples/$examples_key"
if [[ ! -f "$examples_dir/zonda.oci.tar" ]]; then
  log "buildah bud hack/node/examples.Dockerfile (FROM $tag) -> $examples_tag ..."
  t0=$(date +%s)
  mkdir -p "$examples_dir"
  if ! bah inspect --type image "$tag" >/dev/null 2>&1; then  # the store was pruned: reload the archive
    bah tag "$(bah pull --quiet "oci-archive:$image_dir/zonda.oci.tar" | tail -1)" "$tag"
  fi
  nice buildah --root "$store/storage" --runroot "$store/run" --storage-driver vfs bud \
    --isolation chroot --pull=never --layers=false --build-arg "ZONDA_IMAGE=$tag" -t "$examples_tag" \
    -f "$here/examples.Dockerfile" "$repo/examples" > "$examples_dir/build.log" 2>&1 \
    || { log "buildah bud failed: see $examples_dir/build.log"; tail -20 "$examples_dir/build.log" >&2; exit 1; }
  bah push --quiet "$examples_tag" "oci-archive:$examples_dir/zonda.oci.tar.tmp:$examples_tag" >&2
  mv "$examples_dir/zonda.oci.tar.tmp" "$examples_dir/zonda.oci.tar"
  echo "$examples_tag" > "$examples_dir/IMAGE"
  bah rmi --prune >/dev/null 2>&1 || true
  ls -1dt "$cache_root"/image-examples/*/ | tail -n +4 | xargs -r rm -rf
  log "image $examples_tag built in $(( $(date +%s) - t0 ))s ($(du -h "$examples_dir/zonda.oci.tar" | cut -f1) archive)"
fi
echo "$examples_dir/zonda.oci.tar"
