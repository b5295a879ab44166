"""Hostile plugin-side inputs (classes 3 and 6): weights files whose header
lies about them, NaN/Inf weights, special files as plugin.weights,
config_json or a shard index, and size keys near 2^63. Every case must exit
with its code and a message naming the key, file or tensor, and damage
nothing: runs ask for a report, which must not appear when the run fails.

The models are tiny: a Qwen2.5-VL tower of one block (16 wide) and a SigLIP
tower of one layer, both f32 on the CPU, and the toy plugin."""
import json
import os
import re
import struct

from hostile_support import ENV, Case, safetensors, toml_str, toy_config

Q = re.escape

# ---- the tiny towers and their checkpoints ----

QWEN = dict(depth=1, hidden=16, heads=4, inter=16, out=8, patch=14, tpatch=2)
SIGLIP = dict(hidden=16, heads=4, inter=16, layers=1, image=16, patch=8)


def qwen_config(plugin="", extra=""):
    q = QWEN
    return (f"[runtime]\ndevice = \"cpu\"\nlog_level = \"warn\"\nprefer_faster_path = false\n"
            f"plugin_dirs = [{toml_str(ENV.plugin_dir)}]\n"
            f"[plugin]\nname = \"qwen2_5_vl\"\nweights = \"random\"\n"
            f"[plugin.config]\ndepth = {q['depth']}\nhidden_size = {q['hidden']}\n"
            f"num_heads = {q['heads']}\nintermediate_size = {q['inter']}\n"
            f"out_hidden_size = {q['out']}\nfullatt_block_indexes = [0]\ndtype = \"f32\"\n"
            f"max_pixels = 50176\nmax_frames_per_video = 4\n{plugin}\n"
            f"[budgets]\ntoken_budgets = [16, 64]\nmax_items_per_batch = 4\n"
            f"[workload]\nkind = \"synthetic\"\ncount = 2\nseed = 1\nmin_side = 56\n"
            f"max_side = 112\nside_multiple = 28\nvideo_fraction = 0.0\nrequest_size = 2\n"
            f"warmup_requests = 0\n{extra}")


def siglip_config(plugin=""):
    s = SIGLIP
    return (f"[runtime]\ndevice = \"cpu\"\nlog_level = \"warn\"\nprefer_faster_path = false\n"
            f"plugin_dirs = [{toml_str(ENV.plugin_dir)}]\n"
            f"[plugin]\nname = \"siglip\"\nweights = \"random\"\n"
            f"[plugin.config]\nhidden_size = {s['hidden']}\nintermediate_size = {s['inter']}\n"
            f"num_hidden_layers = {s['layers']}\nnum_attention_heads = {s['heads']}\n"
            f"image_size = {s['image']}\npatch_size = {s['patch']}\nmax_budget_images = 4\n"
            f"dtype = \"f32\"\n{plugin}\n"
            f"[budgets]\nvideo = false\n"
            f"[workload]\nkind = \"synthetic\"\ncount = 2\nseed = 1\nmin_side = 16\n"
            f"max_side = 32\nside_multiple = 8\nvideo_fraction = 0.0\nrequest_size = 2\n"
            f"warmup_requests = 0\n")


def qwen_shapes(hidden=None):
    q = dict(QWEN)
    if hidden:
        q["hidden"] = hidden
    d, inter, out, m = q["hidden"], q["inter"], q["out"], 4 * q["hidden"]
    shapes = {"visual.patch_embed.proj.weight": [d, 3, q["tpatch"], q["patch"], q["patch"]]}
    for i in range(q["depth"]):
        p = f"visual.blocks.{i}."
        shapes.update({p + "norm1.weight": [d], p + "norm2.weight": [d],
                       p + "attn.qkv.weight": [3 * d, d], p + "attn.qkv.bias": [3 * d],
                       p + "attn.proj.weight": [d, d], p + "attn.proj.bias": [d],
                       p + "mlp.gate_proj.weight": [inter, d], p + "mlp.gate_proj.bias": [inter],
                       p + "mlp.up_proj.weight": [inter, d], p + "mlp.up_proj.bias": [inter],
                       p + "mlp.down_proj.weight": [d, inter], p + "mlp.down_proj.bias": [d]})
    shapes.update({"visual.merger.ln_q.weight": [d], "visual.merger.mlp.0.weight": [m, m],
                   "visual.merger.mlp.0.bias": [m], "visual.merger.mlp.2.weight": [out, m],
                   "visual.merger.mlp.2.bias": [out]})
    return shapes


