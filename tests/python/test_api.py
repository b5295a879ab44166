"""Every call of the module on the toy, small Qwen and small SigLIP configs."""

import numpy as np
import pytest

import encgraph
from pyhelpers import QUIET, QWEN, SIGLIP, SIGLIP_OUTPUTS, TOY, image, write_png

# (config, image sizes the plugin takes, whether it takes videos)
CONFIGS = {
    "toy": (TOY, [(56, 84), (28, 28)], True),
    "qwen": (QWEN, [(56, 84), (112, 56)], True),
    "siglip": (SIGLIP, [(64, 64), (40, 96)], False),
}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def setup(request):
    config, sizes, videos = CONFIGS[request.param]
    rt = encgraph.Runtime(config, **QUIET)
    yield rt, sizes, videos
    rt.close()


def test_plugins_lists_the_built_plugins():
    found = {p["name"]: p for p in encgraph.plugins()}
    for name in ("toy", "qwen2_5_vl", "siglip"):
        assert name in found
        assert found[name]["abi"].startswith("1.")
        assert "cpu" in found[name]["devices"]
    assert "video" in found["toy"]["modalities"]
    assert found["siglip"]["modalities"] == ["image"]
    assert all(p["valid"] for p in encgraph.plugins(include_rejected=False))


def test_model_info_and_plan(setup):
    rt, _, videos = setup
    info = rt.model_info
    assert info["device"] == "cpu" and info["world_size"] == 1
    assert info["outputs"][0]["width"] == info["out_hidden_size"] > 0
    assert ("video" in info["modalities"]) == videos
    plan = rt.plan
    assert plan["token_budgets"] == sorted(plan["token_budgets"]) and plan["token_budgets"]
    assert plan["max_batch_size"] >= 1
    assert set(plan["path_budgets"]) == {p["name"] for p in info["paths"]}
    assert rt.config["digest"] and "plugin.name" in rt.config["settings"]


def test_capture_then_encode_hits_graphs(setup, tmp_path):
    rt, sizes, _ = setup
    rt.capture()
    assert rt.is_captured
    before = rt.stats()
    phases = before["capture_phases"]  # the report's capture_phases_s
    assert set(phases) == {"prepare_device", "warmup", "capture", "instantiate", "calibrate",
                           "other"}
    assert all(v >= 0 for v in phases.values())
    assert abs(sum(phases.values()) - before["capture_seconds"]) < 1e-6
    paths = [write_png(tmp_path / f"{i}.png", image(h, w, i)) for i, (h, w) in enumerate(sizes)]
    results = rt.encode(images=paths)
    assert len(results) == len(sizes)
    width = rt.model_info["out_hidden_size"]
    for r in results:
        rows, cols = r.shape
        assert rows == r.tokens > 0 and cols == width
        assert r.dtype == "float32" and r.device == "cpu"
        assert list(r) == [o["name"] for o in rt.model_info["outputs"]]
        assert np.isfinite(r.numpy()).all()
    after = rt.stats()
    assert after["graph_hits"] + after["graph_misses"] == (
        before["graph_hits"] + before["graph_misses"] + len(sizes))
    assert after["graph_hits"] > before["graph_hits"]
    assert after["num_graphs"] == len(rt.plan["token_budgets"]) or after["num_graphs"] > 0


def test_image_kinds_agree(setup, tmp_path):
    """A path, an array, a non-contiguous view and a PIL image of the same pixels."""
    rt, sizes, _ = setup
    h, w = sizes[0]
    pixels = image(h, w, 7)
    path = write_png(tmp_path / "a.png", pixels)
    flipped = np.ascontiguousarray(pixels[:, ::-1])[:, ::-1]  # a negative-stride view
    items = [path, pixels, flipped, np.asfortranarray(pixels)]
    try:
        from PIL import Image

        items.append(Image.fromarray(pixels))
        items.append(Image.fromarray(pixels).convert("RGBA"))  # converted to RGB
    except ImportError:
        pass
    results = rt.encode(images=items)
    reference = results[0].numpy()
    for r in results[1:]:
        np.testing.assert_allclose(r.numpy(), reference, rtol=1e-4, atol=1e-5)


