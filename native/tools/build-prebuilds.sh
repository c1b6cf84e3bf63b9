#!/usr/bin/env bash
# Rebuilds the committed N-API prebuilds, stripped, and checks each one's architecture and baked-in
# source digest: prebuilds/linux-{x64,arm64}/pidfence.glibc.node (g++, arm64 cross-compiled) and
# prebuilds/linux-{x64,arm64}/pidfence.musl.node (Zig's clang for *-linux-musl, libc++ linked in
# statically), then the static launcher for both arches (build-launcher.sh). Every run rebuilds all from scratch. design/architecture §3; docs/decisions/0003, 0081.
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

# build <libc> <arch> <`file` must match> [env assignments...]
build() {
  local libc=$1 arch=$2 want=$3
  shift 3
  local out="prebuilds/linux-$arch/pidfence.$libc.node"  # --tag-libc; lib/native/loader.ts names
  rm -f "$out"
  echo "== linux-$arch $libc" >&2
  env "$@" PREBUILD_LIBC="$libc" nice -n 10 node_modules/.bin/prebuildify --napi --strip --tag-libc --arch "$arch" >&2
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

ensure_zig
# strerrorname_np is glibc-only; the no-demangler stub keeps libc++abi's demangler out.
compat="-include $PWD/native/tools/musl-compat.h -include $PWD/native/tools/musl-no-demangler.h"
# What keeps the statically linked libc++ small (docs/decisions/0081): Zig builds libc++, libc++abi
# and libunwind with the link command's flags, so -Os and one section per function and object there
# let --gc-sections drop what is unused; the version script exports only the N-API entry points.
musl_link_flags="-Os -ffunction-sections -fdata-sections"
musl_ldflags="-Wl,--version-script=$PWD/native/tools/musl-exports.map -Wl,--gc-sections"

# arm64 first: prebuildify builds in build/, so the host glibc build is what remains there afterwards.
build musl arm64 "ARM aarch64" CC="$zig cc -target aarch64-linux-musl" CXX="$zig c++ -target aarch64-linux-musl $compat" \
  LINK="$zig c++ -target aarch64-linux-musl $musl_link_flags" LDFLAGS="$musl_ldflags" PREBUILD_STRIP_BIN=aarch64-linux-gnu-strip
build musl x64 "x86-64" CC="$zig cc -target x86_64-linux-musl" CXX="$zig c++ -target x86_64-linux-musl $compat" \
  LINK="$zig c++ -target x86_64-linux-musl $musl_link_flags" LDFLAGS="$musl_ldflags"
build glibc arm64 "ARM aarch64" CC=aarch64-linux-gnu-gcc CXX=aarch64-linux-gnu-g++ PREBUILD_STRIP_BIN=aarch64-linux-gnu-strip
build glibc x64 "x86-64"
bash native/tools/check-musl.sh
bash native/tools/build-launcher.sh
echo "prebuilds rebuilt for source digest $digest" >&2
