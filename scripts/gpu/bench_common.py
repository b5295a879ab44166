"""Helpers shared by the GPU drivers in scripts/gpu (bench.py, compare.py, ncu_profile.py).

The drivers run as `python3 scripts/gpu/<name>.py` and import this module from
their own folder. torch and transformers are imported inside the functions
that need them, so that the pure helpers (percentiles, report parsing, tables)
can be checked on a machine without them.
"""
import json
import math
import os
import random
import struct
import subprocess
import time
import zlib

# ours-vs-fp32 may be at most this times transformers' own bf16-vs-fp32.
ACCURACY_SLACK = 1.10


def log(*a):
    """print(), flushed at once so that logs interleave with the subprocesses' output."""
    print(*a, flush=True)


def log_versions():
    """Logs torch's and transformers' versions and the GPU's name; returns transformers' version."""
    import torch
    import transformers
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{torch.cuda.get_device_name()}")
    return transformers.__version__


# --- timing -------------------------------------------------------------------------------

def matmul_peak(n=8192):
    """The bf16 matrix-product rate in TFLOP/s: the median of 10 timings of 10 n^3 products."""
    import torch
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
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
    return 2 * n ** 3 / times[len(times) // 2] / 1e12


def percentile(sorted_values, q):
    """The nearest-rank q-th percentile (q in 0..100) of an ascending, non-empty list."""
    n = len(sorted_values)
    return sorted_values[min(n - 1, max(0, -(-q * n // 100) - 1))]


def time_requests(requests, forward):
    """Seconds of forward(request) per request, each between two device synchronisations;
    the first request runs once more before them as warm-up (not timed)."""
    import torch
    latencies = []
    with torch.no_grad():
        for i, request in enumerate([requests[0]] + requests):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            forward(request)
            torch.cuda.synchronize()
            if i > 0:
                latencies.append(time.perf_counter() - t0)
    return latencies


def latency_result(latencies, items):
    """A results-table entry from per-forward seconds (the shape encgraph_results gives)."""
    ms = sorted(x * 1e3 for x in latencies)
    return dict(seconds=sum(latencies), p50=percentile(ms, 50), p99=percentile(ms, 99),
                efficiency=None, items=items, note=f"{len(latencies)} forwards")



def run_qwen_transformers(model, items, request, grid, row_values):
    """A transformers Qwen-VL tower timed over requests of `request` items: random bf16
    pixel rows (`row_values` each) for every item's grid(item) = (t, h, w), one forward
    (pixel_values, grid_thw) per request, the first once more as warm-up."""
    import torch
    gen = torch.Generator().manual_seed(1)
    requests = []
    for r in range(0, len(items), request):
        grids = [grid(it) for it in items[r:r + request]]
        rows = sum(t * h * w for t, h, w in grids)
        pv = torch.randn(rows, row_values, generator=gen).to(torch.bfloat16)
        requests.append((pv.pin_memory(), torch.tensor(grids, dtype=torch.long)))
    latencies = time_requests(
        requests, lambda rq: model(rq[0].to("cuda", non_blocking=True), grid_thw=rq[1].to("cuda")))
    return latency_result(latencies, len(items))

# --- encgraph runs ------------------------------------------------------------------------

def write_jsonl(path, items):
    """One JSON object a line: the trace format `encgraph bench` and `encode` read."""
    with open(path, "w") as fh:
        for it in items:
            fh.write(json.dumps(it) + "\n")


def run_encgraph_bench(bundle, config, trace, report, name, request, extra=(), launcher=(),
                       env=None):
    """Runs `encgraph bench` on a trace with requests of `request` items, logs the tail of its
    output and its time, and returns the parsed JSON report. `launcher`: a command the encgraph
    command line follows (mpirun -np N ...); `env`: variables set for it on top of this
    process's. Raises RuntimeError when it fails."""
    cmd = [*launcher, os.path.join(bundle, "bin", "encgraph"), "bench", "--config", config,
           "--set", "workload.kind=\"trace\"", "--set", f"workload.trace=\"{trace}\"",
           "--set", f"workload.request_size={request}", "--report", report, *extra]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env=None if not env else {**os.environ, **env})
    log(proc.stdout[-3000:], proc.stderr[-3000:])
    if proc.returncode != 0:
        raise RuntimeError(f"encgraph bench failed ({proc.returncode}) on {name}")
    log(f"  encgraph {name}: {time.time() - t0:.0f} s including capture")
    with open(report) as fh:
        return json.load(fh)


def ncu_eager_profile(bundle, ncu, config, trace, request, out_csv, sets=()):
    """Runs `encgraph run` eagerly on a trace (requests of `request` items, no warm-up request)
    under Nsight Compute's gpu__time_duration, clocks left alone; keeps ncu's CSV in out_csv.
    Eager: no graph warm-up, so no GEMM tuning runs among the profiled kernels. Returns
    {(kernel name, grid, block): [launches, ns]} and the total ns, or raises RuntimeError."""
    cmd = [ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv",
           os.path.join(bundle, "bin", "encgraph"), "run", "--config", config,
           "--set", "runtime.use_graphs=false", "--set", 'workload.kind="trace"',
           "--set", f'workload.trace="{trace}"', "--set", f"workload.request_size={request}",
           "--set", "workload.warmup_requests=0"]
    for s in sets:
        cmd += ["--set", s]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    with open(out_csv, "w") as fh:
        fh.write(proc.stdout)
    if proc.returncode != 0:
        raise RuntimeError(f"ncu encgraph run failed ({proc.returncode}): "
                           f"{proc.stdout[-2000:]} {proc.stderr[-2000:]}")
    import collections
    import csv
    import io
    text = proc.stdout[proc.stdout.find('"ID"'):]
    groups = collections.defaultdict(lambda: [0, 0.0])
    total = 0.0
    scale = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}
    for row in csv.DictReader(io.StringIO(text)):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        ns = float(row["Metric Value"].replace(",", "")) * scale.get(row.get("Metric Unit", "ns"), 1)
        key = (row["Kernel Name"].split("(")[0][:60], row.get("Grid Size", ""),
               row.get("Block Size", ""))
        groups[key][0] += 1
        groups[key][1] += ns
        total += ns
    return groups, total


def kernel_table(groups, total, rows=45):
    """Lines of a per-kernel table, largest total first, with each group's share."""
    lines = [f"{'kernel':60} {'grid':>18} {'block':>12} {'n':>4} {'ms':>8} {'share':>6}"]
    for (name, grid, block), (n, ns) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:rows]:
        lines.append(f"{name:60} {grid:>18} {block:>12} {n:4d} {ns / 1e6:8.3f} "
                     f"{100 * ns / total:5.1f}%")
    return lines


def padded_efficiency(mode, per_path=False):
    """A bench mode's padded-token efficiency (None without graph batches); with per_path,
    "name 97.1%, ..." per path from its real and budget tokens ("name eager" for a path
    that ran no graph batch) when the report has paths."""
    eff = mode["padded_token_efficiency"] if mode["batches_graph"] else None
    paths = mode.get("paths") or mode.get("path_stats")
    if per_path and paths:
        parts = []
        for i, p in enumerate(paths):
            name = p.get("name", i)
            if p.get("batches_graph", 0) and p.get("budget_tokens", 0):
                parts.append(f"{name} {100 * p['real_tokens'] / p['budget_tokens']:.1f}%")
            elif p.get("batches_eager", 0):
                parts.append(f"{name} eager")
        if parts and any(p.get("batches_graph", 0) for p in paths):
            eff = ", ".join(parts)
    return eff


def parse_variant(text):
    """"LABEL:VAR=VALUE[,VAR=VALUE...]" -> (label, {VAR: VALUE}, [config settings]); a relative
    path value that exists is made absolute (encgraph runs from another folder). A VAR with a
    dot is a config key (plugin.config.mlp_kernel="cublaslt"), passed as `--set VAR=VALUE`.
    Assignments are split at commas, so a value cannot hold one (no TOML arrays)."""
    label, _, assignments = text.partition(":")
    env, sets = {}, []
    for a in filter(None, assignments.split(",")):
        key, _, value = a.partition("=")
        if "." in key:
            sets.append(f"{key}={value}")
            continue
        env[key] = os.path.abspath(value) if os.path.exists(value) else value
    if not label or not (env or sets):
        raise SystemExit(f"--variant wants LABEL:VAR=VALUE[,VAR=VALUE], got {text!r}")
    return label, env, sets


def run_encgraph_variant(bundle, config, trace, report_stem, name, request, variant=None,
                         extra=(), launcher=(), per_path=False):
    """encgraph_results of `encgraph bench` on a trace, its report at
    <report_stem>-<name>[-<variant label>].json; `variant`: (label, {variable: value}, [config
    settings]) from parse_variant, for a run under other environment variables and `--set`
    config values; None: the plain run, labelled "encgraph". per_path: padded efficiency per
    path (padded_efficiency)."""
    label, env, sets = variant or ("encgraph", None, [])
    tag = "" if variant is None else "-" + "".join(c if c.isalnum() else "_" for c in label)
    report = f"{report_stem}-{name}{tag}.json"
    extra = [*extra, *[a for s in sets for a in ("--set", s)]]
    return encgraph_results(
        run_encgraph_bench(bundle, config, trace, report, name, request, extra, launcher, env),
        per_path=per_path, chosen=True, label=label)


def encgraph_results(report, per_path=False, chosen=False, label="encgraph"):
    """{"<label> <mode>": results-table entry} from an `encgraph bench` report; `chosen` adds
    how many eager batches the runtime chose to the note."""
    out = {}
    for mode in report["results"]:
        note = f"{mode['batches_graph']} graph / {mode['batches_eager']} eager batches"
        if mode.get("batches_mixed"):
            note += f" / {mode['batches_mixed']} mixed"
        if chosen:
            note += f" ({mode['batches_eager_chosen']} chosen)"
        out[f"{label} {mode['mode']}"] = dict(
            seconds=mode["seconds"], p50=mode["latency_ms"]["p50"], p99=mode["latency_ms"]["p99"],
            efficiency=padded_efficiency(mode, per_path), items=mode["items"], note=note)
    return out


def run_encgraph_encode(bundle, config, trace, out_path, sets=()):
    """Runs `encgraph encode` on a trace into out_path (safetensors) with --set overrides and
    logs its time; raises CalledProcessError when it fails."""
    cmd = [os.path.join(bundle, "bin", "encgraph"), "encode", "--config", config,
           "--trace", trace, "-o", out_path]
    for s in sets:
        cmd += ["--set", s]
    t0 = time.time()
    subprocess.run(cmd, check=True)
    log(f"  encgraph {' '.join(sets) or 'graphs'}: {time.time() - t0:.1f} s")


# --- transformers references --------------------------------------------------------------

def set_attn_implementation(configs, attn="sdpa"):
    """Sets _attn_implementation on every config (some config classes guard the attribute)."""
    for c in configs:
        try:
            c._attn_implementation = attn
        except Exception:
            pass


def random_bf16_model(model_cls, cfg):
    """model_cls(cfg) built on the GPU in bf16, eval mode, every parameter N(0, 0.02^2)."""
    import torch
    with torch.device("cuda"):
        model = model_cls(cfg).to(torch.bfloat16).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    return model


def deepseek_ocr2_config(attn="sdpa"):
    """transformers' DeepseekOcr2Config with the released vision sizes (SAM ViT-B 768 x 12,
    window 14, global layers 2/5/8/11, neck 256, downsample [512, 896]; Qwen2-style encoder
    24 x 896, 14/2 heads, MLP 4864, rope theta 1e6; projector to 1280) and a one-layer
    language model that get_image_features never runs."""
    from transformers.models.deepseek_ocr2.configuration_deepseek_ocr2 import DeepseekOcr2Config
    vision = dict(
        sam_config=dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        window_size=14, global_attn_indexes=[2, 5, 8, 11], output_channels=256,
                        downsample_channels=[512, 896]),
        encoder_config=dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                            num_attention_heads=14, num_key_value_heads=2, vocab_size=16,
                            max_position_embeddings=8192,
                            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}))
    text = dict(hidden_size=1280, num_hidden_layers=1, num_attention_heads=10,
                intermediate_size=256, vocab_size=256, n_routed_experts=2, n_shared_experts=1,
                moe_intermediate_size=64, num_experts_per_tok=1, mlp_layer_types=["dense"])
    cfg = DeepseekOcr2Config(vision_config=vision, text_config=text)
    set_attn_implementation((cfg, cfg.vision_config, cfg.vision_config.sam_config,
                             cfg.vision_config.encoder_config, cfg.text_config), attn)
    return cfg


