#!/usr/bin/env python3
"""encgraph's Python module as a real client uses it: a small random
Qwen2.5-VL in transformers, the image embeddings computed by encgraph and fed
to the language model in place of its own visual forward, on the GPU machine
(the integration example of docs/python.md).

1. Builds Qwen2_5_VLForConditionalGeneration from a config.json in the
   released 7B layout: the 7B vision tower's dimensions at --depth blocks, the
   7B text model's dimensions at --text-layers layers. The tower is
   initialised as scripts/gpu/qwen_vs_transformers.py does (hf init: N(0,
   0.02^2) matrices, biases N(0, 0.02^2), norm weights 1 + N(0, 0.1^2)); every
   weight is rounded to bf16, and the bf16 model is written by save_pretrained
   as a checkpoint folder with the released preprocessor_config.json.
2. One image and a prompt around its image tokens; references: transformers'
   own end-to-end forward (pixel_values through its visual tower) in bf16 and
   in fp32 on the same bf16-exact weights.
3. Ours: encgraph.Runtime(plugin.weights = the folder, cuda, bf16), capture,
   encode(images=[the uint8 array]); the rows through torch.from_dlpack
   (checked to share memory), scattered into the text embeddings at the image
   tokens, and the language model run on inputs_embeds with the model's own
   multimodal rotary positions (get_rope_index).
4. Judged as qwen_vs_transformers.py judges the tower: over the logits of the
   positions the image affects (its tokens and every later one), ours at most
   1.1x as far from fp32 as transformers' own bf16 is, and ours vs
   transformers bf16 within sqrt(2) x 1.1 x that bf16 noise. The embeddings
   are reported the same way, and the route itself is checked: transformers'
   own bf16 tower rows fed through step 3 give its end-to-end logits.
5. With --fp8 (a GPU with FP8 tensor cores), step 3 again with the tower's
   plugin.config.precision = "fp8_linear", judged by this script's own bound:
   its logits' error against fp32 at most 2x the bf16 route's (ours bf16
   against fp32): what reaches the language model, where the tower's own
   error (several times bf16's, docs/precision.md) is diluted by the text.

usage: PYTHONPATH=build-python-gpu/python python3 scripts/gpu/python_integration.py \
           --out-dir logs [--depth 4] [--text-layers 2] [--fp8]
"""
import argparse
import copy
import glob
import math
import os
import shutil
import sys
import tempfile
import time

try:  # --help works without them; a run needs numpy and torch
    import numpy as np
    import torch
except ImportError:
    np = torch = None

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_folder import (  # noqa: E402
    PREPROCESSOR_7B, released_config, vision_config, write_json)

ACCURACY_SLACK = 1.10  # as compare.py --model qwen2_5_vl
FP8_SLACK = 2.0  # fp8_linear's logits against fp32: at most this x the bf16 route's error
# The released 7B text model's dimensions (head_dim 128: mrope sections 16+24+24).
TEXT_7B = dict(hidden_size=3584, intermediate_size=18944, num_attention_heads=28,
               num_key_value_heads=4, rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]})
IMAGE_TOKEN, VISION_START, VISION_END = 151655, 151652, 151653


