"""InternVL's image encoder against transformers' InternVLModel.get_image_features
(compare.py --model internvl).

Builds a randomly initialised transformers InternVLModel at InternViT-300M-448px's sizes
(bench_common.py: 1024 x 24, 16 heads, MLP 4096, q/k/v biases, 448 tiles of 14-pixel
patches, downsample_ratio 0.5, projector to 896) with a one-layer text model that
get_image_features never runs. Matrices N(0, 1/fan_in), biases N(0, 0.02^2), norm
weights 1 + N(0, 0.1^2), layer scales 0.5 + N(0, 0.1^2), the CLS token and positions
N(0, 0.2^2), rounded to bf16. It is saved as a checkpoint folder as a user has one:
config.json (save_pretrained's), preprocessor_config.json (transformers' GotOcr2 image
processor with InternVL's settings: crop_to_patches, 1..12 patches, 448, ImageNet mean and
std, bicubic) and model.safetensors under InternVLForConditionalGeneration's names
("model.vision_tower.*", "model.multi_modal_projector.*").

Inputs: smooth random images written as PNG: one tile (448x448), an upscaled small one
(224x224), an odd aspect ratio (375x500: 4x3 tiles), a strip (200x1100), and a 3:4 page
(2200x1650: the maximum 12 tiles and the thumbnail); transformers' processor (the PIL
backend when it exists: the plugin resizes as PIL does) makes the references' tiles, and
`encgraph encode` reads the same PNG files with only plugin.weights = <folder>
(graphs and eager).

Per image, rel = ||a - b|| / ||b|| over its rows (tiles x 256). Judged as the Qwen
comparisons are: ours-vs-fp32 at most 1.1x transformers' own bf16-vs-fp32, and our rows
equal to the processor's tiles x 256.
"""
import copy
import json
import math
import os
import tempfile

from bench_common import (ACCURACY_SLACK, exit_code, log, log_versions, rel,
                          run_encgraph_encode, verdict, write_png, write_table)
from bench_common import internvl_image_features as image_features
from bench_common import internvl_transformers_config as transformers_config

ITEMS = [  # (name, height, width)
    ("tile 448x448", 448, 448),
    ("small 224x224", 224, 224),
    ("odd 375x500", 375, 500),
    ("strip 200x1100", 200, 1100),
    ("page 2200x1650", 2200, 1650),
]


