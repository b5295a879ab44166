#!/usr/bin/env bash
# Runs on the GPU machine (from the repository root, with gpu-bundle/ carried):
# every GPU test suite and every step of scripts/gpu/steps.sh (benchmarks,
# comparisons with transformers, profiles), full logs under $OUT, a summary table last.
#   device run: bash scripts/gpu-run-all.sh [filter-regex]
# e.g. bash scripts/gpu-run-all.sh '^bench_qwen2_5_vl$' (or its former name qwen_bench);
# bash scripts/gpu/steps.sh --list prints the steps.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=${ENCGRAPH_BUNDLE_DIR:-$root/gpu-bundle}
# $OUT brings back at most 8 files: individual logs go to a scratch folder and
# are concatenated into $OUT/all-logs.txt at the end.
final=${OUT:-/tmp/encgraph-gpu-out}
out=$(mktemp -d /tmp/encgraph-logs.XXXX)
mkdir -p "$final"
bash "$root/scripts/gpu/steps.sh" --unpack "$bundle"  # libraries shipped compressed
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export ENCGRAPH_PLUGIN_PATH=$bundle/plugins
export ENCGRAPH_REQUIRE_GPU=1  # a GPU test that would skip fails instead
ENCGRAPH_REQUIRE_GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
export ENCGRAPH_REQUIRE_GPUS  # suites needing more GPUs than this skip (77)
export NCCL_NVLS_ENABLE=0
# Tuned GEMM choices go to a fresh cache folder per call ($XDG_CACHE_HOME/encgraph),
# not the machine's ~/.cache (the bench_capture step sets plugin.tuning.cache_dir
# to time cold and warm).
XDG_CACHE_HOME=${XDG_CACHE_HOME:-$(mktemp -d /tmp/encgraph-cache.XXXX)}
export XDG_CACHE_HOME
filter=${1:-.}
nvidia-smi -L | tee "$out/gpu.txt"

summary=()
run() {  # run NAME LIMIT COMMAND...
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  # A hung step must not eat the whole call: each gets its own limit.
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  local verdict=PASS
  if [[ $rc == 77 ]]; then verdict="SKIP($(tail -1 "$out/$name.log" | cut -c1-40))"
  elif [[ $rc != 0 ]]; then verdict=FAIL:$rc; fi
  summary+=("$(printf '%-34s %-6s %4ss' "$name" "$verdict" $((SECONDS - start)))")
  echo "${summary[-1]}"  # progress, in case the call is cut short
  [[ $rc == 0 || $rc == 77 ]] || tail -30 "$out/$name.log"
}

# The GPU suites (CPU suites run in CI; some of them need the build tree's
# paths, which do not exist here).
for t in "$bundle"/bin/test_*gpu* "$bundle"/bin/test_*cuda*; do
  name=$(basename "$t")
  [[ -f $t && $name =~ $filter ]] && run "$name" "${ENCGRAPH_STEP_TIMEOUT:-300}" "$t"
done
# Benchmarks and reference checks: scripts/gpu/steps.sh's table, each step with its own
# limit (ENCGRAPH_STEP_TIMEOUT, when set, wins). A step runs when the filter matches its
# name or one of its former names (qwen_bench, siglip_vs_transformers, ...); a manual
# step only when the filter is given.
while read -r name limit aliases manual; do
  matched=0
  for n in "$name" ${aliases//,/ }; do
    [[ $n != - && $n =~ $filter ]] && matched=1
  done
  [[ $matched == 1 ]] || continue
  [[ -n $manual && $filter == . ]] && continue
  run "$name" "${ENCGRAPH_STEP_TIMEOUT:-$limit}" bash "$root/scripts/gpu/steps.sh" "$name" "$bundle" "$out"
done < <(bash "$root/scripts/gpu/steps.sh" --list)

echo
echo "== encgraph GPU summary =="
printf '%s\n' "${summary[@]}"
for f in "$out"/*.table; do
  [[ -f $f ]] && { echo; cat "$f"; }
done
{
  printf '%s\n' "${summary[@]}"
  for f in "$out"/*.table; do [[ -f $f ]] && { echo; cat "$f"; }; done
} >"$final/summary.txt"
for f in "$out"/*.log "$out"/*.txt; do
  [[ -f $f ]] && { echo "===== $(basename "$f")"; cat "$f"; }
done >"$final/all-logs.txt"
cp "$out"/*.json "$final/" 2>/dev/null || true