def log(*a):
    print(*a, flush=True)


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def build_folder(folder, depth, text_layers, seed):
    """The bf16 model (cuda), an fp32 copy of it, and the checkpoint folder it was saved to."""
    import transformers
    vision = vision_config(depth)  # 7B tower dims; out_hidden_size 3584 = the 7B text width
    config = released_config(vision)
    config.update(TEXT_7B, num_hidden_layers=text_layers)
    write_json(os.path.join(folder, "config.json"), config)
    write_json(os.path.join(folder, "preprocessor_config.json"), PREPROCESSOR_7B)
    cfg = transformers.AutoConfig.from_pretrained(folder)
    cls = transformers.Qwen2_5_VLForConditionalGeneration
    with torch.device("cuda"):
        try:
            model = cls._from_config(cfg, attn_implementation="sdpa", torch_dtype=torch.float32)
        except Exception as e:
            log(f"note: _from_config(attn_implementation='sdpa') failed ({e}); default attention")
            model = cls._from_config(cfg, torch_dtype=torch.float32)
    model = model.float().eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in visual_of(model).named_parameters():
            if name.endswith("bias"):
                v = torch.randn(p.shape, generator=gen) * 0.02
            elif "norm" in name or "ln_q" in name:
                v = 1.0 + 0.1 * torch.randn(p.shape, generator=gen)
            else:
                v = torch.randn(p.shape, generator=gen) * 0.02
            p.copy_(v)
        for p in model.parameters():  # bf16-exact: fp32 and bf16 share the values
            p.copy_(p.to(torch.bfloat16).float())
    # fp32 copied before the cast: .to(bfloat16) also rounds float buffers (inv_freq).
    ref32 = copy.deepcopy(model).eval()
    model16 = model.to(torch.bfloat16).eval()
    saved = os.path.join(os.path.dirname(folder), "saved_by_transformers")
    model16.save_pretrained(saved)
    for f in glob.glob(os.path.join(saved, "*.safetensors")) + glob.glob(
            os.path.join(saved, "*.index.json")):
        shutil.copy(f, folder)
    return model16, ref32


def visual_of(model):
    inner = getattr(model, "model", None)
    return getattr(inner, "visual", None) or model.visual


def token_types(ids):
    """mm_token_type_ids as transformers 5's processor makes them: 1 at image
    tokens, 0 elsewhere (5.x's get_rope_index and forward need them)."""
    return (ids == IMAGE_TOKEN).to(torch.int32)


def rope_index(model, ids, grid, mask):
    import inspect
    for owner in (getattr(model, "model", None), model):
        fn = getattr(owner, "get_rope_index", None)
        if fn is not None:
            kw = dict(input_ids=ids, image_grid_thw=grid, video_grid_thw=None,
                      attention_mask=mask)
            if "mm_token_type_ids" in inspect.signature(fn).parameters:
                kw["mm_token_type_ids"] = token_types(ids)
            return fn(**kw)[0]
    raise RuntimeError("this transformers' Qwen2.5-VL has no get_rope_index")


def forward_kwargs(model, ids):
    """mm_token_type_ids for a forward that takes it (transformers 5.x)."""
    import inspect
    if "mm_token_type_ids" in inspect.signature(model.forward).parameters:
        return {"mm_token_type_ids": token_types(ids)}
    return {}


def tower_rows(model, pixel_values, grid, rows, width):
    """transformers' own tower output (merged rows), whatever object wraps it."""
    with torch.no_grad():
        out = visual_of(model)(pixel_values, grid_thw=grid)
    cands = [out] if torch.is_tensor(out) else [
        getattr(out, "pooler_output", None), getattr(out, "last_hidden_state", None)] + (
        list(out) if isinstance(out, (tuple, list)) else [])
    for c in cands:
        if torch.is_tensor(c) and tuple(c.shape) == (rows, width):
            return c
    raise RuntimeError(f"the tower returned no [{rows}, {width}] tensor")


def logits_from_rows(model, ids, mask, grid, rows):
    """The language model on the text embeddings with `rows` at the image tokens."""
    with torch.no_grad():
        embeds = model.get_input_embeddings()(ids)
        at = ids == IMAGE_TOKEN
        embeds[at] = rows.to(embeds.dtype)
        positions = rope_index(model, ids, grid, mask)
        out = model(input_ids=None, inputs_embeds=embeds, attention_mask=mask,
                    position_ids=positions)
    return out.logits.float()


