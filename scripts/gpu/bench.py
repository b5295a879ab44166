#!/usr/bin/env python3
"""The benchmark driver: encgraph (graphs, eager) against transformers, one model a run.

  bench.py --model qwen2_5_vl|qwen3_vl|glm4v|dsocr2|siglip|internvl|llava_onevision
           --bundle gpu-bundle --out-dir DIR [options]
  bench.py --model qwen2_5_vl --kind capture ...   capture time, cold and warm tuning cache
  bench.py --model qwen2_5_vl --kind dp ...        data parallel against one GPU (2+ GPUs)
  bench.py --model qwen3_vl --kind balance          data-parallel balance, offline (no GPU)

Every model's workloads, FLOP count and transformers reference are a spec in
MODELS below. Throughput runs (--kind speed, the default):
  - Qwen2.5-VL-7B tower (qwen2_5_vl): 224 (256 images 224x224), mixed (256 images, sides
    from the multiples of 28 in 224..1344, seed 20261129), 1344 (32 images 1344x1344),
    video (64 videos of 8 frames at 336x448), 224x1 (64 images, one a request: latency);
    configs/qwen2_5_vl_bench.toml; transformers with sdpa and eager attention.
  - Qwen3-VL-8B tower (qwen3_vl): the same workloads with sides in multiples of 32 (video
    320x448); a config written here (30 budgets 64..16384, pixel bounds widened so no item
    is resized); transformers with sdpa (--with-eager adds eager).
  - GLM-4.1V-9B tower (glm4v): Qwen2.5-VL's workloads (sides in multiples of 28, none
    resized under Glm4vImageProcessor's bounds); a config written here (budgets
    64..16384); transformers' Glm4vVisionModel with sdpa, videos given as Glm4vModel
    gives them (one (1, h, w) grid row per temporal patch).
  - DeepSeek-OCR-2 vision side (dsocr2): a4_150, a4_200, receipt, slide (32 each),
    screenshot (64), mixed (64 of those); requests of 8; transformers' get_image_features.
  - SigLIP (siglip): so400m-patch14-384 and base-patch16-224, 512 images at the model's
    size, requests of 64, bench/siglip's siglip_bench (graphs, eager) against
    transformers' SiglipVisionModel (sdpa, no pooling head), best of --repeats passes.
  - InternVL's image encoder (internvl): InternViT-300M-448px tiles, pixel shuffle and
    projector; mixed (128 images, sides 224..1344), document (32 pages of 2200x1650, the maximum
    tiling), 448 (256 one-tile images); requests of 8 (bench_common.py).
  - LLaVA-OneVision's encoder (llava_onevision): SigLIP so400m (26 layers) tiles, projector
    to 896, anyres_max_9 packing; mixed (256 images, sides 224..1344: 2 to 37 tiles each),
    384 (256 images of 384x384), video (32 videos of 8 frames of 384x384); requests of 8;
    transformers' get_image_features / get_video_features (bench_common.py).
Every system runs requests of 16 items unless the workload says otherwise (one
transformers forward per request, the items concatenated as the processor does), the
first request as warm-up; encgraph's graphs and eager runtimes take the requests in turn
(`encgraph bench`). Times cover the pixels' host-to-device copy and the forward up to the
device's last write. Model FLOPs count matrix products and attention of the real items
(no padding), so TFLOP/s is useful work; the peak is an 8192^3 bf16 torch.matmul
measured in the same run. Results: <out-dir>/<stem>.json (the format
scripts/plot_benchmarks.py reads) and <table> (both named in MODELS).

torch and transformers are imported inside the functions that need them, so --help and
the pure helpers work without them.
"""
import argparse
import glob
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from bench_common import (deepseek_ocr2_config, latency_result, log, log_versions,  # noqa: E402
                          matmul_peak, parse_variant, random_bf16_model, run_encgraph_variant,
                          run_qwen_transformers, time_requests, write_jsonl, write_table)

from bench_common import INTERNVL_CONFIG, INTERNVL, LLAVA_CONFIG, LLAVA_ONEVISION  # noqa: E402

QWEN_BENCH_CONFIG = os.path.join(ROOT, "configs", "qwen2_5_vl_bench.toml")


# --- Qwen2.5-VL-7B and Qwen3-VL-8B towers ---------------------------------------------------

