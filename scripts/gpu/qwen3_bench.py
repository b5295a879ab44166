#!/usr/bin/env python3
"""The Qwen3-VL-8B vision tower benchmark: encgraph (graphs, eager) against
transformers' own implementation (sdpa attention; --with-eager adds eager), in
one run, bf16, random weights (the work does not depend on them).

Workloads (JSONL traces that `encgraph bench` reads), the Qwen2.5-VL
benchmark's with sides in multiples of 32 (Qwen3-VL's resize factor):
  224     256 images of 224x224
  mixed   256 images, height and width drawn from the multiples of 32 in 224..1344
  1344    32 images of 1344x1344
  video   64 videos of 8 frames at 320x448
  224x1   64 images of 224x224, one per request (latency)
The plugin's pixel bounds are widened (min_pixels 4096, video_max_pixels
16777216) so that no item is resized: every system encodes the same grids.
Every system runs requests of 16 items (224x1: one; one transformers forward
per request, the items concatenated as the processor does), the first request
as warm-up; encgraph's graphs and eager runtimes take the requests in turn
(`encgraph bench`). Times cover the host-to-device copy of the pixels and the
forward up to the device's last write. Model FLOPs count the matrix products
(patch embedding, blocks, the merger and the deepstack mergers) and attention
(QK^T, PV) of the real items, no padding: TFLOP/s is useful work. The peak is
an 8192^3 bf16 torch.matmul measured in the same run.

usage: qwen3_bench.py --bundle gpu-bundle --out-dir DIR [--only 224,mixed] [--skip-transformers]
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

PATCH, TEMPORAL, MERGE = 16, 2, 2
D, HEADS, INTER, OUT, DEPTH, DEEPSTACK = 1152, 16, 4304, 4096, 27, (8, 16, 24)
POS = 2304
REQUEST = 16
REQUEST_SIZES = {"224x1": 1}

CONFIG = """# Written by scripts/gpu/qwen3_bench.py: the Qwen3-VL-8B tower, bf16, random
# weights; budgets up to 16384 output tokens.
[runtime]
device = "cuda"
log_level = "warn"
plugin_dirs = ["{plugins}"]

[plugin]
name = "qwen3_vl"
weights = "random"

[plugin.config]
depth = {depth}
hidden_size = {d}
num_heads = {heads}
intermediate_size = {inter}
out_hidden_size = {out}
num_position_embeddings = {pos}
deepstack_visual_indexes = [{deep}]
dtype = "bf16"
min_pixels = 4096
video_max_pixels = 16777216
max_budget = 16384
max_frames_per_video = 16

[budgets]
# About 12% apart up to the largest (30 graphs; capture is cheap since graphs
# are captured on typical sequences): a request pads by at most ~14%, where
# doubling up to 1024 padded the 224 workload's 784 tokens to 1024.
token_budgets = [64, 96, 128, 160, 192, 256, 320, 384, 448, 512, 640, 768, 896, 1024, 1280,
                 1536, 1792, 2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192, 10240,
                 12288, 14336, 16384]
max_items_per_batch = 16

