"""Hostile inputs for the llava_onevision plugin: size, anyres and projector keys, a
config.json or checkpoint folder of another model or with settings the plugin does
not implement, preprocessor files that disagree with the tower or the model's
pinpoints, weights that lie (missing, mis-shaped, NaN, truncated, another prefix),
and images at the tiling's extremes. Every case must exit with its code and a message
naming the key, file, tensor or item and the fix, and damage nothing: runs ask for a
report, which must not appear when the run fails.

The model is tiny (2 SigLIP layers, 32 wide, 56-pixel tiles of 14-pixel patches, a
1..2 x 1..2 anyres grid, f32 on the CPU) so a case runs in a second; its code paths
are the real model's (per-tile attention, projector, unpadding, newlines)."""
import json
import re

from hostile_support import (ENV, Case, model_case_builders, patterned_checkpoint, png,
                              safetensors, toml_str)

Q = re.escape

M = dict(layers=2, hidden=32, heads=4, inter=48, image=56, patch=14, text=24)
PINS = [[56, 56], [56, 112], [112, 56], [112, 112]]
WORKLOAD = ("[workload]\nkind = \"synthetic\"\ncount = 2\nseed = 1\nmin_side = 40\n"
            "max_side = 200\nside_multiple = 4\nvideo_fraction = 0.0\nrequest_size = 2\n"
            "warmup_requests = 0\n")
HEAD = ("[runtime]\ndevice = \"cpu\"\nlog_level = \"warn\"\nprefer_faster_path = false\n"
        f"plugin_dirs = [{toml_str(ENV.plugin_dir)}]\n")


def config(extra_plugin="", weights='"random"'):
    m = M
    pins = ", ".join(f"{h}, {w}" for h, w in PINS)
    return (HEAD + f"[plugin]\nname = \"llava_onevision\"\nweights = {weights}\n"
            f"[plugin.config]\nnum_hidden_layers = {m['layers']}\nhidden_size = {m['hidden']}\n"
            f"num_attention_heads = {m['heads']}\nintermediate_size = {m['inter']}\n"
            f"image_size = {m['image']}\npatch_size = {m['patch']}\n"
            f"text_hidden_size = {m['text']}\nimage_grid_pinpoints = [{pins}]\n"
            f"max_budget_tiles = 8\ndtype = \"f32\"\n{extra_plugin}\n" + WORKLOAD)


def folder_config():
    """Only the folder configures the model: no size keys."""
    return (HEAD + "[plugin]\nname = \"llava_onevision\"\nweights = \"m\"\n"
            "[plugin.config]\ndtype = \"f32\"\nmax_budget_tiles = 8\n" + WORKLOAD)


def model_config_json(model_type="llava_onevision", top=None, **vision):
    m = M
    v = dict(model_type="siglip_vision_model", hidden_size=m["hidden"],
             num_hidden_layers=m["layers"], num_attention_heads=m["heads"],
             intermediate_size=m["inter"], image_size=m["image"], patch_size=m["patch"],
             hidden_act="gelu_pytorch_tanh")
    v.update(vision)
    doc = {"model_type": model_type, "architectures": ["LlavaOnevisionForConditionalGeneration"],
           "vision_feature_layer": -1, "vision_feature_select_strategy": "full",
           "vision_aspect_ratio": "anyres_max_9", "projector_hidden_act": "gelu",
           "image_grid_pinpoints": PINS,
           "text_config": {"model_type": "qwen2", "hidden_size": m["text"]}, "vision_config": v}
    doc.update(top or {})
    return json.dumps(doc)


PREPROCESSOR = {"size": {"height": 56, "width": 56}, "image_mean": [0.5, 0.5, 0.5],
                "image_std": [0.5, 0.5, 0.5], "resample": 3, "do_rescale": True,
                "rescale_factor": 1 / 255, "do_normalize": True, "image_grid_pinpoints": PINS}


