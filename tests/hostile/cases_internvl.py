"""Hostile inputs for the internvl plugin: size, tiling and projector keys, a
config.json or checkpoint folder of another model or with settings the plugin
does not implement, preprocessor files that disagree with the tower, weights
that lie (missing, mis-shaped, NaN, truncated), and images at the tiling's
extremes. Every case must exit with its code and a message naming the key,
file, tensor or item and the fix, and damage nothing: runs ask for a report,
which must not appear when the run fails.

The model is tiny (2 layers, 32 wide, 56-pixel tiles of 14-pixel patches, f32
on the CPU) so a case runs in a second; its code paths are the real model's
(CLS token, layer scales, per-tile attention, pixel shuffle, projector)."""
import json
import re

from hostile_support import (ENV, Case, model_case_builders, patterned_checkpoint, png,
                              safetensors, toml_str)

Q = re.escape

M = dict(layers=2, hidden=32, heads=4, inter=48, image=56, patch=14, text=24)


def config(extra_plugin="", weights='"random"'):
    m = M
    return (f"[runtime]\ndevice = \"cpu\"\nlog_level = \"warn\"\nprefer_faster_path = false\n"
            f"plugin_dirs = [{toml_str(ENV.plugin_dir)}]\n"
            f"[plugin]\nname = \"internvl\"\nweights = {weights}\n"
            f"[plugin.config]\nnum_hidden_layers = {m['layers']}\nhidden_size = {m['hidden']}\n"
            f"num_attention_heads = {m['heads']}\nintermediate_size = {m['inter']}\n"
            f"image_size = {m['image']}\npatch_size = {m['patch']}\n"
            f"text_hidden_size = {m['text']}\nmax_patches = 4\nmax_budget_tiles = 8\n"
            f"dtype = \"f32\"\n{extra_plugin}\n" + WORKLOAD)


WORKLOAD = ("[workload]\nkind = \"synthetic\"\ncount = 2\nseed = 1\nmin_side = 40\n"
            "max_side = 200\nside_multiple = 4\nvideo_fraction = 0.0\nrequest_size = 2\n"
            "warmup_requests = 0\n")


def folder_config():
    """Only the folder configures the model: no size keys."""
    return (f"[runtime]\ndevice = \"cpu\"\nlog_level = \"warn\"\nprefer_faster_path = false\n"
            f"plugin_dirs = [{toml_str(ENV.plugin_dir)}]\n"
            f"[plugin]\nname = \"internvl\"\nweights = \"m\"\n"
            f"[plugin.config]\ndtype = \"f32\"\nmax_budget_tiles = 8\n" + WORKLOAD)


def model_config_json(model_type="internvl", top=None, **vision):
    m = M
    v = dict(model_type=model_type + "_vision" if model_type == "internvl" else model_type,
             hidden_size=m["hidden"],
             num_hidden_layers=m["layers"], num_attention_heads=m["heads"],
             intermediate_size=m["inter"], image_size=[m["image"], m["image"]],
             patch_size=[m["patch"], m["patch"]], hidden_act="gelu", norm_type="layer_norm",
             use_mean_pooling=True, attention_bias=False, use_qk_norm=False)
    v.update(vision)
    doc = {"model_type": model_type, "architectures": ["InternVLForConditionalGeneration"],
           "downsample_ratio": 0.5, "vision_feature_layer": -1,
           "vision_feature_select_strategy": "default", "projector_hidden_act": "gelu",
           "text_config": {"model_type": "qwen2", "hidden_size": m["text"]}, "vision_config": v}
    doc.update(top or {})
    return json.dumps(doc)


PREPROCESSOR = {"crop_to_patches": True, "min_patches": 1, "max_patches": 4,
                "size": {"height": 56, "width": 56}, "image_mean": [0.485, 0.456, 0.406],
                "image_std": [0.229, 0.224, 0.225], "resample": 3, "do_rescale": True,
                "rescale_factor": 1 / 255, "do_normalize": True}


