"""InternVL's image encoder for bench.py --model internvl and compare.py --model internvl:
InternViT-300M-448px (1024 x 24, 16 heads, MLP 4096, 448-pixel tiles of 14-pixel patches),
the 0.5 pixel shuffle and the projector to InternVL3-1B's 896-wide language model.

Workloads (bench.py): mixed (128 images, sides from the multiples of 28 in 224..1344,
seed 20261206; GotOcr2's tiling gives 1 to 13 tiles each), document (32 pages of
2200x1650, a 3:4 scan: the maximum 3x4 tiles and the thumbnail each), 448 (256 one-tile
images). Requests of 8 images. FLOPs count each tile's products and attention
(1025 rows a tile) and the projector's 256 rows; tokens/s are the 256 image tokens a
tile. transformers runs InternVLModel.get_image_features on the processor's tile
stack (random bf16 pixels of the same shape).

torch and transformers are imported inside functions, so --help works without them.
"""
import random

from bench_common import (latency_result, random_bf16_model, set_attn_implementation,
                          time_requests)

D, LAYERS, HEADS, INTER, TILE, PATCH, TEXT = 1024, 24, 16, 4096, 448, 14, 896
ROWS_PER_TILE = (TILE // PATCH // 2) ** 2  # 256
MAX_PATCHES = 12

CONFIG = """# Written by scripts/gpu/bench.py --model internvl: InternVL's image encoder
# (InternViT-300M-448px, projector to 896), bf16, random weights; budgets in image
# tokens (256 a tile).
[runtime]
device = "cuda"
log_level = "warn"
plugin_dirs = ["{plugins}"]

[plugin]
name = "internvl"
weights = "random"

[plugin.config]
text_hidden_size = 896
max_budget_tiles = 64

[budgets]
# tiles: 1, 2, 4, 8, 13 (one page), 16, 26, 32, 48, 64
token_budgets = [256, 512, 1024, 2048, 3328, 4096, 6656, 8192, 12288, 16384]
max_items_per_batch = 8

[workload]
kind = "synthetic"
count = 8
sizes = [[448, 448]]
request_size = 8
warmup_requests = 1
"""


def grid(h, w, tile=TILE, lo=1, hi=MAX_PATCHES):
    """GotOcr2's get_optimal_tiled_canvas: (columns, rows)."""
    cands = sorted([(c, r) for c in range(1, hi + 1) for r in range(1, hi + 1)
                    if lo <= c * r <= hi], key=lambda cr: cr[0] * cr[1])
    aspect, area = w / h, w * h
    best, best_diff = (1, 1), float("inf")
    for c, r in cands:
        diff = abs(aspect - c / r)
        if diff < best_diff:
            best, best_diff = (c, r), diff
        elif diff == best_diff and area > 0.5 * tile * tile * c * r:
            best = (c, r)
    return best


def tiles(h, w):
    """Tiles of one image: the grid's, plus the thumbnail when there are several."""
    c, r = grid(h, w)
    return 1 if c * r == 1 else c * r + 1


def transformers_config(attn="sdpa", layers=LAYERS):
    """InternVLConfig at InternViT-300M-448px's sizes with a one-layer Qwen2 text model
    (never run by get_image_features)."""
    from transformers import InternVLConfig
    vision = dict(hidden_size=D, num_hidden_layers=layers, num_attention_heads=HEADS,
                  intermediate_size=INTER, image_size=[TILE, TILE], patch_size=[PATCH, PATCH],
                  hidden_act="gelu", norm_type="layer_norm", use_qk_norm=False,
                  attention_bias=True, use_mean_pooling=True, layer_norm_eps=1e-6)
    text = dict(model_type="qwen2", hidden_size=TEXT, num_hidden_layers=1,
                num_attention_heads=14, num_key_value_heads=2, intermediate_size=256,
                vocab_size=256)
    cfg = InternVLConfig(vision_config=vision, text_config=text, downsample_ratio=0.5,
                         image_token_id=255, vision_feature_layer=-1,
                         vision_feature_select_strategy="default", projector_hidden_act="gelu")
    set_attn_implementation((cfg, cfg.vision_config, cfg.text_config), attn)
    return cfg


def image_features(model, pixel_values):
    """get_image_features' rows: [tiles x 256, text] (a tensor or a model output)."""
    out = model.get_image_features(pixel_values=pixel_values, vision_feature_layer=-1,
                                   vision_feature_select_strategy="default")
    out = getattr(out, "pooler_output", out)
    if isinstance(out, (list, tuple)):
        import torch
        out = torch.cat([o.reshape(-1, o.shape[-1]) for o in out])
    return out.reshape(-1, out.shape[-1])


class InternVLEncoder:
    """Workloads, FLOPs and the transformers reference of bench.py's spec."""

    @staticmethod
    def workloads():
        rnd = random.Random(20261206)
        sides = list(range(224, 1345, 28))
        return {
            "mixed": [dict(modality="image", height=rnd.choice(sides), width=rnd.choice(sides))
                      for _ in range(128)],
            "document": [dict(modality="image", height=2200, width=1650)] * 32,
            "448": [dict(modality="image", height=448, width=448)] * 256,
        }

    @staticmethod
    def tile_flops():
        n = (TILE // PATCH) ** 2 + 1
        f = 2 * (n - 1) * 3 * PATCH * PATCH * D
        f += LAYERS * (2 * n * (4 * D * D + 2 * D * INTER) + 4 * n * n * D)
        return f + 2 * ROWS_PER_TILE * (4 * D * TEXT + TEXT * TEXT)

    def item_flops(self, item):
        return tiles(item["height"], item["width"]) * self.tile_flops()

    @staticmethod
    def output_tokens(item):
        return tiles(item["height"], item["width"]) * ROWS_PER_TILE

    @staticmethod
    def transformers_model(attn):
        from transformers import InternVLModel
        return random_bf16_model(InternVLModel, transformers_config(attn))

    def run_transformers(self, model, items, request):
        """One get_image_features per request on its tile stack, the first request once as
        warm-up."""
        import torch
        gen = torch.Generator().manual_seed(1)
        requests = []
        for r in range(0, len(items), request):
            n = sum(tiles(it["height"], it["width"]) for it in items[r:r + request])
            requests.append(torch.randn(n, 3, TILE, TILE, generator=gen).to(torch.bfloat16)
                            .pin_memory())

        def forward(pv):
            image_features(model, pv.to("cuda", non_blocking=True))

        return latency_result(time_requests(requests, forward), len(items))


INTERNVL = InternVLEncoder()
