#!/usr/bin/env bash
# A long fuzzing session on a many-core machine: every target of fuzz/ at once,
# WORKERS processes each sharing one working corpus, for SECONDS, then a table
# of executions and crashes (docs/testing.md). scripts/fuzz.sh is CI's short,
# one-process-at-a-time run; this is the hour-long one.
#   scripts/fuzz-parallel.sh SECONDS WORKERS [FUZZ_BIN_DIR] [OUT_DIR]
# FUZZ_BIN_DIR holds fuzz_<target> (default: the sanitizer build's fuzz/).
# Crash inputs land in OUT_DIR/artifacts-<target>/ (default fuzz/artifacts).
# ENCGRAPH_FUZZ_SEED offsets the workers' seeds, so a second session explores anew.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:?seconds}
workers=${2:?workers per target}
bin=${3:-${ENCGRAPH_SANITIZE_BUILD_DIR:-$root/build-sanitize}/fuzz}
out=${4:-$root/fuzz/artifacts}
targets=(json safetensors config trace image)
declare -A max_len=([json]=8192 [safetensors]=8192 [config]=4096 [trace]=4096 [image]=16384)
logs=$(mktemp -d /tmp/encgraph-fuzz.XXXX)
for t in "${targets[@]}"; do
  work=$root/fuzz/work/$t
  mkdir -p "$work" "$out/artifacts-$t"
  inputs=("$work" "$root/fuzz/corpus/$t")
  [[ -d $root/fuzz/regressions/$t ]] && inputs+=("$root/fuzz/regressions/$t")
  for ((w = 0; w < workers; ++w)); do
    "$bin/fuzz_$t" -max_total_time="$seconds" -max_len="${max_len[$t]}" -rss_limit_mb=2048 \
      -timeout=10 -print_final_stats=1 -seed=$((1000 * w + ${ENCGRAPH_FUZZ_SEED:-17})) \
      -artifact_prefix="$out/artifacts-$t/" "${inputs[@]}" >"$logs/$t.$w.log" 2>&1 &
  done
done
wait
failed=0
printf '| target | processes x seconds | executions | crashes | corpus |\n|---|---|---|---|---|\n'
for t in "${targets[@]}"; do
  runs=0
  for f in "$logs/$t".*.log; do
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$f" | tail -1)
    runs=$((runs + ${n:-0}))
  done
  crashes=$(find "$out/artifacts-$t" -type f | wc -l)
  ((crashes)) && failed=1
  printf '| %s | %d x %d | %d | %d | %d |\n' "$t" "$workers" "$seconds" "$runs" "$crashes" \
    "$(find "$root/fuzz/work/$t" -type f | wc -l)"
done
for f in "$logs"/*.log; do
  grep -q -E "ERROR|SUMMARY" "$f" && { echo "== $f"; grep -E "ERROR|SUMMARY|Test unit" "$f" | head; }
done
exit $failed
