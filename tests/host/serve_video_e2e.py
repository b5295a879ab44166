#!/usr/bin/env python3
"""`encgraph serve`'s video inputs end to end on the CPU with a real HTTP client
(python3-requests), against `encgraph encode` of the same videos.

A Matroska file (raw RGB24 frames, written with the standard library by the
hostile-input suite's writer) sent as the BYTES input "videos" must give
encode's embeddings for that file (the same frames sampled) bit for bit, in
JSON and in binary; frames sent as the UINT8 input "frames" [F, H, W, 3]
must give encode's embeddings of those frames as PNG files listed in a trace
line ("frames_files"); a request holding a video, frames and an image
answers each in input order; the same video again is a cache hit; bad video
bytes and frames of the wrong shape are 400 naming the input; the model's
metadata lists the video inputs. Only for a plugin that takes videos (toy).

usage: serve_video_e2e.py ENCGRAPH PLUGIN_DIR CONFIG WORKDIR
"""
import base64
import json
import os
import shutil
import signal
import struct
import subprocess
import sys

try:
    import numpy as np
    import requests
    from PIL import Image
except ImportError as missing:  # Debian python3-requests, python3-pil, python3-numpy
    print(f"skipped: {missing}")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hostile"))
from cases_video import mkv  # noqa: E402  (a Matroska writer, standard library only)

ENCGRAPH, PLUGIN_DIR, CONFIG, WORK = (os.path.abspath(a) for a in sys.argv[1:5])
MODEL = os.path.splitext(os.path.basename(CONFIG))[0]
SETS = ["--set", f'runtime.plugin_dirs=["{PLUGIN_DIR}"]', "--set", "runtime.log_level=warn"]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_e2e import check, failures, read_safetensors  # noqa: E402  (same arguments)


def encode(out, *args):
    r = subprocess.run([ENCGRAPH, "encode", "--config", CONFIG, *SETS, "-o", out, *args], cwd=WORK,
                       capture_output=True, text=True)
    if r.returncode != 0 and "reading video files needs FFmpeg's" in r.stderr:
        print(f"skipped: this machine has no FFmpeg libraries: {r.stderr}")
        sys.exit(77)
    if r.returncode != 0:
        sys.exit(f"encode {args} failed: {r.stderr}")
    return read_safetensors(os.path.join(WORK, out))


def binary_body(inputs):
    """inputs: (name, datatype, shape, bytes) each; BYTES ones get their length prefix."""
    blobs, head_inputs = [], []
    for name, datatype, shape, data in inputs:
        blob = struct.pack("<I", len(data)) + data if datatype == "BYTES" else data
        blobs.append(blob)
        head_inputs.append({"name": name, "datatype": datatype, "shape": shape,
                            "parameters": {"binary_data_size": len(blob)}})
    head = json.dumps({"inputs": head_inputs, "parameters": {"binary_data_output": True}}).encode()
    return head + b"".join(blobs), {"Inference-Header-Content-Length": str(len(head)),
                                    "Content-Type": "application/octet-stream"}


def outputs_of(response):
    """{name: (shape, little-endian bytes)} of a JSON or binary response."""
    hlen = response.headers.get("Inference-Header-Content-Length")
    body = response.content
    doc = json.loads(body[:int(hlen)] if hlen else body)
    offset = int(hlen) if hlen else 0
    out = {}
    for o in doc["outputs"]:
        if "binary_data_size" in o.get("parameters", {}):
            size = o["parameters"]["binary_data_size"]
            raw = body[offset:offset + size]
            offset += size
        elif o["datatype"] == "INT64":
            raw = struct.pack(f"<{len(o['data'])}q", *o["data"])
        else:
            raw = struct.pack(f"<{len(o['data'])}f", *o["data"])
        out[o["name"]] = (o["shape"], raw)
    return out


