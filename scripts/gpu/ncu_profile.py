#!/usr/bin/env python3
"""Per-kernel GPU time of one eager request under Nsight Compute (gpu__time_duration, clocks
left alone), kernels grouped by name and launch shape, largest total first.

  ncu_profile.py --model qwen2_5_vl|qwen3_vl --bundle B --out-dir D --ncu NCU [--sizes 224,1344]
                 [--set KEY=VALUE ...]
      The Qwen2.5-VL-7B or Qwen3-VL-8B tower (bench.py's config: bf16, random weights) on one
      image per size (224: the latency case, 1344: the largest image), also grouped by kind
      (matrix products, attention, the memory-bound passes); <model>-profile.json sums them.
      --set passes a config override on, e.g. plugin.config.precision="fp8_linear".
      Set against the latency a request sees with graphs (bench.py's 224x1 workload), the
      difference is what the replay itself adds (launch gaps, copies).
  ncu_profile.py --model dsocr2 --bundle B --out-dir D --ncu NCU [--plugins DIR] [--workload a4_150]
      DeepSeek-OCR-2's vision side (bench.py's config) on one request of 8 pages of a
      bench.py workload's size.
Eager: no graph warm-up, so no GEMM tuning runs among the profiled kernels.
"""
import argparse
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import DSOCR2_CONFIG, DSOCR2_SIZES, MODELS as BENCH_MODELS, model_config  # noqa: E402
from bench_common import kernel_table, ncu_eager_profile, write_jsonl  # noqa: E402

# Kernel kinds by name fragment, first match wins.
KINDS = [("matrix products", ("gemm", "xmma", "cutlass", "sm90_")),
         ("attention", ("attention",)),
         ("rms/layer norm", ("norm",)),
         ("rotary", ("rotary",)),
         ("silu*mul", ("silu",)),
         ("FP8 quantisation", ("quantize", "e4m3")),
         ("gather/scatter rows", ("gather", "scatter", "permute", "reorder")),
         ("other", ("",))]


def kind_of(name):
    low = name.lower()
    for kind, frags in KINDS:
        if any(f in low for f in frags):
            return kind
    return "other"


def profile_qwen(args, out):
    summary = {}
    config = os.path.abspath(args.config) if args.config else model_config(
        BENCH_MODELS[args.model], os.path.abspath(args.bundle), out)
    stem = f"{args.model}-profile"
    for side in (int(s) for s in args.sizes.split(",")):
        trace = os.path.join(out, f"{stem}-{side}.jsonl")
        write_jsonl(trace, [dict(modality="image", height=side, width=side)])
        groups, total = ncu_eager_profile(args.bundle, args.ncu, config, trace, 1,
                                          os.path.join(out, f"{stem}-{side}-ncu.csv"), args.set)
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
    with open(os.path.join(out, f"{stem}.json"), "w") as fh:
        json.dump(summary, fh, indent=1)


def profile_dsocr2(args, out):
    if args.workload not in DSOCR2_SIZES:
        raise SystemExit(f"--workload: one of {', '.join(DSOCR2_SIZES)}")
    h, w = DSOCR2_SIZES[args.workload]
    trace = os.path.join(out, f"dsocr2-profile-{args.workload}.jsonl")
    write_jsonl(trace, [dict(modality="image", height=h, width=w)] * 8)
    config = args.config
    if not config:
        config = os.path.join(out, "dsocr2_profile.toml")
        with open(config, "w") as fh:
            fh.write(DSOCR2_CONFIG.format(
                plugins=args.plugins or os.path.join(args.bundle, "plugins")))
    groups, total = ncu_eager_profile(args.bundle, args.ncu, os.path.abspath(config), trace, 8,
                                      os.path.join(out, "dsocr2-profile-ncu.csv"), args.set)
    print(f"{args.plugins or 'bundle plugins'}")
    print(f"{args.workload}: 8 images, GPU time {total / 1e6:.1f} ms in "
          f"{sum(g[0] for g in groups.values())} kernels")
    print("\n".join(kernel_table(groups, total)))


MODELS = {"qwen2_5_vl": profile_qwen, "qwen3_vl": profile_qwen, "dsocr2": profile_dsocr2}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--ncu", required=True, help="the Nsight Compute command")
    ap.add_argument("--config", default=None, help="the encgraph config (default: the model's)")
    ap.add_argument("--sizes", default="224,1344", help="qwen2_5_vl, qwen3_vl: square image sides")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override for encgraph run (repeatable)")
    ap.add_argument("--plugins", default=None, help="dsocr2: plugin folder (default: the bundle's)")
    ap.add_argument("--workload", default="a4_150",
                    help="dsocr2: the page size, a bench.py dsocr2 workload")
    args = ap.parse_args(argv)
    out = os.path.abspath(args.out_dir)
    os.makedirs(out, exist_ok=True)
    try:
        MODELS[args.model](args, out)
    except RuntimeError as e:  # ncu or encgraph failed: its output is in the message
        print(e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
