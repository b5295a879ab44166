"""Hostile inputs for the qwen3_vl plugin: size and deepstack keys, a
config.json or checkpoint folder of another model or with contradicting
sizes, preprocessor files that disagree with the tower, weights that lie
(missing, mis-shaped, NaN, truncated) and items no budget can hold. Every case
must exit with its code and a message naming the key, file, tensor or item
and the fix, and damage nothing: runs ask for a report, which must not appear
when the run fails.

The tower is tiny (2 blocks, 32 wide, f32 on the CPU) so a case runs in a
second; its code paths are the real model's (interpolated position embedding,
2-D rotary, deepstack mergers, four named outputs)."""
import json
import re

from hostile_support import (ENV, Case, model_case_builders, patterned_checkpoint, png,
                              run_args, safetensors, toml_str)

Q = re.escape

TOWER = dict(depth=2, hidden=32, heads=2, inter=32, out=16, patch=16, tpatch=2, merge=2,
             positions=16, deepstack=[0, 1])


def config(plugin="", extra="", weights='"random"'):
    t = TOWER
    return (f"[runtime]\ndevice = \"cpu\"\nlog_level = \"warn\"\nprefer_faster_path = false\n"
            f"plugin_dirs = [{toml_str(ENV.plugin_dir)}]\n"
            f"[plugin]\nname = \"qwen3_vl\"\nweights = {weights}\n"
            f"[plugin.config]\ndepth = {t['depth']}\nhidden_size = {t['hidden']}\n"
            f"num_heads = {t['heads']}\nintermediate_size = {t['inter']}\n"
            f"out_hidden_size = {t['out']}\nnum_position_embeddings = {t['positions']}\n"
            f"deepstack_visual_indexes = {t['deepstack']}\ndtype = \"f32\"\n"
            f"min_pixels = 4096\nmax_pixels = 65536\nvideo_min_pixels = 8192\n"
            f"video_max_pixels = 131072\nmax_frames_per_video = 4\n{plugin}\n"
            f"[budgets]\ntoken_budgets = [16, 64]\nmax_items_per_batch = 4\n"
            f"[workload]\nkind = \"synthetic\"\ncount = 2\nseed = 1\nmin_side = 64\n"
            f"max_side = 128\nside_multiple = 32\nvideo_fraction = 0.0\nrequest_size = 2\n"
            f"warmup_requests = 0\n{extra}")


def folder_config(extra=""):
    """Only the folder configures the tower: no size keys."""
    return (f"[runtime]\ndevice = \"cpu\"\nlog_level = \"warn\"\nprefer_faster_path = false\n"
            f"plugin_dirs = [{toml_str(ENV.plugin_dir)}]\n"
            f"[plugin]\nname = \"qwen3_vl\"\nweights = \"m\"\n"
            f"[plugin.config]\ndtype = \"f32\"\n{extra}\n"
            f"[budgets]\ntoken_budgets = [16, 64]\nmax_items_per_batch = 4\n"
            f"[workload]\nkind = \"synthetic\"\ncount = 2\nseed = 1\nmin_side = 64\n"
            f"max_side = 128\nside_multiple = 32\nvideo_fraction = 0.0\nrequest_size = 2\n"
            f"warmup_requests = 0\n")


def model_config_json(model_type="qwen3_vl", **vision):
    """A Qwen3-VL model's config.json holding the tiny tower."""
    t = TOWER
    v = dict(model_type=model_type, depth=t["depth"], hidden_size=t["hidden"],
             num_heads=t["heads"], intermediate_size=t["inter"], out_hidden_size=t["out"],
             patch_size=t["patch"], temporal_patch_size=t["tpatch"],
             spatial_merge_size=t["merge"], num_position_embeddings=t["positions"],
             deepstack_visual_indexes=t["deepstack"], hidden_act="gelu_pytorch_tanh",
             in_channels=3)
    v.update(vision)
    return json.dumps({"model_type": model_type, "architectures": ["Qwen3VLForConditionalGeneration"],
                       "vision_config": v})


PREPROCESSOR = {"size": {"shortest_edge": 4096, "longest_edge": 65536}, "patch_size": 16,
                "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
                "image_std": [0.5, 0.5, 0.5], "resample": 3}