def siglip_shapes():
    s = SIGLIP
    d, inter, tokens = s["hidden"], s["inter"], (s["image"] // s["patch"]) ** 2
    p = "vision_model."
    shapes = {p + "embeddings.patch_embedding.weight": [d, 3, s["patch"], s["patch"]],
              p + "embeddings.patch_embedding.bias": [d],
              p + "embeddings.position_embedding.weight": [tokens, d],
              p + "post_layernorm.weight": [d], p + "post_layernorm.bias": [d]}
    for i in range(s["layers"]):
        layer = p + f"encoder.layers.{i}."
        for n in ("layer_norm1", "layer_norm2"):
            shapes[layer + n + ".weight"] = [d]
            shapes[layer + n + ".bias"] = [d]
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            shapes[layer + "self_attn." + n + ".weight"] = [d, d]
            shapes[layer + "self_attn." + n + ".bias"] = [d]
        shapes[layer + "mlp.fc1.weight"] = [inter, d]
        shapes[layer + "mlp.fc1.bias"] = [inter]
        shapes[layer + "mlp.fc2.weight"] = [d, inter]
        shapes[layer + "mlp.fc2.bias"] = [d]
    return shapes


def count(shape):
    n = 1
    for x in shape:
        n *= x
    return n


def values(name, n):
    """Small deterministic weights: norms near 1, the rest near 0."""
    base = 1.0 if "norm" in name or "ln_q" in name else 0.0
    return [base + 0.02 * (((i * 7 + len(name)) % 13) - 6) for i in range(n)]


def encode(dtype, vals):
    if dtype == "F32":
        return struct.pack("<%df" % len(vals), *vals)
    if dtype == "F16":
        return struct.pack("<%de" % len(vals), *vals)
    # BF16: the high half of the f32 bits (these values need no rounding to stay finite)
    words = struct.unpack("<%dI" % len(vals), struct.pack("<%df" % len(vals), *vals))
    return struct.pack("<%dH" % len(vals), *[w >> 16 for w in words])


def checkpoint(shapes, poison=None, dtype="F32", drop=()):
    """A safetensors checkpoint of `shapes`; poison = (tensor, index, value)."""
    tensors = {}
    for name, shape in shapes.items():
        if name in drop:
            continue
        v = values(name, count(shape))
        if poison and poison[0] == name:
            v[poison[1]] = poison[2]
        tensors[name] = (dtype, shape, encode(dtype, v))
    return safetensors(tensors)


QWEN_QKV = "visual.blocks.0.attn.qkv.weight"
SIGLIP_POS = "vision_model.embeddings.position_embedding.weight"


def raw(header, data=b"", length=None):
    """A file of an 8-byte header length, the header and the data, as given."""
    h = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(h) if length is None else length) + h + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def header_of(entries):
    return json.dumps(entries)


# ---- how a case runs ----

def run_qwen(*sets, config="c.toml"):
    """`encgraph run` on the tiny Qwen tower, a report asked for so that a run
    getting past the error shows as a file left behind."""
    argv = ["run", "-c", config, "--set", "output.report=r.json"]
    for s in sets:
        argv += ["--set", s]
    return argv


run_siglip = run_qwen
run_toy = run_qwen


def mkfifo(name):
    return lambda ctx: os.mkfifo(ctx.path(name))


def mkdir(name):
    return lambda ctx: os.makedirs(ctx.path(name), exist_ok=True)


