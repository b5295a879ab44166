#!/usr/bin/env bash
# GPU runner hook (scripts/gpu-run-all.sh calls: bash cli_smoke.sh <bundle> <logdir>):
# the encgraph command on the GPU as a user runs it. The plugin loader probes each
# CUDA plugin in a child process before loading it; this times that probe
# (`encgraph plugins`), runs the Qwen2.5-VL and SigLIP configs on a small
# workload, encodes one PNG, and checks that a bad input still exits 2 there.
# step-timeout: 300
set -euo pipefail
bundle=$1
logdir=$2
exe=$bundle/bin/encgraph
work=$(mktemp -d /tmp/encgraph-cli-smoke.XXXX)
python3 - "$work/a.png" <<'PY'
import struct, sys, zlib
w, h = 448, 336
rows = b"".join(b"\0" + bytes(((x * 7 + y * 13 + c * 50) & 255) for x in range(w) for c in range(3))
                for y in range(h))
chunk = lambda k, d: struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d))
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
PY
table=$logdir/cli_smoke.table
echo "| check | result | seconds |" >"$table"
echo "|---|---|---|" >>"$table"
step() {  # step NAME EXPECTED_RC COMMAND...
  local name=$1 want=$2
  shift 2
  local t0=$EPOCHREALTIME rc=0
  "$@" >"$work/$name.log" 2>&1 || rc=$?
  local dt
  dt=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
  cat "$work/$name.log"
  if [[ $rc == "$want" ]]; then
    echo "| $name | ok (exit $rc) | $dt |" >>"$table"
  else
    echo "| $name | FAIL (exit $rc, expected $want) | $dt |" >>"$table"
    failed=1
  fi
}
failed=0
step plugins-probe 0 "$exe" plugins
step qwen-run 0 "$exe" run -c configs/qwen2_5_vl.toml --set workload.count=16 --set workload.request_size=8
step siglip-run 0 "$exe" run -c configs/siglip.toml --set workload.count=16 --set workload.request_size=8
step qwen-encode 0 "$exe" encode -c configs/qwen2_5_vl.toml -o "$work/e.safetensors" "$work/a.png"
step qwen-encode-onto-input 2 "$exe" encode -c configs/qwen2_5_vl.toml -o "$work/a.png" "$work/a.png"
step probe-off 0 env ENCGRAPH_PLUGIN_PROBE=0 "$exe" run -c configs/qwen2_5_vl.toml --set workload.count=4
grep -q "wrote 1 embeddings" "$work/qwen-encode.log" || failed=1
cat "$table"
rm -rf "$work"
exit $failed
