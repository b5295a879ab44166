"""SigLIP against transformers' SiglipVisionModel, then a benchmark (compare.py --model siglip).

For each tower (siglip-so400m-patch14-384 and siglip-base-patch16-224 dimensions):
builds a randomly initialised SiglipVisionModel (every parameter redrawn so biases,
norms, positions and the probe matter), rounds it to bf16, saves it as
safetensors under its state-dict names ("vision_model.*"), runs the plugin
(tests' siglip_dump tool) on the same images, and reports ||ours - ref|| / ||ref||
per image against transformers in bf16 for last_hidden_state (graphs and eager),
pooler_output and hidden_states[-2] (the LLaVA feature layer), plus ours and
transformers bf16 against transformers fp32 on the same weights. Judged: every
native image under 2e-2 on all four, and transformers' hidden_states as the
feature layer assumes them.

Images at the model's size are normalised here exactly as SiglipImageProcessor
does ((v/255 - 0.5) / 0.5); one image that needs a resize goes through
transformers' processor when it imports (informational: resamplers differ by
rounding).

Benchmark (unless --no-bench): bench.py's SigLIP run on the saved weights, 512
images at the model's resolution, requests of 64, encgraph with graphs and eagerly
(bench/siglip's siglip_bench) against transformers (sdpa, bf16); images/s into
siglip_bench.table.
"""
import copy
import math
import os
import shutil
import subprocess
import tempfile
import time

from bench import SIGLIP_DIMS as DIM_KEYS, SIGLIP_TOWERS as MODELS, siglip_bench_lines
from bench_common import log, log_versions, rel

TOLERANCE = 2e-2
NATIVE_IMAGES = 6


def build_models(spec, seed):
    import torch
    from transformers import SiglipVisionConfig, SiglipVisionModel
    cfg = SiglipVisionConfig(**{k: spec[k] for k in DIM_KEYS}, num_channels=3,
                             layer_norm_eps=1e-6, hidden_act="gelu_pytorch_tanh",
                             vision_use_head=True)
    try:
        cfg._attn_implementation = "sdpa"
    except Exception:  # some config classes guard the attribute
        pass
    with torch.device("cuda"):
        model = SiglipVisionModel(cfg).eval()
    gen = torch.Generator(device="cuda").manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                v = 1.0 + 0.1 * torch.randn(p.shape, generator=gen, device="cuda")
            elif name.endswith("bias"):
                v = 0.02 * torch.randn(p.shape, generator=gen, device="cuda")
            elif "position_embedding" in name:
                v = 0.2 * torch.randn(p.shape, generator=gen, device="cuda")
            elif name.endswith("probe"):
                v = torch.randn(p.shape, generator=gen, device="cuda")
            else:  # Linear, Conv2d, in_proj: N(0, 1/fan_in)
                v = torch.randn(p.shape, generator=gen, device="cuda") / math.sqrt(p[0].numel())
            p.copy_(v.to(torch.bfloat16).float())  # both references share the bf16 values
    ref16 = copy.deepcopy(model).to(torch.bfloat16)
    return model, ref16


def save_weights(model, folder):
    """The checkpoint as transformers writes it (save_pretrained applies its
    checkpoint name mapping); returns the folder and the names' prefix."""
    from safetensors import safe_open
    try:
        model.save_pretrained(folder, safe_serialization=True)
    except Exception as e:  # fall back to the state dict under the released names
        log(f"  save_pretrained failed ({e!r}); writing the state dict")
        from safetensors.torch import save_file
        os.makedirs(folder, exist_ok=True)
        save_file({k if k.startswith("vision_model.") else "vision_model." + k:
                   v.detach().contiguous().cpu() for k, v in model.state_dict().items()},
                  os.path.join(folder, "model.safetensors"))
    names = []
    for f in sorted(os.listdir(folder)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(folder, f), "pt") as fh:
                names += list(fh.keys())
    prefix = "vision_model." if all(n.startswith("vision_model.") for n in names) else ""
    log(f"  saved {len(names)} tensors to {folder} (e.g. {sorted(names)[0]}); "
        f"weight_prefix = '{prefix}'")
    return folder, prefix


def normalise(images_u8):
    """pixel_values [N, 3, H, W] of uint8 images [N, H, W, 3] at the model's size."""
    import torch
    x = images_u8.to(torch.float64) / 255.0
    return ((x - 0.5) / 0.5).to(torch.float32).permute(0, 3, 1, 2).contiguous()