def sparse(name, size):
    def make(ctx):
        with open(ctx.path(name), "wb") as f:
            f.truncate(size)
    return make


def weights_case(name, data, message, sets=(), exit=2, config=None, outputs=(), **kw):
    """plugin.weights = w.safetensors holding `data`."""
    return Case(name="weights/" + name,
                files={"c.toml": config or qwen_config(), "w.safetensors": data},
                args=run_qwen("plugin.weights=w.safetensors", *sets), exit=exit,
                message=message, outputs=list(outputs), **kw)


def header_case(name, header, message, data=b"", length=None):
    return weights_case(name, raw(header, data, length), message)


def config_json_case(name, message, text=None, setup=None, path="config.json", plugin="qwen"):
    files = {"c.toml": qwen_config() if plugin == "qwen" else siglip_config()}
    if text is not None:
        files["config.json"] = text
    return Case(name=f"config_json/{plugin}-{name}", files=files, setup=setup,
                args=run_qwen("plugin.config.config_json=" + path), exit=2,
                message=message, timeout=30)


def set_case(name, sets, message, config=None, exit=2):
    return Case(name="numbers/" + name, files={"c.toml": config or qwen_config()},
                args=run_qwen(*sets), exit=exit, message=message)


def index_case(name, index_text, message, setup=None, files=None):
    f = {"c.toml": qwen_config(), "ckpt/model.safetensors.index.json": index_text}
    f.update(files or {})
    return Case(name="index/" + name, files=f, setup=setup,
                args=run_qwen("plugin.weights=ckpt"), exit=2, message=message, timeout=30)


F8 = b"A" * 8


def good_qwen(**kw):
    return checkpoint(qwen_shapes(), **kw)


TWO_TENSORS = {"a": entry("F32", [2], 0, 8), "b": entry("F32", [1], 8, 12)}
TWELVE = b"\x00" * 12
POSITION = r"line \d+, column \d+"
WEIGHTS_FILE = Q("plugin.weights file 'w.safetensors'")