def test_videos(setup, tmp_path):
    rt, sizes, videos = setup
    h, w = sizes[0]
    frames = [image(h, w, 10 + f) for f in range(2)]
    if not videos:
        with pytest.raises(encgraph.InputError, match="takes images only"):
            rt.encode(videos=[frames])
        return
    paths = [write_png(tmp_path / f"f{f}.png", frames[f]) for f in range(2)]
    results = rt.encode(videos=[frames, np.stack(frames), paths, tuple(frames)])
    reference = results[0].numpy()
    assert reference.shape[0] == results[0].tokens > 0
    for r in results[1:]:
        np.testing.assert_allclose(r.numpy(), reference, rtol=1e-4, atol=1e-5)


def test_images_then_videos_in_order(setup):
    rt, sizes, videos = setup
    imgs = [image(h, w, i) for i, (h, w) in enumerate(sizes)]
    alone = [rt.encode(images=[x])[0].numpy() for x in imgs]
    together = rt.encode(images=imgs, videos=[[imgs[0]] * 2] if videos else None)
    assert len(together) == len(imgs) + (1 if videos else 0)
    for a, r in zip(alone, together):
        np.testing.assert_allclose(r.numpy(), a, rtol=1e-4, atol=1e-5)


def test_out_numpy_gives_copies(setup):
    rt, sizes, _ = setup
    h, w = sizes[0]
    [shared] = rt.encode(images=[image(h, w, 3)])
    [copies] = rt.encode(images=[image(h, w, 3)], out="numpy")
    assert isinstance(copies, dict) and list(copies) == list(shared)
    for name in shared:
        array = copies[name]
        assert isinstance(array, np.ndarray) and array.flags.owndata
        assert array.__array_interface__["data"][0] != shared[name].data_ptr
        np.testing.assert_allclose(array, shared[name].numpy(), rtol=1e-4, atol=1e-5)


def test_empty_encode(setup):
    rt, _, _ = setup
    assert rt.encode() == [] and rt.encode(images=[], videos=()) == []


def test_dict_config_and_overrides_match_the_file():
    import tomllib

    with open(TOY, "rb") as f:
        table = tomllib.load(f)
    pixels = image(56, 56, 1)
    with encgraph.Runtime(TOY, **QUIET) as a, encgraph.Runtime(table, **QUIET) as b:
        assert a.config["digest"] == b.config["digest"]
        np.testing.assert_array_equal(a.encode(images=[pixels])[0].numpy(),
                                      b.encode(images=[pixels])[0].numpy())
    # Overrides by keyword ("__" for ".") and by dotted key, and a dict value.
    c = encgraph.Runtime(TOY, runtime__log_level="warn", **{"plugin.config.hidden": 32})
    assert c.model_info["out_hidden_size"] == 32
    d = encgraph.Runtime(TOY, runtime={"log_level": "warn"}, plugin__config={"hidden": 16})
    assert d.model_info["out_hidden_size"] == 16
    # No file at all: every key from the overrides.
    e = encgraph.Runtime(plugin__name="toy", plugin__weights="random", runtime__device="cpu",
                         runtime__log_level="warn")
    assert e.model_info["plugin"] == "toy"


def test_several_named_outputs(tmp_path):
    rt = encgraph.Runtime(SIGLIP_OUTPUTS, **QUIET)
    [r] = rt.encode(images=[image(64, 64, 2)])
    assert r.keys() == ["last_hidden_state", "pooled"] and len(r) == 2
    assert r["pooled"].shape == (1, rt.model_info["out_hidden_size"])
    assert r["last_hidden_state"].shape[0] == r.tokens
    assert r[1].name == "pooled" and r[-1].name == "pooled" and "pooled" in r
    with pytest.raises(KeyError, match="last_hidden_state"):
        r["nope"]
    with pytest.raises(IndexError):
        r[2]


def test_results_outlive_the_runtime():
    rt = encgraph.Runtime(TOY, **QUIET)
    [r] = rt.encode(images=[image(28, 56, 4)])
    expected = r.numpy().copy()
    rt.close()
    del rt
    np.testing.assert_array_equal(r.numpy(), expected)
