#!/usr/bin/env bash
# Runs a benchmark while nvidia-smi samples power, SM clock, temperature and the
# active clock-throttle reasons every 100 ms, and summarises the samples under
# load (> 400 W): p10 / p50 / p90 by power, and how often each throttle reason
# was set (0x4: software power cap, 0x1: idle). Nsight Systems is not on the GPU
# machine, so this stands in for a timeline. Used by siglip_power.sh and
# qwen_power.sh (this folder is not a gpu-run-all.sh step).
#   bash scripts/gpu/lib/power_sample.sh <log dir> <name> <command...>
# Leaves <log dir>/<name>_smi.csv (samples), <name>_bench.log (the command's
# output) and <name>.table (the summary, also printed); exits with the
# command's status.
set -uo pipefail
logdir=$1
name=$2
shift 2
samples=$logdir/${name}_smi.csv
gpu=${POWER_SAMPLE_GPU:-0}  # the GPU sampled (the benchmark's, device 0 by default)
: >"$samples"                # exists even if the command ends before the first sample
nvidia-smi -i "$gpu" --query-gpu=power.draw,clocks.sm,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader,nounits -lms 100 >"$samples" &
smi=$!
"$@" >"$logdir/${name}_bench.log" 2>&1
rc=$?
kill "$smi" 2>/dev/null
wait "$smi" 2>/dev/null
{
  echo "$name: command exit $rc; power limit $(nvidia-smi -i "$gpu" --query-gpu=power.limit --format=csv,noheader)"
  echo "samples over 400 W: $(awk -F', ' '$1 > 400' "$samples" | wc -l) of $(wc -l <"$samples")"
  echo "p10 / p50 / p90 by power (power W, SM MHz, temperature C, throttle reasons):"
  awk -F', ' '$1 > 400' "$samples" | sort -t, -k1 -n |
    awk '{row[NR] = $0} END { if (NR == 0) { print "none"; exit }
      print row[int(NR * 0.1) + 1]; print row[int(NR * 0.5) + 1]; print row[int(NR * 0.9) + 1] }'
  echo "SM clock p50 under load: $(awk -F', ' '$1 > 400 {print $2}' "$samples" | sort -n |
    awk '{v[NR] = $1} END { print (NR ? v[int(NR * 0.5) + 1] : "none") }') MHz"
  echo "throttle reasons under load (count):"
  awk -F', ' '$1 > 400 {print $4}' "$samples" | sort | uniq -c
  echo "max SM clock: $(nvidia-smi -i "$gpu" --query-gpu=clocks.max.sm --format=csv,noheader)"
} >"$logdir/$name.table"
cat "$logdir/$name.table"
exit "$rc"