CASES = [
    # ---- sanity: the tiny checkpoints are good ----
    weights_case("good-qwen-checkpoint", good_qwen(), r"throughput", exit=0, outputs=["r.json"]),
    Case(name="weights/good-siglip-checkpoint",
         files={"c.toml": siglip_config(), "w.safetensors": checkpoint(siglip_shapes())},
         args=run_siglip("plugin.weights=w.safetensors"), exit=0, message=r"throughput",
         outputs=["r.json"]),

    # ---- class 6: NaN / Inf weights, checked at load ----
    weights_case("nan-f32", good_qwen(poison=(QWEN_QKV, 37, float("nan"))),
                 [Q(f"tensor '{QWEN_QKV}'"), Q("'w.safetensors'"), r"holds NaN at element 37 of 768",
                  Q("check_finite = false")]),
    weights_case("inf-bf16", good_qwen(dtype="BF16", poison=(QWEN_QKV, 0, float("inf"))),
                 [Q(f"tensor '{QWEN_QKV}'"), r"holds \+Inf at element 0 "]),
    weights_case("neg-inf-f16", good_qwen(dtype="F16", poison=("visual.merger.mlp.2.bias", 7,
                                                                 float("-inf"))),
                 [Q("tensor 'visual.merger.mlp.2.bias'"), r"holds -Inf at element 7 of 8"]),
    weights_case("nan-last-element-of-patch-embed",
                 good_qwen(poison=("visual.patch_embed.proj.weight", 18815, float("nan"))),
                 r"holds NaN at element 18815 of 18816"),
    weights_case("nan-with-check-finite-false", good_qwen(poison=(QWEN_QKV, 37, float("nan"))),
                 r"throughput", sets=["plugin.config.check_finite=false"], exit=0,
                 outputs=["r.json"]),
    weights_case("check-finite-not-a-boolean", good_qwen(), r"check_finite.*'maybe'.*boolean",
                 sets=["plugin.config.check_finite=maybe"]),
    Case(name="weights/siglip-nan-position-embedding",
         files={"c.toml": siglip_config(),
                "w.safetensors": checkpoint(siglip_shapes(), poison=(SIGLIP_POS, 5, float("nan")))},
         args=run_siglip("plugin.weights=w.safetensors"), exit=2,
         message=[Q(f"tensor '{SIGLIP_POS}'"), r"holds NaN at element 5 of 64"]),

    # ---- class 6: safetensors headers that lie ----
    header_case("overlapping-offsets",
                header_of({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}),
                [WEIGHTS_FILE, r"tensor 'b' \(bytes \[4, 12\).*overlaps tensor 'a'"], TWELVE),
    header_case("same-offsets-twice",
                header_of({"a": entry("F32", [3], 0, 12), "b": entry("F32", [3], 0, 12)}),
                r"overlaps tensor", TWELVE),
    header_case("offsets-descending", header_of({"a": entry("F32", [1], 8, 4)}),
                r"tensor 'a'.*not an ascending pair", TWELVE),
    header_case("hole-in-data", header_of({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}),
                r"bytes \[4, 8\) of the data section belong to no tensor", TWELVE),
    header_case("bytes-after-last-tensor", header_of({"a": entry("F32", [2], 0, 8)}),
                r"4 bytes after the last tensor", TWELVE),
    header_case("offset-beyond-file", header_of({"a": entry("F32", [2], 0, 8),
                                                 "b": entry("F32", [1024], 8, 4104)}),
                r"tensor 'b' needs bytes \[8, 4104\).*holds only 12.*truncated", TWELVE),
    weights_case("truncated-checkpoint", good_qwen()[:-10], r"needs bytes .*truncated file"),
    header_case("header-length-2^63", "{}", r"header length 9223372036854775808 is over the format's cap",
                length=1 << 63),
    header_case("header-length-past-end", "{}", r"header length 4096 runs past the file's 10 bytes",
                length=4096),
    header_case("header-is-text", "hello world", r"the header is not a JSON object"),
    header_case("header-is-array", "[1, 2, 3]", r"the header is not a JSON object"),
    header_case("header-truncated-json", '{"a": {"dtype": "F32", "shape": [2', r"invalid JSON at " + POSITION),
    header_case("header-trailing-garbage", header_of(TWO_TENSORS) + "}}", r"trailing characters", TWELVE),
    header_case("shape-1e300", header_of({"a": {"dtype": "F32", "shape": [1e300], "data_offsets": [0, 8]}}),
                r"tensor 'a' shape entry must be an integer within 64 bits, got 1e\+?300", F8),
    header_case("shape-fraction", '{"a": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}}',
                r"must be an integer.*2\.5", F8),
    header_case("shape-negative", header_of({"a": entry("F32", [-2], 0, 8)}), r"negative extent -2", F8),
    header_case("shape-product-overflow", header_of({"a": entry("F32", [1 << 40, 1 << 40], 0, 8)}),
                r"tensor 'a'.*more elements than 64 bits", F8),
    header_case("shape-bytes-overflow", header_of({"a": entry("F32", [1 << 62], 0, 8)}),
                r"needs more bytes than 64 bits", F8),
    header_case("shape-span-mismatch", header_of({"a": entry("F32", [3], 0, 8)}),
                r"span 8 bytes, but shape \[3\] of F32 needs 12", F8),
    header_case("offset-1e300", '{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 1e300]}}',
                r"data_offsets\[1\] must be an integer", F8),
    header_case("offset-beyond-int64", '{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 18446744073709551624]}}',
                r"must be an integer within 64 bits", F8),
    header_case("unknown-dtype", header_of({"a": entry("F12", [2], 0, 8)}), r"unknown dtype 'F12'", F8),
    weights_case("integer-dtype-weight", good_qwen().replace(
        b'"' + QWEN_QKV.encode() + b'": {"dtype": "F32"', b'"' + QWEN_QKV.encode() + b'": {"dtype": "I32"'),
        [Q(f"tensor '{QWEN_QKV}'"), r"has dtype I32; weights must be F32, BF16 or F16"]),
    header_case("duplicate-tensor-name", '{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
                '"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}', r'key "a" twice', F8),
    header_case("metadata-not-object", header_of({"__metadata__": [1], **{"a": entry("F32", [2], 0, 8)}}),
                r"__metadata__ must be an object", F8),
    header_case("metadata-value-not-string", header_of({"__metadata__": {"n": 3}, "a": entry("F32", [2], 0, 8)}),
                r"__metadata__ entry 'n' is not a string", F8),
    header_case("deep-nesting", '{"__metadata__": ' + "[" * 200000 + "]" * 200000 + "}",
                r"nested deeper than 64 levels"),
    header_case("invalid-utf8-name", b'{"a\xff": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}',
                r"invalid UTF-8", F8),
    header_case("entry-not-object", '{"a": 5}', r"tensor 'a': its header entry is not an object"),
    weights_case("empty-file", b"", r"is 0 bytes long: too short"),
    weights_case("missing-tensor", good_qwen(drop=("visual.merger.mlp.0.bias",)),
                 r"tensor 'visual\.merger\.mlp\.0\.bias' is missing from plugin\.weights file 'w\.safetensors'"),
    weights_case("checkpoint-of-another-width", checkpoint(qwen_shapes(hidden=32)),
                 r"has shape \[32, 3, 2, 14, 14\], expected \[16, 3, 2, 14, 14\]"),

    # ---- class 3: what plugin.weights names must be a regular file ----
    Case(name="weights/fifo", files={"c.toml": qwen_config()}, setup=mkfifo("w.safetensors"),
         args=run_qwen("plugin.weights=w.safetensors"), exit=2, timeout=30,
         message=[r"plugin\.weights", Q("'w.safetensors'"), r"FIFO"]),
    Case(name="weights/dev-zero", files={"c.toml": qwen_config()},
         args=run_qwen("plugin.weights=/dev/zero"), exit=2, timeout=30,
         message=[r"plugin\.weights", Q("/dev/zero"), r"character device"]),
    Case(name="weights/empty-directory", files={"c.toml": qwen_config()}, setup=mkdir("ckpt"),
         args=run_qwen("plugin.weights=ckpt"), exit=2,
         message=r"plugin\.weights 'ckpt' is a directory with no model\.safetensors\.index\.json"),
    Case(name="weights/directory-with-fifo-checkpoint", files={"c.toml": qwen_config()},
         setup=lambda ctx: (os.mkdir(ctx.path("ckpt")), os.mkfifo(ctx.path("ckpt/model.safetensors"))),
         args=run_qwen("plugin.weights=ckpt"), exit=2, timeout=30,
         message=[Q("ckpt/model.safetensors"), r"FIFO"]),
    Case(name="weights/missing-file", files={"c.toml": qwen_config()},
         args=run_qwen("plugin.weights=nope.safetensors"), exit=2,
         message=[r"plugin\.weights", Q("nope.safetensors"), r"(does not exist|No such file)"]),
    Case(name="weights/siglip-fifo", files={"c.toml": siglip_config()}, setup=mkfifo("w.safetensors"),
         args=run_siglip("plugin.weights=w.safetensors"), exit=2, timeout=30,
         message=[r"plugin\.weights", r"FIFO"]),
    Case(name="weights/check-config-fifo", files={"c.toml": qwen_config()},
         setup=mkfifo("w.safetensors"),
         args=["check-config", "c.toml", "--set", "plugin.weights=\"w.safetensors\""], exit=2,
         timeout=30, message=[r"plugin\.weights", Q("'w.safetensors'"), r"neither a file nor a folder"]),
    Case(name="weights/toy-fifo", files={"c.toml": toy_config()}, setup=mkfifo("w.safetensors"),
         args=run_toy("plugin.weights=w.safetensors"), exit=2, timeout=30,
         message=r"(toy plugin has no weights|FIFO)"),

    # ---- sharded checkpoints: the index and its shards ----
    index_case("shard-escapes-directory", '{"weight_map": {"%s": "../w.safetensors"}}' % QWEN_QKV,
               r"names shard '\.\./w\.safetensors', which leaves the checkpoint directory"),
    index_case("shard-absolute-dev-zero", '{"weight_map": {"%s": "/dev/zero"}}' % QWEN_QKV,
               r"names shard '/dev/zero', which is an absolute path"),
    index_case("not-an-object", "[]", r"plugin\.weights index 'ckpt/model\.safetensors\.index\.json' is not a JSON object"),
    index_case("no-weight-map", '{"metadata": {}}', r"has no \"weight_map\" object"),
    index_case("shard-not-a-string", '{"weight_map": {"a": 1e300}}', r"weight_map entry 'a' must be a string"),
    index_case("fifo-shard", '{"weight_map": {"visual.patch_embed.proj.weight": "s.safetensors"}}',
               [Q("ckpt/s.safetensors"), r"FIFO"], setup=mkfifo("ckpt/s.safetensors")),
    index_case("missing-shard", '{"weight_map": {"visual.patch_embed.proj.weight": "s.safetensors"}}',
               [Q("ckpt/s.safetensors"), r"does not exist"]),
    Case(name="index/fifo-index", files={"c.toml": qwen_config()},
         setup=lambda ctx: (os.mkdir(ctx.path("ckpt")),
                            os.mkfifo(ctx.path("ckpt/model.safetensors.index.json"))),
         args=run_qwen("plugin.weights=ckpt"), exit=2, timeout=30, message=r"index.*FIFO"),
    Case(name="index/over-the-json-cap", files={"c.toml": qwen_config()},
         setup=lambda ctx: (os.mkdir(ctx.path("ckpt")),
                            sparse("ckpt/model.safetensors.index.json", (16 << 20) + 1)(ctx)),
         args=run_qwen("plugin.weights=ckpt"), exit=2, timeout=30,
         message=r"16777217 bytes, over the limit of 16777216 bytes"),

    # ---- class 3: config_json must be a regular JSON file of sane size ----
    config_json_case("dev-zero", r"config_json '/dev/zero' is a character device", path="/dev/zero"),
    config_json_case("fifo", r"config_json 'config\.json' is a FIFO", setup=mkfifo("config.json")),
    config_json_case("directory", r"config_json 'config\.json' is a directory", setup=mkdir("config.json")),
    config_json_case("missing", r"config_json 'config\.json' does not exist"),
    config_json_case("over-the-cap", r"over the limit of 16777216 bytes",
                     setup=sparse("config.json", (16 << 20) + 1)),
    config_json_case("dev-zero", r"siglip: \[plugin\.config\] config_json '/dev/zero'",
                     path="/dev/zero", plugin="siglip"),
    Case(name="config_json/check-config-dev-zero", files={"c.toml": qwen_config()},
         args=["check-config", "c.toml", "--set", "plugin.config.config_json=/dev/zero"], exit=2,
         timeout=30, message=r"config_json '/dev/zero' is a character device"),
    # ---- class 6: config.json's numbers ----
    config_json_case("depth-1e300", r"vision_config\.depth must be an integer within 64 bits, got 1e300",
                     text='{"vision_config": {"depth": 1e300}}'),
    config_json_case("patch-size-2^62", r"patch_size = 4611686018427387904 is outside \[1, 512\]",
                     text='{"vision_config": {"patch_size": 4611686018427387904}}'),
    config_json_case("number-out-of-double-range", r"the number 1e999 is out of range",
                     text='{"vision_config": {"depth": 1e999}}'),
    config_json_case("deep-nesting", r"nested deeper than 64 levels",
                     text='{"x": ' + "[" * 100000 + "]" * 100000 + "}"),
    config_json_case("trailing-garbage", r"trailing characters after the JSON value",
                     text='{"vision_config": {}} {}'),
    config_json_case("duplicate-key", r'key "depth" twice',
                     text='{"vision_config": {"depth": 1, "depth": 2}}'),
    config_json_case("bad-escape", r"unknown escape", text='{"vision_config": {"hidden_act": "\\q"}}'),
    config_json_case("not-an-object", r"is not a JSON object", text="[1]"),

    # ---- class 6: size keys near 2^63 name the key ----
    set_case("qwen-patch-size-2^62", ["plugin.config.patch_size=4611686018427387904"],
             r"qwen2_5_vl: patch_size = 4611686018427387904 is outside \[1, 512\]"),
    Case(name="numbers/check-config-qwen-patch-size-2^62", files={"c.toml": qwen_config()},
         args=["check-config", "c.toml", "--set", "plugin.config.patch_size=4611686018427387904"],
         exit=2, message=r"patch_size = 4611686018427387904 is outside \[1, 512\]"),
    set_case("qwen-window-size-2^62", ["plugin.config.window_size=4611686018427387904"],
             r"window_size = 4611686018427387904 is outside"),
    set_case("qwen-spatial-merge-2^62", ["plugin.config.spatial_merge_size=4611686018427387904"],
             r"spatial_merge_size = 4611686018427387904 is outside"),
    set_case("qwen-temporal-patch-zero", ["plugin.config.temporal_patch_size=0"],
             r"temporal_patch_size = 0 is outside \[1, 16\]"),
    set_case("qwen-max-pixels-int64-max", ["plugin.config.max_pixels=9223372036854775807"],
             r"max_pixels = 9223372036854775807 is outside"),
    set_case("qwen-max-budget-2^62", ["plugin.config.max_budget=4611686018427387904"],
             r"max_budget = 4611686018427387904 is outside"),
    set_case("qwen-patch-size-1e300", ["plugin.config.patch_size=1e300"],
             r"patch_size.*is not an integer"),
    set_case("qwen-tower-beyond-memory",
             ["plugin.config.depth=1024", "plugin.config.hidden_size=65536",
              "plugin.config.num_heads=1024", "plugin.config.intermediate_size=262144"],
             r"qwen2_5_vl: the tower \(depth 1024, hidden_size 65536.*more than this machine's"),
    set_case("qwen-bf16-on-cpu", ["plugin.config.dtype=bf16"], r"CPU path computes in f32"),
    set_case("siglip-image-size-2^62", ["plugin.config.image_size=4611686018427387904"],
             r"siglip: image_size = 4611686018427387904 is outside", config=siglip_config()),
    set_case("siglip-rows-beyond-int32",
             ["plugin.config.image_size=16384", "plugin.config.patch_size=1",
              "plugin.config.max_budget_images=64"],
             r"overflow the int32 sequence offsets", config=siglip_config()),
    set_case("siglip-layer-norm-eps-nan", ["plugin.config.layer_norm_eps=nan"],
             r"layer_norm_eps.*(not a finite number|finite)", config=siglip_config()),
    set_case("toy-hidden-2^62", ["plugin.config.hidden=4611686018427387904"],
             r"hidden = 4611686018427387904 is outside", config=toy_config()),
    set_case("toy-patch-zero", ["plugin.config.patch=0"], r"patch = 0 is outside", config=toy_config()),
    set_case("toy-workspace-per-token-2^62", ["plugin.name=\"toy_faults\"",
                                               "plugin.config.workspace_per_token=4611686018427387904"],
             r"'workspace_per_token' = 4611686018427387904 is outside", config=toy_config()),
    set_case("toy-bias-nan", ["plugin.config.bias=nan"], r"bias.*(not a finite number|finite)",
             config=toy_config()),
    set_case("toy-hidden-beyond-int64", ["plugin.config.hidden=\"99999999999999999999\""],
             r"hidden.*not an integer", config=toy_config()),
]
