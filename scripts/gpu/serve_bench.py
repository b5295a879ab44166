#!/usr/bin/env python3
"""`encgraph serve` under load against `encgraph bench` on the same config.

64 closed-loop clients (each sends its next request as soon as the last one is
answered), one 224x224 PNG per request, sent as a binary BYTES tensor with the
outputs asked in binary; a share of the requests (--repeat, 50% by default)
repeat an image already sent, so the embedding cache answers them. Reports
served images/s, client latency percentiles, the cache hit rate, the mean
batch the scheduler formed and the share of batches mixing requests, then
`encgraph bench` on 224x224 images of the same config (graphs vs eager,
items/s) as the ceiling the server's engine time is compared with.

Standard library only (the GPU machine has no requests). Run from the
repository root of an unpacked bundle:

  python3 scripts/gpu/serve_bench.py --encgraph gpu-bundle/bin/encgraph \
      --plugin-dir gpu-bundle/plugins --config configs/siglip.toml

--table FILE appends a Markdown table (the bench_serve step of scripts/gpu/steps.sh passes it).
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib


_BASE = {}


def png(side, seed):
    """A side x side RGB PNG unique to `seed`: a fixed pattern whose first row
    carries the seed, so that making one costs a zlib pass, not a Python loop."""
    if side not in _BASE:
        _BASE[side] = bytearray(b"".join(
            b"\0" + bytes(((x * 7 + y * 13 + ch * 85) & 255) for x in range(side) for ch in range(3))
            for y in range(side)))
    raw = bytearray(_BASE[side])
    raw[1:9] = struct.pack("<Q", seed)
    chunk = lambda k, d: struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(bytes(raw), 1)) + chunk(b"IEND", b""))


def binary_request(image):
    blob = struct.pack("<I", len(image)) + image
    head = json.dumps({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1],
                                   "parameters": {"binary_data_size": len(blob)}}],
                       "parameters": {"binary_data_output": True}}).encode()
    return head + blob, {"Inference-Header-Content-Length": str(len(head)),
                         "Content-Type": "application/octet-stream"}


def metrics(host, port):
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name = re.split(r"[{ ]", line, 1)[0]
        out[name] = out.get(name, 0.0) + float(line.split()[-1])
    return out


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(p / 100 * len(v) + 0.5)) - 1))] if v else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--encgraph", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--plugin-dir", default="")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--requests", type=int, default=4096, help="measured requests in all")
    ap.add_argument("--repeat", type=float, default=0.5, help="share of requests repeating a sent image")
    ap.add_argument("--side", type=int, default=224)
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE for both serve and bench")
    ap.add_argument("--table", default="")
    args = ap.parse_args()

    sets = list(args.set)
    if args.plugin_dir:
        sets.append(f'runtime.plugin_dirs=["{os.path.abspath(args.plugin_dir)}"]')
    set_args = [a for s in sets for a in ("--set", s)]
    rng = random.Random(1)
    # Every image made before the clients start: the clients only send.
    pool = [png(args.side, seed) for seed in range(4 * args.clients + args.requests)]
    fresh = iter(range(len(pool)))
    lock = threading.Lock()
    sent = []  # indices of images already sent: the repeats' pool

    server = subprocess.Popen([args.encgraph, "serve", "--config", args.config, "--http", "127.0.0.1:0",
                               "--set", "serve.threads=16", "--set", "runtime.log_level=warn"] + set_args,
                              stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    if not line.startswith("listening on http://"):
        sys.exit(f"serve did not start: {line!r}")
    host, port = line.split("//")[1].strip().rsplit(":", 1)
    port = int(port)

    def next_image():
        with lock:
            if sent and rng.random() < args.repeat:
                return pool[rng.choice(sent)]
            index = next(fresh)
            sent.append(index)
        return pool[index]

    def run_clients(total):
        latencies, errors = [], []
        left = [total]

        def client():
            conn = http.client.HTTPConnection(host, port, timeout=300)
            while True:
                with lock:
                    if left[0] == 0:
                        break
                    left[0] -= 1
                body, headers = binary_request(next_image())
                t0 = time.perf_counter()
                conn.request("POST", "/v2/models/%s/infer" % os.path.splitext(os.path.basename(args.config))[0],
                             body=body, headers=headers)
                r = conn.getresponse()
                r.read()
                dt = time.perf_counter() - t0
                with lock:
                    (latencies if r.status == 200 else errors).append(dt if r.status == 200 else r.status)
            conn.close()

        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return latencies, errors, time.perf_counter() - t0

    run_clients(4 * args.clients)  # warm-up: connections, allocator, first batches
    before = metrics(host, port)
    latencies, errors, seconds = run_clients(args.requests)
    after = metrics(host, port)
    server.send_signal(signal.SIGTERM)
    exit_code = server.wait(timeout=300)

    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    batches = max(d.get("encgraph_batches_total", 0.0), 1.0)
    served = {
        "images_per_s": len(latencies) / seconds,
        "p50_ms": percentile(latencies, 50) * 1e3,
        "p90_ms": percentile(latencies, 90) * 1e3,
        "p99_ms": percentile(latencies, 99) * 1e3,
        "errors": len(errors),
        "cache_hit_rate": d.get("encgraph_cache_hits_total", 0.0)
        / max(1.0, d.get("encgraph_cache_hits_total", 0.0) + d.get("encgraph_cache_misses_total", 0.0)
              + d.get("encgraph_cache_dedup_total", 0.0)),
        "mean_batch_items": d.get("encgraph_batch_items_total", 0.0) / batches,
        "multi_request_batches": d.get("encgraph_batches_multi_request_total", 0.0) / batches,
        "mean_queue_ms": 1e3 * d.get("encgraph_queue_seconds_total", 0.0)
        / max(1.0, d.get("encgraph_queue_items_total", 0.0)),
        "exit_code": exit_code,
    }
    print(json.dumps({"serve": served}, indent=1), flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "bench.json")
        subprocess.run([args.encgraph, "bench", "--config", args.config, "--report", report,
                        "--set", f"workload.sizes=[[{args.side}, {args.side}]]",
                        "--set", "workload.video_fraction=0.0", "--set", "workload.count=1024",
                        "--set", "workload.request_size=64", "--set", "runtime.log_level=warn"] + set_args,
                       check=True, stdout=subprocess.DEVNULL)
        results = json.load(open(report))["results"]
    bench = {r["mode"]: r["items_per_s"] for r in results}
    print(json.dumps({"bench_items_per_s": bench}, indent=1), flush=True)

    rows = [("served images/s (%d clients, %d%% repeats)" % (args.clients, round(100 * args.repeat)),
             "%.1f" % served["images_per_s"]),
            ("client latency p50 / p90 / p99 ms", "%.1f / %.1f / %.1f" % (served["p50_ms"], served["p90_ms"],
                                                                         served["p99_ms"])),
            ("cache hit rate", "%.1f%%" % (100 * served["cache_hit_rate"])),
            ("mean batch (items) / batches mixing requests", "%.1f / %.0f%%" % (
                served["mean_batch_items"], 100 * served["multi_request_batches"])),
            ("mean queue wait ms", "%.2f" % served["mean_queue_ms"]),
            ("errors / exit code after SIGTERM", "%d / %d" % (served["errors"], exit_code))]
    rows += [("bench %s items/s (%dx%d, requests of 64)" % (m, args.side, args.side), "%.1f" % v)
             for m, v in bench.items()]
    table = "| serve_bench (%s) | value |\n|---|---|\n" % os.path.basename(args.config)
    table += "".join("| %s | %s |\n" % r for r in rows)
    print(table)
    if args.table:
        with open(args.table, "a") as f:
            f.write(table)
    return 0 if not errors and exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