[workload]
kind = "synthetic"
count = 16
sizes = [[224, 224]]
request_size = 16
warmup_requests = 1
"""


def workloads():
    rnd = random.Random(20261129)
    sides = list(range(224, 1345, 32))
    return {
        "224": [dict(modality="image", height=224, width=224) for _ in range(256)],
        "mixed": [dict(modality="image", height=rnd.choice(sides), width=rnd.choice(sides))
                  for _ in range(256)],
        "1344": [dict(modality="image", height=1344, width=1344) for _ in range(32)],
        "video": [dict(modality="video", frames=8, height=320, width=448) for _ in range(64)],
        "224x1": [dict(modality="image", height=224, width=224) for _ in range(64)],
    }


def grid(item):
    t = (item.get("frames", 1) + TEMPORAL - 1) // TEMPORAL
    return t, item["height"] // PATCH, item["width"] // PATCH


def item_flops(item):
    """Matrix-product and attention FLOPs of one item's forward (2 per multiply-add)."""
    t, h, w = grid(item)
    p = t * h * w
    per_patch = 2 * (D * 3 * D + D * D + D * INTER + INTER * D)
    flops = 2 * p * 3 * TEMPORAL * PATCH * PATCH * D + DEPTH * p * per_patch
    md = MERGE * MERGE * D
    flops += (1 + len(DEEPSTACK)) * 2 * (p // 4) * (md * md + md * OUT)  # the mergers
    flops += DEPTH * 4 * D * t * (h * w) ** 2  # QK^T and PV within each frame
    return flops


def output_tokens(item):
    t, h, w = grid(item)
    return t * h * w // (MERGE * MERGE)


def run_encgraph(bundle, config, trace, out_dir, name, request, variant=None):
    return run_encgraph_variant(bundle, config, trace, os.path.join(out_dir, "qwen3-bench"), name,
                                request, variant)


def build_transformers(attn):
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLVisionConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel
    cfg = Qwen3VLVisionConfig(depth=DEPTH, hidden_size=D, hidden_act="gelu_pytorch_tanh",
                              intermediate_size=INTER, num_heads=HEADS, in_channels=3,
                              patch_size=PATCH, spatial_merge_size=MERGE,
                              temporal_patch_size=TEMPORAL, out_hidden_size=OUT,
                              num_position_embeddings=POS,
                              deepstack_visual_indexes=list(DEEPSTACK))
    cfg._attn_implementation = attn
    with torch.device("cuda"):
        model = Qwen3VLVisionModel(cfg).to(torch.bfloat16).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--only", default="224,mixed,1344,video,224x1")
    ap.add_argument("--skip-transformers", action="store_true")
    ap.add_argument("--with-eager", action="store_true",
                    help="also transformers with eager attention (slow)")
    ap.add_argument("--variant", action="append", default=[],
                    help="LABEL:VAR=VALUE[,...]: encgraph again under these environment "
                         "variables, side by side in the same run (\"previous build:"
                         "ENCGRAPH_PLUGIN_PATH=gpu-bundle/prev-plugins\"); a dotted VAR is a "
                         "config key")
    args = ap.parse_args()
    variants = [parse_variant(v) for v in args.variant]
    import transformers
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{torch.cuda.get_device_name()}")
    os.makedirs(args.out_dir, exist_ok=True)
    bundle = os.path.abspath(args.bundle)
    config = os.path.join(os.path.abspath(args.out_dir), "qwen3_vl_bench.toml")
    with open(config, "w") as fh:
        fh.write(CONFIG.format(plugins=os.path.join(bundle, "plugins"), depth=DEPTH, d=D,
                               heads=HEADS, inter=INTER, out=OUT, pos=POS,
                               deep=", ".join(map(str, DEEPSTACK))))
    peak = matmul_peak()
    log(f"measured bf16 matrix-product peak (8192^3, torch): {peak:.0f} TFLOP/s")
    chosen = args.only.split(",")
    loads = {k: v for k, v in workloads().items() if k in chosen}
    results = {}
    for name, items in loads.items():
        trace = os.path.join(os.path.abspath(args.out_dir), f"qwen3-bench-{name}.jsonl")
        with open(trace, "w") as fh:
            for it in items:
                fh.write(json.dumps(it) + "\n")
        results[name] = run_encgraph(bundle, config, trace, args.out_dir, name,
                                     REQUEST_SIZES.get(name, REQUEST))
        for variant in variants:
            results[name].update(run_encgraph(bundle, config, trace, args.out_dir, name,
                                              REQUEST_SIZES.get(name, REQUEST), variant))
    if not args.skip_transformers:
        for attn in ("sdpa", "eager") if args.with_eager else ("sdpa",):
            model = build_transformers(attn)
            for name, items in loads.items():
                t0 = time.time()
                results[name][f"transformers {attn}"] = run_qwen_transformers(
                    model, items, REQUEST_SIZES.get(name, REQUEST), grid,
                    3 * TEMPORAL * PATCH * PATCH)
                log(f"  transformers {attn} {name}: {time.time() - t0:.0f} s")
            del model
            torch.cuda.empty_cache()

    lines = [f"Qwen3-VL-8B tower, bf16, {torch.cuda.get_device_name()}; "
             f"bf16 product peak {peak:.0f} TFLOP/s (torch 8192^3, same run)", "",
             "| workload | system | images/s | tokens/s | p50 ms | p99 ms | padded eff. "
             "| TFLOP/s | % peak | vs transformers sdpa | batches |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, items in loads.items():
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
    with open(os.path.join(args.out_dir, "qwen3_bench.table"), "w") as fh:
        fh.write(table + "\n")
    with open(os.path.join(args.out_dir, "qwen3-bench.json"), "w") as fh:
        json.dump(results, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
