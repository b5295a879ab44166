#!/usr/bin/env bash
# Fuzzes each libFuzzer target of fuzz/ for a bounded time (docs/testing.md).
#   scripts/fuzz.sh [seconds per target, default 60] [target ...]
# Targets: json safetensors config trace image infer_request (all by default). They come from
# the sanitizer build, ${ENCGRAPH_SANITIZE_BUILD_DIR:-build-sanitize}, which
# scripts/test configures with -DENCGRAPH_FUZZ=ON and builds. Each run starts
# from the committed seeds (fuzz/corpus/<target>) and the saved crashes
# (fuzz/regressions/<target>), grows a working corpus in fuzz/work/<target>,
# and writes any crash, leak, timeout or out-of-memory input to
# fuzz/artifacts/<target>/ (both git-ignored). Exit status 1 when any target
# failed; copy a reproducer into fuzz/regressions/<target>/ to keep it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ENCGRAPH_SANITIZE_BUILD_DIR:-$root/build-sanitize}
seconds=${1:-60}
(($# > 0)) && shift
targets=("$@")
((${#targets[@]})) || targets=(json safetensors config trace image infer_request)

# Longest input per target: past what each format's interesting structure
# needs, short enough to keep executions fast.
declare -A max_len=([json]=8192 [safetensors]=8192 [config]=4096 [trace]=4096 [image]=16384
  [infer_request]=8192)

failed=()
for t in "${targets[@]}"; do
  exe=$build/fuzz/fuzz_$t
  if [[ ! -x $exe ]]; then
    echo "fuzz: $exe is missing: build it with scripts/test, or configure $build with" \
      "-DENCGRAPH_FUZZ=ON and build the target fuzz_$t" >&2
    exit 2
  fi
  work=$root/fuzz/work/$t
  artifacts=$root/fuzz/artifacts/$t
  mkdir -p "$work" "$artifacts"
  inputs=("$work" "$root/fuzz/corpus/$t")
  [[ -d $root/fuzz/regressions/$t ]] && inputs+=("$root/fuzz/regressions/$t")
  log=$root/fuzz/work/$t.log
  rc=0
  "$exe" -max_total_time="$seconds" -max_len="${max_len[$t]:-4096}" -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$artifacts/" "${inputs[@]}" \
    >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  corpus=$(find "$work" -type f | wc -l)
  if ((rc)); then
    failed+=("$t")
    echo "fuzz_$t: FAILED (exit $rc) after ${runs:-?} executions; log $log:"
    grep -E "ERROR|SUMMARY|Test unit written|==[0-9]+==" "$log" | head -20 || true
  else
    echo "fuzz_$t: ${runs:-?} executions in ${seconds} s, no crash (working corpus: $corpus inputs)"
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: ${failed[*]} failed; reproducers in $root/fuzz/artifacts/" >&2
  exit 1
fi
