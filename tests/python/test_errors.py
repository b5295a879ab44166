"""Bad arguments give the right exception types, with the host's messages."""

import numpy as np
import pytest

import encgraph
from pyhelpers import QUIET, SIGLIP, TOY, cli_error, image, write_png


@pytest.fixture(scope="module")
def rt():
    return encgraph.Runtime(TOY, **QUIET)


def test_hierarchy():
    for cls in (encgraph.ConfigError, encgraph.PluginError, encgraph.InputError,
                encgraph.DeviceError):
        assert issubclass(cls, encgraph.Error) and issubclass(cls, Exception)
    assert issubclass(encgraph.ConfigError, ValueError)
    assert issubclass(encgraph.InputError, ValueError)
    assert issubclass(encgraph.PluginError, RuntimeError)
    assert issubclass(encgraph.DeviceError, RuntimeError)


def test_unknown_key_has_the_cli_message():
    with pytest.raises(encgraph.ConfigError) as caught:
        encgraph.Runtime(TOY, **{"budgets.max_item_per_batch": 8})
    code, stderr = cli_error(["check-config", "-c", TOY, "--set", "budgets.max_item_per_batch=8"])
    assert code == 2
    message = str(caught.value)
    assert "unknown key 'budgets.max_item_per_batch'" in message
    assert "did you mean 'max_items_per_batch'" in message
    assert message in stderr


def test_bad_values_are_config_errors():
    with pytest.raises(encgraph.ConfigError, match="budgets.max_items_per_batch: expected an integer"):
        encgraph.Runtime(TOY, budgets__max_items_per_batch="eight")
    with pytest.raises(encgraph.ConfigError, match="must be >= 0"):
        encgraph.Runtime(TOY, budgets__max_items_per_batch=-1)
    with pytest.raises(encgraph.ConfigError, match="is not a device"):
        encgraph.Runtime(TOY, runtime__device="tpu")
    with pytest.raises(encgraph.ConfigError, match="None is no config value"):
        encgraph.Runtime(TOY, runtime__device=None)
    with pytest.raises(encgraph.ConfigError, match="unknown key 'plugn'"):
        encgraph.Runtime({"plugn": {"name": "toy"}})
    with pytest.raises(encgraph.ConfigError, match="64-bit"):
        encgraph.Runtime(TOY, budgets__max_items_per_batch=2**70)
    # A config file that cannot be read is a bad input, as in the CLI (exit code 2).
    with pytest.raises(encgraph.InputError, match="toy.toml.missing' does not exist"):
        encgraph.Runtime(TOY + ".missing")


# Every budget rule lives in the core (check_budget_request, plan_budgets), as do
# the tuning options' rules: the same message through Python and through the
# CLI, naming the key.
BUDGET_RULES = [
    ({"budgets__token_budgets": [64, 0]},
     "budgets.token_budgets: budgets must be positive, got 0"),
    ({"budgets__token_budgets": [64, 2**40]},
     "budgets.token_budgets: must be <= 1073741824"),
    ({"budgets__token_step": -64}, "budgets.token_step: must be >= 0 (0: powers of two)"),
    ({"budgets__token_budgets": [64], "budgets__token_step": 64},
     "budgets.token_step: shapes generated budgets, but budgets.token_budgets lists them"),
    ({"budgets__token_budgets": [64, 128], "budgets__max_items_per_batch": 65},
     "budgets.max_items_per_batch: 65 must be <= the smallest token budget (64)"),
    ({"budgets__max_items_per_batch": -1}, "budgets.max_items_per_batch: must be >= 0"),
    ({"budgets__max_frames_per_batch": -1}, "budgets.max_frames_per_batch: must be >= 0"),
    ({"budgets__paths__default__token_budgets": [64, -8]},
     "budgets.paths.default.token_budgets: budgets must be positive, got -8"),
    ({"budgets__paths__default__token_step": 0}, "budgets.paths.default: gives no budgets"),
    ({"budgets__token_budgets": list(range(64, 64 * 301, 64))},
     "budgets.token_budgets: the plan would capture 300 graphs, more than limits.max_graphs"),
    ({"budgets__paths__lokal__token_budgets": [64]},
     "budgets.paths.lokal: the plugin has no path 'lokal'"),
    # [plugin.tuning]: the values' rules are core's too (tuning_options.cpp).
    ({"plugin__tuning__cpu_threads": 0}, "plugin.tuning.cpu_threads: must be an integer in [1, 1024]"),
    ({"plugin__tuning__cache_dir": ""}, "plugin.tuning.cache_dir: is empty"),
    ({"plugin__tuning__cpu_thread": 2},
     "unknown key 'plugin.tuning.cpu_thread' (known keys in [plugin.tuning]: cpu_threads, "
     "cache_dir); did you mean 'cpu_threads'?"),
]


def sets_of(overrides):
    out = []
    for key, value in overrides.items():
        if isinstance(value, list):
            text = "[" + ", ".join(map(str, value)) + "]"
        elif isinstance(value, str):
            text = '"' + value + '"'
        else:
            text = str(value)
        out += ["--set", key.replace("__", ".") + "=" + text]
    return out