class QwenTower:
    """A Qwen-VL tower's sizes, workloads and FLOP count."""

    def __init__(self, version, patch, d, heads, inter, out, depth, full=(), window=0,
                 deepstack=(), pos=0, gated=True, side_multiple=28, video_hw=(336, 448)):
        self.version, self.patch, self.temporal, self.merge = version, patch, 2, 2
        self.d, self.heads, self.inter, self.out, self.depth = d, heads, inter, out, depth
        self.full, self.window, self.deepstack, self.pos = full, window, deepstack, pos
        self.gated, self.side_multiple, self.video_hw = gated, side_multiple, video_hw

    def workloads(self):
        rnd = random.Random(20261129)
        sides = list(range(224, 1345, self.side_multiple))
        vh, vw = self.video_hw
        return {
            "224": [dict(modality="image", height=224, width=224) for _ in range(256)],
            "mixed": [dict(modality="image", height=rnd.choice(sides), width=rnd.choice(sides))
                      for _ in range(256)],
            "1344": [dict(modality="image", height=1344, width=1344) for _ in range(32)],
            "video": [dict(modality="video", frames=8, height=vh, width=vw) for _ in range(64)],
            "224x1": [dict(modality="image", height=224, width=224) for _ in range(64)],
        }

    def grid(self, item):
        t = (item.get("frames", 1) + self.temporal - 1) // self.temporal
        return t, item["height"] // self.patch, item["width"] // self.patch

    def output_tokens(self, item):
        t, h, w = self.grid(item)
        return t * h * w // (self.merge * self.merge)

    def item_flops(self, item):
        """Matrix-product and attention FLOPs of one item's forward (2 per multiply-add)."""
        t, h, w = self.grid(item)
        p, d, inter = t * h * w, self.d, self.inter
        mlp_in = 2 * inter if self.gated else inter
        per_patch = 2 * (d * 3 * d + d * d + d * mlp_in + inter * d)
        flops = 2 * p * 3 * self.temporal * self.patch * self.patch * d + self.depth * p * per_patch
        md = self.merge * self.merge * d
        flops += (1 + len(self.deepstack)) * 2 * (p // 4) * (md * md + md * self.out)  # mergers
        if not self.window:  # every block full attention within each frame
            return flops + self.depth * 4 * d * t * (h * w) ** 2
        # Window attention: QK^T and PV, 4 * len^2 * d per sequence and layer.
        wu = self.window // self.patch // self.merge  # merge units per window side
        hu, wu_ = h // self.merge, w // self.merge
        win = sum((min(wu, hu - i) * min(wu, wu_ - j) * self.merge * self.merge) ** 2
                  for i in range(0, hu, wu) for j in range(0, wu_, wu)) * t
        full = t * (h * w) ** 2
        return flops + 4 * d * (len(self.full) * full + (self.depth - len(self.full)) * win)

    def transformers_model(self, attn):
        import torch
        if self.version == "qwen2_5_vl":
            from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import (
                Qwen2_5_VLVisionConfig)
            from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
                Qwen2_5_VisionTransformerPretrainedModel as cls)
            cfg = Qwen2_5_VLVisionConfig(
                depth=self.depth, hidden_size=self.d, hidden_act="silu",
                intermediate_size=self.inter, num_heads=self.heads, in_channels=3,
                patch_size=self.patch, spatial_merge_size=self.merge,
                temporal_patch_size=self.temporal, window_size=self.window,
                out_hidden_size=self.out, fullatt_block_indexes=list(self.full))
        else:
            from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLVisionConfig
            from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel as cls
            cfg = Qwen3VLVisionConfig(
                depth=self.depth, hidden_size=self.d, hidden_act="gelu_pytorch_tanh",
                intermediate_size=self.inter, num_heads=self.heads, in_channels=3,
                patch_size=self.patch, spatial_merge_size=self.merge,
                temporal_patch_size=self.temporal, out_hidden_size=self.out,
                num_position_embeddings=self.pos, deepstack_visual_indexes=list(self.deepstack))
        cfg._attn_implementation = attn
        with torch.device("cuda"):
            model = cls(cfg).to(torch.bfloat16).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0, 0.02)
        return model

    def run_transformers(self, model, items, request):
        return run_qwen_transformers(model, items, request, self.grid,
                                     3 * self.temporal * self.patch * self.patch)


QWEN2_5 = QwenTower("qwen2_5_vl", patch=14, d=1280, heads=16, inter=3420, out=3584, depth=32,
                    full=(7, 15, 23, 31), window=112)
QWEN3 = QwenTower("qwen3_vl", patch=16, d=1152, heads=16, inter=4304, out=4096, depth=27,
                  deepstack=(8, 16, 24), pos=2304, gated=False, side_multiple=32,
                  video_hw=(320, 448))

class GlmTower(QwenTower):
    """GLM-4.1V's tower: Qwen2.5-VL's workloads, full attention, the blocks' SiLU-gated MLP
    out_hidden_size wide, then the downsample Conv2d and GLM's merger (intermediate_size)."""

    def __init__(self):
        super().__init__("glm4v", patch=14, d=1536, heads=12, inter=4096, out=4096, depth=24)
        self.merger_inter, self.image_size = 13696, 336

    def item_flops(self, item):
        t, h, w = self.grid(item)
        p, d, out = t * h * w, self.d, self.out
        per_patch = 2 * (d * 3 * d + d * d + 3 * d * self.inter)
        flops = 2 * p * 3 * self.temporal * self.patch * self.patch * d + self.depth * p * per_patch
        md = self.merge * self.merge * d
        flops += 2 * (p // 4) * (md * out + out * out + 3 * out * self.merger_inter)
        return flops + self.depth * 4 * d * t * (h * w) ** 2

    def transformers_model(self, attn):
        import torch
        from transformers.models.glm4v.configuration_glm4v import Glm4vVisionConfig
        from transformers.models.glm4v.modeling_glm4v import Glm4vVisionModel
        cfg = Glm4vVisionConfig(
            depth=self.depth, hidden_size=self.d, hidden_act="silu",
            intermediate_size=self.merger_inter, num_heads=self.heads, in_channels=3,
            patch_size=self.patch, spatial_merge_size=self.merge,
            temporal_patch_size=self.temporal, out_hidden_size=self.out,
            image_size=self.image_size, attention_bias=False, rms_norm_eps=1e-5)
        cfg._attn_implementation = attn
        with torch.device("cuda"):
            model = Glm4vVisionModel(cfg).to(torch.bfloat16).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0, 0.02)
        return model

    def run_transformers(self, model, items, request):
        import torch
        gen = torch.Generator().manual_seed(1)
        row_values = 3 * self.temporal * self.patch * self.patch
        requests = []
        for r in range(0, len(items), request):
            rows = [(1, h, w) for t, h, w in map(self.grid, items[r:r + request])
                    for _ in range(t)]
            pv = torch.randn(sum(h * w for _, h, w in rows), row_values,
                             generator=gen).to(torch.bfloat16)
            requests.append((pv.pin_memory(), torch.tensor(rows, dtype=torch.long)))
        latencies = time_requests(
            requests,
            lambda rq: model(rq[0].to("cuda", non_blocking=True), grid_thw=rq[1].to("cuda")))
        return latency_result(latencies, len(items))


GLM4V = GlmTower()