def encode_with_encgraph(folder, pixels, precision):
    """One image through encgraph.Runtime (plugin.weights = the folder, CUDA graphs) at
    `precision`; the rows as a torch tensor through DLPack, whether it shares the
    result's memory and outlives the runtime, capture seconds and ms per encode."""
    import encgraph
    config = {"runtime": {"device": "cuda", "log_level": "warn"},
              "plugin": {"name": "qwen2_5_vl", "weights": folder,
                         "config": {"dtype": "bf16", "precision": precision}},
              "budgets": {"token_budgets": [1024, 4096], "max_items_per_batch": 8}}
    rt = encgraph.Runtime(config)
    t0 = time.time()
    rt.capture()
    capture_s = time.time() - t0
    [result] = rt.encode(images=[pixels])
    t0 = time.time()
    for _ in range(10):
        rt.encode(images=[pixels])
    encode_ms = (time.time() - t0) * 100
    ours = torch.from_dlpack(result)
    shared = ours.data_ptr() == result.data_ptr and ours.device.type == "cuda"
    log(f"encgraph {precision}: {tuple(ours.shape)} {ours.dtype} on {ours.device}, shares memory: "
        f"{shared}, capture {capture_s:.1f} s, encode {encode_ms:.1f} ms/image, stats "
        f"{rt.stats()['graph_hits']} hits")
    checksum = float(ours.float().sum())
    rt.close()  # the tensor keeps the result alive
    del rt
    alive = float(ours.float().sum()) == checksum
    return ours, shared, alive, capture_s, encode_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--depth", type=int, default=4, help="vision blocks (7B: 32)")
    ap.add_argument("--text-layers", type=int, default=2, help="language model layers (7B: 28)")
    ap.add_argument("--height", type=int, default=448)
    ap.add_argument("--width", type=int, default=336)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fp8", action="store_true",
                    help="also run the tower with precision = fp8_linear and judge its logits")
    args = ap.parse_args()
    if np is None or torch is None:
        raise SystemExit("python_integration.py needs numpy and torch (the GPU machine has them)")
    import transformers
    from PIL import Image
    import encgraph
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, encgraph "
        f"{encgraph.__version__} ({encgraph.__file__}), {torch.cuda.get_device_name()}")
    work = tempfile.mkdtemp(prefix="encgraph_python_")
    folder = os.path.join(work, "Qwen2.5-VL-small")
    os.makedirs(folder)
    t0 = time.time()
    model16, ref32 = build_folder(folder, args.depth, args.text_layers, args.seed)
    log(f"checkpoint folder {folder}: {sorted(os.listdir(folder))} ({time.time() - t0:.1f} s)")

    rng = np.random.default_rng(args.seed + 1)
    pixels = rng.integers(0, 256, (args.height, args.width, 3), dtype=np.uint8)
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
    proc = Qwen2VLImageProcessor.from_pretrained(folder)
    inputs = proc(images=[Image.fromarray(pixels)], return_tensors="pt")
    grid = inputs["image_grid_thw"].to("cuda")
    n = int(grid.prod()) // 4
    prompt = [int(t) for t in rng.integers(0, 150000, 12)]
    tail = [int(t) for t in rng.integers(0, 150000, 12)]
    ids = torch.tensor([prompt + [VISION_START] + [IMAGE_TOKEN] * n + [VISION_END] + tail],
                       device="cuda")
    mask = torch.ones_like(ids)
    first = len(prompt) + 1  # the first position the image affects
    width = model16.config.vision_config.out_hidden_size

    # transformers end to end (its own visual forward), bf16 and fp32.
    pv = inputs["pixel_values"].to("cuda")
    with torch.no_grad():
        r16 = model16(input_ids=ids, attention_mask=mask, pixel_values=pv.to(torch.bfloat16),
                      image_grid_thw=grid, **forward_kwargs(model16, ids)).logits.float()
        r32 = ref32(input_ids=ids, attention_mask=mask, pixel_values=pv.float(),
                    image_grid_thw=grid, **forward_kwargs(ref32, ids)).logits.float()
    tf16_rows = tower_rows(model16, pv.to(torch.bfloat16), grid, n, width)
    tf32_rows = tower_rows(ref32, pv.float(), grid, n, width)

    # encgraph: the folder as plugin.weights, the rows through DLPack.
    ours, shared, alive, capture_s, encode_ms = encode_with_encgraph(folder, pixels, "bf16")
    logits = logits_from_rows(model16, ids, mask, grid, ours)
    route = logits_from_rows(model16, ids, mask, grid, tf16_rows)
    sl = slice(first, None)
    e_emb = [rel(ours.float(), tf16_rows.float()), rel(ours.float(), tf32_rows.float()),
             rel(tf16_rows.float(), tf32_rows.float())]
    e_log = [rel(logits[:, sl], r16[:, sl]), rel(logits[:, sl], r32[:, sl]),
             rel(r16[:, sl], r32[:, sl])]
    e_route = rel(route[:, sl], r16[:, sl])
    e_text = rel(logits[:, :first], r16[:, :first])  # before the image: same computation
    agree = float((logits[:, sl].argmax(-1) == r16[:, sl].argmax(-1)).float().mean())

    def judged(e):
        return e[1] <= ACCURACY_SLACK * e[2] and e[0] < math.sqrt(2.0) * ACCURACY_SLACK * e[2]

    ok = shared and alive and ours.dtype == torch.bfloat16 and judged(e_log) and judged(e_emb)
    ok = ok and e_route <= 0.5 * e_log[2]
    fp8_lines, ok8 = [], True
    if args.fp8:
        rows8, shared8, alive8, capture8_s, encode8_ms = encode_with_encgraph(
            folder, pixels, "fp8_linear")
        logits8 = logits_from_rows(model16, ids, mask, grid, rows8)
        e8_emb = rel(rows8.float(), tf32_rows.float())
        e8_log = rel(logits8[:, sl], r32[:, sl])
        agree8 = float((logits8[:, sl].argmax(-1) == r32[:, sl].argmax(-1)).float().mean())
        ok8 = (shared8 and alive8 and rows8.dtype == torch.bfloat16
               and e8_log <= FP8_SLACK * e_log[1])
        fp8_lines = [
            f"fp8_linear: image embeddings vs hf32 {e8_emb:.2e} (bf16 {e_emb[1]:.2e}), logits vs "
            f"hf32 {e8_log:.2e} (bf16 {e_log[1]:.2e}, ratio {e8_log / e_log[1]:.2f}), argmax "
            f"agreement with hf32 {agree8:.3f}; capture {capture8_s:.1f} s (bf16 "
            f"{capture_s:.1f}), encode {encode8_ms:.1f} ms per image (bf16 {encode_ms:.1f})",
            f"judged: fp8_linear's logits vs hf32 <= {FP8_SLACK} x ours bf16 vs hf32: "
            f"{'PASS' if ok8 else 'FAIL'}",
        ]
    lines = [
        f"encgraph Python module vs transformers {transformers.__version__}: Qwen2.5-VL, 7B tower "
        f"dims at depth {args.depth}, 7B text dims at {args.text_layers} layers, random bf16 "
        f"weights (hf init), image {args.height}x{args.width} ({n} image tokens); "
        "rel = ||a-b||/||b||",
        f"{'':34} {'ours/hf16':>10} {'ours/hf32':>10} {'hf16/hf32':>10}",
        f"{'image embeddings':34} {e_emb[0]:10.2e} {e_emb[1]:10.2e} {e_emb[2]:10.2e}",
        f"{'logits (image tokens and after)':34} {e_log[0]:10.2e} {e_log[1]:10.2e} {e_log[2]:10.2e}",
        f"route check (hf16 tower rows through inputs_embeds vs hf16 end to end): {e_route:.2e}",
        f"logits before the image, ours vs hf16: {e_text:.2e}; argmax agreement after: {agree:.3f}",
        f"DLPack: torch.from_dlpack shares memory {shared}, tensor valid after Runtime.close() "
        f"{alive}; capture {capture_s:.1f} s, encode {encode_ms:.1f} ms per image",
        f"judged: ours/hf32 <= {ACCURACY_SLACK} x hf16/hf32 and ours/hf16 < sqrt(2) x "
        f"{ACCURACY_SLACK} x hf16/hf32 (embeddings and logits): {'PASS' if ok else 'FAIL'}",
    ] + fp8_lines
    table = "\n".join(lines)
    log("\n" + table)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "python_integration.table"), "w") as fh:
        fh.write(table + "\n")
    return 0 if ok and ok8 else 1


if __name__ == "__main__":
    sys.exit(main())
