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
import subprocess
import sys
import time

import torch

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
token_budgets = [256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192]
max_items_per_batch = 8

[workload]
kind = "synthetic"
count = 8
sizes = [[1024, 1024]]
request_size = 8
warmup_requests = 1
"""

SIZES = {"a4_150": (1754, 1240), "a4_200": (2339, 1654), "receipt": (2000, 576),
         "slide": (1080, 1920), "screenshot": (400, 640)}


def log(*a):
    print(*a, flush=True)


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


def matmul_peak():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        a @ b
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(10):
            a @ b
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 10 / 1e3)
    times.sort()
    return 2 * 8192 ** 3 / times[len(times) // 2] / 1e12


def run_encgraph(bundle, config, trace, out_dir, name):
    report = os.path.join(out_dir, f"dsocr2-bench-{name}.json")
    cmd = [os.path.join(bundle, "bin", "encgraph"), "bench", "--config", config,
           "--set", "workload.kind=\"trace\"", "--set", f"workload.trace=\"{trace}\"",
           "--set", f"workload.request_size={REQUEST}", "--report", report]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log(proc.stdout[-3000:], proc.stderr[-3000:])
    if proc.returncode != 0:
        raise RuntimeError(f"encgraph bench failed ({proc.returncode}) on {name}")
    log(f"  encgraph {name}: {time.time() - t0:.0f} s including capture")
    with open(report) as fh:
        rep = json.load(fh)
    out = {}
    for mode in rep["results"]:
        eff = mode["padded_token_efficiency"] if mode["batches_graph"] else None
        per_path = mode.get("paths") or mode.get("path_stats")
        if per_path and mode["batches_graph"]:
            try:
                eff = ", ".join(f"{p.get('name', i)} {100 * p['padded_token_efficiency']:.1f}%"
                                for i, p in enumerate(per_path))
            except Exception:  # an unexpected shape: keep the overall figure
                pass
        out["encgraph " + mode["mode"]] = dict(
            seconds=mode["seconds"], p50=mode["latency_ms"]["p50"], p99=mode["latency_ms"]["p99"],
            efficiency=eff, items=mode["items"],
            note=f"{mode['batches_graph']} graph / {mode['batches_eager']} eager batches")
    return out


def build_transformers():
    from transformers.models.deepseek_ocr2.configuration_deepseek_ocr2 import DeepseekOcr2Config
    from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import DeepseekOcr2Model
    vision = dict(
        sam_config=dict(hidden_size=D, num_hidden_layers=SAM_LAYERS, num_attention_heads=12,
                        window_size=WIN, global_attn_indexes=[2, 5, 8, 11], output_channels=C,
                        downsample_channels=[C1, E]),
        encoder_config=dict(hidden_size=E, intermediate_size=INTER, num_hidden_layers=ENC_LAYERS,
                            num_attention_heads=14, num_key_value_heads=2, vocab_size=16,
                            max_position_embeddings=8192,
                            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}))
    text = dict(hidden_size=H, num_hidden_layers=1, num_attention_heads=10, intermediate_size=256,
                vocab_size=256, n_routed_experts=2, n_shared_experts=1, moe_intermediate_size=64,
                num_experts_per_tok=1, mlp_layer_types=["dense"])
    cfg = DeepseekOcr2Config(vision_config=vision, text_config=text)
    for c in (cfg, cfg.vision_config, cfg.vision_config.sam_config,
              cfg.vision_config.encoder_config, cfg.text_config):
        try:
            c._attn_implementation = "sdpa"
        except Exception:
            pass
    with torch.device("cuda"):
        model = DeepseekOcr2Model(cfg).to(torch.bfloat16).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    return model


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
    latencies = []
    with torch.no_grad():
        for i, (pv, local, n) in enumerate([requests[0]] + requests):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model.get_image_features(
                pixel_values=pv.to("cuda", non_blocking=True),
                pixel_values_local=None if local is None else local.to("cuda", non_blocking=True),
                num_local_patches=n if local is not None else None)
            torch.cuda.synchronize()
            if i > 0:
                latencies.append(time.perf_counter() - t0)
    ms = sorted(x * 1e3 for x in latencies)
    pct = lambda q: ms[min(len(ms) - 1, max(0, -(-q * len(ms) // 100) - 1))]
    return dict(seconds=sum(latencies), p50=pct(50), p99=pct(99), efficiency=None,
                items=len(items), note=f"{len(latencies)} forwards")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--only", default="a4_150,a4_200,receipt,slide,screenshot,mixed")
    ap.add_argument("--skip-transformers", action="store_true")
    args = ap.parse_args()
    import transformers
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{torch.cuda.get_device_name()}")
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
        with open(trace, "w") as fh:
            for it in items:
                fh.write(json.dumps(it) + "\n")
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
    table = "\n".join(lines)
    log("\n" + table)
    with open(os.path.join(args.out_dir, "dsocr2_bench.table"), "w") as fh:
        fh.write(table + "\n")
    with open(os.path.join(args.out_dir, "dsocr2-bench.json"), "w") as fh:
        json.dump(results, fh, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
