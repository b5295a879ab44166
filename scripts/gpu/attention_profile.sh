#!/usr/bin/env bash
# GPU runner hook (scripts/gpu-run-all.sh calls: bash attention_profile.sh <bundle> <logdir>):
# Nsight Compute on the Hopper attention kernel (head_dim 72
# padded to 80, lazy max) at 768 and 2048 tokens a sequence (64 sequences x
# 16 heads: bench_kernels --only attnshort --attn-len N), side by side: what
# holds short sequences back per FLOP (bench/kernels/NOTES.md, "Open leads").
# Details and the hottest SASS lines per length go to the logs; the table
# puts the headline metrics of the two lengths beside each other.
#   device run: bash scripts/gpu-run-all.sh attention_profile
# step-timeout: 420
set -euo pipefail
bundle=$1
logdir=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
lengths=(768 2048)
for len in "${lengths[@]}"; do
  scratch=$(mktemp -d)
  if ! bash "$root/bench/kernels/profile_kernel.sh" "$bundle" "$scratch" \
    'tma_attention_kernel<\(int\)80, \(bool\)1>' --only attnshort --attn-len "$len" \
    >"$logdir/attention_profile_$len.log" 2>&1; then
    # Nsight Compute's own log says why (no counters, no matching launch).
    tail -40 "$scratch"/ncu-run-*.log >>"$logdir/attention_profile_$len.log" 2>&1 || true
    cat "$logdir/attention_profile_$len.log"
    exit 1
  fi
  cp "$scratch"/*-details.txt "$logdir/attention_profile_${len}_details.txt"
  rm -rf "$scratch"
done
metrics=("Duration" "SM Frequency" "Compute (SM) Throughput" "Memory Throughput"
  "Executed Ipc Active" "Issue Slots Busy" "No Eligible" "Active Warps Per Scheduler"
  "Eligible Warps Per Scheduler" "Warp Cycles Per Issued Instruction" "Achieved Occupancy"
  "Registers Per Thread" "Waves Per SM")
{
  echo "attention_profile: variant 3 at ${lengths[*]} tokens (ncu, one launch each)"
  echo "| metric | ${lengths[0]} | ${lengths[1]} |"
  echo "|---|---|---|"
  for m in "${metrics[@]}"; do
    row="| $m"
    for len in "${lengths[@]}"; do
      # The metric's name as a fixed string (some hold parentheses): "value unit".
      v=$(awk -v m="$m" '$0 ~ /^ +/ && index($0, " " m " ") { print $NF, $(NF-1); exit }' \
        "$logdir/attention_profile_${len}_details.txt" || true)
      row="$row | ${v:-?}"
    done
    echo "$row |"
  done
} >"$logdir/attention_profile.table"
cat "$logdir/attention_profile.table"
