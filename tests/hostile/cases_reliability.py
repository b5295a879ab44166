"""Hostile inputs that once fell back silently or ended unclearly: a
checkpoint folder whose config.json or preprocessor_config.json is a
directory, a FIFO or missing; a whole model's config.json without its
vision_config; preprocessor bounds that contradict each other; normalisation
values no processor can have (exit code 2, like any bad input);
runtime.plugin_dirs entries that are not folders (an error in check-config, a
warning in run); floats in messages printed readably. Every case asserts the
exit code, the message (the file or key and the reason) and that nothing
changed on disk."""
import json
import os
import re

import cases_qwen3 as q3
from hostile_support import ENV, Case, toml_str, toy_config

Q = re.escape
REPORT = ["r.json"]


def run(*sets, cfg="c.toml"):
    argv = ["run", "-c", cfg, "--set", "output.report=r.json"]
    for s in sets:
        argv += ["--set", s]
    return argv


def no_long_numbers(ctx, result):
    """A float in a message is short: no run of 30 digits (std::to_string of 1e300)."""
    m = re.search(r"\d{30,}", result.text)
    return [f"a {len(m.group(0))}-digit number in the output"] if m else []


# ---- checkpoint folders (the tiny Qwen3-VL tower of cases_qwen3) ----

def folder_case(name, message, files, sets=(), exit=2, outputs=(), setup=None, config=None):
    f = {"c.toml": config or q3.folder_config()}
    f.update({"m/" + k: v for k, v in files.items()})
    return Case(name="folder/" + name, files=f, args=run(*sets), exit=exit, message=message,
                outputs=list(outputs), setup=setup, timeout=60)


def fifo(name):
    return lambda ctx: os.mkfifo(ctx.path(name))


CONFIG = q3.model_config_json()
WEIGHTS = q3.checkpoint()
PRE = json.dumps(q3.PREPROCESSOR)


def sizes_config():
    """The folder's weights, and every size the releases differ in given as keys."""
    t = q3.TOWER
    return q3.folder_config(
        f"depth = {t['depth']}\nhidden_size = {t['hidden']}\nnum_heads = {t['heads']}\n"
        f"intermediate_size = {t['inter']}\nout_hidden_size = {t['out']}\n"
        f"num_position_embeddings = {t['positions']}\n"
        f"deepstack_visual_indexes = {t['deepstack']}\npatch_size = {t['patch']}\n")


def lm_config_json(**extra):
    """A whole model's config.json with the vision_config dropped."""
    d = {"model_type": "qwen3_vl", "architectures": ["Qwen3VLForConditionalGeneration"],
         "hidden_size": 4096, "num_hidden_layers": 36, "vocab_size": 151936}
    d.update(extra)
    return json.dumps(d)


def qwen25_folder_config():
    return (f"[runtime]\ndevice = \"cpu\"\nlog_level = \"warn\"\nprefer_faster_path = false\n"
            f"plugin_dirs = [{toml_str(ENV.plugin_dir)}]\n"
            f"[plugin]\nname = \"qwen2_5_vl\"\nweights = \"m\"\n"
            f"[plugin.config]\ndtype = \"f32\"\n"
            f"[budgets]\ntoken_budgets = [16, 64]\nmax_items_per_batch = 4\n"
            f"[workload]\nkind = \"synthetic\"\ncount = 2\nseed = 1\nmin_side = 56\n"
            f"max_side = 112\nside_multiple = 28\nvideo_fraction = 0.0\nrequest_size = 2\n"
            f"warmup_requests = 0\n")


QWEN25_CONFIG = json.dumps({"model_type": "qwen2_5_vl", "vision_config": {
    "depth": 1, "hidden_size": 16, "num_heads": 4, "intermediate_size": 16,
    "out_hidden_size": 8, "fullatt_block_indexes": [0], "hidden_act": "silu"}})


# ---- runtime.plugin_dirs ----

def dirs_config():
    """The toy's config with three entries that are no folders after the real ones."""
    bad = ["/etc/passwd", "nowhere", "pipe"]
    config = toy_config()
    start = config.index("plugin_dirs = [")
    end = config.index("]", start)
    return config[:end] + ", " + ", ".join(toml_str(d) for d in bad) + config[end:]


DIR_MESSAGES = [r"runtime\.plugin_dirs", Q("'/etc/passwd' is a regular file, not a directory"),
                Q("'nowhere' does not exist"), Q("'pipe' is a FIFO")]


