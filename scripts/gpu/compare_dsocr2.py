"""DeepSeek-OCR-2 against transformers' DeepseekOcr2Model.get_image_features
(compare.py --model dsocr2).

Builds a randomly initialised transformers DeepseekOcr2Model with the released
vision sizes (SAM ViT-B 768 x 12, window 14, global layers 2/5/8/11, neck 256,
downsample [512, 896]; the Qwen2-style encoder 24 x 896, 14/2 heads, MLP 4864,
rope theta 1e6; projector 896 -> 1280) and a one-layer language model (never
run: get_image_features uses the vision side only). Matrices N(0, 0.02^2),
biases N(0, 0.02^2), norm weights 1 + N(0, 0.1^2), position and
relative-position tables N(0, 0.3^2), queries and the separator N(0, 0.5^2),
rounded to bf16 and saved as safetensors under transformers' names ("model." +
the vision tower's, the projector's and view_separator's state-dict keys).

Inputs: document-like synthetic pages written as PNG (an A4 scan at 150 dpi, a
tall receipt, a 16:9 slide, a small screenshot that gets no crops), processed
by transformers' own DeepseekOcr2 image processor (the PIL backend when it
exists: the plugin resizes as PIL does) for the references, and read from the
same PNG files by `encgraph encode` (graphs and eager).

Per image, rel = ||a - b|| / ||b|| over its whole row block ([crops x 144,
256, separator]). Judged as the Qwen comparisons are: ours-vs-fp32 at most
1.1x transformers' own bf16-vs-fp32.
"""
import copy
import json
import os
import tempfile

from bench_common import (ACCURACY_SLACK, deepseek_ocr2_config, exit_code, log, log_versions,
                          rel, run_encgraph_encode, verdict, write_png, write_table)

# (name, height, width)
ITEMS = [
    ("A4 150dpi 1754x1240", 1754, 1240),
    ("receipt 2000x576", 2000, 576),
    ("slide 1080x1920", 1080, 1920),
    ("screenshot 400x640", 400, 640),
]


