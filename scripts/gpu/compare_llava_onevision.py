"""LLaVA-OneVision's image and video encoder against transformers' LlavaOnevisionModel
(compare.py --model llava_onevision).

Builds a randomly initialised transformers LlavaOnevisionForConditionalGeneration at
llava-onevision-qwen2-0.5b-ov's vision sizes (bench_common.py: SigLIP so400m cut to 26
layers, 1152 x 16 heads, MLP 4304, 384-pixel tiles of 14-pixel patches,
vision_feature_layer -1, "full" strategy, the released image_grid_pinpoints (1..6 tiles
of 384 a side), anyres_max_9, projector to 896) with a one-layer text model that the
image and video features never run. Matrices N(0, 1/fan_in), biases N(0, 0.02^2), norm
weights 1 + N(0, 0.1^2), positions N(0, 0.2^2), image_newline N(0, 1) (as large as a
projected row, so a misplaced newline shows), rounded to bf16. It is saved as a checkpoint
folder as a user has one: config.json (save_pretrained's), preprocessor_config.json (the
released llava-onevision-qwen2-0.5b-ov-hf settings: mean and std 0.5, bicubic) and
model.safetensors under the ForConditionalGeneration's names ("model.vision_tower.*",
"model.multi_modal_projector.*", "model.image_newline"; the text model left out).

Inputs: smooth random images written as PNG: one tile (384x384: the 1x1 canvas and the
base), 640x480 (2x2 canvas, rows cropped by unpad_image), 1920x1080 (3x5 canvas: a
75 x 135 map shrunk by anyres_max_9 to 60 x 108), a 200x3000 strip (1x6 canvas), and a
3-frame video of 384x384 PNG frames (`frames_files`). transformers' image processor (the
PIL backend when it exists: the plugin resizes as PIL does), read from the folder's
preprocessor_config.json, makes the images' tiles; the video's pixel values are the
released normalisation computed here (its frames need no resize), checked against
transformers' video processor when it imports.

References, in bf16 and fp32 on the same weights (TF32 off): per image, what
LlavaOnevisionModel.forward scatters into the language model:
get_image_features(...).pooler_output[0] (the tower, the projector, pack_image_features
and image_newline, inside get_image_features in transformers 5; a version that returns
unpacked features gets model.pack_image_features applied as its forward does); per video
get_video_features(...).pooler_output[0] (tower, projector, apply_pooling) plus the one
image_newline forward appends. Ours: `encgraph encode` on the same files with only
plugin.weights = <folder> (graphs, eager, the smallest items also on the CPU path).

Per item, rel = ||a - b|| / ||b|| over its rows. Judged: our rows equal transformers' in
count, and ours-vs-fp32 at most 1.1x transformers' own bf16-vs-fp32 (graphs and eager).
"""
import copy
import json
import math
import os
import tempfile

from bench_common import (ACCURACY_SLACK, LLAVA_PREPROCESSOR, LLAVA_TILE, exit_code, llava_rows,
                          llava_tiles, llava_transformers_config, log, log_versions, rel,
                          run_encgraph_encode, verdict, write_png, write_table)
from bench_common import llava_image_features, llava_video_features

ITEMS = [  # (name, frames (0: an image), height, width)
    ("img 384x384", 0, 384, 384),
    ("img 640x480", 0, 480, 640),
    ("img 1920x1080 (shrunk)", 0, 1080, 1920),
    ("strip 200x3000", 0, 200, 3000),
    ("video 3x384x384", 3, 384, 384),
]
MEAN, STD = LLAVA_PREPROCESSOR["image_mean"], LLAVA_PREPROCESSOR["image_std"]


