#!/usr/bin/env bash
# Rebuilds the committed N-API prebuilds prebuilds/linux-x64/pidfence.glibc.node and
# prebuilds/linux-arm64/pidfence.glibc.node (cross-compiled), stripped, and checks each one's
# architecture and baked-in source digest. DESIGN.md §3; docs/decisions/0003.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=native/tools/ensure-tool.sh
. native/tools/ensure-tool.sh

# node-gyp must use this machine's Node headers, offline.
export npm_config_nodedir="${npm_config_nodedir:-/usr}"
[ -f "$npm_config_nodedir/include/node/node_api.h" ] ||
  { echo "error: no Node headers under $npm_config_nodedir/include/node; set npm_config_nodedir to a Node install with headers" >&2; exit 1; }
[ -x node_modules/.bin/prebuildify ] || { echo "error: prebuildify not installed; run 'npm install' first" >&2; exit 1; }

ensure_tool file file
ensure_tool strip binutils
ensure_tool aarch64-linux-gnu-g++ g++-aarch64-linux-gnu

digest=$(node native/tools/source-digest.js)
name=pidfence.glibc.node  # --tag-libc; lib/native/loader.ts looks for this name first

# build <arch> <`file` must match> [env assignments...]
build() {
  local arch=$1 want=$2
  shift 2
  local out="prebuilds/linux-$arch/$name"
  rm -rf "prebuilds/linux-$arch"
  echo "== linux-$arch" >&2
  env "$@" nice -n 10 node_modules/.bin/prebuildify --napi --strip --tag-libc --arch "$arch" >&2
  [ -f "$out" ] || { echo "error: prebuildify wrote no $out" >&2; exit 1; }
  local kind
  kind=$(file -b "$out")
  case "$kind" in
    *"$want"*) ;;
    *)
      # The trap from FACTS.md: --arch arm64 without CC/CXX quietly builds for the host.
      echo "error: $out is not $want but: $kind (cross compiler not used?); deleting it" >&2
      rm -f "$out"
      exit 1
      ;;
  esac
  grep -qF "$digest" "$out" || { echo "error: $out does not carry source digest $digest" >&2; exit 1; }
  echo "$out: $kind" >&2
}

# arm64 first: prebuildify builds in build/, so the host build is what remains there afterwards.
build arm64 "ARM aarch64" CC=aarch64-linux-gnu-gcc CXX=aarch64-linux-gnu-g++ PREBUILD_STRIP_BIN=aarch64-linux-gnu-strip
build x64 "x86-64"
echo "prebuilds rebuilt for source digest $digest" >&2
