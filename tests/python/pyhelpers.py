"""Shared helpers of the Python module's tests: where the build is, PNG files
written without PIL, a safetensors reader without the safetensors package,
and the CLI run the results are compared with."""

import json
import os
import struct
import subprocess
import zlib

import numpy as np

SOURCE_DIR = os.environ.get(
    "ENCGRAPH_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
)
ENCGRAPH_BIN = os.environ.get("ENCGRAPH_BIN", "")

# The configs every call is tested on, with their quiet log level.
TOY = os.path.join(SOURCE_DIR, "configs", "toy.toml")
QWEN = os.path.join(SOURCE_DIR, "configs", "qwen2_5_vl_small_cpu.toml")
SIGLIP = os.path.join(SOURCE_DIR, "configs", "siglip_small_cpu.toml")
SIGLIP_OUTPUTS = os.path.join(SOURCE_DIR, "configs", "siglip_outputs_cpu.toml")
QUIET = {"runtime__log_level": "warn"}


def image(height, width, seed=0):
    """A deterministic HxWx3 uint8 image."""
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def write_png(path, pixels):
    """An 8-bit RGB PNG of an HxWx3 uint8 array (lossless: decodes to `pixels`)."""
    height, width, _ = pixels.shape
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(height))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header))
        f.write(chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    return str(path)


_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I32": np.int32,
           "I64": np.int64, "U8": np.uint8}


def read_safetensors(path):
    """{name: array} of a safetensors file (BF16 widened to float32)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        raw = body[start:end]
        if spec["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=_DTYPES[spec["dtype"]])
        out[name] = array.reshape(spec["shape"])
    return out


def cli_encode(config, out_path, files=None, trace=None, sets=()):
    """Runs `encgraph encode` and returns its embeddings file as {name: array}."""
    assert ENCGRAPH_BIN, "ENCGRAPH_BIN names the built encgraph command"
    args = [ENCGRAPH_BIN, "encode", "-c", config, "-o", str(out_path),
            "--set", "runtime.log_level=warn"]
    for s in sets:
        args += ["--set", s]
    if trace:
        args += ["--trace", str(trace)]
    args += [str(f) for f in files or []]
    run = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    return read_safetensors(out_path)


def cli_error(args):
    """The error message (stderr) of a failing encgraph command, and its exit code."""
    run = subprocess.run([ENCGRAPH_BIN] + args, capture_output=True, text=True, timeout=600)
    return run.returncode, run.stderr


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