# --- comparisons --------------------------------------------------------------------------

def write_png(path, rgb):
    """rgb: [H, W, 3] uint8 tensor -> an 8-bit RGB PNG (standard library only)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].contiguous().numpy().tobytes() for y in range(h))

    def chunk(kind, data):
        c = struct.pack(">I", len(data)) + kind + data
        return c + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as fh:
        fh.write(b"\x89PNG\r\n\x1a\n")
        fh.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)))
        fh.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        fh.write(chunk(b"IEND", b""))


def rel(a, b):
    """||a - b|| / ||b|| in float64; NaN when either is missing or the shapes differ."""
    if a is None or b is None or a.shape != b.shape:
        return float("nan")
    return float((a.double() - b.double()).norm() / b.double().norm())


def verdict(ok, informational):
    """The comparison's last word: PASS, or FAIL (informational: 'over target')."""
    return "PASS" if ok else ("over target (informational)" if informational else "FAIL")


def exit_code(ok, informational):
    """0 when the comparison passed or is informational, else 1."""
    return 0 if ok or informational else 1


def write_table(out_dir, name, lines):
    """Joins the table lines, logs them after a blank line and writes out_dir/name (the folder
    made if missing); returns the table text."""
    table = "\n".join(lines)
    log("\n" + table)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, name), "w") as fh:
        fh.write(table + "\n")
    return table