@pytest.mark.parametrize("overrides,expected", BUDGET_RULES)
def test_core_rules_through_python_and_the_cli(overrides, expected):
    with pytest.raises(encgraph.ConfigError) as caught:
        encgraph.Runtime(TOY, **overrides, **QUIET)
    message = str(caught.value)
    assert expected in message
    code, stderr = cli_error(["check-config", "-c", TOY] + sets_of(overrides))
    assert code == 2
    assert expected in stderr


def test_unknown_plugin_is_a_config_error():
    with pytest.raises(encgraph.ConfigError, match="nosuchplugin"):
        encgraph.Runtime(TOY, plugin__name="nosuchplugin", **QUIET)


def test_plugin_rejecting_its_config():
    with pytest.raises(encgraph.ConfigError, match=r"\[plugin.config\] or plugin.weights rejected"):
        encgraph.Runtime(TOY, plugin__config__hidden=-5, **QUIET)


def test_cuda_on_a_cpu_build_is_an_error():
    with pytest.raises(encgraph.Error):
        encgraph.Runtime(TOY, runtime__device="cuda:0", **QUIET)


def test_wrong_argument_types(rt):
    with pytest.raises(TypeError, match="wrap a single one"):
        rt.encode(images="a.png")
    with pytest.raises(TypeError, match="wrap a single one"):
        rt.encode(images=image(28, 28))
    with pytest.raises(TypeError, match="list or tuple"):
        rt.encode(images={"a.png"})
    with pytest.raises(ValueError, match="out must be"):
        rt.encode(images=[image(28, 28)], out="torch")
    with pytest.raises(TypeError):
        encgraph.Runtime(config=5)
    with pytest.raises(TypeError, match="plugin_dirs"):
        encgraph.plugins("dir")


def test_bad_items_are_input_errors(rt, tmp_path):
    cases = [
        ([5], r"images\[0\]: expected a path, a PIL.Image or an HxWx3 uint8 array, got int"),
        ([np.zeros((28, 28), np.uint8)], r"images\[0\]: expected HxWx3 uint8 pixels .* shape \(28, 28\)"),
        ([np.zeros((28, 28, 4), np.uint8)], r"drop the alpha channel"),
        ([np.zeros((28, 28, 3), np.float32)], r"format 'f'"),
        ([np.zeros((0, 28, 3), np.uint8)], r"empty"),
        ([str(tmp_path / "missing.png")], r"images\[0\].*missing.png"),
    ]
    (tmp_path / "text.png").write_text("not an image")
    cases.append(([str(tmp_path / "text.png")], r"text.png"))
    for images, pattern in cases:
        with pytest.raises(encgraph.InputError, match=pattern):
            rt.encode(images=images)
    with pytest.raises(encgraph.InputError, match=r"videos\[0\]: a video needs at least one frame"):
        rt.encode(videos=[[]])
    with pytest.raises(encgraph.InputError, match=r"frame 1 is 28x56 but frame 0 is 28x28"):
        rt.encode(videos=[[image(28, 28), image(28, 56)]])
    with pytest.raises(encgraph.InputError, match="TxHxWx3"):
        rt.encode(videos=[np.zeros((2, 28, 28), np.uint8)])
    with pytest.raises(encgraph.InputError, match="limits.max_image_pixels"):
        encgraph.Runtime(TOY, limits__max_image_pixels=100, **QUIET).encode(images=[image(28, 28)])
    with pytest.raises(encgraph.InputError, match="limits.max_frames_per_video"):
        encgraph.Runtime(TOY, limits__max_frames_per_video=2, **QUIET).encode(
            videos=[np.zeros((3, 28, 28, 3), np.uint8)])
    # The runtime still works after every refusal.
    assert rt.encode(images=[write_png(tmp_path / "ok.png", image(28, 28))])[0].tokens == 4


def test_videos_on_an_image_plugin():
    siglip = encgraph.Runtime(SIGLIP, **QUIET)
    with pytest.raises(encgraph.InputError, match="plugin 'siglip' takes images only"):
        siglip.encode(videos=[np.zeros((2, 64, 64, 3), np.uint8)])


def test_closed_runtime():
    runtime = encgraph.Runtime(TOY, **QUIET)
    runtime.close()
    with pytest.raises(encgraph.Error, match="closed"):
        runtime.encode(images=[image(28, 28)])


def test_bad_video_file_is_an_input_error(rt, tmp_path):
    bogus = tmp_path / "clip.mp4"
    bogus.write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 64)  # an MP4 signature, no movie
    with pytest.raises(encgraph.InputError, match=r"videos\[0\] \('.*clip.mp4'\)"):
        rt.encode(videos=[str(bogus)])
    with pytest.raises(encgraph.InputError, match=r"videos\[0\]"):
        rt.encode(videos=[tmp_path / "missing.mp4"])
