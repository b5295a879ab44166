"""No leak over 1000 encodes: the process's resident memory stays flat."""

import gc

import numpy as np

import encgraph
from pyhelpers import QUIET, TOY, image, rss_bytes


def test_rss_flat_over_1000_encodes(tmp_path):
    rt = encgraph.Runtime(TOY, **QUIET)
    rt.capture()
    pixels = [image(56, 84, 1), image(28, 28, 2)]
    frames = np.stack([image(28, 56, 3)] * 2)

    def one_call(k):
        results = rt.encode(images=pixels, videos=[frames])
        views = [np.from_dlpack(r) for r in results]   # consumed capsules
        results[0].__dlpack__()                          # one never consumed
        if k % 2:
            rt.encode(images=pixels, out="numpy")
        return float(sum(v.sum() for v in views))

    for k in range(100):  # warm-up: allocator pools, graph buffers, caches
        one_call(k)
    gc.collect()
    before = rss_bytes()
    for k in range(1000):
        one_call(k)
    gc.collect()
    grown = rss_bytes() - before
    # 1000 calls leaking one result each would hold megabytes.
    assert grown < 4 * 1024 * 1024, f"RSS grew by {grown / 1e6:.1f} MB"