# --- InternVL (bench.py --model internvl, compare.py --model internvl) ---------------------
# InternVL's image encoder for bench.py --model internvl and compare.py --model internvl:
# InternViT-300M-448px (1024 x 24, 16 heads, MLP 4096, 448-pixel tiles of 14-pixel patches),
# the 0.5 pixel shuffle and the projector to InternVL3-1B's 896-wide language model.
#
# Workloads (bench.py): mixed (128 images, sides from the multiples of 28 in 224..1344,
# seed 20261206; GotOcr2's tiling gives 1 to 13 tiles each), document (32 pages of
# 2200x1650, a 3:4 scan: the maximum 3x4 tiles and the thumbnail each), 448 (256 one-tile
# images). Requests of 8 images. FLOPs count each tile's products and attention
# (1025 rows a tile) and the projector's 256 rows; tokens/s are the 256 image tokens a
# tile. transformers runs InternVLModel.get_image_features on the processor's tile
# stack (random bf16 pixels of the same shape).
#
# torch and transformers are imported inside functions, so --help works without them.

D, LAYERS, HEADS, INTER, TILE, PATCH, TEXT = 1024, 24, 16, 4096, 448, 14, 896
ROWS_PER_TILE = (TILE // PATCH // 2) ** 2  # 256
MAX_PATCHES = 12

INTERNVL_CONFIG = """# Written by scripts/gpu/bench.py --model internvl: InternVL's image encoder
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


def internvl_grid(h, w, tile=TILE, lo=1, hi=MAX_PATCHES):
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


def internvl_tiles(h, w):
    """Tiles of one image: the grid's, plus the thumbnail when there are several."""
    c, r = internvl_grid(h, w)
    return 1 if c * r == 1 else c * r + 1


def internvl_transformers_config(attn="sdpa", layers=LAYERS):
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


def internvl_image_features(model, pixel_values):
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
        return internvl_tiles(item["height"], item["width"]) * self.tile_flops()

    @staticmethod
    def output_tokens(item):
        return internvl_tiles(item["height"], item["width"]) * ROWS_PER_TILE

    @staticmethod
    def transformers_model(attn):
        from transformers import InternVLModel
        return random_bf16_model(InternVLModel, internvl_transformers_config(attn))

    def run_transformers(self, model, items, request):
        """One get_image_features per request on its tile stack, the first request once as
        warm-up."""
        import torch
        gen = torch.Generator().manual_seed(1)
        requests = []
        for r in range(0, len(items), request):
            n = sum(internvl_tiles(it["height"], it["width"]) for it in items[r:r + request])
            requests.append(torch.randn(n, 3, TILE, TILE, generator=gen).to(torch.bfloat16)
                            .pin_memory())

        def forward(pv):
            internvl_image_features(model, pv.to("cuda", non_blocking=True))

        return latency_result(time_requests(requests, forward), len(items))


INTERNVL = InternVLEncoder()


# --- LLaVA-OneVision (bench.py --model llava_onevision, compare.py --model llava_onevision) --
# LLaVA-OneVision's image and video encoder at llava-onevision-qwen2-0.5b-ov's sizes: the
# SigLIP so400m tower cut to 26 layers (1152, 16 heads, MLP 4304, 384-pixel tiles of
# 14-pixel patches: 27 x 27 = 729 rows a tile, hidden_states[-1]), the projector to 896,
# anyres_max_9 packing with image_newline; a video frame is one tile pooled to 14 x 14.
#
# Workloads (bench.py): mixed (256 images, sides from the multiples of 28 in 224..1344,
# seed 20261206; 2 to 37 tiles each with the released pinpoints), 384 (256 images of
# 384x384: 2 tiles each), video (32 videos of 8 frames of 384x384). Requests of 8 items.
# FLOPs count each tile's products and attention (729 rows) and the projector's; tokens/s
# are the rows the language model receives. transformers runs get_image_features (its
# packing included) on the processor's tile stack, get_video_features plus the newline on
# the frames (random bf16 pixels of the same shapes).

LLAVA_D, LLAVA_LAYERS, LLAVA_HEADS, LLAVA_INTER = 1152, 26, 16, 4304
LLAVA_TILE, LLAVA_PATCH, LLAVA_TEXT, LLAVA_MAX_PATCHES = 384, 14, 896, 9
LLAVA_GRID = LLAVA_TILE // LLAVA_PATCH  # 27
# The released image_grid_pinpoints: [height, width], 1..6 tiles a side, height outer.
LLAVA_PINPOINTS = [[LLAVA_TILE * r, LLAVA_TILE * c] for r in range(1, 7) for c in range(1, 7)]
# llava-hf/llava-onevision-qwen2-0.5b-ov-hf's preprocessor_config.json.
LLAVA_PREPROCESSOR = dict(
    do_convert_rgb=True, do_normalize=True, do_pad=True, do_rescale=True, do_resize=True,
    image_grid_pinpoints=LLAVA_PINPOINTS, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
    image_processor_type="LlavaOnevisionImageProcessor", processor_class="LlavaOnevisionProcessor",
    resample=3, rescale_factor=1 / 255, size={"height": LLAVA_TILE, "width": LLAVA_TILE})

LLAVA_CONFIG = """# Written by scripts/gpu/bench.py --model llava_onevision: LLaVA-OneVision's encoder
# (SigLIP so400m 26 layers, projector to 896, anyres_max_9 packing), bf16, random
# weights; budgets in tiles (729 tower rows a tile).
[runtime]
device = "cuda"
log_level = "warn"
plugin_dirs = ["{plugins}"]

[plugin]
name = "llava_onevision"
weights = "random"

[plugin.config]
text_hidden_size = 896
max_budget_tiles = 128

[budgets]
# an image is 2 to 37 tiles, a video one a frame; requests of 8 items
token_budgets = [8, 12, 16, 24, 32, 48, 64, 96, 128]
max_items_per_batch = 8

[workload]
kind = "synthetic"
count = 8
sizes = [[384, 384]]
request_size = 8
warmup_requests = 1
"""


def llava_best_resolution(h, w, pinpoints=LLAVA_PINPOINTS):
    """transformers' select_best_resolution: the [height, width] pinpoint keeping the most of
    the image's pixels, ties to the least waste."""
    best, best_eff, best_waste = None, 0, float("inf")
    for ph, pw in pinpoints:
        scale = min(pw / w, ph / h)
        eff = min(int(w * scale) * int(h * scale), w * h)
        waste = pw * ph - eff
        if eff > best_eff or (eff == best_eff and waste < best_waste):
            best, best_eff, best_waste = (ph, pw), eff, waste
    return best


def llava_tiles(item):
    """Tiles through the tower: an image's grid plus its base tile, a video's frames."""
    if item.get("modality") == "video":
        return item["frames"]
    ph, pw = llava_best_resolution(item["height"], item["width"])
    return (ph // LLAVA_TILE) * (pw // LLAVA_TILE) + 1


def llava_rows(item):
    """The rows the language model receives (pack_image_features, or a video's pooled frames
    and its newline): docs/models/llava_onevision.md's arithmetic."""
    g = LLAVA_GRID
    if item.get("modality") == "video":
        return item["frames"] * ((g + 1) // 2) ** 2 + 1
    h, w = item["height"], item["width"]
    ph, pw = llava_best_resolution(h, w)
    cur_h, cur_w = ph // LLAVA_TILE * g, pw // LLAVA_TILE * g
    if w / h > cur_w / cur_h:  # unpad_image: rows cropped
        cur_h -= 2 * ((cur_h - int(round(h * (cur_w / w), 7))) // 2)
    else:
        cur_w -= 2 * ((cur_w - int(round(w * (cur_h / h), 7))) // 2)
    ratio = math.sqrt(cur_h * cur_w / (LLAVA_MAX_PATCHES * g * g))
    if ratio > 1.1:
        cur_h, cur_w = int(cur_h // ratio), int(cur_w // ratio)
    return g * g + cur_h * (cur_w + 1)


def llava_transformers_config(attn="sdpa", layers=LLAVA_LAYERS):
    """LlavaOnevisionConfig at llava-onevision-qwen2-0.5b-ov's vision sizes with a one-layer
    Qwen2 text model of width 896 (never run by get_image_features / get_video_features)."""
    from transformers import LlavaOnevisionConfig
    vision = dict(model_type="siglip_vision_model", hidden_size=LLAVA_D,
                  num_hidden_layers=layers, num_attention_heads=LLAVA_HEADS,
                  intermediate_size=LLAVA_INTER, image_size=LLAVA_TILE, patch_size=LLAVA_PATCH,
                  hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6, vision_use_head=False)
    text = dict(model_type="qwen2", hidden_size=LLAVA_TEXT, num_hidden_layers=1,
                num_attention_heads=14, num_key_value_heads=2, intermediate_size=256,
                vocab_size=256)
    cfg = LlavaOnevisionConfig(vision_config=vision, text_config=text, vision_feature_layer=-1,
                               vision_feature_select_strategy="full",
                               vision_aspect_ratio=f"anyres_max_{LLAVA_MAX_PATCHES}",
                               image_grid_pinpoints=LLAVA_PINPOINTS, projector_hidden_act="gelu",
                               multimodal_projector_bias=True)
    set_attn_implementation((cfg, cfg.vision_config, cfg.text_config), attn)
    return cfg


def _feature_kwargs(method, **wanted):
    """The keyword arguments `method` declares (transformers' signatures move between
    versions; an unknown one would reach the vision tower)."""
    import inspect
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return wanted
    if any(p.kind == p.VAR_KEYWORD for p in params.values()) and not any(k in params for k in wanted):
        return wanted  # a bare **kwargs wrapper: nothing to go by
    return {k: v for k, v in wanted.items() if k in params}


def _call_features(method, **kwargs):
    """method(..., return_dict=True) as LlavaOnevisionModel.forward calls it (transformers 5:
    the output object with pooler_output); a version without the keyword: without it."""
    try:
        return method(**kwargs, return_dict=True)
    except TypeError as e:
        if "return_dict" not in str(e):
            raise
        return method(**kwargs)


def llava_image_features(model, pixel_values, image_sizes):
    """The language model's rows for each image, as LlavaOnevisionModel.forward gets them:
    get_image_features' pooler_output (pack_image_features with image_newline applied
    inside it, transformers 5), or, from a version that returns the unpacked per-image
    features, model.pack_image_features on them. A list of [rows, text] tensors."""
    import torch
    kwargs = _feature_kwargs(model.get_image_features, vision_feature_layer=-1,
                             vision_feature_select_strategy="full",
                             vision_aspect_ratio=f"anyres_max_{LLAVA_MAX_PATCHES}")
    out = _call_features(model.get_image_features, pixel_values=pixel_values,
                         image_sizes=image_sizes, **kwargs)
    feats = out.pooler_output if getattr(out, "pooler_output", None) is not None else out
    if torch.is_tensor(feats):  # one image's rows, or one tensor of split-able tiles
        feats = [feats] if feats.dim() == 2 else list(torch.split(feats, 1))
    elif len(feats) == 2 and torch.is_tensor(feats[1]) and feats[1].dim() == 1 and \
            feats[1].dtype == torch.long:  # (packed features, feature_lens)
        feats = _split_packed(*feats)
    feats = list(feats)
    if feats and feats[0].dim() == 3:  # unpacked [tiles, 729, text]: pack as forward does
        pack = _feature_kwargs(model.pack_image_features, image_newline=model.image_newline,
                               vision_aspect_ratio=f"anyres_max_{LLAVA_MAX_PATCHES}",
                               vision_feature_select_strategy="full")
        feats = _split_packed(*model.pack_image_features(feats, image_sizes, **pack)[:2])
    return feats


def _split_packed(packed, lens):
    """pack_image_features' (features, feature_lens): a list of [rows, text] per image
    whether the features come as a list or concatenated."""
    import torch
    if torch.is_tensor(packed):
        return list(torch.split(packed, [int(n) for n in lens]))
    return list(packed)


def llava_video_features(model, pixel_values_videos):
    """Each video's rows as LlavaOnevisionModel.forward gets them: get_video_features'
    pooled frames, then one image_newline per video. A list of [rows, text] tensors."""
    import torch
    kwargs = _feature_kwargs(model.get_video_features, vision_feature_layer=-1,
                             vision_feature_select_strategy="full")
    out = _call_features(model.get_video_features, pixel_values=pixel_values_videos, **kwargs)
    feats = out.pooler_output if getattr(out, "pooler_output", None) is not None else out
    if isinstance(feats, (list, tuple)):
        feats = torch.stack([f.reshape(-1, f.shape[-1]) for f in feats])
    feats = feats.reshape(pixel_values_videos.shape[0], -1, feats.shape[-1])
    newline = model.image_newline[None, None, :].repeat(feats.shape[0], 1, 1).to(feats)
    return list(torch.cat((feats, newline), dim=1))


class LlavaOnevisionEncoder:
    """Workloads, FLOPs and the transformers reference of bench.py's spec."""

    @staticmethod
    def workloads():
        rnd = random.Random(20261206)
        sides = list(range(224, 1345, 28))
        return {
            "mixed": [dict(modality="image", height=rnd.choice(sides), width=rnd.choice(sides))
                      for _ in range(256)],
            "384": [dict(modality="image", height=LLAVA_TILE, width=LLAVA_TILE)] * 256,
            "video": [dict(modality="video", frames=8, height=LLAVA_TILE, width=LLAVA_TILE)] * 32,
        }

    @staticmethod
    def tile_flops():
        n, d, inter, text = LLAVA_GRID ** 2, LLAVA_D, LLAVA_INTER, LLAVA_TEXT
        f = 2 * n * 3 * LLAVA_PATCH * LLAVA_PATCH * d
        f += LLAVA_LAYERS * (2 * n * (4 * d * d + 2 * d * inter) + 4 * n * n * d)
        return f + 2 * n * (d * text + text * text)

    def item_flops(self, item):
        return llava_tiles(item) * self.tile_flops()

    @staticmethod
    def output_tokens(item):
        return llava_rows(item)

    @staticmethod
    def transformers_model(attn):
        from transformers import LlavaOnevisionModel
        return random_bf16_model(LlavaOnevisionModel, llava_transformers_config(attn))

    def run_transformers(self, model, items, request):
        """One get_image_features per request of images on their tile stack (with the
        images' sizes, so the packing runs as it would), one get_video_features per request
        of videos; the first request once more as warm-up."""
        import torch
        gen = torch.Generator().manual_seed(1)
        requests = []
        for r in range(0, len(items), request):
            chunk = items[r:r + request]
            images = [it for it in chunk if it.get("modality") != "video"]
            videos = [it for it in chunk if it.get("modality") == "video"]
            pv = sizes = pvv = None
            if images:
                n = sum(llava_tiles(it) for it in images)
                pv = torch.randn(n, 3, LLAVA_TILE, LLAVA_TILE, generator=gen).to(
                    torch.bfloat16).pin_memory()
                sizes = torch.tensor([[it["height"], it["width"]] for it in images])
            if videos:
                pvv = torch.randn(len(videos), videos[0]["frames"], 3, LLAVA_TILE, LLAVA_TILE,
                                  generator=gen).to(torch.bfloat16).pin_memory()
            requests.append((pv, sizes, pvv))

        def forward(rq):
            pv, sizes, pvv = rq
            if pv is not None:
                llava_image_features(model, pv.to("cuda", non_blocking=True), sizes.to("cuda"))
            if pvv is not None:
                llava_video_features(model, pvv.to("cuda", non_blocking=True))

        return latency_result(time_requests(requests, forward), len(items))


LLAVA_ONEVISION = LlavaOnevisionEncoder()