def matches(response, reference, keys, outputs, what):
    """The response holds encode's rows of `keys` (reference keys), in order, exactly."""
    if response.status_code != 200:
        check(False, f"{what}: status {response.status_code}: {response.text[:300]}")
        return
    got = outputs_of(response)
    for k, output in enumerate(outputs):
        parts = [reference[key if k == 0 else key + "/" + output] for key in keys]
        shape = [sum(p[0][0] for p in parts), parts[0][0][1]]
        rows = struct.pack(f"<{len(keys)}q", *[p[0][0] for p in parts])
        check(got.get(output, (None, None))[0] == shape, f"{what}: {output} shape {got.get(output)} vs {shape}")
        check(got.get(output, (None, None))[1] == b"".join(p[1] for p in parts),
              f"{what}: {output} differs from encode's")
        check(got.get(output + "_rows", (None, None))[1] == rows, f"{what}: {output}_rows differ")


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    # 40 frames at 10 fps: 4 s, of which the qwen-vl-utils rule samples 8.
    clip = mkv(frames=40, width=56, height=42, fps=10)
    open(os.path.join(WORK, "clip.mkv"), "wb").write(clip)
    rng = np.random.default_rng(3)
    frames = rng.integers(0, 256, (6, 42, 56, 3), dtype=np.uint8)
    names = []
    for i, f in enumerate(frames):
        names.append(f"frame{i}.png")
        Image.fromarray(f).save(os.path.join(WORK, names[-1]))
    image = rng.integers(0, 256, (28, 42, 3), dtype=np.uint8)
    Image.fromarray(image).save(os.path.join(WORK, "image.png"))
    with open(os.path.join(WORK, "frames.jsonl"), "w") as t:
        t.write(json.dumps({"id": "frames", "frames_files": names}) + "\n")
    reference = encode("clip.safetensors", "clip.mkv", "image.png")
    reference.update(encode("frames.safetensors", "--trace", "frames.jsonl"))
    check(reference["clip.mkv"][0][0] == 8 * 12, f"encode sampled other frames: {reference['clip.mkv'][0]}")

    server = subprocess.Popen([ENCGRAPH, "serve", "--config", CONFIG, "--http", "127.0.0.1:0", *SETS],
                              stdout=subprocess.PIPE, text=True, cwd=WORK)
    line = server.stdout.readline()
    if not line.startswith("listening on http://"):
        server.kill()
        sys.exit(f"the server did not start: {line!r}")
    url = line.split()[-1]
    infer = f"{url}/v2/models/{MODEL}/infer"
    meta = requests.get(f"{url}/v2/models/{MODEL}", timeout=30).json()
    outputs = [o["name"] for o in meta["outputs"] if not o["name"].endswith("_rows")]
    inputs = {i["name"]: i["datatype"] for i in meta["inputs"]}
    check(inputs.get("videos") == "BYTES" and inputs.get("frames") == "UINT8",
          f"the metadata does not list the video inputs: {meta['inputs']}")

    # A video file, JSON (base64) then binary.
    r = requests.post(infer, json={"inputs": [{"name": "videos", "datatype": "BYTES", "shape": [1],
                                               "data": [base64.b64encode(clip).decode()]}]}, timeout=120)
    matches(r, reference, ["clip.mkv"], outputs, "video file as JSON")
    body, headers = binary_body([("videos", "BYTES", [1], clip)])
    r = requests.post(infer, data=body, headers=headers, timeout=120)
    matches(r, reference, ["clip.mkv"], outputs, "video file in binary")

    # Frames, binary then JSON (nested lists).
    body, headers = binary_body([("frames", "UINT8", list(frames.shape), frames.tobytes())])
    r = requests.post(infer, data=body, headers=headers, timeout=120)
    matches(r, reference, ["frames"], outputs, "frames in binary")
    r = requests.post(infer, json={"inputs": [{"name": "frames", "datatype": "UINT8",
                                               "shape": list(frames.shape), "data": frames.tolist()}]},
                      timeout=120)
    matches(r, reference, ["frames"], outputs, "frames as JSON")

    # Every kind in one request: answered in input order.
    hits = requests.get(f"{url}/metrics", timeout=30).text
    before = sum(float(l.split()[-1]) for l in hits.splitlines() if l.startswith("encgraph_cache_hits_total"))
    body, headers = binary_body([("frames", "UINT8", [1] + list(frames.shape), frames.tobytes()),
                                 ("images", "BYTES", [1], open(os.path.join(WORK, "image.png"), "rb").read()),
                                 ("videos", "BYTES", [1], clip)])
    r = requests.post(infer, data=body, headers=headers, timeout=120)
    matches(r, reference, ["frames", "image.png", "clip.mkv"], outputs, "frames, image and video together")
    text = requests.get(f"{url}/metrics", timeout=30).text
    after = sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith("encgraph_cache_hits_total"))
    check(after - before == 2, f"the repeated video and frames were {after - before} cache hits, not 2")

    # Bad inputs: 400 naming the input, and the server goes on.
    body, headers = binary_body([("videos", "BYTES", [1], b"not a video at all" * 10)])
    r = requests.post(infer, data=body, headers=headers, timeout=120)
    check(r.status_code == 400 and "videos[0]" in r.text, f"garbage video: {r.status_code} {r.text}")
    check("encgraph-serve-video" not in r.text, f"the error names the temporary file: {r.text}")
    body, headers = binary_body([("videos", "BYTES", [1], clip[:len(clip) // 2])])
    r = requests.post(infer, data=body, headers=headers, timeout=120)
    check(r.status_code == 400 and "videos[0]" in r.text, f"truncated video: {r.status_code} {r.text}")
    body, headers = binary_body([("frames", "UINT8", [42, 56, 3], frames[0].tobytes())])
    r = requests.post(infer, data=body, headers=headers, timeout=120)
    check(r.status_code == 400 and "[frames, height, width, 3]" in r.text,
          f"frames of rank 3: {r.status_code} {r.text}")
    r = requests.post(infer, json={"inputs": [{"name": "videos", "datatype": "UINT8", "shape": [1],
                                               "data": [0]}]}, timeout=120)
    check(r.status_code == 400 and "'frames'" in r.text, f"videos as UINT8: {r.status_code} {r.text}")
    body, headers = binary_body([("videos", "BYTES", [1], clip)])
    r = requests.post(infer, data=body, headers=headers, timeout=120)
    matches(r, reference, ["clip.mkv"], outputs, "the video after the bad requests")
    leftovers = [f for f in os.listdir(os.environ.get("TMPDIR", "/tmp")) if f.startswith("encgraph-serve-video")]
    server.send_signal(signal.SIGTERM)
    check(server.wait(timeout=120) == 0, "the server did not exit 0")
    # Other servers may run at once, so only a count well past this test's is a leak.
    check(len(leftovers) < 4, f"temporary video files are left behind: {leftovers}")
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