CASES = [
    # config.json: required unless the keys give every size; a regular file.
    folder_case("config-missing", [Q("folder 'm' has no config.json"), "depth",
                                   "config_json", "set every size key"],
                {"model.safetensors": WEIGHTS, "preprocessor_config.json": PRE}),
    folder_case("config-missing-sizes-given", [], {"model.safetensors": WEIGHTS,
                                                   "preprocessor_config.json": PRE},
                exit=0, outputs=REPORT, config=sizes_config()),
    folder_case("config-directory", [Q("m/config.json' is a directory"), "replace it"],
                {"config.json/x": "{}", "model.safetensors": WEIGHTS}),
    folder_case("config-fifo", [Q("m/config.json' is a FIFO, not a regular file")],
                {"model.safetensors": WEIGHTS}, setup=fifo("m/config.json")),
    folder_case("config-broken-link", [Q("m/config.json' is a broken symbolic link")],
                {"model.safetensors": WEIGHTS},
                setup=lambda ctx: os.symlink("gone.json", ctx.path("m/config.json"))),
    # preprocessor_config.json (and the video one): a regular file when there.
    folder_case("preprocessor-directory", [Q("m/preprocessor_config.json' is a directory")],
                {"config.json": CONFIG, "model.safetensors": WEIGHTS,
                 "preprocessor_config.json/x": "{}"}),
    folder_case("preprocessor-fifo", [Q("m/preprocessor_config.json' is a FIFO")],
                {"config.json": CONFIG, "model.safetensors": WEIGHTS},
                setup=fifo("m/preprocessor_config.json")),
    folder_case("video-preprocessor-fifo", [Q("m/video_preprocessor_config.json' is a FIFO")],
                {"config.json": CONFIG, "model.safetensors": WEIGHTS},
                setup=fifo("m/video_preprocessor_config.json")),
    # A whole model's config.json whose vision_config is gone: its top-level
    # sizes are the language model's.
    folder_case("config-without-vision-config",
                [Q("m/config.json' has a vocab_size but no vision_config"), "language model"],
                {"config.json": lm_config_json(), "model.safetensors": WEIGHTS}),
    folder_case("config-with-text-config-only", [Q("has a text_config but no vision_config")],
                {"config.json": json.dumps({"model_type": "qwen3_vl",
                                            "text_config": {"hidden_size": 4096}}),
                 "model.safetensors": WEIGHTS}),
    # Preprocessing bounds that contradict each other, in either spelling.
    folder_case("preprocessor-min-above-max",
                [Q("m/preprocessor_config.json' has size.shortest_edge = 1000000 above "
                   "size.longest_edge = 3136")],
                {"config.json": CONFIG, "model.safetensors": WEIGHTS,
                 "preprocessor_config.json": json.dumps(dict(
                     q3.PREPROCESSOR, size={"shortest_edge": 1000000, "longest_edge": 3136}))}),
    folder_case("qwen2.5-preprocessor-min-pixels-above-max",
                [Q("m/preprocessor_config.json' has min_pixels = 1000000 above "
                   "max_pixels = 3136")],
                {"config.json": QWEN25_CONFIG,
                 "preprocessor_config.json": json.dumps({"min_pixels": 1000000,
                                                         "max_pixels": 3136})},
                config=qwen25_folder_config()),
    # Values no normalisation can have are a bad file (2); valid ones the plugin
    # does not implement stay a limit of the plugin (1, cases_qwen3).
    folder_case("preprocessor-negative-std",
                [Q("m/preprocessor_config.json' image_std entry 0 is -0.5: a standard "
                   "deviation must be positive")],
                {"config.json": CONFIG, "model.safetensors": WEIGHTS,
                 "preprocessor_config.json": json.dumps(dict(q3.PREPROCESSOR,
                                                             image_std=[-0.5, -0.5, -0.5]))}),
    folder_case("preprocessor-negative-mean",
                [Q("m/preprocessor_config.json' image_mean entry 0 is -1: a mean of pixels "
                   "scaled to [0, 1] lies in [0, 1]")],
                {"config.json": CONFIG, "model.safetensors": WEIGHTS,
                 "preprocessor_config.json": json.dumps(dict(q3.PREPROCESSOR,
                                                             image_mean=[-1.0, 0.5, 0.5]))}),

    # runtime.plugin_dirs entries that are not folders.
    Case(name="plugin-dirs/check-config-refuses", files={"c.toml": dirs_config()},
         setup=fifo("pipe"), args=["check-config", "c.toml"], exit=2, message=DIR_MESSAGES),
    Case(name="plugin-dirs/run-warns", files={"c.toml": dirs_config()}, setup=fifo("pipe"),
         args=run(), exit=0, outputs=REPORT, message=DIR_MESSAGES + ["skipped"]),

    # Floats in messages: short, whatever their size.
    Case(name="numbers/timeout-1e300", files={"c.toml": toy_config()},
         args=["check-config", "c.toml", "--set", "distributed.timeout_s=1e300"], exit=2,
         message=[r"distributed\.timeout_s", Q("got 1e+300")], check=no_long_numbers),
    Case(name="numbers/fps-1e300", files={"c.toml": toy_config()},
         args=["check-config", "c.toml", "--set", "video.fps=1e300"], exit=2,
         message=[r"video\.fps", Q("got 1e+300")], check=no_long_numbers),
    Case(name="numbers/video-fraction-tiny", files={"c.toml": toy_config()},
         args=["check-config", "c.toml", "--set", "workload.video_fraction=-1e-300"], exit=2,
         message=[r"workload\.video_fraction", Q("got -1e-300")], check=no_long_numbers),
]
