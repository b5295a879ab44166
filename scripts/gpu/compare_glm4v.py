"""The GLM-4.1V vision tower against transformers (compare.py --model glm4v).

Builds a randomly initialised transformers Glm4vVisionModel at GLM-4.1V-9B's vision
dimensions (depth 24, hidden 1536, 12 heads, blocks' MLP 4096 = out_hidden_size, merger
13696, image_size 336: a 24 x 24 position grid, no qkv bias, rms_norm_eps 1e-5).
Matrices N(0, 0.02^2) as transformers initialises them, biases N(0, 0.02^2), norm weights
1 + N(0, 0.1^2), the position table N(0, 0.3^2), so that every parameter matters; rounded
to bf16 and saved as a checkpoint folder the plugin reads alone: model.safetensors
("model.visual." + the module's state-dict keys), config.json (model_type glm4v, its
vision_config) and preprocessor_config.json (Glm4vImageProcessor's size, CLIP mean/std).

The plugin runs through `encgraph encode` on PNG frames and a JSONL trace (graphs, eager,
the smallest items on the CPU path). Reference pixel values: the processor's
normalisation and patch flattening computed here for sides that need no resize (checked
against transformers' Glm4vImageProcessor when it imports); items that need a resize use
transformers' processor's output. Videos are given frame by frame, an odd count included.

Judged, per item (rel = ||a - b|| / ||b||): ours-vs-fp32 at most 1.1x transformers' own
bf16-vs-fp32, and ours-vs-transformers-bf16 within sqrt(2) x 1.1 x that noise.
"""
import json
import math
import os
import tempfile

from bench_common import (ACCURACY_SLACK, exit_code, log, log_versions, rel, verdict,
                          write_table)
from compare_qwen import flatten, run_encode, write_trace

PATCH, TEMPORAL, MERGE = 14, 2, 2
MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)
# Glm4vImageProcessor's size: the bounds count an image's two temporal copies.
MIN_PIXELS, MAX_PIXELS = 112 * 112, 28 * 28 * 15000
DIMS = dict(hidden_size=1536, num_heads=12, intermediate_size=13696, out_hidden_size=4096,
            image_size=336, patch_size=PATCH, temporal_patch_size=TEMPORAL,
            spatial_merge_size=MERGE, in_channels=3, rms_norm_eps=1e-5, attention_bias=False,
            hidden_act="silu")
# (name, frames, height, width); sides are multiples of 28 unless the name says resized.
ITEMS = [("img 336x336", 1, 336, 336),        # the table's own 24 x 24 grid
         ("img 448x336", 1, 448, 336),
         ("img 308x532", 1, 308, 532),        # 22 x 38 patches
         ("img 1008x1008", 1, 1008, 1008),    # a 72 x 72 grid: the table upsampled
         ("img 84x1120", 1, 84, 1120),        # a strip: 6 rows of the 24-row table
         ("video 8x224x336", 8, 224, 336),
         ("video 5x168x168", 5, 168, 168),    # odd frame count: the last frame repeated
         ("img 375x500 (resized)", 1, 375, 500),
         ("img 20x30 (resized)", 1, 20, 30)]  # sides under 28: scaled up first


def add_arguments(ap, model):
    ap.add_argument("--bundle", required=True, help="the GPU bundle (scripts/gpu-bundle.sh)")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--depth", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cpu-items", type=int, default=2,
                    help="smallest items also run on the CPU path")
    ap.add_argument("--informational", action="store_true",
                    help="report only: exit 0 whatever the errors")


def needs_resize(frames, h, w):
    unit = PATCH * MERGE
    if h % unit or w % unit:
        return True
    pixels = max(frames, TEMPORAL) * h * w  # round(F / 2) * 2 for these items
    return frames == 1 and not MIN_PIXELS <= pixels <= MAX_PIXELS