def document_page(h, w, gen):
    """A light page with dark 'text lines' of random words, some grey boxes and noise."""
    import torch
    page = torch.full((h, w, 3), 245, dtype=torch.int16)
    line = max(h // 60, 6)
    y = line
    while y + line < h - line:
        x = w // 20
        while x < w - w // 20:
            word = int(torch.randint(w // 40 + 1, w // 8 + 2, (1,), generator=gen))
            shade = int(torch.randint(10, 90, (1,), generator=gen))
            page[y:y + line * 2 // 3, x:min(x + word, w - w // 20)] = shade
            x += word + line
        y += line * 2
    for _ in range(3):
        y0 = int(torch.randint(0, h // 2, (1,), generator=gen))
        x0 = int(torch.randint(0, w // 2, (1,), generator=gen))
        page[y0:y0 + h // 6, x0:x0 + w // 4] -= 60
    page += torch.randint(-8, 9, page.shape, generator=gen, dtype=torch.int16)
    return page.clamp(0, 255).to(torch.uint8)


def build_models(seed):
    import torch
    from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import DeepseekOcr2Model
    cfg = deepseek_ocr2_config("sdpa")
    model = DeepseekOcr2Model(cfg).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("language_model"):
                continue
            if name.endswith("bias"):
                v = torch.randn(p.shape, generator=gen) * 0.02
            elif "norm" in name:
                v = 1.0 + 0.1 * torch.randn(p.shape, generator=gen)
            elif "pos" in name:  # pos_embed, rel_pos_h, rel_pos_w
                v = torch.randn(p.shape, generator=gen) * 0.3
            elif "query" in name or "view_separator" in name:
                v = torch.randn(p.shape, generator=gen) * 0.5
            else:
                v = torch.randn(p.shape, generator=gen) * 0.02
            p.copy_(v.to(torch.bfloat16).float())  # both references share the bf16 values
    ref32 = model.to("cuda")
    ref16 = copy.deepcopy(ref32).to(torch.bfloat16)
    return ref16, ref32


def save_weights(model, path):
    import torch
    from safetensors.torch import save_file
    tensors = {"model." + k: v.detach().to(torch.bfloat16).contiguous().cpu()
               for k, v in model.state_dict().items() if not k.startswith("language_model")}
    save_file(tensors, path)
    return len(tensors)


def image_processor():
    """transformers' DeepseekOcr2 image processor, the PIL backend first."""
    import importlib
    for module in ("image_processing_pil_deepseek_ocr2", "image_processing_deepseek_ocr2",
                   "image_processing_deepseek_ocr2_fast"):
        try:
            mod = importlib.import_module(f"transformers.models.deepseek_ocr2.{module}")
        except Exception as e:
            log(f"note: {module}: {e}")
            continue
        for name in dir(mod):
            cls = getattr(mod, name)
            # The processor classes only (not the ...Kwargs TypedDict beside them).
            if name.startswith("DeepseekOcr2ImageProcessor") and isinstance(cls, type) and \
                    callable(getattr(cls, "preprocess", None)):
                try:
                    proc = getattr(mod, name)()
                    log(f"processor: {module}.{name}")
                    return proc
                except Exception as e:
                    log(f"note: {name}(): {e}")
    raise RuntimeError("no DeepseekOcr2 image processor in this transformers")


def process(proc, rgb):
    from PIL import Image
    out = proc(images=[Image.fromarray(rgb.numpy())], return_tensors="pt")
    pv = out["pixel_values"]
    local = out.get("pixel_values_local")
    n = out.get("num_local_patches")
    n = [int(v) for v in (n.tolist() if hasattr(n, "tolist") else n)] if n is not None else [0]
    if local is not None and local.numel() == 0:
        local = None
    return pv, local, n


def run_reference(model, pv, local, n, dtype):
    import torch
    with torch.no_grad():
        out = model.get_image_features(
            pixel_values=pv.to(device="cuda", dtype=dtype),
            pixel_values_local=None if local is None else local.to(device="cuda", dtype=dtype),
            num_local_patches=n if local is not None else None, return_dict=True)
    feats = out.pooler_output
    # transformers 5.17 returns one tensor per image (a list); one image here.
    if isinstance(feats, (list, tuple)):
        feats = torch.cat([f.reshape(-1, f.shape[-1]) for f in feats], dim=0)
    return feats.float().cpu()


def write_trace(work, pixels):
    path = os.path.join(work, "items.jsonl")
    with open(path, "w") as fh:
        for i, px in enumerate(pixels):
            name = f"item{i}.png"
            write_png(os.path.join(work, name), px)
            fh.write(json.dumps(dict(id=f"item{i}", file=name)) + "\n")
    return path


def write_config(work, bundle, weights):
    path = os.path.join(work, "dsocr2.toml")
    with open(path, "w") as fh:
        fh.write(f"""[runtime]
device = "cuda"
log_level = "warn"
plugin_dirs = ["{os.path.join(bundle, 'plugins')}"]

[plugin]
name = "deepseek_ocr2"
weights = "{weights}"

[budgets]
token_budgets = [256, 512, 864, 1024, 2048]
max_items_per_batch = 4
""")
    return path


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
    work = tempfile.mkdtemp(prefix="dsocr2_vs_tf_")
    ref16, ref32 = build_models(args.seed)
    weights = os.path.join(work, "model.safetensors")
    log(f"saved {save_weights(ref32, weights)} tensors to {weights}")
    proc = image_processor()
    gen = torch.Generator().manual_seed(args.seed + 1)
    pixels, refs = [], []
    for name, h, w in ITEMS:
        px = document_page(h, w, gen)
        pixels.append(px)
        pv, local, n = process(proc, px)
        r16 = run_reference(ref16, pv, local, n, torch.bfloat16)
        r32 = run_reference(ref32, pv, local, n, torch.float32)
        refs.append((r16, r32, n[0]))
        log(f"  reference {name}: {n[0]} crops, {r16.shape[0]} rows")
    del ref16, ref32
    torch.cuda.empty_cache()
    trace = write_trace(work, pixels)
    config = write_config(work, bundle, weights)
    graphs = run_ours(bundle, config, trace, os.path.join(work, "g.safetensors"))
    eager = run_ours(bundle, config, trace, os.path.join(work, "e.safetensors"),
                     ["runtime.use_graphs=false"])

    lines = [f"deepseek_ocr2 vs transformers {tf_version} (released vision sizes, "
             f"random bf16 weights, transformers' names); rel = ||a-b||/||b||",
             f"{'image':22} {'crops':>5} {'rows':>5} {'graphs/hf16':>11} {'eager/hf16':>10} "
             f"{'graphs/hf32':>11} {'eager/hf32':>10} {'hf16/hf32':>9} {'ratio':>6}"]
    ok = True
    worst_ratio = 0.0
    for i, (name, _h, _w) in enumerate(ITEMS):
        r16, r32, crops = refs[i]
        g, e_ = graphs.get(i), eager.get(i)
        e = [rel(g, r16), rel(e_, r16), rel(g, r32), rel(e_, r32), rel(r16, r32)]
        ratio = max(e[2], e[3]) / e[4]
        worst_ratio = max(worst_ratio, ratio)
        good = ratio <= ACCURACY_SLACK  # a NaN (missing output, shape mismatch) fails too
        ok &= good
        lines.append(f"{name:22} {crops:5d} {r16.shape[0]:5d} {e[0]:11.2e} {e[1]:10.2e} "
                     f"{e[2]:11.2e} {e[3]:10.2e} {e[4]:9.2e} {ratio:6.3f}{'' if good else '  <-'}")
    lines.append(f"worst (ours vs fp32) / (transformers bf16 vs fp32): {worst_ratio:.3f} "
                 f"(judged: <= {ACCURACY_SLACK}): {verdict(ok, args.informational)}")
    write_table(args.out_dir, "dsocr2_vs_transformers.table", lines)
    return exit_code(ok, args.informational)

