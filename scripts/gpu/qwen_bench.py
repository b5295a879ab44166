#!/usr/bin/env python3
"""The Qwen2.5-VL-7B vision tower benchmark: encgraph (graphs, eager) against
transformers' own implementation (eager and sdpa attention), in one run, on the
same four workloads, bf16, random weights (the work does not depend on them).

Workloads (written as JSONL traces that `encgraph bench` reads):
  224     256 images of 224x224
  mixed   256 images, height and width drawn from the multiples of 28 in 224..1344
  1344    32 images of 1344x1344
  video   64 videos of 8 frames at 336x448
  224x1   64 images of 224x224, one per request (latency; not an issue target)
Every system runs requests of 16 items (224x1: one; one transformers forward per request,
the items concatenated as Qwen2.5-VL's processor does), the first request as
warm-up; encgraph's graphs and eager runtimes take the requests in turn
(`encgraph bench`). Padded efficiency: real over budget tokens of the batches
that replayed a graph ("-": none did). Times cover the host-to-device copy of the pixels and the forward up to
the device's last write. Model FLOPs count matrix products and attention of the
real items (no padding), so TFLOP/s is useful work.

usage: qwen_bench.py --bundle gpu-bundle --out-dir DIR [--only 224,mixed] [--skip-transformers]
                     [--variant "LABEL:VAR=VALUE,..."]...
"""
import argparse
import json
import os
import random
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (log, matmul_peak, parse_variant,  # noqa: E402
                          run_encgraph_variant, run_qwen_transformers)

PATCH, TEMPORAL, MERGE, WINDOW = 14, 2, 2, 112
D, HEADS, INTER, OUT, DEPTH, FULL = 1280, 16, 3420, 3584, 32, (7, 15, 23, 31)
REQUEST = 16
# Items per request where a workload does not say otherwise; "224x1" sends one
# small image per request, where launch and replay overhead would show.
REQUEST_SIZES = {"224x1": 1}


def workloads():
    rnd = random.Random(20261129)
    sides = list(range(224, 1345, 28))
    return {
        "224": [dict(modality="image", height=224, width=224) for _ in range(256)],
        "mixed": [dict(modality="image", height=rnd.choice(sides), width=rnd.choice(sides))
                  for _ in range(256)],
        "1344": [dict(modality="image", height=1344, width=1344) for _ in range(32)],
        "video": [dict(modality="video", frames=8, height=336, width=448) for _ in range(64)],
        "224x1": [dict(modality="image", height=224, width=224) for _ in range(64)],
    }


def grid(item):
    t = (item.get("frames", 1) + TEMPORAL - 1) // TEMPORAL
    return t, item["height"] // PATCH, item["width"] // PATCH


