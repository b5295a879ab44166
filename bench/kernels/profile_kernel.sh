#!/usr/bin/env bash
# On the GPU machine (gpu-bundle/ carried, unpacked): Nsight Compute on one
# launch of one kernel that bench_kernels runs: speed of light, warp states and
# stall sampling per SASS instruction, hottest first (where its time goes
# besides the tensor cores).
#   bash bench/kernels/profile_kernel.sh <bundle> <out-dir> <kernel-name regex> [bench_kernels args]
# The second matching launch is profiled (the first after a warm-up call). The
# regex sees the demangled name, template arguments included, as Nsight
# Compute spells them (e.g. 'tma_attention_kernel<\(int\)80, \(bool\)1, \(bool\)0, \(int\)0>': the
# TMA attention kernel, lazy, head_dim 72 or 80).
# e.g. tma_attention_kernel --only attnfull (the Hopper attention at 16 x 4096);
# profile_gemm_sm90.sh names our GEMM and its case.
set -euo pipefail
bundle=$1
out=$2
kernel=$3
shift 3
name=${kernel//[^A-Za-z0-9_]/_}
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
[[ -n $ncu ]] || { echo "no ncu on this machine"; exit 1; }
"$ncu" --kernel-name-base demangled --kernel-name "regex:$kernel" --launch-skip 1 --launch-count 1 \
  --section WarpStateStats --section SchedulerStats --section LaunchStats --section SourceCounters --section SpeedOfLight \
  --section ComputeWorkloadAnalysis --section Occupancy \
  -o "$out/$name" -f "$bundle/bin/bench_kernels" "$@" >"$out/ncu-run-$name.log" 2>&1
"$ncu" -i "$out/$name.ncu-rep" --page details >"$out/$name-details.txt"
"$ncu" -i "$out/$name.ncu-rep" --page source --csv --print-source sass >"$out/$name-sass.csv"
python3 - "$out/$name-sass.csv" <<'PY'
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
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued|Issued Warp|Issue Slots Busy|Achieved Occupancy|Stall|Executed Ipc" \
  "$out/$name-details.txt" | head -30
