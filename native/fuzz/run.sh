#!/usr/bin/env bash
# Fuzzes proc_stat_parse with libFuzzer + ASan + UBSan against the harness's independent
# reference (native/fuzz/proc_stat_fuzz.cc). Usage: npm run fuzz [-- SECONDS] (default 30).
# Build output, corpus and any crashing input go to native/fuzz/out/ (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=native/tools/ensure-tool.sh
. native/tools/ensure-tool.sh

seconds=${1:-30}
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "error: duration must be whole seconds, e.g. 'npm run fuzz -- 60'" >&2; exit 1; }

ensure_tool clang++ clang
out=native/fuzz/out
corpus=$out/corpus
mkdir -p "$corpus"

binary=$out/proc_stat_fuzz
if [ ! -x "$binary" ] || [ -n "$(find native/fuzz/proc_stat_fuzz.cc native/proc_stat.cc native/proc_stat.h -newer "$binary")" ]; then
  echo "building $binary ..." >&2
  nice -n 10 clang++ -std=c++17 -g -O1 -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -o "$binary" native/fuzz/proc_stat_fuzz.cc native/proc_stat.cc
fi

# Seeds: real stat lines (this machine's own, a kernel thread, a zombie, a task being reaped) and the comm torture
# cases that break a parser anchored on the first ')'. Rewritten each run; libFuzzer adds its own.
tail22=' 1 0 192777 3133440 386 18446744073709551615 94195231137792 94195231157673 140721736928416 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 94195231173680 94195231175296 94195350093824 140721736931855 140721736931875 140721736931875 140721736933355 0'
fields=' S 12251 12297 7655 0 -1 4194304 101 0 0 0 0 0 0 0 20 0'
seed() { printf '%s' "$2" >"$corpus/seed-$1"; }
seed self "$(cat /proc/self/stat)"
seed kthread "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 2 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0"
seed zombie "4242 (sh) Z 1 4242 4242 0 -1 4227148 0 0 0 0 0 0 0 0 20 0 1 0 9999999999$tail22"
seed released "4243 (sh) X 0 -1 -1 0 -1 4227148 17 0 0 0 0 0 0 0 20 0 0 0 151802$tail22"
seed newline "12297 (cat)$fields$tail22"$'\n'
seed torture-1 "12297 (a) b (c)$fields$tail22"
seed torture-2 "12297 () ) ))$fields$tail22"
seed torture-3 "12297 ((())$fields$tail22"
seed empty-comm "12297 ()$fields$tail22"
seed spaces "12297 ( S 1 2 3 )$fields$tail22"
seed max-ticks "4194304 (x) R 4194304 4194304 4194304 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 18446744073709551615 0"
seed cut "12297 (cat)$fields 1 0 192777"

echo "fuzzing proc_stat_parse for ${seconds}s ..." >&2
log=$out/last-run.log
status=0
nice -n 10 "$binary" "$corpus" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 \
  -artifact_prefix="$out/" >"$log" 2>&1 || status=$?
execs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$' || echo '?')
if [ "$status" -ne 0 ]; then
  tail -n 40 "$log" >&2
  echo "error: the fuzzer found a failing input (saved as $out/crash-* or similar; full log $log); reproduce with: $binary <file>" >&2
  exit 1
fi
echo "proc_stat fuzz: ${execs} executions in ${seconds}s, no disagreement, no sanitizer report (corpus $(ls "$corpus" | wc -l) files, log $log)"
