#!/usr/bin/env bash
# GPU runner hook (scripts/gpu-run-all.sh calls: bash verify.sh <bundle> <logdir>):
# `encgraph verify` on the shipped GPU configs. Every batch of a small workload
# runs through its graph, then every item alone eagerly, memory poisoned; any
# row beyond the dtype's tolerance fails the step (exit 1) and names the item,
# output, row and the padding logic of the buffers involved.
# step-timeout: 400
set -euo pipefail
bundle=$1
logdir=$2
exe=$bundle/bin/encgraph
table=$logdir/verify.table
echo "| config | result | seconds | summary |" >"$table"
echo "|---|---|---|---|" >>"$table"
failed=0
for cfg in configs/qwen2_5_vl.toml configs/siglip.toml; do
  name=$(basename "$cfg" .toml)
  log=$logdir/verify-$name.log
  t0=$EPOCHREALTIME
  rc=0
  "$exe" verify -c "$cfg" --set workload.count=24 --set workload.request_size=8 >"$log" 2>&1 || rc=$?
  dt=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  cat "$log"
  line=$(grep -m1 -E '^(OK|MISMATCH|STATISTICS)' "$log" | cut -c1-120 || true)
  if [[ $rc == 0 ]]; then
    echo "| $name | ok | $dt | $line |" >>"$table"
  else
    echo "| $name | FAIL (exit $rc) | $dt | $line |" >>"$table"
    failed=1
  fi
done
cat "$table"
exit $failed