def smooth_image(h, w, gen):
    """Low-frequency colour fields plus noise: resampling matters, as in photos."""
    import torch
    base = torch.rand(1, 3, max(h // 64, 2), max(w // 64, 2), generator=gen) * 255
    img = torch.nn.functional.interpolate(base, size=(h, w), mode="bilinear",
                                          align_corners=False)[0].permute(1, 2, 0)
    img = img + torch.randint(-12, 13, (h, w, 3), generator=gen)
    return img.clamp(0, 255).to(torch.uint8)


def build_models(seed):
    import torch
    from transformers import InternVLModel
    model = InternVLModel(transformers_config("sdpa")).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("language_model"):
                continue
            if "lambda" in name:
                v = 0.5 + 0.1 * torch.randn(p.shape, generator=gen)
            elif "norm" in name and name.endswith("weight"):
                v = 1.0 + 0.1 * torch.randn(p.shape, generator=gen)
            elif name.endswith("bias"):
                v = 0.02 * torch.randn(p.shape, generator=gen)
            elif "position" in name or "cls_token" in name:
                v = 0.2 * torch.randn(p.shape, generator=gen)
            else:  # Linear, Conv2d: N(0, 1/fan_in)
                v = torch.randn(p.shape, generator=gen) / math.sqrt(p[0].numel())
            p.copy_(v.to(torch.bfloat16).float())  # both references share the bf16 values
    ref32 = model.to("cuda")
    ref16 = copy.deepcopy(ref32).to(torch.bfloat16)
    return ref16, ref32


def image_processor():
    """transformers' GotOcr2 image processor with InternVL's settings, the PIL backend first."""
    import importlib
    kwargs = dict(crop_to_patches=True, min_patches=1, max_patches=12,
                  size={"height": 448, "width": 448}, image_mean=[0.485, 0.456, 0.406],
                  image_std=[0.229, 0.224, 0.225], resample=3)
    for module in ("image_processing_pil_got_ocr2", "image_processing_got_ocr2",
                   "image_processing_got_ocr2_fast"):
        try:
            mod = importlib.import_module(f"transformers.models.got_ocr2.{module}")
        except Exception as e:
            log(f"note: {module}: {e}")
            continue
        for name in dir(mod):
            cls = getattr(mod, name)
            if name.startswith("GotOcr2ImageProcessor") and isinstance(cls, type) and \
                    callable(getattr(cls, "preprocess", None)):
                try:
                    proc = cls(**kwargs)
                    log(f"processor: {module}.{name}")
                    return proc
                except Exception as e:
                    log(f"note: {name}(): {e}")
    raise RuntimeError("no GotOcr2 image processor in this transformers")


def save_folder(model, proc, folder):
    """config.json, preprocessor_config.json and model.safetensors (bf16, the
    ForConditionalGeneration names) in folder."""
    import torch
    from safetensors.torch import save_file
    os.makedirs(folder, exist_ok=True)
    model.config.save_pretrained(folder)
    proc.save_pretrained(folder)
    tensors = {"model." + k: v.detach().to(torch.bfloat16).contiguous().cpu()
               for k, v in model.state_dict().items() if not k.startswith("language_model")}
    save_file(tensors, os.path.join(folder, "model.safetensors"))
    return len(tensors)


def process(proc, rgb):
    from PIL import Image
    out = proc(images=[Image.fromarray(rgb.numpy())], return_tensors="pt")
    return out["pixel_values"]


def run_reference(model, pv, dtype):
    import torch
    with torch.no_grad():
        return image_features(model, pv.to(device="cuda", dtype=dtype)).float().cpu()


def write_inputs(work, bundle, folder, pixels):
    trace = os.path.join(work, "items.jsonl")
    with open(trace, "w") as fh:
        for i, px in enumerate(pixels):
            name = f"item{i}.png"
            write_png(os.path.join(work, name), px)
            fh.write(json.dumps(dict(id=f"item{i}", file=name)) + "\n")
    config = os.path.join(work, "internvl.toml")
    with open(config, "w") as fh:
        fh.write(f"""[runtime]
device = "cuda"
log_level = "warn"
plugin_dirs = ["{os.path.join(bundle, 'plugins')}"]

[plugin]
name = "internvl"
weights = "{folder}"

[budgets]
token_budgets = [256, 1024, 2048, 3328, 4096, 8192]
max_items_per_batch = 4
""")
    return trace, config


def run_ours(bundle, config, trace, out_path, sets=()):
    run_encgraph_encode(bundle, config, trace, out_path, sets)
    from safetensors.torch import load_file
    return {int(k.split("/")[0][4:]): v.float() for k, v in load_file(out_path).items()
            if "/" not in k}


def add_arguments(ap, model):
    ap.add_argument("--bundle", required=True, help="the GPU bundle (scripts/gpu-bundle.sh)")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--informational", action="store_true",
                    help="report only: exit 0 whatever the errors")


def run(args, model):
    import torch
    tf_version = log_versions()
    bundle = os.path.abspath(args.bundle)
    work = tempfile.mkdtemp(prefix="internvl_vs_tf_")
    ref16, ref32 = build_models(args.seed)
    proc = image_processor()
    folder = os.path.join(work, "InternVL-300M-random")
    log(f"saved {save_folder(ref32, proc, folder)} tensors to {folder}")
    gen = torch.Generator().manual_seed(args.seed + 1)
    pixels, refs = [], []
    for name, h, w in ITEMS:
        px = smooth_image(h, w, gen)
        pixels.append(px)
        pv = process(proc, px)
        refs.append((run_reference(ref16, pv, torch.bfloat16),
                     run_reference(ref32, pv, torch.float32), pv.shape[0]))
        log(f"  reference {name}: {pv.shape[0]} tiles, {refs[-1][0].shape[0]} rows")
    del ref16, ref32
    torch.cuda.empty_cache()
    trace, config = write_inputs(work, bundle, folder, pixels)
    graphs = run_ours(bundle, config, trace, os.path.join(work, "g.safetensors"))
    eager = run_ours(bundle, config, trace, os.path.join(work, "e.safetensors"),
                     ["runtime.use_graphs=false"])

    lines = [f"internvl vs transformers {tf_version} (InternViT-300M-448px sizes, random bf16 "
             f"weights, a checkpoint folder); rel = ||a-b||/||b||",
             f"{'image':16} {'tiles':>5} {'rows':>5} {'graphs/hf16':>11} {'eager/hf16':>10} "
             f"{'graphs/hf32':>11} {'eager/hf32':>10} {'hf16/hf32':>9} {'ratio':>6}"]
    ok, worst = True, 0.0
    for i, (name, _h, _w) in enumerate(ITEMS):
        r16, r32, tiles = refs[i]
        g, e_ = graphs.get(i), eager.get(i)
        e = [rel(g, r16), rel(e_, r16), rel(g, r32), rel(e_, r32), rel(r16, r32)]
        ratio = max(e[2], e[3]) / e[4]
        worst = max(worst, ratio)
        good = ratio <= ACCURACY_SLACK and g is not None and g.shape[0] == tiles * 256
        ok &= good
        lines.append(f"{name:16} {tiles:5d} {r16.shape[0]:5d} {e[0]:11.2e} {e[1]:10.2e} "
                     f"{e[2]:11.2e} {e[3]:10.2e} {e[4]:9.2e} {ratio:6.3f}{'' if good else '  <-'}")
    lines.append(f"worst (ours vs fp32) / (transformers bf16 vs fp32): {worst:.3f} "
                 f"(judged: <= {ACCURACY_SLACK}): {verdict(ok, args.informational)}")
    write_table(args.out_dir, "internvl_vs_transformers.table", lines)
    return exit_code(ok, args.informational)