def hf_processor(size):
    try:
        from transformers import SiglipImageProcessor
        return SiglipImageProcessor(size={"height": size, "width": size})
    except Exception as e:  # PIL or the class may be missing
        log(f"note: transformers' SiglipImageProcessor unavailable ({e})")
        return None


def run_reference(model, pixel_values, dtype):
    import torch
    tower = getattr(model, "vision_model", model)
    with torch.inference_mode():
        out = model(pixel_values=pixel_values.to(device="cuda", dtype=dtype),
                    output_hidden_states=True)
        states = getattr(out, "hidden_states", None)
        feature, check = None, (0, float("nan"))
        if states is not None:
            feature = states[-2].float().cpu()
            # hidden_states must be (embeddings, layer 1, ..., layer L), the last
            # one before post_layernorm: what feature_layer = -2 assumes.
            post = tower.post_layernorm(states[-1])
            check = (len(states), rel(post.float(), out.last_hidden_state.float()))
    return {"last": out.last_hidden_state.float().cpu(), "pooled": out.pooler_output.float().cpu(),
            "feature": feature, "check": check}


def read_dump(path):
    import torch
    outs, data, pos = [], open(path, "rb").read(), 0
    while pos < len(data):
        rows, cols = torch.frombuffer(bytearray(data[pos:pos + 16]), dtype=torch.int64).tolist()
        pos += 16
        n = rows * cols * 4
        outs.append(torch.frombuffer(bytearray(data[pos:pos + n]), dtype=torch.float32)
                    .reshape(rows, cols))
        pos += n
    return outs


def run_ours(bundle, spec, weights, files, work, tag, extra, device="cuda"):
    out = os.path.join(work, f"{tag}.bin")
    cmd = [os.path.join(bundle, "bin", "siglip_dump"), "--device", device, "--weights", weights,
           "--out", out, "--set", f"weight_prefix={spec['prefix']}"]
    for k in DIM_KEYS:
        cmd += ["--set", f"{k}={spec[k]}"]
    if device == "cpu":
        cmd += ["--set", "dtype=f32"]
    cmd += extra
    for f in files:
        cmd += ["--item", f]
    t0 = time.time()
    subprocess.run(cmd, check=True)
    log(f"  ours {tag}: {time.time() - t0:.1f} s")
    return read_dump(out)