def build_models(depth, seed):
    """(bf16 reference, fp32 reference) on the GPU, sharing bf16-rounded weights."""
    import copy
    import torch
    from transformers.models.glm4v.configuration_glm4v import Glm4vVisionConfig
    from transformers.models.glm4v.modeling_glm4v import Glm4vVisionModel
    cfg = Glm4vVisionConfig(depth=depth, **DIMS)
    try:
        cfg._attn_implementation = "sdpa"
    except Exception:  # some config classes guard the attribute
        pass
    net = Glm4vVisionModel(cfg).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in net.named_parameters():
            if name.endswith("bias"):
                v = torch.randn(p.shape, generator=gen) * 0.02
            elif "norm" in name:
                v = 1.0 + 0.1 * torch.randn(p.shape, generator=gen)
            elif "position_embedding" in name:
                v = torch.randn(p.shape, generator=gen) * 0.3
            else:
                v = torch.randn(p.shape, generator=gen) * 0.02
            p.copy_(v.to(torch.bfloat16).float())
    ref32 = net.to("cuda")
    ref16 = copy.deepcopy(ref32).to(torch.bfloat16)
    return ref16, ref32


def write_folder(folder, net, depth):
    """model.safetensors, config.json and preprocessor_config.json as transformers saves them."""
    import torch
    from safetensors.torch import save_file
    os.makedirs(folder, exist_ok=True)
    tensors = {"model.visual." + k: t.detach().to(torch.bfloat16).contiguous().cpu()
               for k, t in net.state_dict().items()}
    save_file(tensors, os.path.join(folder, "model.safetensors"))
    vision = dict(model_type="glm4v", depth=depth, **DIMS)
    with open(os.path.join(folder, "config.json"), "w") as fh:
        json.dump(dict(model_type="glm4v", vision_config=vision), fh, indent=1)
    with open(os.path.join(folder, "preprocessor_config.json"), "w") as fh:
        json.dump(dict(size=dict(shortest_edge=MIN_PIXELS, longest_edge=MAX_PIXELS),
                       patch_size=PATCH, temporal_patch_size=TEMPORAL, merge_size=MERGE,
                       image_mean=list(MEAN), image_std=list(STD),
                       image_processor_type="Glm4vImageProcessor"), fh, indent=1)
    return len(tensors)


def hf_image_processor():
    for module, name in (("image_processing_glm4v", "Glm4vImageProcessor"),
                         ("image_processing_pil_glm4v", "Glm4vImageProcessorPil"),
                         ("image_processing_glm4v_fast", "Glm4vImageProcessorFast")):
        try:
            mod = __import__(f"transformers.models.glm4v.{module}", fromlist=[name])
            return getattr(mod, name)(size={"shortest_edge": MIN_PIXELS,
                                            "longest_edge": MAX_PIXELS})
        except Exception as e:  # PIL, torchvision or the class may be missing
            log(f"note: transformers' {name} unavailable ({e})")
    return None


def reference_inputs(frames, processor):
    v = dict(patch=PATCH, mean=MEAN, std=STD)
    ours, grid = (None, None) if needs_resize(*frames.shape[:3]) else flatten(v, frames)
    note = ""
    if processor is not None and frames.shape[0] == 1:
        out = processor(images=[frames[0].numpy()], return_tensors="pt")
        pv, g = out["pixel_values"].float(), tuple(int(x) for x in out["image_grid_thw"][0])
        if ours is not None:
            note = f"processor max|diff| {float((pv - ours).abs().max()):.2e}"
        ours, grid = pv, g
    if ours is None:
        return None, None, "skipped: needs transformers' processor for the resize"
    return ours, grid, note


def run_reference(net, pixel_values, grid, dtype):
    """The merged output, float32 on the CPU. A video goes in as Glm4vModel's
    get_video_features passes it: one (1, h, w) row of grid_thw per temporal patch."""
    import torch
    t, h, w = grid
    grid_thw = torch.tensor([[1, h, w]] * t, dtype=torch.long, device="cuda")
    with torch.no_grad():
        out = net(pixel_values.to(device="cuda", dtype=dtype), grid_thw=grid_thw)
    if not torch.is_tensor(out):
        out = out.pooler_output if getattr(out, "pooler_output", None) is not None else out[0]
    return out.float().cpu()


def write_config(work, bundle, folder):
    path = os.path.join(work, "glm4v.toml")
    with open(path, "w") as fh:
        fh.write(f"""[runtime]
device = "cuda"
log_level = "warn"
plugin_dirs = ["{os.path.join(bundle, 'plugins')}"]

[plugin]
name = "glm4v"
weights = "{folder}"

[plugin.config]
max_budget = 2048
max_frames_per_video = 16

[budgets]
token_budgets = [256, 1024, 2048]
max_items_per_batch = 8
max_frames_per_batch = 16
""")
    return path


