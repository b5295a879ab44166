#!/usr/bin/env bash
# GPU runner hook (scripts/gpu-run-all.sh calls: bash qwen_power.sh <bundle> <logdir>):
# whether the Qwen2.5-VL-7B tower's sustained workloads run under the power
# cap, as SigLIP's do (siglip_power.sh). `encgraph bench` on the bench config
# (requests of 16; graphs and eager interleaved, as the command runs them, so
# the samples cover both) runs 8192 224² images, then 1024 videos (8 frames of
# 336 x 448, qwen_bench's video item), each for several seconds under
# lib/power_sample.sh. Leaves <logdir>/qwen_power_{224,video}.table.
#   device run: bash scripts/gpu-run-all.sh qwen_power
# step-timeout: 300
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bundle=$(cd "$1" && pwd)
logdir=$(cd "$2" && pwd)  # absolute: the trace path goes into the config
config=$root/configs/qwen2_5_vl_bench.toml
trace=$logdir/qwen_power_video.jsonl
for _ in $(seq 1024); do
  echo '{"modality": "video", "frames": 8, "height": 336, "width": 448}'
done >"$trace"
bash "$here/lib/power_sample.sh" "$logdir" qwen_power_224 \
  "$bundle/bin/encgraph" bench --config "$config" --set workload.count=8192 \
  --report "$logdir/qwen_power_224.json"
bash "$here/lib/power_sample.sh" "$logdir" qwen_power_video \
  "$bundle/bin/encgraph" bench --config "$config" --set 'workload.kind="trace"' \
  --set "workload.trace=\"$trace\"" \
  --report "$logdir/qwen_power_video.json"
for w in 224 video; do  # items/s per mode, from the report's results
  python3 -c 'import json, sys
print(sys.argv[2] + ": " + ", ".join("%s %.1f items/s" % (r["mode"], r["items_per_s"])
                                     for r in json.load(open(sys.argv[1]))["results"]))' \
    "$logdir/qwen_power_$w.json" "$w" | tee -a "$logdir/qwen_power_$w.table"
done
