#!/usr/bin/env python3
"""Per-kernel GPU time of the Qwen2.5-VL-7B tower on one image, under Nsight Compute.

The benchmark's config (configs/qwen2_5_vl_bench.toml: bf16, random weights) runs
eagerly on a trace of one image per workload (224: the latency case, 1344: the
largest image); the kernels are grouped by name and launch shape and by kind
(matrix products, attention, the memory-bound passes), with the GPU time of the
forward. Set against the latency a request sees with graphs (qwen_bench's 224x1),
the difference is what the replay itself adds (launch gaps, copies).

usage: qwen_profile.py --bundle gpu-bundle --out-dir DIR --ncu NCU [--sizes 224,1344]
"""
import argparse
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import kernel_table, ncu_eager_profile, write_jsonl  # noqa: E402

# Kernel kinds by name fragment, first match wins.
KINDS = [("matrix products", ("gemm", "xmma", "cutlass", "sm90_")),
         ("attention", ("attention",)),
         ("rms/layer norm", ("norm",)),
         ("rotary", ("rotary",)),
         ("silu*mul", ("silu",)),
         ("gather/scatter rows", ("gather", "scatter", "permute", "reorder")),
         ("other", ("",))]


def kind_of(name):
    low = name.lower()
    for kind, frags in KINDS:
        if any(f in low for f in frags):
            return kind
    return "other"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--ncu", required=True)
    ap.add_argument("--config", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "configs", "qwen2_5_vl_bench.toml"))
    ap.add_argument("--sizes", default="224,1344")
    args = ap.parse_args()
    out = os.path.abspath(args.out_dir)
    os.makedirs(out, exist_ok=True)
    summary = {}
    for side in (int(s) for s in args.sizes.split(",")):
        trace = os.path.join(out, f"qwen-profile-{side}.jsonl")
        write_jsonl(trace, [dict(modality="image", height=side, width=side)])
        try:
            groups, total = ncu_eager_profile(args.bundle, args.ncu, os.path.abspath(args.config),
                                              trace, 1,
                                              os.path.join(out, f"qwen-profile-{side}-ncu.csv"))
        except RuntimeError as e:
            print(e)
            return 1
        launches = sum(g[0] for g in groups.values())
        by_kind = collections.defaultdict(lambda: [0, 0.0])
        for (name, _, _), (n, ns) in groups.items():
            by_kind[kind_of(name)][0] += n
            by_kind[kind_of(name)][1] += ns
        print(f"\n{side}x{side}, one image, eager: GPU time {total / 1e6:.3f} ms in {launches} "
              f"kernels ({total / 1e3 / max(launches, 1):.1f} us a kernel on average)")
        print(f"{'kind':24} {'n':>5} {'ms':>8} {'share':>6}")
        for kind, (n, ns) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
            print(f"{kind:24} {n:5d} {ns / 1e6:8.3f} {100 * ns / total:5.1f}%")
        print("\n".join(kernel_table(groups, total, rows=25)))
        summary[str(side)] = dict(gpu_ms=total / 1e6, kernels=launches,
                                  kinds={k: dict(launches=n, ms=ns / 1e6)
                                         for k, (n, ns) in by_kind.items()})
    with open(os.path.join(out, "qwen-profile.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