def run(args, model):
    import torch
    tf_version = log_versions()
    bundle = os.path.abspath(args.bundle)
    work = tempfile.mkdtemp(prefix="glm4v_vs_tf_")
    ref16, ref32 = build_models(args.depth, args.seed)
    folder = os.path.join(work, "GLM-4.1V-random")
    log(f"saved {write_folder(folder, ref32, args.depth)} tensors to {folder}")
    processor = hf_image_processor()
    gen = torch.Generator().manual_seed(args.seed + 1)
    pixels, refs = [], []
    for name, frames, h, w in ITEMS:
        px = torch.randint(0, 256, (frames, h, w, 3), dtype=torch.uint8, generator=gen)
        pixels.append(px)
        pv, grid, note = reference_inputs(px, processor)
        if pv is None:
            refs.append((None, None, note))
            continue
        r16 = run_reference(ref16, pv, grid, torch.bfloat16)
        r32 = run_reference(ref32, pv, grid, torch.float32)
        refs.append((r16, r32, note))
        log(f"  reference {name}: grid {grid}, {r16.shape[0]} tokens {note}")
    del ref16, ref32
    torch.cuda.empty_cache()
    small = sorted(range(len(ITEMS)), key=lambda i: ITEMS[i][1] * ITEMS[i][2] * ITEMS[i][3])
    small = [i for i in small if refs[i][0] is not None][: args.cpu_items]
    trace = write_trace(work, pixels)
    config = write_config(work, bundle, folder)
    graphs = run_encode(bundle, config, trace, os.path.join(work, "g.safetensors"), 1)
    eager = run_encode(bundle, config, trace, os.path.join(work, "e.safetensors"), 1,
                       ["runtime.use_graphs=false"])
    cpu = {}
    if small:
        cpu_trace = os.path.join(work, "cpu.jsonl")
        with open(trace) as src, open(cpu_trace, "w") as dst:
            lines = src.readlines()
            for i in small:
                dst.write(lines[i])
        cpu = run_encode(bundle, config, cpu_trace, os.path.join(work, "c.safetensors"), 1,
                         ['runtime.device="cpu"', "runtime.use_graphs=false"])

    lines = [f"glm4v vs transformers {tf_version} (GLM-4.1V-9B vision dims, depth {args.depth}, "
             f"random bf16 weights in a checkpoint folder); rel = ||a-b||/||b||",
             f"{'item':24} {'tokens':>6} {'graphs/hf16':>11} {'eager/hf16':>10} "
             f"{'graphs/hf32':>11} {'hf16/hf32':>9} {'ratio':>6} {'cpu/hf32':>8}"]
    worst = worst_ratio = 0.0
    ok = True
    for i, (name, *_rest) in enumerate(ITEMS):
        r16, r32, note = refs[i]
        if r16 is None:
            lines.append(f"{name:24} {note}")
            continue
        g = graphs.get(i, [None])[0]
        e_ = eager.get(i, [None])[0]
        c = cpu.get(i, [None])[0]
        e = [rel(g, r16), rel(e_, r16), rel(g, r32), rel(r16, r32), rel(c, r32)]
        ratio = max(e[2], rel(e_, r32)) / e[3]
        worst = max(worst, e[0], e[1])
        worst_ratio = max(worst_ratio, ratio)
        good = ratio <= ACCURACY_SLACK and \
            max(e[0], e[1]) < math.sqrt(2.0) * e[3] * ACCURACY_SLACK
        ok &= good  # a NaN (a missing output or a shape mismatch) fails too
        lines.append(f"{name:24} {r16.shape[0]:6d} {e[0]:11.2e} {e[1]:10.2e} {e[2]:11.2e} "
                     f"{e[3]:9.2e} {ratio:6.3f} {e[4]:8.2e}{'' if good else '  <-'}")
    lines.append(f"worst ours vs transformers bf16: {worst:.2e}; worst (ours vs fp32) / "
                 f"(transformers bf16 vs fp32): {worst_ratio:.3f} (judged: <= {ACCURACY_SLACK}): "
                 f"{verdict(ok, args.informational)}")
    write_table(args.out_dir, "glm4v_vs_transformers.table", lines)
    return exit_code(ok, args.informational)
