#!/usr/bin/env python3
"""Per-kernel time of one eager DeepSeek-OCR-2 request under Nsight Compute.

Writes the config and a trace of 8 pages, runs `encgraph run` eagerly under
`ncu --metrics gpu__time_duration.sum`, and prints the kernels grouped by
name and launch shape, largest total first, with their share of the GPU time.
"""
import argparse
import collections
import csv
import io
import os
import subprocess
import sys

# The benchmark's own config and page sizes (dsocr2_bench.py), run eagerly on a trace.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dsocr2_bench import CONFIG, SIZES  # noqa: E402
from bench_common import write_jsonl  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--ncu", required=True)
    ap.add_argument("--plugins", default=None, help="plugin folder (default: the bundle's)")
    ap.add_argument("workload", nargs="?", default="a4_150")
    args = ap.parse_args()
    out = os.path.abspath(args.out_dir)
    h, w = SIZES[args.workload]
    trace = os.path.join(out, f"dsocr2-profile-{args.workload}.jsonl")
    write_jsonl(trace, [dict(modality="image", height=h, width=w)] * 8)
    config = os.path.join(out, "dsocr2_profile.toml")
    with open(config, "w") as fh:
        fh.write(CONFIG.format(plugins=args.plugins or os.path.join(args.bundle, "plugins")))
    cmd = [args.ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv",
           os.path.join(args.bundle, "bin", "encgraph"), "run", "--config", config,
           "--set", "runtime.use_graphs=false", "--set", 'workload.kind="trace"',
           "--set", f'workload.trace="{trace}"', "--set", "workload.request_size=8",
           "--set", "workload.warmup_requests=0"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    with open(os.path.join(out, "dsocr2-profile-ncu.csv"), "w") as fh:
        fh.write(proc.stdout)
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        return 1
    text = proc.stdout[proc.stdout.find('"ID"'):]
    groups = collections.defaultdict(lambda: [0, 0.0])
    total = 0.0
    for row in csv.DictReader(io.StringIO(text)):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        ns = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "ns")
        ns *= {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}.get(unit, 1)
        name = row["Kernel Name"].split("(")[0][:60]
        key = (name, row.get("Grid Size", ""), row.get("Block Size", ""))
        groups[key][0] += 1
        groups[key][1] += ns
        total += ns
    print(f"{args.plugins or 'bundle plugins'}")
    print(f"{args.workload}: 8 images, GPU time {total / 1e6:.1f} ms in {sum(g[0] for g in groups.values())} kernels")
    print(f"{'kernel':60} {'grid':>18} {'block':>12} {'n':>4} {'ms':>8} {'share':>6}")
    for (name, grid, block), (n, ns) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:45]:
        print(f"{name:60} {grid:>18} {block:>12} {n:4d} {ns / 1e6:8.2f} {100 * ns / total:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
