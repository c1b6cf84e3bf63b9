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
