#!/usr/bin/env bash
# Host staging against replay time, and the first-batch split, on the bench
# config: one `encgraph bench` run each of 48 videos (8 frames at 336x448) and
# 96 images of 224x224, requests of 16, and 32 images of 224x224 one a request,
# debug log. Needs the device
# environment (scripts/gpu-run-all.sh's) and $OUT.
set -uo pipefail
python3 - <<'PY'
import sys
sys.path.insert(0, 'scripts/gpu')
from bench_common import write_jsonl
write_jsonl('/tmp/v.jsonl', [dict(modality="video", frames=8, height=336, width=448)] * 48)
write_jsonl('/tmp/i.jsonl', [dict(modality="image", height=224, width=224)] * 96)
write_jsonl('/tmp/x.jsonl', [dict(modality="image", height=224, width=224)] * 32)
PY
for w in v i x; do
  size=16
  [ $w = x ] && size=1
  gpu-bundle/bin/encgraph bench --config configs/qwen2_5_vl_bench.toml \
    --set 'workload.kind="trace"' --set "workload.trace=\"/tmp/$w.jsonl\"" \
    --set workload.request_size=$size --set 'runtime.log_level="debug"' \
    --report "$OUT/probe_$w.json" "$@" > "$OUT/probe_$w.log" 2>&1
  echo "probe $w rc=$?"
  grep -E "host staging|split" "$OUT/probe_$w.log" | tail -6 | sed 's/.*\] //'
  python3 -c "import json;r=json.load(open('$OUT/probe_$w.json'))['results'];[print(x['mode'],round(x['items_per_s'],1),x['latency_ms']['p50'],x['batches_graph']) for x in r]"
done
