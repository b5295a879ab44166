#!/usr/bin/env python3
"""`encgraph serve` under load against `encgraph bench` on the same config.

--clients closed-loop connections (each sends its next request as soon as the
last one is answered) spread over --procs client processes, so that no single
Python interpreter (its GIL) caps the load; one 224x224 PNG per request, sent
as a binary BYTES tensor with the outputs asked in binary. Every request body
is built before the clock starts, and responses are read into reused buffers
(recv_into; no per-byte Python work), so a client process costs a few
microseconds of Python per request.

Repeats: a warm-up first sends a hot set of --hot images once each (and waits
for every answer); then a share of the measured requests (--repeat, 50% by
default) sends one of those hot images, the others a fresh image never sent
before. A repeat therefore names an image already answered, and the hot set is
small enough for the cache to hold, so the cache hit rate should come out
close to --repeat; it is reported as hits / lookups, with the lookups that
waited for the same image still being encoded (coalesced) apart.

Reports served images/s, client latency percentiles, the hit and coalesced
rates, the mean batch the scheduler formed and the share of batches mixing
requests, the server's own time per request answered wholly from the cache
(the encgraph_cache_only_request_seconds histogram: request in hand to
response built), then `encgraph bench` on the same images (a trace of the
measured requests' sizes, the first 1024 in the order sent) and config
(graphs vs eager, items/s, in requests of 16 and of 64) as the ceiling the
server's engine time is compared with. Images are --side square (224), or
under --mixed LO,HI of a height and a width drawn per image from LO..HI in
steps of 28, as bench's synthetic workload draws them (the mixed workload:
--mixed 224,1344).

--ceiling measures the harness and the server's fixed costs instead of the
model: every measured request repeats a hot image (a cache hit, no engine
work), and `encgraph bench` is skipped. Its requests/s is the most this client
and server pair can serve at this response size; a model's served images/s
near it means the harness (or the HTTP path), not the engine, is the limit.

Standard library only (the GPU machine has no requests). Run from the
repository root of an unpacked bundle:

  python3 scripts/gpu/serve_bench.py --encgraph gpu-bundle/bin/encgraph \\
      --plugin-dir gpu-bundle/plugins --config configs/siglip.toml [--ceiling]

--table FILE appends a Markdown table (the bench_serve step of scripts/gpu/steps.sh passes it).
"""
import argparse
import json
import multiprocessing
import os
import random
import re
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
import zlib

_BASE = {}
HOT_SEED = 0               # hot images: seeds 0 .. hot - 1
WARM_SEED = 1 << 40        # warm-up's fresh images
FRESH_SEED = 2 << 40       # measured fresh images: FRESH_SEED + client << 24 + request


SIDES = (224, 224, 28)     # --side, or --mixed's (smallest, largest, step)


def dims_of(seed):
    """The height and width of image `seed`: --side square, or under --mixed
    each drawn from the seed on its own, as `encgraph bench`'s synthetic
    workload draws them (the same image always has the same size)."""
    lo, hi, step = SIDES
    if lo == hi:
        return lo, lo
    rng = random.Random(seed)
    return rng.randrange(lo, hi + 1, step), rng.randrange(lo, hi + 1, step)


def png(seed):
    """An RGB PNG of dims_of(seed) unique to `seed`: rows of a fixed pattern
    (256 of them per width, cached), the first carrying the seed, so that
    making one costs a zlib pass."""
    height, width = dims_of(seed)
    if width not in _BASE:
        first = bytes(((x * 7 + ch * 85) & 255) for x in range(width) for ch in range(3))
        _BASE[width] = [b"\0" + first.translate(bytes((i + k) & 255 for i in range(256)))
                        for k in range(256)]
    rows = _BASE[width]
    raw = bytearray(b"".join(rows[y * 13 & 255] for y in range(height)))
    raw[1:9] = struct.pack("<Q", seed)
    chunk = lambda k, d: struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(bytes(raw), 1)) + chunk(b"IEND", b""))