def smooth_image(h, w, gen):
    """Low-frequency colour fields plus noise: resampling matters, as in photos."""
    import torch
    base = torch.rand(1, 3, max(h // 64, 2), max(w // 64, 2), generator=gen) * 255
    img = torch.nn.functional.interpolate(base, size=(h, w), mode="bilinear",
                                          align_corners=False)[0].permute(1, 2, 0)
    img = img + torch.randint(-12, 13, (h, w, 3), generator=gen)
    return img.clamp(0, 255).to(torch.uint8)


def build_model(seed):
    """LlavaOnevisionForConditionalGeneration (fp32, CPU) whose vision side holds
    bf16-rounded random values; the text model keeps transformers' initialisation."""
    import torch
    from transformers import LlavaOnevisionForConditionalGeneration
    model = LlavaOnevisionForConditionalGeneration(llava_transformers_config("sdpa")).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if is_text_side(name):
                continue
            if name.endswith("image_newline"):
                v = torch.randn(p.shape, generator=gen)
            elif "norm" in name and name.endswith("weight"):
                v = 1.0 + 0.1 * torch.randn(p.shape, generator=gen)
            elif name.endswith("bias"):
                v = 0.02 * torch.randn(p.shape, generator=gen)
            elif "position" in name:
                v = 0.2 * torch.randn(p.shape, generator=gen)
            else:  # Linear, Conv2d: N(0, 1/fan_in)
                v = torch.randn(p.shape, generator=gen) / math.sqrt(p[0].numel())
            p.copy_(v.to(torch.bfloat16).float())  # both references share the bf16 values
    return model


def is_text_side(name):
    """The language model and its head: neither image nor video features read them."""
    return name.startswith(("model.language_model.", "language_model.", "lm_head."))


def save_folder(model, folder):
    """config.json, preprocessor_config.json and model.safetensors (bf16, the
    ForConditionalGeneration's names, the text side left out) in folder."""
    import torch
    from safetensors.torch import save_file
    os.makedirs(folder, exist_ok=True)
    model.config.save_pretrained(folder)
    with open(os.path.join(folder, "preprocessor_config.json"), "w") as fh:
        json.dump(LLAVA_PREPROCESSOR, fh, indent=2)
    tensors = {k: v.detach().to(torch.bfloat16).contiguous().cpu()
               for k, v in model.state_dict().items() if not is_text_side(k)}
    if "model.image_newline" not in tensors:
        raise RuntimeError("the model's state dict has no model.image_newline: "
                           f"{sorted(tensors)[:5]}...")
    save_file(tensors, os.path.join(folder, "model.safetensors"))
    return len(tensors)


def released_settings(proc):
    """Whether a processor carries the released mean and std (not the class defaults)."""
    return [float(x) for x in getattr(proc, "image_mean", [])] == MEAN and \
        [float(x) for x in getattr(proc, "image_std", [])] == STD


def image_processor(folder):
    """transformers' LlavaOnevision image processor read from the folder's
    preprocessor_config.json (else given its settings), the PIL backend first."""
    import importlib
    settings = {k: LLAVA_PREPROCESSOR[k] for k in ("image_mean", "image_std", "size", "resample",
                                                   "image_grid_pinpoints")}
    for module in ("image_processing_pil_llava_onevision", "image_processing_llava_onevision",
                   "image_processing_llava_onevision_fast"):
        try:
            mod = importlib.import_module(f"transformers.models.llava_onevision.{module}")
        except Exception as e:
            log(f"note: {module}: {e}")
            continue
        for name in dir(mod):
            cls = getattr(mod, name)
            if not (name.startswith("LlavaOnevisionImageProcessor") and isinstance(cls, type)
                    and callable(getattr(cls, "preprocess", None))):
                continue
            for how, make in (("from_pretrained", lambda: cls.from_pretrained(folder)),
                              ("the settings as arguments", lambda: cls(**settings))):
                try:
                    proc = make()
                except Exception as e:
                    log(f"note: {name} by {how}: {e}")
                    continue
                if released_settings(proc):
                    log(f"processor: {module}.{name} by {how}")
                    return proc
                log(f"note: {name} by {how} has mean/std {getattr(proc, 'image_mean', None)}, "
                    f"{getattr(proc, 'image_std', None)}, not the folder's")
    raise RuntimeError("no LlavaOnevision image processor in this transformers")


def video_processor_diff(frames, pixel_values):
    """max |transformers' video processor - pixel_values| as a note, or why there is none."""
    try:
        from transformers.models.llava_onevision.video_processing_llava_onevision import (
            LlavaOnevisionVideoProcessor)
        vp = LlavaOnevisionVideoProcessor(size={"height": LLAVA_TILE, "width": LLAVA_TILE},
                                          image_mean=MEAN, image_std=STD, resample=3)
        out = vp(videos=[frames.numpy()], return_tensors="pt")["pixel_values_videos"]
        return f"video processor max|diff| {float((out.float() - pixel_values).abs().max()):.2e}"
    except Exception as e:  # torchvision or the class may be missing
        return f"video processor unavailable ({type(e).__name__})"


def video_pixels(frames):
    """[1, frames, 3, T, T] float32: rescale by 1/255 and the released normalisation."""
    import torch
    x = frames.to(torch.float64) / 255.0
    x = (x - torch.tensor(MEAN, dtype=torch.float64)) / torch.tensor(STD, dtype=torch.float64)
    return x.to(torch.float32).permute(0, 3, 1, 2)[None].contiguous()


def references(ref16, ref32, proc, pixels):
    """Per item (bf16 rows, fp32 rows, tiles, note), float32 on the CPU."""
    import torch
    from PIL import Image
    out = []
    for (name, frames, h, w), px in zip(ITEMS, pixels):
        rows = []
        if frames:
            pv = video_pixels(px)
            note = video_processor_diff(px, pv)
            tiles = frames
            for model, dtype in ((ref16, torch.bfloat16), (ref32, torch.float32)):
                with torch.no_grad():
                    rows.append(llava_video_features(
                        model, pv.to(device="cuda", dtype=dtype))[0].float().cpu())
        else:
            batch = proc(images=[Image.fromarray(px[0].numpy())], return_tensors="pt")
            pv, sizes = batch["pixel_values"], batch["image_sizes"]
            tiles = int(pv.shape[1]) if pv.dim() == 5 else int(pv.shape[0])
            expected = llava_tiles(dict(height=h, width=w))
            note = "" if tiles == expected else f"processor tiles {tiles}, expected {expected}"
            for model, dtype in ((ref16, torch.bfloat16), (ref32, torch.float32)):
                with torch.no_grad():
                    rows.append(llava_image_features(
                        model, pv.to(device="cuda", dtype=dtype),
                        sizes.to("cuda"))[0].float().cpu())
        item = dict(height=h, width=w, modality="video" if frames else "image", frames=frames)
        if rows[0].shape[0] != llava_rows(item):
            note += f" (docs' arithmetic: {llava_rows(item)} rows)"
        out.append((rows[0], rows[1], tiles, note.strip()))
        log(f"  reference {name}: {tiles} tiles, {rows[0].shape[0]} rows {note}")
    return out


def write_inputs(work, bundle, folder, pixels):
    """PNG files (a video's frames one each), the JSONL trace and the encgraph config."""
    trace = os.path.join(work, "items.jsonl")
    with open(trace, "w") as fh:
        for i, ((_name, frames, _h, _w), px) in enumerate(zip(ITEMS, pixels)):
            files = []
            for f in range(px.shape[0]):
                files.append(f"item{i}_{f:03d}.png")
                write_png(os.path.join(work, files[-1]), px[f])
            line = (dict(id=f"item{i}", modality="video", frames_files=files) if frames else
                    dict(id=f"item{i}", file=files[0]))
            fh.write(json.dumps(line) + "\n")
    config = os.path.join(work, "llava_onevision.toml")
    with open(config, "w") as fh:
        fh.write(f"""[runtime]
device = "cuda"
log_level = "warn"
plugin_dirs = ["{os.path.join(bundle, 'plugins')}"]

[plugin]
name = "llava_onevision"
weights = "{folder}"

[budgets]
# tiles: an image here is 2 to 16, the video 3
token_budgets = [4, 8, 16, 32, 64]
max_items_per_batch = 4
""")
    return trace, config


def run_ours(bundle, config, trace, out_path, sets=(), only=None):
    """{item index: rows} from `encgraph encode`; only: the trace's lines to keep."""
    if only is not None:
        subset = out_path + ".jsonl"
        with open(trace) as src, open(subset, "w") as dst:
            lines = src.readlines()
            for i in only:
                dst.write(lines[i])
        trace = subset
    run_encgraph_encode(bundle, config, trace, out_path, sets)
    from safetensors.torch import load_file
    return {int(k.split("/")[0][4:]): v.float() for k, v in load_file(out_path).items()
            if "/" not in k}


def add_arguments(ap, model):
    ap.add_argument("--bundle", required=True, help="the GPU bundle (scripts/gpu-bundle.sh)")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cpu-items", type=int, default=1,
                    help="smallest items also run on the CPU path (f32; reported, not judged)")
    ap.add_argument("--informational", action="store_true",
                    help="report only: exit 0 whatever the errors")


def run(args, model):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 is the reference: no TF32 anywhere
    torch.backends.cudnn.allow_tf32 = False
    tf_version = log_versions()
    bundle = os.path.abspath(args.bundle)
    work = tempfile.mkdtemp(prefix="llava_onevision_vs_tf_")
    full = build_model(args.seed)
    folder = os.path.join(work, "llava-onevision-so400m-random")
    log(f"saved {save_folder(full, folder)} tensors to {folder}")
    ref32 = full.model.to("cuda")
    ref16 = copy.deepcopy(ref32).to(torch.bfloat16)
    del full
    proc = image_processor(folder)
    gen = torch.Generator().manual_seed(args.seed + 1)
    pixels = [torch.stack([smooth_image(h, w, gen) for _ in range(max(frames, 1))])
              for _name, frames, h, w in ITEMS]
    refs = references(ref16, ref32, proc, pixels)
    del ref16, ref32
    torch.cuda.empty_cache()
    trace, config = write_inputs(work, bundle, folder, pixels)
    graphs = run_ours(bundle, config, trace, os.path.join(work, "g.safetensors"))
    eager = run_ours(bundle, config, trace, os.path.join(work, "e.safetensors"),
                     ["runtime.use_graphs=false"])
    small = sorted(range(len(ITEMS)), key=lambda i: refs[i][2])[:args.cpu_items]
    cpu = run_ours(bundle, config, trace, os.path.join(work, "c.safetensors"),
                   ['runtime.device="cpu"', "runtime.use_graphs=false"], small) if small else {}

    lines = [f"llava_onevision vs transformers {tf_version} (SigLIP so400m 26 layers, projector "
             f"to 896, anyres_max_9, random bf16 weights in a checkpoint folder); "
             f"rel = ||a-b||/||b||",
             f"{'item':24} {'tiles':>5} {'rows':>5} {'ours':>5} {'graphs/hf16':>11} "
             f"{'eager/hf16':>10} {'graphs/hf32':>11} {'eager/hf32':>10} {'hf16/hf32':>9} "
             f"{'ratio':>6} {'cpu/hf32':>8}"]
    ok, worst = True, 0.0
    for i, (name, *_rest) in enumerate(ITEMS):
        r16, r32, tiles, note = refs[i]
        g, e_ = graphs.get(i), eager.get(i)
        ours_rows = -1 if g is None else g.shape[0]
        e = [rel(g, r16), rel(e_, r16), rel(g, r32), rel(e_, r32), rel(r16, r32),
             rel(cpu.get(i), r32)]
        ratio = max(e[2], e[3]) / e[4]
        worst = max(worst, ratio)
        rows_ok = ours_rows == r16.shape[0] and e_ is not None and e_.shape[0] == r16.shape[0]
        good = rows_ok and ratio <= ACCURACY_SLACK  # a NaN (missing, mis-shaped) fails too
        ok &= good
        lines.append(f"{name:24} {tiles:5d} {r16.shape[0]:5d} {ours_rows:5d} {e[0]:11.2e} "
                     f"{e[1]:10.2e} {e[2]:11.2e} {e[3]:10.2e} {e[4]:9.2e} {ratio:6.3f} "
                     f"{e[5]:8.2e}{'' if good else '  <-'}{'  ' + note if note else ''}")
    lines.append(f"rows equal in count, worst (ours vs fp32) / (transformers bf16 vs fp32): "
                 f"{worst:.3f} (judged: <= {ACCURACY_SLACK}): {verdict(ok, args.informational)}")
    write_table(args.out_dir, "llava_onevision_vs_transformers.table", lines)
    return exit_code(ok, args.informational)