GLM4V_CONFIG = """# Written by scripts/gpu/bench.py --model glm4v: the GLM-4.1V-9B tower, bf16, random
# weights; budgets up to 16384 output tokens.
[runtime]
device = "cuda"
log_level = "warn"
plugin_dirs = ["{plugins}"]

[plugin]
name = "glm4v"
weights = "random"

[plugin.config]
depth = 24
hidden_size = 1536
num_heads = 12
intermediate_size = 13696
out_hidden_size = 4096
image_size = 336
attention_bias = false
dtype = "bf16"
max_budget = 16384
max_frames_per_video = 16

[budgets]
# About 12% apart up to the largest (30 graphs): a request pads by at most ~14%.
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

QWEN3_CONFIG = """# Written by scripts/gpu/bench.py --model qwen3_vl: the Qwen3-VL-8B tower, bf16,
# random weights; budgets up to 16384 output tokens.
[runtime]
device = "cuda"
log_level = "warn"
plugin_dirs = ["{plugins}"]

[plugin]
name = "qwen3_vl"
weights = "random"

[plugin.config]
depth = 27
hidden_size = 1152
num_heads = 16
intermediate_size = 4304
out_hidden_size = 4096
num_position_embeddings = 2304
deepstack_visual_indexes = [8, 16, 24]
dtype = "bf16"
min_pixels = 4096
video_max_pixels = 16777216
max_budget = 16384
max_frames_per_video = 16

[budgets]
# About 12% apart up to the largest (30 graphs): a request pads by at most ~14%.
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

# --- DeepSeek-OCR-2 vision side -------------------------------------------------------------

DS_D, DS_SAM_LAYERS, DS_MLP, DS_WIN, DS_C, DS_C1 = 768, 12, 3072, 14, 256, 512
DS_E, DS_ENC_LAYERS, DS_KV_DIM, DS_INTER, DS_H = 896, 24, 128, 4864, 1280
DS_GLOBAL, DS_TILE = 1024, 768

