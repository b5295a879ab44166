#!/usr/bin/env python3
"""Checks examples/two_path_newcomer, built by build_example.cmake:

1. `encgraph verify` passes on its config;
2. `encgraph encode` of PNG files written here equals a float64 numpy
   reference of the model (from its definition in the plugin's header
   comment): both outputs, "tokens" and "pooled"; requests of two images, the
   first of only small images, so one batch sends no token down the local path;
3. the variant built with -DTWO_PATH_NEWCOMER_ZERO_OFFSETS (cu_seqlens padded
   with zeros) encodes wrongly (so check 2 can fail) and fails verify (exit 1),
   the diagnosis naming 'cu_seqlens'.

usage: check_two_path_newcomer.py ENCGRAPH CONFIG PLUGIN_DIR BROKEN_PLUGIN_DIR WORK_DIR
"""

import os
import shutil
import sys

from example_checks import (np, compare, plugin_dir_setting, read_report, read_safetensors, run,
                            scaled_error, splitmix64, write_png)

PATCH, VIEW, HIDDEN, HEADS = 8, 32, 16, 2


def weights(seed, tensor, n, fan_in):
    """The plugin's weight(): uniform in [-1, 1) / sqrt(fan_in) from splitmix64."""
    base = splitmix64((seed * 8 + tensor) & ((1 << 64) - 1))
    z = [splitmix64((base + k) & ((1 << 64) - 1)) >> 40 for k in range(n)]
    return (np.array(z, np.float64) / 2.0**23 - 1.0) / np.sqrt(fan_in)


def patches(picture):
    """A 32x32x3 picture's 16 patches of 8x8, row-major, each (y, x, channel)."""
    g = VIEW // PATCH
    return picture.reshape(g, PATCH, g, PATCH, 3).transpose(0, 2, 1, 3, 4).reshape(g * g, -1)


def encode_sequence(x, w, b, att_weights):
    wq, wk, wv, wo = att_weights
    t = np.arange(len(x), dtype=np.float64)[:, None]
    j = np.arange(HIDDEN)
    angle = t / 10000.0 ** ((j - j % 2) / HIDDEN)
    h = x @ w.T + b + np.where(j % 2 == 0, np.sin(angle), np.cos(angle))
    q, k, v = h @ wq.T, h @ wk.T, h @ wv.T
    d = HIDDEN // HEADS
    att = np.zeros_like(h)
    for head in range(HEADS):
        s = slice(head * d, (head + 1) * d)
        scores = q[:, s] @ k[:, s].T / np.sqrt(d)
        p = np.exp(scores - scores.max(axis=1, keepdims=True))
        att[:, s] = (p / p.sum(axis=1, keepdims=True)) @ v[:, s]
    return h + att @ wo.T


def reference(rgb, seed):
    """(tokens, pooled) of one image."""
    dim = PATCH * PATCH * 3
    w_global, w_local = (weights(seed, t, HIDDEN * dim, dim).reshape(HIDDEN, dim) for t in (0, 1))
    b_global, b_local = (weights(seed, t, HIDDEN, 1) for t in (2, 3))
    att = [weights(seed, t, HIDDEN * HIDDEN, HIDDEN).reshape(HIDDEN, HIDDEN) for t in (4, 5, 6, 7)]
    px = rgb.astype(np.float64) / 255.0 - 0.5
    h, w, _ = rgb.shape
    view = np.zeros((VIEW, VIEW, 3))
    for vy in range(VIEW):
        y0 = vy * h // VIEW
        y1 = max(y0 + 1, (vy + 1) * h // VIEW)
        for vx in range(VIEW):
            x0 = vx * w // VIEW
            x1 = max(x0 + 1, (vx + 1) * w // VIEW)
            view[vy, vx] = px[y0:y1, x0:x1].mean(axis=(0, 1))
    rows = [encode_sequence(patches(view), w_global, b_global, att)]
    if h * w > VIEW * VIEW:
        for ty in range(h // VIEW):
            for tx in range(w // VIEW):
                tile = px[ty * VIEW : (ty + 1) * VIEW, tx * VIEW : (tx + 1) * VIEW]
                rows.append(encode_sequence(patches(tile), w_local, b_local, att))
    tokens = np.concatenate(rows)
    return tokens, tokens.mean(axis=0, keepdims=True)


def main():
    encgraph, config, plugin_dir, broken_dir, work = sys.argv[1:6]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    good = ["--config", config, "--set", plugin_dir_setting(plugin_dir)]

    out = run([encgraph, "verify", *good])
    if "OK:" not in out:
        sys.exit(f"verify exited 0 without 'OK:':\n{out}")

    # Requests of two (graphs wherever one fits: no eager choice, so padding is
    # exercised): (16x16, 32x32) send no token down the local path (no
    # tiles); then 40x33 (1 tile, cropped), 70x100 (2x3 tiles), 7x200 (a wide
    # view of repeated rows, 0 tiles) and 96x64 (3x2 tiles).
    seed = 11  # the config's [plugin.config] seed
    rng = np.random.default_rng(2027)
    sizes = [(16, 16), (32, 32), (40, 33), (70, 100), (7, 200), (96, 64)]
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
    ran = {p["name"]: p["batches_graph"] + p["batches_eager"] for p in read_report(report)["paths"]}
    if ran != {"global": 3, "local": 2}:
        sys.exit(f"expected 3 batches on the global path and 2 on the local one, got {ran}")
    tensors, meta = read_safetensors(embeddings)
    if meta.get("outputs") != "tokens,pooled":
        sys.exit(f"{embeddings}: metadata {meta}, expected outputs tokens,pooled")
    worst = 0.0
    for f, rgb in zip(files, images):
        tokens, pooled = reference(rgb, seed)
        worst = max(worst, compare(f, tensors[f], tokens))
        worst = max(worst, compare(f + "/pooled", tensors[f + "/pooled"], pooled))
    print(f"encode: {len(files)} images match the float64 reference, both outputs "
          f"(worst scaled error {worst:.2g})")

    # The broken variant's encode differs from the reference (its graphs' padding
    # offsets drop to 0, and the forward zeroes every row past the last offset),
    # so the check above can fail.
    broken = ["--config", config, "--set", plugin_dir_setting(broken_dir)]
    run([encgraph, "encode", *broken, *requests_of_two, "-o", embeddings, *files])
    tensors, _ = read_safetensors(embeddings)
    wrong = [f for f, rgb in zip(files, images)
             if scaled_error(tensors[f], reference(rgb, seed)[0]) > 1e-4]
    if not wrong:
        sys.exit("the broken variant's encode matched the reference")

    out = run([encgraph, "verify", "--config", config, "--set", plugin_dir_setting(broken_dir)],
              expect_rc=1)
    for needle in ("MISMATCH:", "buffer 'cu_seqlens' is declared zero padding"):
        if needle not in out:
            sys.exit(f"verify rejected the broken variant, but without '{needle}':\n{out}")
    print("verify rejects cu_seqlens padded with zeros, naming the buffer")


if __name__ == "__main__":
    main()
