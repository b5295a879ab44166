#!/usr/bin/env python3
"""DeepSeek-OCR-2's vision side benchmark: encgraph (graphs, eager) against
transformers' DeepseekOcr2Model.get_image_features (sdpa), in one run, bf16,
random weights (the work does not depend on them), released vision sizes.

Workloads (JSONL traces that `encgraph bench` reads; synthetic pixels of the
given sizes: the crop count follows from the size exactly as the processor's):
  a4_150      32 A4 pages at 150 dpi (1240x1754: 6 crops each)
  a4_200      32 A4 pages at 200 dpi (1654x2339: 6 crops)
  receipt     32 receipts (576x2000: 4 crops, tall and thin)
  slide       32 16:9 slides (1920x1080: 2 crops)
  screenshot  64 small screenshots (640x400: no crops, global view only)
  mixed       64 of the above in a fixed random order
Every system runs requests of 8 images (one transformers forward per request:
the global views batched, the crops concatenated as the processor does), the
first request as warm-up. Model FLOPs count the matrix products and attention
of the real views (windowed layers over their padded 14x14 windows, as the
model computes them): TFLOP/s is useful work. Padded efficiency is the
runtime's (per path when its report has it).

usage: dsocr2_bench.py --bundle gpu-bundle --out-dir DIR [--only a4_150,slide] [--skip-transformers]
"""
import argparse
import json
import math
import os
import random
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (deepseek_ocr2_config, encgraph_results, latency_result,  # noqa: E402
                          log, log_versions, matmul_peak, random_bf16_model,
                          run_encgraph_bench, time_requests, write_jsonl, write_table)

D, SAM_LAYERS, MLP, WIN, GLOBAL_LAYERS, C, C1 = 768, 12, 3072, 14, 4, 256, 512
E, ENC_LAYERS, KV_DIM, INTER, H = 896, 24, 128, 4864, 1280
GLOBAL, TILE = 1024, 768
REQUEST = 8

CONFIG = """# Written by scripts/gpu/dsocr2_bench.py: DeepSeek-OCR-2's vision side, bf16,
# random weights; budgets in query tokens (256 a global view, 144 a crop).
[runtime]
device = "cuda"
log_level = "warn"
plugin_dirs = ["{plugins}"]

[plugin]
name = "deepseek_ocr2"
weights = "random"

[plugin.config]
max_budget = 8192

[budgets]
token_budgets = [256, 512, 1024, 1536, 2048]
max_items_per_batch = 8

[budgets.paths.global]
# views: 1, 2, 4, 6, 8 (a path with a minimum budget would otherwise double from it)
token_budgets = [256, 512, 1024, 1536, 2048]

[budgets.paths.local]
# crops: 1, 2, 4, 6, 8, 12, 16, 24, 32, 40, 48 (8 pages of 6)
token_budgets = [144, 288, 576, 864, 1152, 1728, 2304, 3456, 4608, 5760, 6912]

[workload]
kind = "synthetic"
count = 8
sizes = [[1024, 1024]]
request_size = 8
warmup_requests = 1
"""

SIZES = {"a4_150": (1754, 1240), "a4_200": (2339, 1654), "receipt": (2000, 576),
         "slide": (1080, 1920), "screenshot": (400, 640)}


def workloads():
    rnd = random.Random(20260518)
    loads = {k: [dict(modality="image", height=h, width=w)] * (64 if k == "screenshot" else 32)
             for k, (h, w) in SIZES.items()}
    mixed = [dict(modality="image", height=h, width=w)
             for h, w in (SIZES[rnd.choice(list(SIZES))] for _ in range(64))]
    loads["mixed"] = mixed
    return loads


def crops(h, w):
    """get_optimal_tiled_canvas (docs/models/deepseek_ocr2.md): cols * rows, 0 below a tile."""
    if max(h, w) <= TILE:
        return 0
    cands = sorted([(c, r) for c in range(1, 7) for r in range(1, 7) if 2 <= c * r <= 6],
                   key=lambda cr: cr[0] * cr[1])  # stable: cols outer, rows inner
    aspect, area = w / h, w * h
    best, best_diff = (1, 1), math.inf
    for c, r in cands:
        diff = abs(aspect - c / r)
        if diff < best_diff or (diff == best_diff and area > 0.5 * TILE * TILE * c * r):
            best, best_diff = (c, r), diff
    return best[0] * best[1]