def item_flops(item):
    """Matrix-product and attention FLOPs of one item's forward (2 per multiply-add)."""
    t, h, w = grid(item)
    p = t * h * w
    per_patch = 2 * (D * 3 * D + D * D + D * 2 * INTER + INTER * D)
    flops = 2 * p * 3 * TEMPORAL * PATCH * PATCH * D + DEPTH * p * per_patch
    flops += 2 * (p // 4) * (4 * D * 4 * D + 4 * D * OUT)  # merger
    # Attention: QK^T and PV, 4 * len^2 * D per sequence and layer.
    wu = WINDOW // PATCH // MERGE  # merge units per window side
    hu, wu_ = h // MERGE, w // MERGE
    win = sum((min(wu, hu - i) * min(wu, wu_ - j) * MERGE * MERGE) ** 2
              for i in range(0, hu, wu) for j in range(0, wu_, wu)) * t
    full = t * (h * w) ** 2
    flops += 4 * D * (len(FULL) * full + (DEPTH - len(FULL)) * win)
    return flops


def output_tokens(item):
    t, h, w = grid(item)
    return t * h * w // (MERGE * MERGE)


def run_encgraph(bundle, config, trace, out_dir, name, request, extra=(), launcher=(),
                 variant=None):
    """`launcher`: a command the encgraph command line follows (mpirun -np N ...); `variant`:
    from parse_variant (bench_common)."""
    return run_encgraph_variant(bundle, config, trace, os.path.join(out_dir, "qwen-bench"),
                                name, request, variant, extra, launcher)


def build_transformers(attn):
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
        Qwen2_5_VisionTransformerPretrainedModel)
    cfg = Qwen2_5_VLVisionConfig(depth=DEPTH, hidden_size=D, hidden_act="silu",
                                 intermediate_size=INTER, num_heads=HEADS, in_channels=3,
                                 patch_size=PATCH, spatial_merge_size=MERGE,
                                 temporal_patch_size=TEMPORAL, window_size=WINDOW,
                                 out_hidden_size=OUT, fullatt_block_indexes=list(FULL))
    cfg._attn_implementation = attn
    with torch.device("cuda"):
        model = Qwen2_5_VisionTransformerPretrainedModel(cfg).to(torch.bfloat16).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--config", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "configs", "qwen2_5_vl_bench.toml"))
    ap.add_argument("--only", default="224,mixed,1344,video,224x1")
    ap.add_argument("--skip-transformers", action="store_true")
    ap.add_argument("--transformers", default="sdpa,eager",
                    help="transformers attention implementations to run (eager attention is "
                         "the slow one: about 300 s of the full run)")
    ap.add_argument("--variant", action="append", default=[],
                    help="LABEL:VAR=VALUE[,...]: encgraph again under these environment "
                         "variables, side by side in the same run (e.g. \"previous build:"
                         "ENCGRAPH_PLUGIN_PATH=gpu-bundle/prev-plugins\"); a "
                         "dotted VAR is a config key instead (\"cuBLASLt MLP:plugin.config."
                         "mlp_kernel='cublaslt'\")")
    args = ap.parse_args()
    variants = [parse_variant(v) for v in args.variant]
    import transformers
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{torch.cuda.get_device_name()}")
    os.makedirs(args.out_dir, exist_ok=True)
    peak = matmul_peak()
    log(f"measured bf16 matrix-product peak (8192^3, torch): {peak:.0f} TFLOP/s")
    chosen = args.only.split(",")
    loads = {k: v for k, v in workloads().items() if k in chosen}
    results = {}
    for name, items in loads.items():
        trace = os.path.join(args.out_dir, f"qwen-bench-{name}.jsonl")
        with open(trace, "w") as fh:
            for it in items:
                fh.write(json.dumps(it) + "\n")
        results[name] = run_encgraph(args.bundle, os.path.abspath(args.config), trace,
                                     args.out_dir, name, REQUEST_SIZES.get(name, REQUEST))
        for variant in variants:
            results[name].update(run_encgraph(
                args.bundle, os.path.abspath(args.config), trace, args.out_dir, name,
                REQUEST_SIZES.get(name, REQUEST), variant=variant))
    if not args.skip_transformers:
        for attn in filter(None, args.transformers.split(",")):
            model = build_transformers(attn)
            for name, items in loads.items():
                t0 = time.time()
                results[name][f"transformers {attn}"] = run_qwen_transformers(
                    model, items, REQUEST_SIZES.get(name, REQUEST), grid,
                    3 * TEMPORAL * PATCH * PATCH)
                log(f"  transformers {attn} {name}: {time.time() - t0:.0f} s")
            del model
            torch.cuda.empty_cache()

    lines = [f"Qwen2.5-VL-7B tower, bf16, {torch.cuda.get_device_name()}; "
             f"bf16 product peak {peak:.0f} TFLOP/s (torch 8192^3, same run)", "",
             "| workload | system | images/s | tokens/s | p50 ms | p99 ms | padded eff. "
             "| TFLOP/s | % peak | vs transformers sdpa | batches |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, items in loads.items():
        # Every system runs the first request once unmeasured, then all of them.
        flops = sum(item_flops(it) for it in items)
        tokens = sum(output_tokens(it) for it in items)
        ref = results[name].get("transformers sdpa")
        for system, r in results[name].items():
            speed = r["items"] / r["seconds"]
            tf = flops / r["seconds"] / 1e12
            ratio = f"{(ref['seconds'] / r['seconds']):.2f}x" if ref else "-"
            eff = "-" if r["efficiency"] is None else f"{100 * r['efficiency']:.1f}%"
            lines.append(f"| {name} | {system} | {speed:.1f} | {tokens / r['seconds']:.0f} | "
                         f"{r['p50']:.2f} | {r['p99']:.2f} | {eff} | "
                         f"{tf:.0f} | {100 * tf / peak:.0f}% | {ratio} | {r['note']} |")
    table = "\n".join(lines)
    log("\n" + table)
    with open(os.path.join(args.out_dir, "qwen_bench.table"), "w") as fh:
        fh.write(table + "\n")
    with open(os.path.join(args.out_dir, "qwen-bench.json"), "w") as fh:
        json.dump(results, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