DSOCR2_CONFIG = """# Written by scripts/gpu/bench.py --model dsocr2: DeepSeek-OCR-2's vision side,
# bf16, random weights; budgets in query tokens (256 a global view, 144 a crop).
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

DSOCR2_SIZES = {"a4_150": (1754, 1240), "a4_200": (2339, 1654), "receipt": (2000, 576),
                "slide": (1080, 1920), "screenshot": (400, 640)}


class DeepSeekOcr2:
    """DeepSeek-OCR-2's vision side (released sizes): pages, crops and FLOPs."""

    @staticmethod
    def workloads():
        rnd = random.Random(20260518)
        loads = {k: [dict(modality="image", height=h, width=w)] * (64 if k == "screenshot" else 32)
                 for k, (h, w) in DSOCR2_SIZES.items()}
        loads["mixed"] = [dict(modality="image", height=h, width=w) for h, w in
                          (DSOCR2_SIZES[rnd.choice(list(DSOCR2_SIZES))] for _ in range(64))]
        return loads

    @staticmethod
    def crops(h, w):
        """get_optimal_tiled_canvas (docs/models/deepseek_ocr2.md): cols * rows, 0 below a tile."""
        if max(h, w) <= DS_TILE:
            return 0
        cands = sorted([(c, r) for c in range(1, 7) for r in range(1, 7) if 2 <= c * r <= 6],
                       key=lambda cr: cr[0] * cr[1])  # stable: cols outer, rows inner
        aspect, area = w / h, w * h
        best, best_diff = (1, 1), math.inf
        for c, r in cands:
            diff = abs(aspect - c / r)
            if diff < best_diff or (diff == best_diff and area > 0.5 * DS_TILE * DS_TILE * c * r):
                best, best_diff = (c, r), diff
        return best[0] * best[1]

    @staticmethod
    def view_flops(side):
        g = side // 16
        gg = g * g
        per = -(-g // DS_WIN)
        win_rows = per * per * DS_WIN * DS_WIN
        g2 = (g - 1) // 2 + 1
        n = ((g2 - 1) // 2 + 1) ** 2
        L = 2 * n
        d, e = DS_D, DS_E
        f = 2 * gg * 768 * d  # patch embedding
        for layer in range(DS_SAM_LAYERS):
            glob_ = layer in (2, 5, 8, 11)
            rows = gg if glob_ else win_rows
            f += 2 * rows * (d * 3 * d + d * d) + 2 * gg * 2 * d * DS_MLP
            f += 4 * d * (gg * gg if glob_ else per * per * (DS_WIN * DS_WIN) ** 2)
        f += 2 * gg * (d * DS_C + 9 * DS_C * DS_C) + 2 * g2 * g2 * 9 * DS_C * DS_C1
        f += 2 * n * 9 * DS_C1 * e
        f += DS_ENC_LAYERS * (2 * L * (e * (e + 2 * DS_KV_DIM) + e * e + 3 * e * DS_INTER)
                              + 4 * e * (2 * n * n + n * (n + 1) // 2))
        return f + 2 * n * e * DS_H

    def item_flops(self, item):
        return self.view_flops(DS_GLOBAL) + \
            self.crops(item["height"], item["width"]) * self.view_flops(DS_TILE)

    @staticmethod
    def transformers_model(attn):
        from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import DeepseekOcr2Model
        return random_bf16_model(DeepseekOcr2Model, deepseek_ocr2_config(attn))

    def run_transformers(self, model, items, request):
        """One get_image_features per request, after the first request once as warm-up."""
        import torch
        gen = torch.Generator().manual_seed(1)
        requests = []
        for r in range(0, len(items), request):
            chunk = items[r:r + request]
            n = [self.crops(it["height"], it["width"]) for it in chunk]
            pv = torch.randn(len(chunk), 3, DS_GLOBAL, DS_GLOBAL, generator=gen).to(torch.bfloat16)
            local = (torch.randn(sum(n), 3, DS_TILE, DS_TILE, generator=gen).to(torch.bfloat16)
                     .pin_memory() if sum(n) else None)
            requests.append((pv.pin_memory(), local, n))

        def forward(rq):
            pv, local, n = rq
            model.get_image_features(
                pixel_values=pv.to("cuda", non_blocking=True),
                pixel_values_local=None if local is None else local.to("cuda", non_blocking=True),
                num_local_patches=n if local is not None else None)

        return latency_result(time_requests(requests, forward), len(items))


DSOCR2 = DeepSeekOcr2()

# --- the specs ------------------------------------------------------------------------------

# title; tower; the config (a path, or a template written into the out folder); request
# size and per-workload exceptions; the report stem and table; the transformers
# implementations run by default; per-path padded efficiency in the table.
MODELS = {
    "qwen2_5_vl": dict(title="Qwen2.5-VL-7B tower", tower=QWEN2_5, config=QWEN_BENCH_CONFIG,
                       request=16, request_sizes={"224x1": 1}, stem="qwen-bench",
                       table="qwen_bench.table", transformers="sdpa,eager", per_path=False,
                       precision=(1, 2)),
    "qwen3_vl": dict(title="Qwen3-VL-8B tower", tower=QWEN3, config=QWEN3_CONFIG,
                     config_name="qwen3_vl_bench.toml", request=16, request_sizes={"224x1": 1},
                     stem="qwen3-bench", table="qwen3_bench.table", transformers="sdpa",
                     per_path=False, precision=(1, 2)),
    "glm4v": dict(title="GLM-4.1V-9B tower", tower=GLM4V, config=GLM4V_CONFIG,
                  config_name="glm4v_bench.toml", request=16, request_sizes={"224x1": 1},
                  stem="glm4v-bench", table="glm4v_bench.table", transformers="sdpa",
                  per_path=False, precision=(1, 2)),
    "dsocr2": dict(title="DeepSeek-OCR-2 vision side (released sizes)", tower=DSOCR2,
                   config=DSOCR2_CONFIG, config_name="dsocr2_bench.toml", request=8,
                   request_sizes={}, stem="dsocr2-bench", table="dsocr2_bench.table",
                   transformers="sdpa", per_path=True, precision=(2, 1)),
    "siglip": dict(title="SigLIP towers", table="siglip_bench.table"),
    "internvl": dict(title="InternVL image encoder (InternViT-300M-448px, projector to 896)",
                     tower=INTERNVL, config=INTERNVL_CONFIG, config_name="internvl_bench.toml",
                     request=8, request_sizes={}, stem="internvl-bench",
                     table="internvl_bench.table", transformers="sdpa", per_path=False,
                     precision=(1, 1)),
    "llava_onevision": dict(title="LLaVA-OneVision encoder (SigLIP so400m 26 layers, projector "
                            "to 896, anyres_max_9)", tower=LLAVA_ONEVISION, config=LLAVA_CONFIG,
                            config_name="llava_onevision_bench.toml", request=8,
                            request_sizes={}, stem="llava-onevision-bench",
                            table="llava_onevision_bench.table", transformers="sdpa",
                            per_path=False, precision=(1, 1)),
}

SIGLIP_TOWERS = {
    "so400m": dict(name="siglip-so400m-patch14-384", hidden_size=1152, intermediate_size=4304,
                   num_hidden_layers=27, num_attention_heads=16, image_size=384, patch_size=14),
    "base": dict(name="siglip-base-patch16-224", hidden_size=768, intermediate_size=3072,
                 num_hidden_layers=12, num_attention_heads=12, image_size=224, patch_size=16),
}
SIGLIP_DIMS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
               "image_size", "patch_size")


def model_config(spec, bundle, out_dir):
    """The spec's config path: its own file, or its template written into out_dir."""
    if "config_name" not in spec:
        return os.path.abspath(spec["config"])
    path = os.path.join(os.path.abspath(out_dir), spec["config_name"])
    with open(path, "w") as fh:
        fh.write(spec["config"].format(plugins=os.path.join(bundle, "plugins")))
    return path


def format_efficiency(eff):
    if eff is None:
        return "-"
    return eff if isinstance(eff, str) else f"{100 * eff:.1f}%"


# --- throughput -----------------------------------------------------------------------------

def run_speed(args, spec):
    import torch
    log_versions()
    os.makedirs(args.out_dir, exist_ok=True)
    bundle = os.path.abspath(args.bundle)
    config = os.path.abspath(args.config) if args.config else model_config(spec, bundle,
                                                                          args.out_dir)
    tower = spec["tower"]
    variants = [parse_variant(v) for v in args.variant]
    peak = matmul_peak()
    log(f"measured bf16 matrix-product peak (8192^3, torch): {peak:.0f} TFLOP/s")
    all_loads = tower.workloads()
    chosen = args.only.split(",") if args.only else list(all_loads)
    unknown = [k for k in chosen if k not in all_loads]
    if unknown:
        raise SystemExit(f"--only: unknown workload(s) {unknown} for --model {args.model}; "
                         f"choose from {','.join(all_loads)}")
    loads = {k: v for k, v in all_loads.items() if k in chosen}
    stem = os.path.join(os.path.abspath(args.out_dir), spec["stem"])
    results, failed = {}, False
    for name, items in loads.items():
        trace = f"{stem}-{name}.jsonl"
        write_jsonl(trace, items)
        request = spec["request_sizes"].get(name, spec["request"])
        results[name] = {}
        for variant in [None] + variants:
            try:  # a failed run keeps the other workloads and systems
                results[name].update(run_encgraph_variant(
                    bundle, config, trace, stem, name, request, variant,
                    per_path=spec["per_path"]))
            except RuntimeError as e:
                log(f"  {name}: {e}")
                failed = True
    attns = args.transformers if args.transformers is not None else spec["transformers"]
    if args.with_eager and "eager" not in attns.split(","):
        attns += ",eager"
    if not args.skip_transformers:
        for attn in filter(None, attns.split(",")):
            model = tower.transformers_model(attn)
            for name, items in loads.items():
                t0 = time.time()
                results[name][f"transformers {attn}"] = tower.run_transformers(
                    model, items, spec["request_sizes"].get(name, spec["request"]))
                log(f"  transformers {attn} {name}: {time.time() - t0:.0f} s")
            del model
            torch.cuda.empty_cache()

    tokens_of = getattr(tower, "output_tokens", None)
    ips, ms = spec["precision"]
    lines = [f"{spec['title']}, bf16, {torch.cuda.get_device_name()}; bf16 product peak "
             f"{peak:.0f} TFLOP/s (torch 8192^3, same run)", "",
             "| workload | system | images/s | tokens/s | p50 ms | p99 ms | padded eff. "
             "| TFLOP/s | % peak | vs transformers sdpa | batches |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, items in loads.items():
        flops = sum(tower.item_flops(it) for it in items)
        tokens = sum(tokens_of(it) for it in items) if tokens_of else None
        ref = results[name].get("transformers sdpa")
        for system, r in results[name].items():
            tf = flops / r["seconds"] / 1e12
            ratio = f"{(ref['seconds'] / r['seconds']):.2f}x" if ref else "-"
            tps = f"{tokens / r['seconds']:.0f}" if tokens else "-"
            lines.append(f"| {name} | {system} | {r['items'] / r['seconds']:.{ips}f} | {tps} | "
                         f"{r['p50']:.{ms}f} | {r['p99']:.{ms}f} | "
                         f"{format_efficiency(r['efficiency'])} | {tf:.0f} | "
                         f"{100 * tf / peak:.0f}% | {ratio} | {r['note']} |")
        # Both encgraph runtimes must have run every workload.
        failed |= "encgraph graphs" not in results[name] or "encgraph eager" not in results[name]
    write_table(args.out_dir, spec["table"], lines)
    with open(f"{stem}.json", "w") as fh:
        json.dump(results, fh, indent=1)
    return 1 if failed else 0


# --- SigLIP: siglip_bench against transformers ----------------------------------------------

def siglip_transformers(tower, images, request, repeats):
    """images/s of transformers' SiglipVisionModel (bf16, sdpa, no pooling head: the same work
    as encgraph's last_hidden_state output), best of `repeats` passes after a warm-up."""
    import torch
    from transformers import SiglipVisionConfig, SiglipVisionModel
    cfg = SiglipVisionConfig(**{k: tower[k] for k in SIGLIP_DIMS}, hidden_act="gelu_pytorch_tanh",
                             layer_norm_eps=1e-6, vision_use_head=False)
    try:
        cfg._attn_implementation = "sdpa"
    except Exception:  # some config classes guard the attribute
        pass
    with torch.device("cuda"):
        model = SiglipVisionModel(cfg).to(torch.bfloat16).eval()
    impl = getattr(model.config, "_attn_implementation", "?")
    side = tower["image_size"]
    pv = torch.randn(images, 3, side, side, device="cuda", dtype=torch.bfloat16).clamp(-1, 1)
    with torch.inference_mode():
        model(pixel_values=pv[:request])
        torch.cuda.synchronize()
        best = math.inf
        for _ in range(repeats):
            t0 = time.time()
            for s in range(0, images, request):
                model(pixel_values=pv[s:s + request])
            torch.cuda.synchronize()
            best = min(best, time.time() - t0)
    del model
    torch.cuda.empty_cache()
    return images / best, best, impl


def siglip_bench_lines(bundle, tower, weights, prefix, images, request, repeats, skip_hf=False):
    """Runs bench/siglip's siglip_bench (graphs, eager) on `weights` ("random" or a checkpoint
    with names under `prefix`) and transformers; returns the table's lines for this tower."""
    cmd = [os.path.join(bundle, "bin", "siglip_bench"), "--device", "cuda", "--weights", weights,
           "--images", str(images), "--request-size", str(request), "--repeats", str(repeats)]
    if prefix is not None:
        cmd += ["--set", f"weight_prefix={prefix}"]
    for k in SIGLIP_DIMS:
        cmd += ["--set", f"{k}={tower[k]}"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    log(res.stdout)
    if res.returncode != 0:
        raise RuntimeError(f"siglip_bench failed ({res.returncode}): {res.stderr[-2000:]}")
    rows = {}
    for line in res.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[len("RESULT "):])
            rows[r["mode"]] = r
    g, e = rows["graphs"], rows["eager"]
    lines = [f"{tower['name']}: {images} images at {tower['image_size']}px, requests of "
             f"{request}, best of {repeats}",
             f"  encgraph graphs   {g['images_per_s']:9.1f} images/s  ({g['seconds']:.3f} s, "
             f"capture {g['capture_s']:.2f} s, {g['graphs']} graphs, hit rate "
             f"{100 * g['hit_rate']:.0f}%)",
             f"  encgraph eager    {e['images_per_s']:9.1f} images/s  ({e['seconds']:.3f} s)"]
    if skip_hf:
        return lines + [f"  graphs / eager {g['images_per_s'] / e['images_per_s']:.2f}x"]
    hf_rate, hf_s, impl = siglip_transformers(tower, images, request, repeats)
    return lines + [
        f"  transformers      {hf_rate:9.1f} images/s  ({hf_s:.3f} s, attn {impl}, bf16)",
        f"  graphs / eager {g['images_per_s'] / e['images_per_s']:.2f}x, graphs / "
        f"transformers {g['images_per_s'] / hf_rate:.2f}x"]


def run_siglip(args, spec):
    log_versions()
    os.makedirs(args.out_dir, exist_ok=True)
    bundle = os.path.abspath(args.bundle)
    lines, failed = [], False
    for key in args.models.split(","):
        if key not in SIGLIP_TOWERS:
            raise SystemExit(f"--models: unknown tower {key!r}; choose from "
                             f"{','.join(SIGLIP_TOWERS)}")
        try:  # one tower failing still leaves the other's figures
            lines += siglip_bench_lines(bundle, SIGLIP_TOWERS[key], "random", None, args.images,
                                        args.request_size, args.repeats,
                                        args.skip_transformers) + [""]
        except Exception as e:
            failed = True
            lines.append(f"{SIGLIP_TOWERS[key]['name']}: FAILED: {e!r}")
    write_table(args.out_dir, spec["table"], lines)
    return 1 if failed else 0


# --- capture time ---------------------------------------------------------------------------

PHASES = ("prepare_device", "warmup", "capture", "instantiate", "calibrate", "other")


def phases_text(phases):
    if not phases:
        return "no capture_phases_s in the report"
    return ", ".join(f"{p} {phases.get(p, 0.0):.2f}" for p in PHASES)


def capture_run(bundle, config, out_dir, name, cache_dir, extra):
    """One `encgraph bench` (a short workload: the run itself is not what is measured) with
    its GEMM tuning cache in cache_dir; its capture seconds, graphs, wall time, phases, warnings."""
    report = os.path.join(out_dir, f"capture-bench-{name}.json")
    cmd = [os.path.join(bundle, "bin", "encgraph"), "bench", "--config", config,
           "--set", "workload.count=32", "--set", f'plugin.tuning.cache_dir="{cache_dir}"',
           "--report", report, *extra]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    log(f"== {name}: {' '.join(cmd)}")
    log(proc.stdout[-2000:], proc.stderr[-2000:])
    if proc.returncode != 0:
        raise RuntimeError(f"encgraph bench failed ({proc.returncode}) on {name}")
    with open(report) as fh:
        rep = json.load(fh)
    modes = [m for m in rep["results"] if m.get("graphs", 0) > 0]
    if not modes:
        raise RuntimeError(f"{name}: no mode captured graphs")
    best = max(modes, key=lambda m: m["capture_s"])
    phases = best.get("capture_phases_s", {})  # absent in reports of older builds
    log(f"{name}: capture {best['capture_s']:.2f} s = {phases_text(phases)}")
    return dict(capture_s=best["capture_s"], graphs=best["graphs"], wall_s=wall, phases=phases,
                warnings=[l for l in proc.stderr.splitlines() if "tuning cache" in l])


def cache_entries(cache_dir):
    files = glob.glob(os.path.join(cache_dir, "gemm-*.txt"))
    n = 0
    for f in files:
        with open(f) as fh:
            n += sum(1 for l in fh if l.startswith("gemm:"))
    return len(files), n


def run_capture(args, spec):
    """Capture time in a fresh cache folder: cold (tunes, writes the cache), warm (reads it),
    and tune_gemm = false for reference (unless --skip-untuned). Target: warm <= 3 s."""
    os.makedirs(args.out_dir, exist_ok=True)
    bundle = os.path.abspath(args.bundle)
    config = os.path.abspath(args.config) if args.config else model_config(spec, bundle,
                                                                          args.out_dir)
    cache_dir = tempfile.mkdtemp(prefix="encgraph-capture-cache-")
    rows = []
    try:
        cold = capture_run(bundle, config, args.out_dir, "cold", cache_dir, [])
        files, entries = cache_entries(cache_dir)
        log(f"cache after the cold run: {files} file(s), {entries} entries in {cache_dir}")
        warm = capture_run(bundle, config, args.out_dir, "warm", cache_dir, [])
        rows += [("cold (tunes, writes cache)", cold), ("warm (reads cache)", warm)]
        if not args.skip_untuned:
            rows.append(("tune_gemm = false", capture_run(
                bundle, config, args.out_dir, "untuned", cache_dir,
                ["--set", "plugin.config.tune_gemm=false"])))
        for label, r in rows:
            for w in r["warnings"]:
                log(f"warning in {label}: {w}")
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    lines = [f"capture time, {spec['title']} ({os.path.relpath(config, ROOT)})",
             f"{'run':<28} {'graphs':>6} {'capture s':>10} {'process s':>10}"]
    for label, r in rows:
        lines.append(f"{label:<28} {r['graphs']:>6} {r['capture_s']:>10.2f} {r['wall_s']:>10.1f}")
    lines.append(f"cache: {entries} entries; target: warm capture <= 3 s -> "
                 f"{'met' if rows[1][1]['capture_s'] <= 3.0 else 'NOT met'}")
    lines += ["", "capture phases, s (the report's capture_phases_s)",
              f"{'run':<28} " + " ".join(f"{p:>14}" for p in PHASES)]
    for label, r in rows:
        if r["phases"]:
            lines.append(f"{label:<28} " +
                         " ".join(f"{r['phases'].get(p, 0.0):>14.2f}" for p in PHASES))
    write_table(args.out_dir, "capture_bench.table", lines)
    return 0


# --- data parallel --------------------------------------------------------------------------

def run_dp(args, spec):
    """`encgraph bench` on one GPU, with runtime.data_parallel over every GPU in one process,
    and one process per GPU under mpirun (--mpirun, from scripts/gpu/steps.sh's mpi_env);
    exits 77 (skipped) with fewer than two devices."""
    import torch
    tower = spec["tower"]
    devices = args.ranks.split(",") if args.ranks else [
        f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if len(devices) < 2:
        print(f"skipped: data parallel needs 2 GPUs, {len(devices)} present")
        return 77
    gpus = len(devices)
    os.makedirs(args.out_dir, exist_ok=True)
    bundle = os.path.abspath(args.bundle)
    config = os.path.abspath(args.config) if args.config else model_config(spec, bundle,
                                                                          args.out_dir)
    ranks = "[" + ", ".join(f'"{d}"' for d in devices) + "]"
    stem = os.path.join(os.path.abspath(args.out_dir), spec["stem"])
    rows = [f"{spec['title']}, bf16, {gpus} ranks ({', '.join(devices)}), "
            f"{torch.cuda.get_device_name()}", "",
            "| workload | system | images/s | tokens/s | p50 ms | p99 ms | speed-up over 1 GPU |",
            "|---|---|---|---|---|---|---|"]
    only = (args.only or "mixed,1344").split(",")
    for name, items in ((k, v) for k, v in tower.workloads().items() if k in only):
        trace = os.path.join(os.path.abspath(args.out_dir), f"dp-bench-{name}.jsonl")
        write_jsonl(trace, items)
        tokens = sum(tower.output_tokens(it) for it in items)
        request = spec["request"]
        single = run_encgraph_variant(bundle, config, trace, stem, name + "-1gpu", request)
        dp = run_encgraph_variant(bundle, config, trace, stem, name + f"-{gpus}gpu", request,
                                  extra=("--set", f"runtime.data_parallel={ranks}"))
        runs = [("1 GPU", single), (f"1 process, {gpus} GPUs", dp)]
        if args.mpirun:
            runs.append((f"{gpus} processes (mpirun)", run_encgraph_variant(
                bundle, config, trace, stem, name + f"-{gpus}proc", request,
                extra=("--set", 'runtime.device="cuda:{local_rank}"'),
                launcher=(*args.mpirun.split(), "-np", str(gpus)))))
        base = single["encgraph graphs"]["seconds"]
        for label, res in runs:
            for system, r in res.items():
                rows.append(f"| {name} | {label} {system} | {r['items'] / r['seconds']:.1f} | "
                            f"{tokens / r['seconds']:.0f} | {r['p50']:.1f} | {r['p99']:.1f} | "
                            f"{base / r['seconds']:.2f}x |")
    write_table(args.out_dir, "dp_bench.table", rows)
    return 0


# --- data-parallel balance, offline (--kind balance: no GPU, no bundle) ----------------------
# Every request of --balance-request items is assigned to ranks as the runtime does
# (core/src/load_balance.cpp: largest first onto the least-loaded rank), once by patch count
# and once by the work estimate the qwen_vl plugins report (plugins/qwen_vl/work.cpp: the
# forward's FLOPs in patch-equivalents). With FLOPs as the truth it prints the rank
# imbalance and the speed-up over one GPU that imbalance allows, then the same with each
# rank's items packed into padded budgets.

def patch_unit_flops(tower):
    """What one patch costs in the blocks' products: the estimate's unit."""
    d, inter = tower.d, tower.inter
    mlp_in = 2 * inter if tower.gated else inter
    return tower.depth * 2 * (d * 3 * d + d * d + d * mlp_in + inter * d)


def estimate(tower, item):
    """The plugin's input_size: FLOPs / unit, rounded half up."""
    whole, rest = divmod(tower.item_flops(item), patch_unit_flops(tower))
    return whole + (1 if 2 * rest >= patch_unit_flops(tower) else 0)


def patches(tower, item):
    t, h, w = tower.grid(item)
    return t * h * w


def balance_ranks(sizes, ranks):
    """Item indices per rank, as balance_by_input_size assigns them."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])  # stable: ties keep order
    load, per_rank = [0] * ranks, [[] for _ in range(ranks)]
    for i in order:
        r = min(range(ranks), key=lambda k: (load[k], k))
        per_rank[r].append(i)
        load[r] += sizes[i]
    return per_rank


def budgets(step, largest, smallest=64):
    """The budgets token_step generates: doubling from the smallest up to step, then steps."""
    out, b = [], smallest
    while b < step:
        out.append(b)
        b *= 2
    out.extend(range(step, largest + 1, step))
    return out


def attention_flops(tower, item):
    """The item's attention FLOPs: its FLOPs less those of its products (linear in patches)."""
    t, h, w = tower.grid(item)
    # One merged unit of one temporal patch: its products, less its attention
    # (one sequence of merge^2 patches in every block).
    side, unit = tower.patch * tower.merge, tower.merge * tower.merge
    one = dict(item, height=side, width=side, frames=1)
    linear_per_patch = (tower.item_flops(one) - tower.depth * 4 * tower.d * unit * unit) / unit
    return tower.item_flops(item) - linear_per_patch * t * h * w, linear_per_patch


def rank_time(tower, items, grid, max_items):
    """FLOPs a rank runs for its items as the packer batches them (core/src/packer.cpp):
    sorted by output tokens, at most max_items and the largest budget a batch, each batch
    padded to its smallest fitting budget; padded rows cost products, not attention."""
    batches, cur, cur_tokens = [], [], 0
    for it in sorted(items, key=tower.output_tokens):
        n = tower.output_tokens(it)
        if cur and (len(cur) == max_items or cur_tokens + n > grid[-1]):
            batches.append((cur, cur_tokens))
            cur, cur_tokens = [], 0
        cur.append(it)
        cur_tokens += n
    if cur:
        batches.append((cur, cur_tokens))
    total = 0
    for batch, tokens in batches:
        budget = min(b for b in grid if b >= tokens)
        attn = [attention_flops(tower, it) for it in batch]
        total += attn[0][1] * budget * tower.merge * tower.merge + sum(a for a, _ in attn)
    return total


def run_balance(args, spec):
    grid = budgets(args.token_step, args.max_budget)
    tower = QWEN2_5 if args.model == "qwen2_5_vl" else QWEN3
    ranks = int(args.ranks) if args.ranks.isdigit() else 2
    workload = args.only or "mixed"
    items = tower.workloads()[workload]
    flops = [tower.item_flops(it) for it in items]
    print(f"{args.model} {workload}: {len(items)} items, requests of {args.balance_request}, "
          f"{ranks} ranks; FLOPs as the truth")
    print(f"{'balanced by':<14} {'mean max/mean':>14} {'worst':>8} {'speed-up bound':>15}")
    for name, size in (("patches", patches), ("work estimate", estimate)):
        ratios, busiest = [], 0
        for start in range(0, len(items), args.balance_request):
            chunk = list(range(start, min(start + args.balance_request, len(items))))
            per_rank = balance_ranks([size(tower, items[i]) for i in chunk], ranks)
            rank_flops = [sum(flops[chunk[k]] for k in ks) for ks in per_rank]
            ratios.append(max(rank_flops) / (sum(rank_flops) / ranks))
            busiest += max(rank_flops)
        print(f"{name:<14} {sum(ratios) / len(ratios):>14.4f} {max(ratios):>8.4f} "
              f"{sum(flops) / busiest:>14.3f}x")
    # The same with each rank's items packed into padded budgets, against one GPU
    # packing the whole request.
    print(f"packed into budgets ({grid[0]}..{grid[-1]}, step {args.token_step}, "
          f"{args.max_items} items a batch): speed-up over one GPU")
    for name, size in (("patches", patches), ("work estimate", estimate)):
        one, busiest = 0, 0
        for start in range(0, len(items), args.balance_request):
            chunk = items[start:start + args.balance_request]
            one += rank_time(tower, chunk, grid, args.max_items)
            per_rank = balance_ranks([size(tower, it) for it in chunk], ranks)
            busiest += max(rank_time(tower, [chunk[k] for k in ks], grid, args.max_items)
                           for ks in per_rank)
        print(f"{name:<14} {one / busiest:>14.3f}x")
    return 0


# --- the command line -----------------------------------------------------------------------

KINDS = {"speed": run_speed, "capture": run_capture, "dp": run_dp, "balance": run_balance}


def parser():
    ap = argparse.ArgumentParser(
        description="encgraph benchmarks, one model a run (see the module's docstring).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  bench.py --model qwen2_5_vl --bundle gpu-bundle --out-dir OUT --skip-transformers\n"
               "  bench.py --model qwen3_vl --bundle gpu-bundle --out-dir OUT --only 224x1 "
               "--variant unmerged:VAR=0\n"
               "  bench.py --model dsocr2 --bundle gpu-bundle --out-dir OUT --only a4_150,mixed\n"
               "  bench.py --model siglip --bundle gpu-bundle --out-dir OUT --models so400m\n"
               "  bench.py --model internvl --bundle gpu-bundle --out-dir OUT "
               "--only mixed,document\n"
               "  bench.py --model llava_onevision --bundle gpu-bundle --out-dir OUT "
               "--only mixed,video\n"
               "  bench.py --model qwen2_5_vl --kind capture --bundle gpu-bundle --out-dir OUT\n"
               "  bench.py --model qwen2_5_vl --kind dp --bundle gpu-bundle --out-dir OUT "
               "--mpirun \"$ENCGRAPH_MPIRUN\"")
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("--kind", choices=sorted(KINDS), default="speed",
                    help="speed (default): throughput against transformers; capture: capture "
                         "time with a cold and a warm tuning cache; dp: data parallel over "
                         "the machine's GPUs (Qwen models); balance: the data-parallel "
                         "balance of --only's workload (default mixed) computed offline, no "
                         "GPU (--bundle and --out-dir are then ignored)")
    ap.add_argument("--bundle", default=None, help="the GPU bundle (scripts/gpu-bundle.sh)")
    ap.add_argument("--out-dir", default=None, help="traces, reports, tables and JSON go here")
    ap.add_argument("--config", default=None,
                    help="the encgraph config (default: the model's: "
                         "configs/qwen2_5_vl_bench.toml, or one written into --out-dir)")
    ap.add_argument("--only", default=None,
                    help="comma-separated workloads (default: all of the model's; dp: mixed,1344)")
    ap.add_argument("--skip-transformers", action="store_true")
    ap.add_argument("--transformers", default=None,
                    help="transformers attention implementations to run, comma-separated "
                         "(default: qwen2_5_vl sdpa,eager; the others sdpa; eager attention is "
                         "the slow one: about 300 s of the Qwen2.5-VL run)")
    ap.add_argument("--with-eager", action="store_true",
                    help="add transformers with eager attention to the default")
    ap.add_argument("--variant", action="append", default=[],
                    help="LABEL:VAR=VALUE[,...]: encgraph again under these environment "
                         "variables, side by side in the same run (e.g. \"previous build:"
                         "ENCGRAPH_PLUGIN_PATH=gpu-bundle/prev-plugins\"); a dotted VAR is a "
                         "config key instead (\"cuBLASLt MLP:plugin.config.mlp_kernel="
                         "'cublaslt'\")")
    siglip = ap.add_argument_group("siglip")
    siglip.add_argument("--models", default="so400m,base", help="SigLIP towers: so400m,base")
    siglip.add_argument("--images", type=int, default=512)
    siglip.add_argument("--request-size", type=int, default=64)
    siglip.add_argument("--repeats", type=int, default=2)
    capture = ap.add_argument_group("capture")
    capture.add_argument("--skip-untuned", action="store_true",
                         help="leave out the tune_gemm = false run")
    dp = ap.add_argument_group("dp")
    dp.add_argument("--mpirun", default=os.environ.get("ENCGRAPH_MPIRUN", ""),
                    help="the mpirun command line (without -np) for the multi-process runs")
    dp.add_argument("--ranks", default="",
                    help="devices of the ranks, e.g. cpu,cpu (default: every GPU); balance: "
                         "the number of ranks (default 2)")
    bal = ap.add_argument_group("balance")
    bal.add_argument("--balance-request", type=int, default=16, help="items a request (bench: 16)")
    bal.add_argument("--token-step", type=int, default=1024, help="the bench config's budgets")
    bal.add_argument("--max-budget", type=int, default=16384)
    bal.add_argument("--max-items", type=int, default=16, help="max_items_per_batch")
    return ap


def main(argv=None):
    args = parser().parse_args(argv)
    spec = MODELS[args.model]
    if args.model == "siglip":
        if args.kind != "speed":
            raise SystemExit("--model siglip runs --kind speed only")
        return run_siglip(args, spec)
    if args.kind in ("dp", "balance") and args.model not in ("qwen2_5_vl", "qwen3_vl"):
        raise SystemExit(f"--kind {args.kind} runs the Qwen models only")
    if args.kind != "balance" and (args.bundle is None or args.out_dir is None):
        raise SystemExit("--bundle and --out-dir are required (all kinds but balance)")
    return KINDS[args.kind](args, spec)


if __name__ == "__main__":
    sys.exit(main())
