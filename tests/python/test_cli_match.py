"""The module's embeddings equal `encgraph encode`'s file for the same inputs."""

import json

import numpy as np
import pytest

import encgraph
from pyhelpers import QUIET, QWEN, SIGLIP, SIGLIP_OUTPUTS, TOY, cli_encode, image, write_png

TOLERANCE = dict(rtol=1e-4, atol=1e-5)
CASES = {
    "toy": (TOY, [(56, 84), (28, 28), (112, 56)]),
    "qwen": (QWEN, [(56, 84), (112, 56), (56, 56)]),
    "siglip": (SIGLIP, [(64, 64), (40, 96), (160, 32)]),
    "siglip_outputs": (SIGLIP_OUTPUTS, [(64, 64), (96, 40)]),
}


def tensor_name(item_id, outputs, o):
    """host/src/embeddings.hpp: the first output by the id, others '<id>/<name>'."""
    return item_id if o == 0 else f"{item_id}/{outputs[o]}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_images_equal_the_cli(case, tmp_path):
    config, sizes = CASES[case]
    pixels = [image(h, w, 20 + i) for i, (h, w) in enumerate(sizes)]
    files = [write_png(tmp_path / f"img{i}.png", p) for i, p in enumerate(pixels)]
    expected = cli_encode(config, tmp_path / "out.safetensors", files=files)
    rt = encgraph.Runtime(config, **QUIET)
    rt.capture()  # as the CLI does with runtime.use_graphs = true
    outputs = [o["name"] for o in rt.model_info["outputs"]]
    for items in (files, pixels):  # by path and by the same pixels in memory
        results = rt.encode(images=items)
        for f, r in zip(files, results):
            for o, name in enumerate(outputs):
                np.testing.assert_allclose(r[name].numpy(), expected[tensor_name(f, outputs, o)],
                                           **TOLERANCE)
    copies = rt.encode(images=files, out="numpy")
    for f, c in zip(files, copies):
        for o, name in enumerate(outputs):
            np.testing.assert_allclose(c[name], expected[tensor_name(f, outputs, o)], **TOLERANCE)


@pytest.mark.parametrize("config", [TOY, QWEN], ids=["toy", "qwen"])
def test_videos_equal_the_cli(config, tmp_path):
    frames = [image(56, 84, 40 + f) for f in range(4)]
    files = [write_png(tmp_path / f"frame{f}.png", p) for f, p in enumerate(frames)]
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({"modality": "video", "frames_files": files, "id": "clip"}) + "\n")
    expected = cli_encode(config, tmp_path / "out.safetensors", trace=trace)
    rt = encgraph.Runtime(config, **QUIET)
    rt.capture()
    for video in (files, frames, np.stack(frames)):
        [r] = rt.encode(videos=[video])
        np.testing.assert_allclose(r.numpy(), expected["clip"], **TOLERANCE)
