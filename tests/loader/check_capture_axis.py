#!/usr/bin/env python3
"""Checks examples/capture_axis_plugin, built by build_example.cmake:

1. `encgraph verify` passes on its config (every batch under the keys it selects);
2. `encgraph encode` of PNG files written here equals a float64 numpy
   reference of the model (computed from the model's definition in the
   plugin's header comment, not from its code), including an image cropped to
   whole patches and one longer than the largest key (run eagerly);
3. the variant built with -DCAPTURE_AXIS_FIRST_ITEM_ONLY encodes the one
   image batched after a shorter one wrongly (so check 2 can fail), and fails
   verify (exit 1) with the capture-axis diagnosis.

usage: check_capture_axis.py ENCGRAPH CONFIG PLUGIN_DIR BROKEN_PLUGIN_DIR WORK_DIR
"""

import os
import shutil
import sys

from example_checks import (np, compare, plugin_dir_setting, read_report, read_safetensors, run,
                            scaled_error, splitmix64, write_png)

PATCH, HIDDEN, HEADS = 8, 16, 2


def weights(seed, tensor, n, fan_in):
    """The plugin's weight(): uniform in [-1, 1) / sqrt(fan_in) from splitmix64."""
    base = splitmix64((seed * 8 + tensor) & ((1 << 64) - 1))
    z = [splitmix64((base + k) & ((1 << 64) - 1)) >> 40 for k in range(n)]
    return (np.array(z, np.float64) / 2.0**23 - 1.0) / np.sqrt(fan_in)


def reference(rgb, seed):
    h, w, _ = rgb.shape
    ph, pw = h // PATCH, w // PATCH
    x = rgb[: ph * PATCH, : pw * PATCH].astype(np.float64) / 255.0 - 0.5
    x = x.reshape(ph, PATCH, pw, PATCH, 3).transpose(0, 2, 1, 3, 4).reshape(ph * pw, -1)
    dim = x.shape[1]
    we = weights(seed, 0, HIDDEN * dim, dim).reshape(HIDDEN, dim)
    be = weights(seed, 1, HIDDEN, 1)
    wq, wk, wv, wo = (weights(seed, t, HIDDEN * HIDDEN, HIDDEN).reshape(HIDDEN, HIDDEN)
                      for t in (2, 3, 4, 5))
    t = np.arange(len(x), dtype=np.float64)[:, None]
    j = np.arange(HIDDEN)
    angle = t / 10000.0 ** ((j - j % 2) / HIDDEN)
    hid = x @ we.T + be + np.where(j % 2 == 0, np.sin(angle), np.cos(angle))
    q, k, v = hid @ wq.T, hid @ wk.T, hid @ wv.T
    d = HIDDEN // HEADS
    att = np.zeros_like(hid)
    for head in range(HEADS):
        s = slice(head * d, (head + 1) * d)
        scores = q[:, s] @ k[:, s].T / np.sqrt(d)
        p = np.exp(scores - scores.max(axis=1, keepdims=True))
        att[:, s] = (p / p.sum(axis=1, keepdims=True)) @ v[:, s]
    return hid + att @ wo.T


def main():
    encgraph, config, plugin_dir, broken_dir, work = sys.argv[1:6]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    good = ["--config", config, "--set", plugin_dir_setting(plugin_dir)]

    out = run([encgraph, "verify", *good])
    if "OK:" not in out:
        sys.exit(f"verify exited 0 without 'OK:':\n{out}")

    # Requests of two, one batch each (graphs only where one fits, no eager
    # choice): 1 patch and a 12x20 image cropped to 1x2 patches (key 16); 15 and
    # 64 patches (key 64, the longer item second); 120 and 256 (key 256); 300
    # patches alone (over the largest key: eager under its own length).
    seed = 7  # the config's [plugin.config] seed
    rng = np.random.default_rng(2026)
    sizes = [(8, 8), (12, 20), (24, 40), (64, 64), (100, 81), (128, 128), (120, 160)]
    files, images = [], []
    for i, (h, w) in enumerate(sizes):
        files.append(os.path.join(work, f"image{i}_{h}x{w}.png"))
        images.append(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
        write_png(files[-1], images[-1])
    embeddings = os.path.join(work, "out.safetensors")
    report = os.path.join(work, "report.json")
    requests_of_two = ["--set", "workload.request_size=2",
                       "--set", "runtime.prefer_faster_path=false"]
    run([encgraph, "encode", *good, *requests_of_two, "-o", embeddings, "--report", report, *files])
    stats = read_report(report)
    reasons = stats["paths"][0]["eager_reasons"]
    if (stats["graph_hits"], stats["graph_misses"], reasons["no_graph_for_axis_keys"]) != (6, 1, 1):
        sys.exit(f"expected 6 items replayed and 1 eager for its axis key, got {stats}")
    tensors, meta = read_safetensors(embeddings)
    if meta.get("plugin") != "capture_axis":
        sys.exit(f"{embeddings}: metadata {meta}, expected plugin capture_axis")
    worst = 0.0
    for f, rgb in zip(files, images):
        worst = max(worst, compare(f, tensors[f], reference(rgb, seed)))
    print(f"encode: {len(files)} images match the float64 reference "
          f"(worst scaled error {worst:.2g})")

    # The broken variant's encode differs from the reference (the 64-patch image
    # batched after the 15-patch one runs under key 16), so the check above can fail.
    broken = ["--config", config, "--set", plugin_dir_setting(broken_dir)]
    run([encgraph, "encode", *broken, *requests_of_two, "-o", embeddings, *files])
    tensors, _ = read_safetensors(embeddings)
    wrong = [f for f, rgb in zip(files, images)
             if scaled_error(tensors[f], reference(rgb, seed)) > 1e-4]
    if wrong != [files[3]]:
        sys.exit(f"the broken variant should get exactly {files[3]} wrong, got {wrong}")

    out = run([encgraph, "verify", "--config", config, "--set", plugin_dir_setting(broken_dir)],
              expect_rc=1)
    for needle in ("MISMATCH:", "capture-axis keys", "select_axis_keys must return keys"):
        if needle not in out:
            sys.exit(f"verify rejected the broken variant, but without '{needle}':\n{out}")
    print("verify rejects select_axis_keys that reads only the first item")


if __name__ == "__main__":
    main()
