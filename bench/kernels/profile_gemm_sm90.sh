#!/usr/bin/env bash
# On the GPU machine (gpu-bundle/ carried, unpacked): Nsight Compute's stall
# sampling of one launch of our Hopper GEMM (gemm_sm90.cu), per SASS
# instruction, hottest first: where a tile's time goes besides the wgmma.
#   bash bench/kernels/profile_gemm_sm90.sh <bundle> <out-dir> [bench_kernels args]
# Default: the fused gate/up + SiLU·mul form at 65536 rows (bench_kernels --only mlp,
# the second launch: the first after a warm-up call).
set -euo pipefail
bundle=$1
out=$2
shift 2
args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(--only mlp)
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
[[ -n $ncu ]] || { echo "no ncu on this machine"; exit 1; }
"$ncu" --kernel-name regex:gemm_sm90_kernel --launch-skip 1 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --section SpeedOfLight \
  -o "$out/gemm_sm90" -f "$bundle/bin/bench_kernels" "${args[@]}" >"$out/ncu-run.log" 2>&1
"$ncu" -i "$out/gemm_sm90.ncu-rep" --page details >"$out/gemm_sm90-details.txt"
"$ncu" -i "$out/gemm_sm90.ncu-rep" --page source --csv --print-source sass >"$out/gemm_sm90-sass.csv"
python3 - "$out/gemm_sm90-sass.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next(i for i, r in enumerate(rows) if any("Warp Stall Sampling (All" in c for c in r))
hdr, body = rows[head], rows[head + 1:]
col = next(i for i, c in enumerate(hdr) if c.startswith("Warp Stall Sampling (All"))
src = next(i for i, c in enumerate(hdr) if c == "Source")
num = lambda s: float(s.replace(",", "") or 0)
total = sum(num(r[col]) for r in body if len(r) > col)
print(f"stall samples: {total:.0f}; hottest SASS instructions:")
for r in sorted((r for r in body if len(r) > col), key=lambda r: -num(r[col]))[:45]:
    print(f"{100 * num(r[col]) / total:5.1f}%  {r[src][:110]}")
PY
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued|Issued Warp" "$out/gemm_sm90-details.txt" | head -12