def shapes(prefix="visual."):
    t = TOWER
    d, inter, out, m = t["hidden"], t["inter"], t["out"], t["hidden"] * t["merge"] ** 2
    s = {prefix + "patch_embed.proj.weight": [d, 3, t["tpatch"], t["patch"], t["patch"]],
         prefix + "patch_embed.proj.bias": [d],
         prefix + "pos_embed.weight": [t["positions"], d]}
    for i in range(t["depth"]):
        p = f"{prefix}blocks.{i}."
        s.update({p + "norm1.weight": [d], p + "norm1.bias": [d], p + "norm2.weight": [d],
                  p + "norm2.bias": [d], p + "attn.qkv.weight": [3 * d, d],
                  p + "attn.qkv.bias": [3 * d], p + "attn.proj.weight": [d, d],
                  p + "attn.proj.bias": [d], p + "mlp.linear_fc1.weight": [inter, d],
                  p + "mlp.linear_fc1.bias": [inter], p + "mlp.linear_fc2.weight": [d, inter],
                  p + "mlp.linear_fc2.bias": [d]})

    def merger(p, norm):
        s.update({p + "norm.weight": [norm], p + "norm.bias": [norm],
                  p + "linear_fc1.weight": [m, m], p + "linear_fc1.bias": [m],
                  p + "linear_fc2.weight": [out, m], p + "linear_fc2.bias": [out]})

    merger(prefix + "merger.", d)
    for k in range(len(t["deepstack"])):
        merger(f"{prefix}deepstack_merger_list.{k}.", m)
    return s


def checkpoint(prefix="visual.", poison=None, drop=(), reshape=None, extra=None):
    return patterned_checkpoint(shapes(prefix), norm=".norm", poison=poison, drop=drop,
                                reshape=reshape, extra=extra)


key_case, _, folder_case, weights_case = model_case_builders("qwen3", config, folder_config)
run = run_args


QKV = "visual.blocks.0.attn.qkv.weight"
REPORT_OK = ["r.json"]

