#!/usr/bin/env bash
# GPU runner hook (scripts/gpu-run-all.sh calls: bash siglip_power.sh <bundle> <logdir>):
# what bounds SigLIP so400m's sustained rate. Runs `siglip_bench` (graphs,
# requests of 64, 2048 images, 4 passes) while nvidia-smi samples power, SM
# clock, temperature and the active clock-throttle reasons every 100 ms, and
# reports the samples under load (> 400 W): p10/p50/p90 and how often each
# throttle reason was set (0x4: software power cap). There is no Nsight
# Systems on the GPU machine, so this stands in for a timeline.
# Leaves <logdir>/siglip_power.table.
#   device run: bash scripts/gpu-run-all.sh siglip_power
# step-timeout: 300
set -euo pipefail
bundle=$1
logdir=$2
samples=$logdir/siglip_power_smi.csv
nvidia-smi --query-gpu=power.draw,clocks.sm,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader,nounits -lms 100 >"$samples" &
smi=$!
"$bundle/bin/siglip_bench" --device cuda --weights random --set hidden_size=1152 \
  --set intermediate_size=4304 --set num_hidden_layers=27 --set num_attention_heads=16 \
  --set image_size=384 --set patch_size=14 --images 2048 --request-size 64 --repeats 4 \
  --modes graphs >"$logdir/siglip_power_bench.log" 2>&1
kill "$smi" 2>/dev/null || true
{
  echo "siglip_bench: $(grep -o '"images_per_s": [0-9.]*' "$logdir/siglip_power_bench.log")"
  echo "samples over 400 W (power W, SM MHz, temperature C, throttle reasons), p10 / p50 / p90:"
  awk -F', ' '$1 > 400' "$samples" | sort -t, -k1 -n |
    awk '{row[NR] = $0} END { if (NR == 0) { print "none"; exit }
      print row[int(NR * 0.1) + 1]; print row[int(NR * 0.5) + 1]; print row[int(NR * 0.9) + 1] }'
  echo "throttle reasons under load (count):"
  awk -F', ' '$1 > 400 {print $4}' "$samples" | sort | uniq -c
  echo "max SM clock: $(nvidia-smi --query-gpu=clocks.max.sm --format=csv,noheader)"
} >"$logdir/siglip_power.table"
cat "$logdir/siglip_power.table"