def shapes(prefix="model."):
    m = M
    d, tokens = m["hidden"], (m["image"] // m["patch"]) ** 2
    t = prefix + "vision_tower.vision_model."
    s = {t + "embeddings.patch_embedding.weight": [d, 3, m["patch"], m["patch"]],
         t + "embeddings.patch_embedding.bias": [d],
         t + "embeddings.position_embedding.weight": [tokens, d]}
    for i in range(m["layers"]):
        p = f"{t}encoder.layers.{i}."
        for n in ("layer_norm1", "layer_norm2"):
            s.update({p + n + ".weight": [d], p + n + ".bias": [d]})
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            a = p + "self_attn." + n
            s.update({a + ".weight": [d, d], a + ".bias": [d]})
        s.update({p + "mlp.fc1.weight": [m["inter"], d], p + "mlp.fc1.bias": [m["inter"]],
                  p + "mlp.fc2.weight": [d, m["inter"]], p + "mlp.fc2.bias": [d]})
    j = prefix + "multi_modal_projector."
    s.update({j + "linear_1.weight": [m["text"], d], j + "linear_1.bias": [m["text"]],
              j + "linear_2.weight": [m["text"], m["text"]], j + "linear_2.bias": [m["text"]],
              prefix + "image_newline": [m["text"]]})
    return s


def checkpoint(poison=None, drop=(), reshape=None):
    return patterned_checkpoint(shapes(), poison=poison, drop=drop, reshape=reshape)


key_case, config_json_case, folder_case, weights_case = model_case_builders(
    "llava_onevision", config, folder_config)


QPROJ = "model.vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight"
NEWLINE = "model.image_newline"
LINEAR2 = "model.multi_modal_projector.linear_2.weight"
REPORT_OK = ["r.json"]
GOOD = {"config.json": model_config_json(), "model.safetensors": checkpoint(),
        "preprocessor_config.json": json.dumps(PREPROCESSOR)}


def preprocessor(**changes):
    return dict(GOOD, **{"preprocessor_config.json": json.dumps(dict(PREPROCESSOR, **changes))})


CASES = [
    # ---- size, anyres and projector keys: bounded, named, with the fix ----
    key_case("budget-below-one-image", ["plugin.config.max_budget_tiles=4"],
             [Q("max_budget_tiles 4 is below the 5 tiles one item can get")]),
    key_case("pinpoint-not-a-tile-multiple", ["plugin.config.image_grid_pinpoints=[56, 60]"],
             [Q("[56, 60] is not a multiple of the tile size 56")]),
    key_case("pinpoints-odd-count", ["plugin.config.image_grid_pinpoints=[56, 56, 56]"],
             ["image_grid_pinpoints", "pairs"]),
    key_case("aspect-ratio-pad", ['plugin.config.vision_aspect_ratio="pad"'],
             ["vision_aspect_ratio", "anyres_max_"], exit=1),
    key_case("feature-layer-past-the-end", ["plugin.config.vision_feature_layer=3"],
             [Q("vision_feature_layer 3 is outside [-3, 2]")]),
    key_case("heads-not-dividing", ["plugin.config.num_attention_heads=5"],
             [Q("hidden_size 32 is not a multiple of num_attention_heads 5")]),
    key_case("hidden-2^63", ["plugin.config.hidden_size=9223372036854775807"],
             [Q("hidden_size = 9223372036854775807 is outside")]),
    key_case("text-hidden-zero", ["plugin.config.text_hidden_size=0"],
             [Q("text_hidden_size = 0 is outside")]),
    key_case("frames-past-the-budget", ["plugin.config.max_frames_per_video=9"],
             [Q("max_budget_tiles 8 is below the 9 tiles")]),
    key_case("misspelt-key", ["plugin.config.max_budget_tile=4"], ["max_budget_tile"]),

    # ---- config_json: this model, what the plugin implements ----
    config_json_case("other-model", model_config_json("qwen2_5_vl"), ["model_type 'qwen2_5_vl'"]),
    config_json_case("relu", model_config_json(hidden_act="relu"),
                     [Q("hidden_act is 'relu'"), "gelu_pytorch_tanh"], exit=1),
    config_json_case("default-strategy", model_config_json(
        top={"vision_feature_select_strategy": "default"}),
        ["vision_feature_select_strategy", "full", "CLS"], exit=1),
    config_json_case("feature-layer-list",
                     model_config_json(top={"vision_feature_layer": [-1, -2]}),
                     ["vision_feature_layer is a list"], exit=1),
    config_json_case("pinpoints-not-pairs",
                     model_config_json(top={"image_grid_pinpoints": [[56, 56, 56]]}),
                     ["image_grid_pinpoints", "pairs"]),
    config_json_case("not-json", "{nope", ["config.json"]),

    # ---- checkpoint folders: the folder's files rule, contradictions name both ----
    folder_case("runs", [], GOOD, exit=0, outputs=REPORT_OK),
    folder_case("key-contradicts-config", [Q("vision_config.hidden_size = 32"),
                                           Q("[plugin.config] hidden_size = 64")],
                GOOD, sets=["plugin.config.hidden_size=64"]),
    folder_case("preprocessor-size-384", ["preprocessor_config.json", "size.height"],
                preprocessor(size={"height": 384, "width": 384})),
    folder_case("preprocessor-other-pinpoints", ["image_grid_pinpoints differs from config.json"],
                preprocessor(image_grid_pinpoints=[[56, 56]])),
    folder_case("preprocessor-no-normalize", ["do_normalize is false"],
                preprocessor(do_normalize=False), exit=1),
    folder_case("preprocessor-nearest", [Q("resample is 0"), "bicubic"],
                preprocessor(resample=0), exit=1),
    folder_case("preprocessor-zero-std", ["image_std must be positive"],
                preprocessor(image_std=[0.2, 0.0, 0.2])),
    folder_case("weights-contradict-config", ["patch_embedding.weight", "m/config.json"],
                dict(GOOD, **{"config.json": model_config_json(hidden_size=64)})),
    folder_case("no-weights", ["m"], {"config.json": model_config_json()}),

    # ---- weights that lie ----
    weights_case("missing-newline", checkpoint(drop=(NEWLINE,)),
                 ["image_newline", "w.safetensors"]),
    weights_case("wrong-shape", checkpoint(reshape=(LINEAR2, [12, 48])),
                 [Q(LINEAR2), "w.safetensors"]),
    weights_case("nan", checkpoint(poison=(QPROJ, 7, float("nan"))),
                 [Q(QPROJ), "NaN|not finite|infinit", "check_finite"]),
    weights_case("nan-allowed", checkpoint(poison=(LINEAR2, 0, float("inf"))), [], exit=0,
                 outputs=REPORT_OK, sets=["plugin.config.check_finite=false"]),
    weights_case("truncated", checkpoint()[:-100], ["w.safetensors"]),
    weights_case("released-prefix-on-new-file", checkpoint(), ["vision_tower"],
                 sets=['plugin.config.weight_prefix=""']),

    # ---- images at the tiling's extremes: they run ----
    Case(name="llava_onevision/item-extremes-run",
         files={"c.toml": config(), "strip.png": png(3000, 1), "dot.png": png(1, 1),
                "tall.png": png(2, 900, channels=4), "grey.png": png(70, 50, channels=1)},
         args=["encode", "-c", "c.toml", "-o", "e.st", "strip.png", "dot.png", "tall.png",
               "grey.png"], exit=0, outputs=["e.st"]),
]