CASES = [
    # ---- size and structure keys: bounded, named, with the fix ----
    key_case("deepstack-out-of-range", ["plugin.config.deepstack_visual_indexes=[0,5]"],
             [Q("deepstack_visual_indexes entry 5 is outside [0, depth=2)")]),
    key_case("deepstack-repeated", ["plugin.config.deepstack_visual_indexes=[1,1]"],
             [Q("deepstack_visual_indexes lists block 1 twice")]),
    key_case("deepstack-negative", ["plugin.config.deepstack_visual_indexes=[-1]"],
             ["deepstack_visual_indexes", "-1"]),
    key_case("heads-not-dividing", ["plugin.config.num_heads=3"],
             [Q("hidden_size 32 is not a multiple of num_heads 3")]),
    key_case("positions-not-square", ["plugin.config.num_position_embeddings=15"],
             [Q("num_position_embeddings 15 must be a square")]),
    key_case("patch-zero", ["plugin.config.patch_size=0"], [Q("patch_size = 0 is outside [1, 512]")]),
    key_case("hidden-2^63", ["plugin.config.hidden_size=9223372036854775807"],
             [Q("hidden_size = 9223372036854775807 is outside")]),
    key_case("depth-negative", ["plugin.config.depth=-4"], [Q("depth = -4 is outside")]),
    key_case("max-pixels-below-min", ["plugin.config.max_pixels=1000"],
             [Q("max_pixels = 1000 is outside [4096")]),
    key_case("video-max-below-min", ["plugin.config.video_max_pixels=100"],
             [Q("video_max_pixels = 100 is outside [8192")]),
    key_case("merge-leaves-no-budget", ["plugin.config.spatial_merge_size=3"],
             ["gives 28 tokens, below min_budget 64", "raise max_pixels or lower min_budget"]),
    key_case("max-budget-below-min", ["plugin.config.max_budget=8"],
             [Q("max_budget = 8 is outside [64")]),
    key_case("dtype-f64", ['plugin.config.dtype="f64"'], [Q("dtype 'f64' is not f32 or bf16")]),
    key_case("one-frame-videos", ["plugin.config.max_frames_per_video=1"],
             [Q("max_frames_per_video = 1 is outside [2, 65536]")]),
    key_case("hidden-act-key", ['plugin.config.hidden_act="relu"'],
             ["qwen3_vl: unknown config key 'hidden_act' in \\[plugin.config\\]"]),
    key_case("deepstack-not-a-list", ['plugin.config.deepstack_visual_indexes="8,16"'],
             ["deepstack_visual_indexes"]),
    key_case("budget-overflows-int32", ["plugin.config.max_budget=16777216",
                                        "plugin.config.spatial_merge_size=64",
                                        "plugin.config.max_pixels=4294967296"],
             ["spatial_merge_size|max_budget"]),

    # ---- config_json: regular files only, this model, its activation ----
    Case(name="qwen3/config-json-missing", files={"c.toml": config()},
         args=run('plugin.config.config_json="nothere.json"'),
         message=[Q("config_json 'nothere.json' does not exist")]),
    Case(name="qwen3/config-json-directory", files={"c.toml": config(), "cfg/x": "x"},
         args=run('plugin.config.config_json="cfg"'), message=["'cfg'", "directory"]),
    Case(name="qwen3/config-json-other-model", files={"c.toml": config(),
                                                     "config.json": model_config_json("qwen2_5_vl")},
         args=run('plugin.config.config_json="config.json"'),
         message=["model_type 'qwen2_5_vl'"]),
    Case(name="qwen3/config-json-relu", files={"c.toml": config(),
                                              "config.json": model_config_json(hidden_act="relu")},
         args=run('plugin.config.config_json="config.json"'),
         message=[Q("hidden_act is 'relu'"), "gelu_pytorch_tanh"]),
    Case(name="qwen3/config-json-not-json", files={"c.toml": config(), "config.json": "{nope"},
         args=run('plugin.config.config_json="config.json"'), message=["config.json"]),

    # ---- checkpoint folders: the folder's files rule, contradictions name both ----
    folder_case("key-contradicts-config", [Q("config.json' vision_config.hidden_size = 32"),
                                           Q("[plugin.config] hidden_size = 64")],
                {"config.json": model_config_json(), "model.safetensors": checkpoint()},
                sets=["plugin.config.hidden_size=64"]),
    folder_case("preprocessor-patch-14", [Q("preprocessor_config.json' patch_size = 14")],
                {"config.json": model_config_json(), "model.safetensors": checkpoint(),
                 "preprocessor_config.json": json.dumps(dict(PREPROCESSOR, patch_size=14))}),
    # A processor this plugin does not implement: a limit of the plugin (exit 1).
    folder_case("preprocessor-clip-mean", ["preprocessor_config.json", "image_mean"],
                {"config.json": model_config_json(), "model.safetensors": checkpoint(),
                 "preprocessor_config.json": json.dumps(
                     dict(PREPROCESSOR, image_mean=[0.48145466, 0.4578275, 0.40821073]))},
                exit=1),
    folder_case("preprocessor-bilinear", [Q("resample is 2"), "bicubic only"],
                {"config.json": model_config_json(), "model.safetensors": checkpoint(),
                 "preprocessor_config.json": json.dumps(dict(PREPROCESSOR, resample=2))},
                exit=1),
    folder_case("video-preprocessor-temporal-4",
                [Q("video_preprocessor_config.json' temporal_patch_size = 4")],
                {"config.json": model_config_json(), "model.safetensors": checkpoint(),
                 "video_preprocessor_config.json": json.dumps(
                     dict(PREPROCESSOR, temporal_patch_size=4))}),
    folder_case("video-preprocessor-not-json", ["video_preprocessor_config.json"],
                {"config.json": model_config_json(), "model.safetensors": checkpoint(),
                 "video_preprocessor_config.json": "[1, 2"}),
    folder_case("config-of-qwen2.5", ["model_type 'qwen2_5_vl'"],
                {"config.json": model_config_json("qwen2_5_vl"),
                 "model.safetensors": checkpoint()}),
    folder_case("weights-contradict-config", ["patch_embed.proj.weight", "m/config.json"],
                {"config.json": model_config_json(hidden_size=64, intermediate_size=32),
                 "model.safetensors": checkpoint()}),
    folder_case("no-weights", ["m"],
                {"config.json": model_config_json()}),
    # Transformers >= 4.52 saves the tower as model.visual., beside the text
    # model's tensors: a folder like that runs.
    folder_case("model-visual-prefix-runs", [], {
        "config.json": model_config_json(),
        "model.safetensors": checkpoint("model.visual.",
                                        extra={"model.language_model.norm.weight": [8]})},
        exit=0, outputs=REPORT_OK),

    # ---- weights that lie ----
    weights_case("missing-tensor", checkpoint(drop=("visual.deepstack_merger_list.1.norm.bias",)),
                 ["visual.deepstack_merger_list.1.norm.bias", "w.safetensors"]),
    weights_case("wrong-shape", checkpoint(reshape=(QKV, [96, 16])), [Q(QKV), "w.safetensors"]),
    weights_case("nan", checkpoint(poison=(QKV, 7, float("nan"))),
                 [Q(QKV), "NaN|not finite|infinit", "check_finite"]),
    weights_case("nan-allowed", checkpoint(poison=("visual.merger.linear_fc2.bias", 0,
                                                   float("inf"))),
                 [], exit=0, outputs=REPORT_OK, sets=["plugin.config.check_finite=false"]),
    weights_case("truncated", checkpoint()[:-100], ["w.safetensors"]),

    # ---- items no budget can hold ----
    Case(name="qwen3/item-thin-strip", files={"c.toml": config(), "strip.png": png(3000, 40)},
         args=["encode", "-c", "c.toml", "-o", "e.st", "strip.png"],
         message=["strip.png", "raise max_pixels", "70656"]),
    Case(name="qwen3/item-one-frame-video",
         files={"c.toml": config(), "f0.png": png(64, 64),
                "t.jsonl": '{"id": "v", "frames_files": ["f0.png"]}\n'},
         args=["encode", "-c", "c.toml", "-o", "e.st", "--trace", "t.jsonl"],
         message=["frame"]),
]
