#!/usr/bin/env bash
# Fuzzes each libFuzzer target of fuzz/ for a bounded time (docs/testing.md).
#   scripts/fuzz.sh [--workers N] [seconds per target, default 60] [target ...]
# Targets: json safetensors config trace image infer_request (all by default). They come from
# the sanitizer build, ${ENCGRAPH_SANITIZE_BUILD_DIR:-build-sanitize}, which
# scripts/test configures with -DENCGRAPH_FUZZ=ON and builds. Each run starts
# from the committed seeds (fuzz/corpus/<target>) and the saved crashes
# (fuzz/regressions/<target>), grows a working corpus in fuzz/work/<target>,
# and writes any crash, leak, timeout or out-of-memory input to
# fuzz/artifacts/<target>/ (both git-ignored). Exit status 1 when any target
# failed; copy a reproducer into fuzz/regressions/<target>/ to keep it.
# CI's run is one process per target, one target after another. --workers N
# is the long run for a many-core machine: every target at once, N processes
# each sharing its working corpus (seeds offset by ENCGRAPH_FUZZ_SEED, so a
# second long run explores anew), then a table of executions and crashes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ENCGRAPH_SANITIZE_BUILD_DIR:-$root/build-sanitize}
workers=1
if [[ ${1:-} == --workers ]]; then
  workers=${2:?--workers needs a count}
  shift 2
fi
seconds=${1:-60}
(($# > 0)) && shift
targets=("$@")
((${#targets[@]})) || targets=(json safetensors config trace image infer_request)

# Longest input per target: past what each format's interesting structure
# needs, short enough to keep executions fast.
declare -A max_len=([json]=8192 [safetensors]=8192 [config]=4096 [trace]=4096 [image]=16384
  [infer_request]=8192)

for t in "${targets[@]}"; do
  if [[ ! -x $build/fuzz/fuzz_$t ]]; then
    echo "fuzz: $build/fuzz/fuzz_$t is missing: build it with scripts/test, or configure" \
      "$build with -DENCGRAPH_FUZZ=ON and build the target fuzz_$t" >&2
    exit 2
  fi
done

# fuzz TARGET LOG [SEED]: one libFuzzer process on TARGET's corpora.
fuzz() {
  local t=$1 log=$2 seed=${3:-0}
  local inputs=("$root/fuzz/work/$t" "$root/fuzz/corpus/$t")
  [[ -d $root/fuzz/regressions/$t ]] && inputs+=("$root/fuzz/regressions/$t")
  mkdir -p "$root/fuzz/work/$t" "$root/fuzz/artifacts/$t"
  "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -max_len="${max_len[$t]:-4096}" \
    -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -seed="$seed" \
    -artifact_prefix="$root/fuzz/artifacts/$t/" "${inputs[@]}" >"$log" 2>&1
}
executions() { sed -n 's/^stat::number_of_executed_units: *//p' "$@" | awk '{s += $1} END {print s + 0}'; }

failed=()
if ((workers > 1)); then
  logs=$(mktemp -d /tmp/encgraph-fuzz.XXXX)
  for t in "${targets[@]}"; do
    for ((w = 0; w < workers; ++w)); do
      fuzz "$t" "$logs/$t.$w.log" $((1000 * w + ${ENCGRAPH_FUZZ_SEED:-17})) &
    done
  done
  wait || true
  printf '| target | processes x seconds | executions | crashes | corpus |\n|---|---|---|---|---|\n'
  for t in "${targets[@]}"; do
    crashes=$(find "$root/fuzz/artifacts/$t" -type f | wc -l)
    ((crashes)) && failed+=("$t")
    printf '| %s | %d x %d | %d | %d | %d |\n' "$t" "$workers" "$seconds" \
      "$(executions "$logs/$t".*.log)" "$crashes" "$(find "$root/fuzz/work/$t" -type f | wc -l)"
  done
  for f in "$logs"/*.log; do
    grep -q -E "ERROR|SUMMARY" "$f" && { echo "== $f"; grep -E "ERROR|SUMMARY|Test unit" "$f" | head; }
  done
else
  for t in "${targets[@]}"; do
    log=$root/fuzz/work/$t.log
    rc=0
    fuzz "$t" "$log" || rc=$?
    corpus=$(find "$root/fuzz/work/$t" -type f | wc -l)
    if ((rc)); then
      failed+=("$t")
      echo "fuzz_$t: FAILED (exit $rc) after $(executions "$log") executions; log $log:"
      grep -E "ERROR|SUMMARY|Test unit written|==[0-9]+==" "$log" | head -20 || true
    else
      echo "fuzz_$t: $(executions "$log") executions in ${seconds} s, no crash (working corpus: $corpus inputs)"
    fi
  done
fi
if ((${#failed[@]})); then
  echo "fuzz: ${failed[*]} failed; reproducers in $root/fuzz/artifacts/" >&2
  exit 1
fi
