#!/usr/bin/env bash
# Checks the musl prebuilds without a musl Node (none is on npm; docs/decisions/0081):
# - both: ELF of the right machine, needing nothing but musl's libc.so (libc++ is linked in), and
#   exporting only the N-API entry points;
# - x64: dlopen() under Debian's musl loader (/lib/ld-musl-x86_64.so.1) from a musl-linked program
#   that first provides every napi_* and uv_* symbol the addon imports from Node (musl binds all symbols at dlopen,
#   so this proves each libc import resolves in musl), then finds napi_register_module_v1.
# The arm64 file gets the first check only: Debian has no arm64 musl loader to run under qemu.
set -euo pipefail
cd "$(dirname "$0")/../.."
. native/tools/ensure-tool.sh
ensure_tool musl-gcc musl-tools musl-dev
ensure_tool readelf binutils

for arch in x64 arm64; do
  file="prebuilds/linux-$arch/pidfence.musl.node"
  needed=$(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  [ "$needed" = "libc.so " ] || { echo "error: $file needs [$needed], expected only musl's libc.so" >&2; exit 1; }
  # native/tools/musl-exports.map: nothing of the static libc++ may stay exported.
  exports=$(nm -D --defined-only "$file" | awk '{print $3}' | sort | tr '\n' ' ')
  [ "$exports" = "napi_register_module_v1 node_api_module_get_api_version_v1 " ] ||
    { echo "error: $file exports [$exports], expected only the N-API entry points" >&2; exit 1; }
  echo "$file: needs only libc.so, exports only the N-API entry points" >&2
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
addon=prebuilds/linux-x64/pidfence.musl.node
{
  echo '#include <dlfcn.h>'
  echo '#include <stdio.h>'
  # One do-nothing definition per function imported from Node (N-API, libuv); only their presence is needed.
  nm -D --undefined-only "$addon" | awk '{print $2}' | grep -E '^(napi|node_api|uv)_' | sed 's/.*/void &(void) {}/'
  cat <<'C'
int main(int argc, char** argv) {
  void* handle = dlopen(argv[1], RTLD_NOW);
  if (handle == NULL) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
  if (dlsym(handle, "napi_register_module_v1") == NULL) { fprintf(stderr, "no napi_register_module_v1\n"); return 2; }
  return 0;
}
C
} >"$work/check.c"
musl-gcc -rdynamic -o "$work/check" "$work/check.c"
"$work/check" "$PWD/$addon"
echo "$addon: dlopen under the musl loader ok, napi_register_module_v1 found" >&2