def compare(bundle, spec, work, seed):
    import torch
    log(f"== {spec['name']}: building the reference")
    model32, model16 = build_models(spec, seed)
    weights, spec["prefix"] = save_weights(model16, os.path.join(work, spec["name"]))
    side = spec["image_size"]
    tokens = (side // spec["patch_size"]) ** 2
    gen = torch.Generator().manual_seed(seed + 1)
    native = torch.randint(0, 256, (NATIVE_IMAGES, side, side, 3), dtype=torch.uint8,
                           generator=gen)
    odd = torch.randint(0, 256, (375, 500, 3), dtype=torch.uint8, generator=gen)
    files, names = [], []
    for i in range(NATIVE_IMAGES):
        path = os.path.join(work, f"img{i}.rgb")
        native[i].numpy().tofile(path)
        files.append(f"{path}:{side}:{side}")
        names.append(f"img {side}x{side} #{i}")
    path = os.path.join(work, "odd.rgb")
    odd.numpy().tofile(path)
    files.append(f"{path}:375:500")
    names.append("img 375x500 (resized)")

    pv = normalise(native)
    processor = hf_processor(side)
    notes = []
    pv_odd = None
    if processor is not None:
        try:
            got = processor(images=[native[0].numpy()], return_tensors="pt")["pixel_values"]
            notes.append(f"processor vs ours on a native image: max|diff| "
                         f"{float((got.float() - pv[:1]).abs().max()):.1e} "
                         f"({type(processor).__name__})")
            pv_odd = processor(images=[odd.numpy()], return_tensors="pt")["pixel_values"].float()
        except Exception as e:
            notes.append(f"processor failed: {e}")
    ref16 = run_reference(model16, torch.cat([pv] + ([pv_odd] if pv_odd is not None else [])),
                          torch.bfloat16)
    ref32 = run_reference(model32, torch.cat([pv] + ([pv_odd] if pv_odd is not None else [])),
                          torch.float32)
    layers = spec["num_hidden_layers"]
    n_states, post_err = ref32["check"]
    notes.append(f"transformers hidden_states: {n_states} entries (expected {layers + 1}); "
                 f"post_layernorm(hidden_states[-1]) vs last_hidden_state: {post_err:.1e}")
    semantics_ok = n_states == layers + 1 and post_err < 1e-5
    del model32, model16
    torch.cuda.empty_cache()

    batch = ["--budgets", ",".join(str(tokens * n) for n in (1, 2, 4, 8)), "--max-items", "8"]
    ours = {
        "graphs": run_ours(bundle, spec, weights, files, work, "graphs", batch),
        "eager": run_ours(bundle, spec, weights, files, work, "eager", ["--eager"]),
        "pooled": run_ours(bundle, spec, weights, files, work, "pooled",
                           ["--set", "output=pooled", "--budgets", "8", "--max-items", "8"]),
        "feature": run_ours(bundle, spec, weights, files, work, "feature",
                            ["--set", "feature_layer=-2"] + batch),
    }
    cpu = {}
    if spec["hidden_size"] <= 768:  # the CPU path on one image of the small tower
        cpu = dict(enumerate(run_ours(bundle, spec, weights, files[:1], work, "cpu", ["--eager"],
                                      device="cpu")))

    lines = [f"siglip vs transformers, {spec['name']} dims ({spec['num_hidden_layers']} layers, "
             f"{tokens} tokens, random bf16 weights); rel = ||a-b||/||b||",
             f"{'item':22} {'graphs/hf16':>11} {'eager/hf16':>10} {'pooled/hf16':>11} "
             f"{'feat-2/hf16':>11} {'graphs/hf32':>11} {'hf16/hf32':>9} {'cpu/hf32':>8}"]
    worst, ok = 0.0, True
    for i, name in enumerate(names):
        if i >= ref16["last"].shape[0]:
            lines.append(f"{name:22} skipped: transformers' processor unavailable")
            continue
        e = [rel(ours["graphs"][i], ref16["last"][i]), rel(ours["eager"][i], ref16["last"][i]),
             rel(ours["pooled"][i][0], ref16["pooled"][i]),
             rel(ours["feature"][i],
                 ref16["feature"][i] if ref16["feature"] is not None else None),
             rel(ours["graphs"][i], ref32["last"][i]), rel(ref16["last"][i], ref32["last"][i]),
             rel(cpu.get(i), ref32["last"][i])]
        if i < NATIVE_IMAGES:
            worst = max([worst] + e[:4])
            ok &= all(v < TOLERANCE for v in e[:4])
        lines.append(f"{name:22} " + " ".join(f"{v:{w}.2e}" for v, w in
                                             zip(e, (11, 10, 11, 11, 11, 9, 8))))
    lines += notes
    ok &= semantics_ok
    lines.append(f"worst ours vs transformers bf16 (native images): {worst:.2e} "
                 f"(target < {TOLERANCE}): {'PASS' if ok else 'FAIL'}")
    return ok, lines, weights


def add_arguments(ap, model):
    ap.add_argument("--bundle", required=True, help="the GPU bundle (scripts/gpu-bundle.sh)")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--models", default="so400m,base", help="towers: so400m,base")
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--request-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-bench", action="store_true", help="the comparison only")


def run(args, model):
    import torch
    log_versions()
    # The fp32 reference in true fp32 (cuDNN would run the patch Conv2d in TF32).
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    os.makedirs(args.out_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="siglip_vs_tf_")
    ok_all, table, bench_lines = True, [], []
    for key in args.models.split(","):
        spec = dict(MODELS[key])
        weights = None
        try:  # one model failing still leaves the other's figures
            ok, lines, weights = compare(args.bundle, spec, work, args.seed)
            ok_all &= ok
            table += lines + [""]
            log("\n".join(lines))
            if not args.no_bench:
                bench_lines += siglip_bench_lines(args.bundle, spec, weights, spec["prefix"],
                                                  args.images, args.request_size,
                                                  args.repeats) + [""]
                log("\n".join(bench_lines))
        except Exception as e:
            ok_all = False
            table.append(f"{spec['name']}: FAILED: {e!r}")
            log(f"{spec['name']}: FAILED: {e!r}")
        if weights and os.path.exists(weights):
            shutil.rmtree(weights, ignore_errors=True)
    with open(os.path.join(args.out_dir, "siglip_vs_transformers.table"), "w") as fh:
        fh.write("\n".join(table) + "\n")
    if not args.no_bench:
        with open(os.path.join(args.out_dir, "siglip_bench.table"), "w") as fh:
            fh.write("\n".join(bench_lines) + "\n")
    return 0 if ok_all else 1