def http_request(host, model, image):
    """The whole HTTP/1.1 request (head and binary-tensor body) as bytes."""
    blob = struct.pack("<I", len(image)) + image
    head = json.dumps({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1],
                                   "parameters": {"binary_data_size": len(blob)}}],
                       "parameters": {"binary_data_output": True}}).encode()
    body = head + blob
    return (f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: application/octet-stream\r\n"
            f"Inference-Header-Content-Length: {len(head)}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


class Connection:
    """One keep-alive connection reading each response into a reused buffer."""

    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=300)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray(1 << 20)

    def exchange(self, request):
        """Sends `request`, reads the whole response; returns its HTTP status."""
        self.sock.sendall(request)
        view = memoryview(self.buf)
        got, end = 0, -1
        while end < 0:
            if got == len(self.buf):
                view.release()  # a bytearray with a live view cannot be resized
                self._grow(2 * len(self.buf))
                view = memoryview(self.buf)
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise ConnectionError("the server closed the connection")
            got += n
            end = self.buf.find(b"\r\n\r\n", 0, got)
        head = bytes(self.buf[:end]).lower()
        status = int(head[9:12])
        m = re.search(rb"\r\ncontent-length:\s*(\d+)", head)
        total = end + 4 + (int(m.group(1)) if m else 0)
        if total > len(self.buf):
            view.release()
            self._grow(total)
            view = memoryview(self.buf)
        while got < total:
            n = self.sock.recv_into(view[got:total])
            if n == 0:
                raise ConnectionError("the server closed the connection mid-response")
            got += n
        return status

    def _grow(self, size):
        self.buf.extend(bytes(size - len(self.buf)))

    def close(self):
        self.sock.close()


def schedule(client, count, repeat, hot, rng_seed):
    """Client `client`'s image seeds: a repeat of a hot image with probability
    `repeat`, else a fresh one."""
    rng = random.Random(rng_seed * 1000003 + client)
    return [rng.randrange(hot) if hot and rng.random() < repeat else FRESH_SEED + (client << 24) + j
            for j in range(count)]


def client_process(host, port, model, side, plans, barrier, results):
    """Runs the plans (one seed list per connection) on threads, after every
    request body is built and the barrier (the clock's start) is passed.
    Puts (latencies, errors, end, cpu) on `results`, or a failure's text."""
    try:
        results.put(client_load(host, port, model, side, plans, barrier))
    except Exception:  # noqa: BLE001  (reported by the parent, which must not hang)
        barrier.abort()
        results.put(traceback.format_exc())


def client_load(host, port, model, sides, plans, barrier):
    global SIDES
    SIDES = sides  # the parent's, whatever the start method
    images = {}
    requests = []
    for plan in plans:
        for s in plan:
            if s not in images:
                images[s] = http_request(host, model, png(s))
        requests.append([images[s] for s in plan])
    conns = [Connection(host, port) for _ in plans]
    latencies, errors = [], []
    lock = threading.Lock()

    failed = []

    def run(conn, reqs):
        mine, bad = [], []
        try:
            for r in reqs:
                t0 = time.monotonic()
                status = conn.exchange(r)
                dt = time.monotonic() - t0
                (mine.append(dt) if status == 200 else bad.append(status))
        except OSError as e:
            failed.append(repr(e))
        with lock:
            latencies.extend(mine)
            errors.extend(bad)

    threads = [threading.Thread(target=run, args=(c, r)) for c, r in zip(conns, requests)]
    barrier.wait()
    cpu = cpu_seconds()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    end = time.monotonic()
    cpu = cpu_seconds() - cpu
    for c in conns:
        c.close()
    if failed:
        raise RuntimeError("a connection failed: " + failed[0])
    return latencies, errors, end, cpu


