#!/usr/bin/env python3
"""Per-kernel time of one eager DeepSeek-OCR-2 request under Nsight Compute.

Writes the config and a trace of 8 pages, runs `encgraph run` eagerly under
`ncu --metrics gpu__time_duration.sum`, and prints the kernels grouped by
name and launch shape, largest total first, with their share of the GPU time.
"""
import argparse
import os
import sys

# The benchmark's own config and page sizes (dsocr2_bench.py), run eagerly on a trace.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dsocr2_bench import CONFIG, SIZES  # noqa: E402
from bench_common import kernel_table, ncu_eager_profile, write_jsonl  # noqa: E402


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
    try:
        groups, total = ncu_eager_profile(args.bundle, args.ncu, config, trace, 8,
                                          os.path.join(out, "dsocr2-profile-ncu.csv"))
    except RuntimeError as e:
        print(e)
        return 1
    print(f"{args.plugins or 'bundle plugins'}")
    print(f"{args.workload}: 8 images, GPU time {total / 1e6:.1f} ms in {sum(g[0] for g in groups.values())} kernels")
    print("\n".join(kernel_table(groups, total)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
