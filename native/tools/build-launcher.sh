#!/usr/bin/env bash
# Rebuilds the committed launcher prebuilds (docs/decisions/0151): prebuilds/linux-{x64,arm64}/pidfence-launcher,
# each a static, stripped executable linked against musl by Zig's clang, so one file per architecture
# runs on glibc and musl systems alike. Checks each one's architecture, static linking and baked-in
# source digest. Called by build-prebuilds.sh; runs alone after a change to native/launcher/.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=native/tools/ensure-tool.sh
. native/tools/ensure-tool.sh
ensure_tool file file
ensure_tool strip binutils
ensure_tool aarch64-linux-gnu-strip binutils-aarch64-linux-gnu

ensure_zig

digest=$(node native/tools/source-digest.js launcher)
flags=(-std=c17 -Os -Wall -Wextra -Wshadow -Wformat=2 -Werror -static "-DPIDFENCE_LAUNCHER_SOURCE_DIGEST=\"$digest\"")

# build <arch> <zig target> <strip> <`file` must match>
build() {
  local arch=$1 target=$2 strip_bin=$3 want=$4
  local out="prebuilds/linux-$arch/pidfence-launcher"  # lib/native/launcher-binary.ts names it
  rm -f "$out"
  echo "== linux-$arch launcher" >&2
  nice -n 10 "$zig" cc -target "$target" "${flags[@]}" -o "$out" native/launcher/*.c
  "$strip_bin" "$out"
  local kind
  kind=$(file -b "$out")
  case "$kind" in
    *"$want"*"statically linked"*) ;;
    *) echo "error: $out is not a static $want executable but: $kind; deleting it" >&2; rm -f "$out"; exit 1 ;;
  esac
  grep -qF "$digest" "$out" || { echo "error: $out does not carry source digest $digest" >&2; exit 1; }
  echo "$out: $kind" >&2
}

build arm64 aarch64-linux-musl aarch64-linux-gnu-strip "ARM aarch64"
build x64 x86_64-linux-musl strip "x86-64"
echo "launcher prebuilds rebuilt for source digest $digest" >&2