def shapes(prefix="model."):
    m = M
    d, seq, sw = m["hidden"], (m["image"] // m["patch"]) ** 2 + 1, m["hidden"] * 4
    e = prefix + "vision_tower.embeddings."
    s = {e + "cls_token": [1, 1, d], e + "position_embeddings": [1, seq, d],
         e + "patch_embeddings.projection.weight": [d, 3, m["patch"], m["patch"]],
         e + "patch_embeddings.projection.bias": [d]}
    for i in range(m["layers"]):
        p = f"{prefix}vision_tower.encoder.layer.{i}."
        for n in ("layernorm_before", "layernorm_after"):
            s.update({p + n + ".weight": [d], p + n + ".bias": [d]})
        for n in ("q_proj", "k_proj", "v_proj", "projection_layer"):
            s[p + "attention." + n + ".weight"] = [d, d]
        s.update({p + "attention.projection_layer.bias": [d], p + "lambda_1": [d],
                  p + "lambda_2": [d], p + "mlp.fc1.weight": [m["inter"], d],
                  p + "mlp.fc1.bias": [m["inter"]], p + "mlp.fc2.weight": [d, m["inter"]],
                  p + "mlp.fc2.bias": [d]})
    j = prefix + "multi_modal_projector."
    s.update({j + "layer_norm.weight": [sw], j + "layer_norm.bias": [sw],
              j + "linear_1.weight": [m["text"], sw], j + "linear_1.bias": [m["text"]],
              j + "linear_2.weight": [m["text"], m["text"]], j + "linear_2.bias": [m["text"]]})
    return s


def checkpoint(poison=None, drop=(), reshape=None):
    return patterned_checkpoint(shapes(), poison=poison, drop=drop, reshape=reshape)


key_case, config_json_case, folder_case, weights_case = model_case_builders(
    "internvl", config, folder_config)


QPROJ = "model.vision_tower.encoder.layer.0.attention.q_proj.weight"
LAMBDA = "model.vision_tower.encoder.layer.1.lambda_2"
REPORT_OK = ["r.json"]
GOOD = {"config.json": model_config_json(), "model.safetensors": checkpoint(),
        "preprocessor_config.json": json.dumps(PREPROCESSOR)}

CASES = [
    # ---- size, tiling and projector keys: bounded, named, with the fix ----
    key_case("budget-below-one-image", ["plugin.config.max_budget_tiles=4"],
             [Q("max_budget_tiles 4 is below the 5 tiles one image can get"), "max_patches"]),
    key_case("heads-not-dividing", ["plugin.config.num_attention_heads=5"],
             [Q("hidden_size 32 is not a multiple of num_attention_heads 5")]),
    key_case("image-not-multiple-of-patch", ["plugin.config.image_size=60"],
             [Q("image_size 60 is not a multiple of patch_size 14")]),
    key_case("grid-odd-for-shuffle", ["plugin.config.image_size=42"],
             ["pixel shuffle", "multiple of 1/downsample_ratio"]),
    key_case("downsample-0.3", ["plugin.config.downsample_ratio=0.3"],
             [Q("downsample_ratio 0.3"), "1/n"], exit=1),
    key_case("feature-layer-past-the-end", ["plugin.config.vision_feature_layer=3"],
             [Q("vision_feature_layer 3 is outside [-3, 2]")]),
    key_case("min-patches-above-max", ["plugin.config.min_patches=6"],
             [Q("min_patches 6 is above max_patches 4")]),
    key_case("norm-type-batch-norm", ['plugin.config.norm_type="batch_norm"'],
             ["norm_type", "batch_norm"]),
    key_case("hidden-2^63", ["plugin.config.hidden_size=9223372036854775807"],
             [Q("hidden_size = 9223372036854775807 is outside")]),
    key_case("max-patches-zero", ["plugin.config.max_patches=0"], ["max_patches"]),
    key_case("misspelt-key", ["plugin.config.max_patch=4"], ["max_patch"]),
    key_case("text-hidden-zero", ["plugin.config.text_hidden_size=0"],
             [Q("text_hidden_size = 0 is outside")]),

    # ---- config_json: this model, what the plugin implements ----
    config_json_case("other-model", model_config_json("qwen2_5_vl"), ["model_type 'qwen2_5_vl'"]),
    config_json_case("relu", model_config_json(hidden_act="relu"),
                     [Q("hidden_act is 'relu'"), "'gelu'"], exit=1),
    config_json_case("full-strategy", model_config_json(
        top={"vision_feature_select_strategy": "full"}),
        ["vision_feature_select_strategy", "default"], exit=1),
    config_json_case("feature-layer-list",
                     model_config_json(top={"vision_feature_layer": [-1, -2]}),
                     ["vision_feature_layer is a list"], exit=1),
    config_json_case("non-square-image", model_config_json(image_size=[56, 28]),
                     ["image_size", "square"], exit=1),
    config_json_case("no-position-embeddings",
                     model_config_json(use_absolute_position_embeddings=False),
                     ["use_absolute_position_embeddings"], exit=1),
    config_json_case("not-json", "{nope", ["config.json"]),

    # ---- checkpoint folders: the folder's files rule, contradictions name both ----
    folder_case("runs", [], GOOD, exit=0, outputs=REPORT_OK),
    folder_case("key-contradicts-config", [Q("vision_config.hidden_size = 32"),
                                           Q("[plugin.config] hidden_size = 64")],
                GOOD, sets=["plugin.config.hidden_size=64"]),
    folder_case("preprocessor-size-448", ["preprocessor_config.json", "size.height"],
                dict(GOOD, **{"preprocessor_config.json": json.dumps(
                    dict(PREPROCESSOR, size={"height": 448, "width": 448}))})),
    folder_case("preprocessor-no-normalize", ["do_normalize is false"],
                dict(GOOD, **{"preprocessor_config.json": json.dumps(
                    dict(PREPROCESSOR, do_normalize=False))}), exit=1),
    folder_case("preprocessor-nearest", [Q("resample is 0"), "bicubic"],
                dict(GOOD, **{"preprocessor_config.json": json.dumps(
                    dict(PREPROCESSOR, resample=0))}), exit=1),
    folder_case("preprocessor-zero-std", ["image_std must be positive"],
                dict(GOOD, **{"preprocessor_config.json": json.dumps(
                    dict(PREPROCESSOR, image_std=[0.2, 0.0, 0.2]))})),
    folder_case("preprocessor-two-means", ["image_mean must list 3 values"],
                dict(GOOD, **{"preprocessor_config.json": json.dumps(
                    dict(PREPROCESSOR, image_mean=[0.5, 0.5]))})),
    folder_case("preprocessor-many-patches", [Q("max_budget_tiles 8 is below the 13 tiles")],
                dict(GOOD, **{"preprocessor_config.json": json.dumps(
                    dict(PREPROCESSOR, max_patches=12))})),
    folder_case("weights-contradict-config",
                ["patch_embeddings.projection.weight", "m/config.json"],
                dict(GOOD, **{"config.json": model_config_json(hidden_size=64)})),
    folder_case("no-weights", ["m"], {"config.json": model_config_json()}),

    # ---- weights that lie ----
    weights_case("missing-layer-scale", checkpoint(drop=(LAMBDA,)), [Q(LAMBDA), "w.safetensors"]),
    weights_case("wrong-shape", checkpoint(reshape=(QPROJ, [16, 64])), [Q(QPROJ), "w.safetensors"]),
    weights_case("nan", checkpoint(poison=(QPROJ, 7, float("nan"))),
                 [Q(QPROJ), "NaN|not finite|infinit", "check_finite"]),
    weights_case("nan-allowed", checkpoint(poison=(LAMBDA, 0, float("inf"))), [], exit=0,
                 outputs=REPORT_OK, sets=["plugin.config.check_finite=false"]),
    weights_case("truncated", checkpoint()[:-100], ["w.safetensors"]),
    weights_case("vision-only-prefix", checkpoint(), ["model.vision_tower|vision_tower"],
                 sets=['plugin.config.weight_prefix=""']),

    # ---- images at the tiling's extremes: they run ----
    Case(name="internvl/item-extremes-run",
         files={"c.toml": config(), "strip.png": png(3000, 1), "dot.png": png(1, 1),
                "tall.png": png(2, 900, channels=4), "grey.png": png(70, 50, channels=1)},
         args=["encode", "-c", "c.toml", "-o", "e.st", "strip.png", "dot.png", "tall.png",
               "grey.png"], exit=0, outputs=["e.st"]),
]