def run_load(host, port, model, side, plans, procs):
    """Runs `plans` (one seed list per connection) over `procs` processes;
    returns (latencies, errors, seconds from the common start to the last
    answer, the client processes' CPU seconds in that time)."""
    ctx = multiprocessing.get_context("fork")
    procs = max(1, min(procs, len(plans)))
    barrier = ctx.Barrier(procs + 1)
    results = ctx.Queue()
    workers = [ctx.Process(target=client_process,
                           args=(host, port, model, side, plans[p::procs], barrier, results))
               for p in range(procs)]
    for w in workers:
        w.start()
    try:
        barrier.wait()  # every process has its requests built and connections open
    except threading.BrokenBarrierError:
        pass  # a process failed: its report follows
    t0 = time.monotonic()
    latencies, errors, end, cpu = [], [], t0, 0.0
    failures = []
    for _ in workers:
        report = results.get()
        if isinstance(report, str):
            failures.append(report)
            continue
        lat, err, e, c = report
        latencies += lat
        errors += err
        end = max(end, e)
        cpu += c
    for w in workers:
        w.join()
    if failures:
        sys.exit("a client process failed:\n" + failures[0])
    return latencies, errors, end - t0, cpu


def cpu_seconds():
    """This process's CPU time, all its threads, user and system."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def metrics(host, port):
    text = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=60).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name = re.split(r"[{ ]", line, 1)[0]
        label = re.search(r'(?:le|phase)="([^"]+)"', line)
        if label:
            name += "@" + label.group(1)
        out[name] = out.get(name, 0.0) + float(line.split()[-1])
    return out


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(p / 100 * len(v) + 0.5)) - 1))] if v else 0.0


def histogram_quantile(d, name, q):
    """The upper bound of the bucket holding quantile q (Prometheus-style), in seconds."""
    buckets = sorted(((float(k.split("@")[1]), v) for k, v in d.items() if k.startswith(name + "_bucket@")),
                     key=lambda b: b[0])
    total = d.get(name + "_count", 0.0)
    for bound, count in buckets:
        if total and count >= q * total:
            return bound
    return float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--encgraph", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--plugin-dir", default="")
    ap.add_argument("--clients", type=int, default=64, help="concurrent connections")
    ap.add_argument("--procs", type=int, default=min(16, os.cpu_count() or 1),
                    help="client processes the connections are spread over")
    ap.add_argument("--requests", type=int, default=4096, help="measured requests in all")
    ap.add_argument("--repeat", type=float, default=0.5, help="share of requests repeating a hot image")
    ap.add_argument("--hot", type=int, default=128,
                    help="images sent in the warm-up that repeats choose from (sized to stay cached)")
    ap.add_argument("--side", type=int, default=224)
    ap.add_argument("--mixed", default="",
                    help="LO,HI: each image's side drawn from LO..HI in steps of 28 (the mixed "
                         "workload: 224,1344), bench on the same range; instead of --side")
    ap.add_argument("--ceiling", action="store_true",
                    help="cache hits only (every request repeats a hot image), no encgraph bench: "
                         "the harness's and the HTTP path's ceiling")
    ap.add_argument("--no-bench", action="store_true", help="skip encgraph bench")
    ap.add_argument("--bench-request-sizes", default="16,64",
                    help="encgraph bench's request sizes, comma-separated (16: the issue's gate, "
                         "one batch a request; 64: batches back to back)")
    ap.add_argument("--server-threads", type=int, default=16, help="serve.threads")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE for both serve and bench")
    ap.add_argument("--table", default="")
    args = ap.parse_args()
    if args.ceiling:
        args.repeat, args.no_bench = 1.0, True
    global SIDES
    if args.mixed:
        lo, hi = (int(v) for v in args.mixed.split(","))
        if not 28 <= lo <= hi:
            sys.exit("--mixed wants LO,HI with 28 <= LO <= HI")
        SIDES = (lo, hi, 28)
    else:
        SIDES = (args.side, args.side, 28)
    if args.repeat > 0 and args.hot < 1:
        sys.exit("--repeat needs --hot of at least 1")

    sets = list(args.set)
    if args.plugin_dir:
        sets.append(f'runtime.plugin_dirs=["{os.path.abspath(args.plugin_dir)}"]')
    set_args = [a for s in sets for a in ("--set", s)]
    model = os.path.splitext(os.path.basename(args.config))[0]

    server = subprocess.Popen([args.encgraph, "serve", "--config", args.config, "--http", "127.0.0.1:0",
                               "--set", f"serve.threads={args.server_threads}",
                               "--set", "runtime.log_level=warn"] + set_args,
                              stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    if not line.startswith("listening on http://"):
        sys.exit(f"serve did not start: {line!r}")
    host, port = line.split("//")[1].strip().rsplit(":", 1)
    try:
        return measure(args, server, host, int(port), model, set_args)
    finally:
        if server.poll() is None:  # a client failed: the server must not outlive the script
            server.kill()


def measure(args, server, host, port, model, set_args):
    """The warm-up, the measured load, the server's metrics and `encgraph bench`;
    prints the figures and the table; returns the exit code."""
    # Warm-up: every hot image once, then fresh ones up to 4 per connection
    # (connections, allocator, first batches); all answered before the clock.
    warm = list(range(HOT_SEED, HOT_SEED + args.hot)) if args.repeat > 0 else []
    warm += [WARM_SEED + i for i in range(max(0, 4 * args.clients - len(warm)))]
    run_load(host, port, model, SIDES, [warm[c::args.clients] for c in range(args.clients)], args.procs)
    before = metrics(host, port)
    plans = [schedule(c, args.requests // args.clients + (c < args.requests % args.clients), args.repeat,
                      args.hot, 1) for c in range(args.clients)]
    latencies, errors, seconds, cpu = run_load(host, port, model, SIDES, plans, args.procs)
    client_cpu = cpu / max(1, args.requests)  # sending, reading, timing: the harness's own cost
    after = metrics(host, port)
    server.send_signal(signal.SIGTERM)
    exit_code = server.wait(timeout=300)

    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    batches = max(d.get("encgraph_batches_total", 0.0), 1.0)
    hits = d.get("encgraph_cache_hits_total", 0.0)
    coalesced = d.get("encgraph_cache_coalesced_total", 0.0)
    lookups = d.get("encgraph_cache_lookups_total", 0.0) or (
        hits + coalesced + d.get("encgraph_cache_misses_total", 0.0))
    hist = "encgraph_cache_only_request_seconds"
    hit_requests = d.get(hist + "_count", 0.0)
    served = {
        "images_per_s": len(latencies) / seconds,
        "client_processes": min(args.procs, args.clients),
        "p50_ms": percentile(latencies, 50) * 1e3,
        "p90_ms": percentile(latencies, 90) * 1e3,
        "p99_ms": percentile(latencies, 99) * 1e3,
        "errors": len(errors),
        "repeat_share_sent": sum(s < args.hot for p in plans for s in p) / max(1, args.requests),
        "cache_hit_rate": hits / max(1.0, lookups),
        "cache_coalesced_rate": coalesced / max(1.0, lookups),
        "mean_batch_items": d.get("encgraph_batch_items_total", 0.0) / batches,
        "multi_request_batches": d.get("encgraph_batches_multi_request_total", 0.0) / batches,
        "mean_queue_ms": 1e3 * d.get("encgraph_queue_seconds_total", 0.0)
        / max(1.0, d.get("encgraph_queue_items_total", 0.0)),
        "cache_only_requests": int(hit_requests),
        "cache_only_server_us_mean": 1e6 * d.get(hist + "_sum", 0.0) / max(1.0, hit_requests),
        "cache_only_server_us_p50_at_most": 1e6 * histogram_quantile(d, hist, 0.5),
        "cache_only_server_us_p99_at_most": 1e6 * histogram_quantile(d, hist, 0.99),
        "worker_ms_per_batch": {ph: 1e3 * d.get(f"encgraph_worker_seconds_total@{ph}", 0.0) / batches
                                for ph in ("prepare", "execute", "collect", "answer")},
        "client_cpu_us_per_request": 1e6 * client_cpu,
        "exit_code": exit_code,
    }
    print(json.dumps({"serve": served}, indent=1), flush=True)

    bench = {}  # (mode, request size) -> items/s
    lo, hi, _ = SIDES
    # The same images: bench runs the sizes of the measured requests (the first
    # 1024, in the order the clients sent them) as a trace.
    order = [p[j] for j in range(max(map(len, plans))) for p in plans if j < len(p)]
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "served.jsonl")
        with open(trace, "w") as f:
            for seed in order[:1024]:
                h, w = dims_of(seed)
                f.write(json.dumps({"modality": "image", "height": h, "width": w}) + "\n")
        report = os.path.join(tmp, "bench.json")
        for size in ([] if args.no_bench else [int(v) for v in args.bench_request_sizes.split(",")]):
            subprocess.run([args.encgraph, "bench", "--config", args.config, "--report", report,
                            "--set", 'workload.kind="trace"', "--set", 'workload.trace="%s"' % trace,
                            "--set", f"workload.request_size={size}", "--set", "runtime.log_level=warn"] + set_args,
                           check=True, stdout=subprocess.DEVNULL)
            with open(report) as f:
                results = json.load(f)["results"]
            bench.update({(r["mode"], size): r["items_per_s"] for r in results})
            print(json.dumps({"bench_items_per_s": {"%s, requests of %d" % k: v for k, v in bench.items()}},
                             indent=1), flush=True)

    what = "cache hits only" if args.ceiling else "%d%% repeats" % round(100 * args.repeat)
    rows = [("served images/s (%d clients in %d processes, %s)" % (args.clients, served["client_processes"], what),
             "%.1f" % served["images_per_s"]),
            ("client latency p50 / p90 / p99 ms", "%.1f / %.1f / %.1f" % (served["p50_ms"], served["p90_ms"],
                                                                         served["p99_ms"])),
            ("cache hit rate (hits / lookups) / coalesced / repeats sent", "%.1f%% / %.1f%% / %.1f%%" % (
                100 * served["cache_hit_rate"], 100 * served["cache_coalesced_rate"],
                100 * served["repeat_share_sent"])),
            ("mean batch (items) / batches mixing requests", "%.1f / %.0f%%" % (
                served["mean_batch_items"], 100 * served["multi_request_batches"])),
            ("mean queue wait ms", "%.2f" % served["mean_queue_ms"]),
            ("worker ms per batch: prepare / execute / collect / answer",
             " / ".join("%.2f" % v for v in served["worker_ms_per_batch"].values()))]
    if hit_requests:
        rows.append(("server time per all-hit request, mean / p50 / p99 us (%d requests)" % hit_requests,
                     "%.0f / <= %.0f / <= %.0f" % (served["cache_only_server_us_mean"],
                                                   served["cache_only_server_us_p50_at_most"],
                                                   served["cache_only_server_us_p99_at_most"])))
    rows.append(("client CPU us per request / requests/s the %d client processes could drive "
                 "on cores of their own" % served["client_processes"],
                 "%.0f / %.0f" % (1e6 * client_cpu, served["client_processes"] / max(client_cpu, 1e-9))))
    rows.append(("errors / exit code after SIGTERM", "%d / %d" % (served["errors"], exit_code)))
    sides_text = "%dx%d" % (lo, lo) if lo == hi else "the served sizes, %d-%d" % (lo, hi)
    rows += [("bench %s items/s (%s, requests of %d)" % (m, sides_text, size),
              "%.1f (served: %.0f%%)" % (v, 100.0 * served["images_per_s"] / v if v else 0.0))
             for (m, size), v in bench.items()]
    table = "| serve_bench (%s) | value |\n|---|---|\n" % os.path.basename(args.config)
    table += "".join("| %s | %s |\n" % r for r in rows)
    print(table)
    if args.table:
        with open(args.table, "a") as f:
            f.write(table)
    return 0 if not errors and exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
