#!/usr/bin/env bash
# What the UI's tests and `zonda dags show --format svg|png` need from the system: Debian's Chromium
# (driven by Playwright from PyPI; no browser is ever downloaded) and Graphviz's `dot`.
set -euo pipefail
need=()
command -v chromium >/dev/null || need+=(chromium)
command -v dot >/dev/null || need+=(graphviz)
if ((${#need[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" fonts-dejavu-core
fi