def view_flops(side):
    g = side // 16
    gg = g * g
    per = -(-g // WIN)
    win_rows = per * per * WIN * WIN
    g2 = (g - 1) // 2 + 1
    n = ((g2 - 1) // 2 + 1) ** 2
    L = 2 * n
    f = 2 * gg * 768 * D  # patch embedding
    for layer in range(SAM_LAYERS):
        glob = layer in (2, 5, 8, 11)
        rows = gg if glob else win_rows
        f += 2 * rows * (D * 3 * D + D * D) + 2 * gg * 2 * D * MLP
        f += 4 * D * (gg * gg if glob else per * per * (WIN * WIN) ** 2)
    f += 2 * gg * (D * C + 9 * C * C) + 2 * g2 * g2 * 9 * C * C1 + 2 * n * 9 * C1 * E
    f += ENC_LAYERS * (2 * L * (E * (E + 2 * KV_DIM) + E * E + 3 * E * INTER)
                       + 4 * E * (2 * n * n + n * (n + 1) // 2))
    return f + 2 * n * E * H


def item_flops(item):
    return view_flops(GLOBAL) + crops(item["height"], item["width"]) * view_flops(TILE)


def run_encgraph(bundle, config, trace, out_dir, name):
    report = os.path.join(out_dir, f"dsocr2-bench-{name}.json")
    rep = run_encgraph_bench(bundle, config, trace, report, name, REQUEST)
    return encgraph_results(rep, per_path=True)


def build_transformers():
    from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import DeepseekOcr2Model
    return random_bf16_model(DeepseekOcr2Model, deepseek_ocr2_config("sdpa"))


def run_transformers(model, items):
    """One get_image_features per request, after the first request once as warm-up."""
    gen = torch.Generator().manual_seed(1)
    requests = []
    for r in range(0, len(items), REQUEST):
        chunk = items[r:r + REQUEST]
        n = [crops(it["height"], it["width"]) for it in chunk]
        pv = torch.randn(len(chunk), 3, GLOBAL, GLOBAL, generator=gen).to(torch.bfloat16)
        local = (torch.randn(sum(n), 3, TILE, TILE, generator=gen).to(torch.bfloat16).pin_memory()
                 if sum(n) else None)
        requests.append((pv.pin_memory(), local, n))

    def forward(request):
        pv, local, n = request
        model.get_image_features(
            pixel_values=pv.to("cuda", non_blocking=True),
            pixel_values_local=None if local is None else local.to("cuda", non_blocking=True),
            num_local_patches=n if local is not None else None)

    return latency_result(time_requests(requests, forward), len(items))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--only", default="a4_150,a4_200,receipt,slide,screenshot,mixed")
    ap.add_argument("--skip-transformers", action="store_true")
    args = ap.parse_args()
    log_versions()
    os.makedirs(args.out_dir, exist_ok=True)
    bundle = os.path.abspath(args.bundle)
    config = os.path.join(os.path.abspath(args.out_dir), "dsocr2_bench.toml")
    with open(config, "w") as fh:
        fh.write(CONFIG.format(plugins=os.path.join(bundle, "plugins")))
    peak = matmul_peak()
    log(f"measured bf16 matrix-product peak (8192^3, torch): {peak:.0f} TFLOP/s")
    chosen = args.only.split(",")
    loads = {k: v for k, v in workloads().items() if k in chosen}
    results = {}
    for name, items in loads.items():
        trace = os.path.join(os.path.abspath(args.out_dir), f"dsocr2-bench-{name}.jsonl")
        write_jsonl(trace, items)
        try:
            results[name] = run_encgraph(bundle, config, trace, args.out_dir, name)
        except Exception as e:  # keep the other workloads and systems
            log(f"  encgraph {name}: {e}")
            results[name] = {}
    if not args.skip_transformers:
        model = build_transformers()
        for name, items in loads.items():
            t0 = time.time()
            results[name]["transformers sdpa"] = run_transformers(model, items)
            log(f"  transformers {name}: {time.time() - t0:.0f} s")
        del model
        torch.cuda.empty_cache()

    lines = [f"DeepSeek-OCR-2 vision side (released sizes), bf16, {torch.cuda.get_device_name()}; "
             f"bf16 product peak {peak:.0f} TFLOP/s (torch 8192^3, same run)", "",
             "| workload | system | images/s | p50 ms | p99 ms | padded eff. | TFLOP/s | % peak "
             "| vs transformers | batches |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    ok = True
    for name, items in loads.items():
        flops = sum(item_flops(it) for it in items)
        ref = results[name].get("transformers sdpa")
        for system, r in results[name].items():
            tf = flops / r["seconds"] / 1e12
            ratio = f"{(ref['seconds'] / r['seconds']):.2f}x" if ref else "-"
            eff = r["efficiency"]
            eff = "-" if eff is None else (eff if isinstance(eff, str) else f"{100 * eff:.1f}%")
            lines.append(f"| {name} | {system} | {r['items'] / r['seconds']:.2f} | "
                         f"{r['p50']:.1f} | {r['p99']:.1f} | {eff} | {tf:.0f} | "
                         f"{100 * tf / peak:.0f}% | {ratio} | {r['note']} |")
        g, e = results[name].get("encgraph graphs"), results[name].get("encgraph eager")
        ok &= g is not None and e is not None
    write_table(args.out_dir, "dsocr2_bench.table", lines)
    with open(os.path.join(args.out_dir, "dsocr2-bench.json"), "w") as fh:
        json.dump(results, fh, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
