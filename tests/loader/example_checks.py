"""Helpers for the example plugins' checks (check_capture_axis.py,
check_two_path_newcomer.py): PNG files written without Pillow, the embeddings
file read without the safetensors package, encgraph runs, and the row-scaled
comparison `encgraph verify` uses (|a - b| <= tol x max(1, the row's largest |b|))."""

import json
import os
import struct
import subprocess
import sys
import zlib

try:
    import numpy as np
except ImportError:  # scripts/setup-deps.sh installs python3-numpy
    print("python3-numpy missing (scripts/setup-deps.sh): skipped")
    sys.exit(77)



def write_png(path, rgb):
    """Writes an HxWx3 uint8 array as an 8-bit RGB PNG."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def read_safetensors(path):
    """{name: float32 array} of an F32 safetensors file, and its metadata."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        assert t["dtype"] == "F32", f"{name}: dtype {t['dtype']}, expected F32"
        begin, end = t["data_offsets"]
        tensors[name] = np.frombuffer(data[8 + n + begin : 8 + n + end], "<f4").reshape(t["shape"])
    return tensors, meta


def run(args, expect_rc=0):
    """Runs a command, returns its stdout + stderr; fails on another exit code."""
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != expect_rc:
        sys.exit(f"{' '.join(args)}\nexited {p.returncode}, expected {expect_rc}:\n{p.stdout}")
    return p.stdout


def plugin_dir_setting(folder):
    return f'runtime.plugin_dirs=["{os.path.abspath(folder)}"]'


def scaled_error(got, want):
    """The largest |got - want| / max(1, the row's largest |want|); inf for
    another shape or a value that is not finite."""
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        return float("inf")
    scale = np.maximum(1.0, np.abs(want).max(axis=1, keepdims=True))
    return float((np.abs(got.astype(np.float64) - want) / scale).max())


def compare(name, got, want, tol=1e-4):
    """Fails unless `got` has `want`'s shape and every row is within tol x max(1, |row|)."""
    if got.shape != want.shape:
        sys.exit(f"{name}: shape {got.shape}, the reference's {want.shape}")
    err = scaled_error(got, want)
    if err > tol:
        scale = np.maximum(1.0, np.abs(want).max(axis=1, keepdims=True))
        rows = np.abs(got.astype(np.float64) - want) / scale
        r, c = np.unravel_index(np.nanargmax(np.where(np.isfinite(rows), rows, np.inf)), rows.shape)
        sys.exit(f"{name}: row {r}, column {c}: got {got[r, c]}, reference {want[r, c]}"
                 f" (scaled error {err:.3g} > {tol})")
    return err


def read_report(path):
    """The one result entry of an `encgraph encode --report` file."""
    with open(path) as f:
        results = json.load(f)["results"]
    if len(results) != 1:
        sys.exit(f"{path}: {len(results)} result entries, expected 1")
    return results[0]


def splitmix64(x):
    m = (1 << 64) - 1
    x = (x + 0x9E3779B97F4A7C15) & m
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
    return x ^ (x >> 31)
