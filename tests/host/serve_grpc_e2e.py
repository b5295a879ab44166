#!/usr/bin/env python3
"""`encgraph serve --grpc` end to end on the CPU with a real gRPC client.

The client is Debian's python3-grpcio with the messages protoc generates at
test time from host/src/serve/inference.proto (python3-protobuf), calling the
service's methods by their full names. Checks: the health, metadata and
repository RPCs; embeddings over gRPC (raw_input_contents and contents, BYTES
files and UINT8 pixels, a BF16 output) equal `encgraph encode`'s and the
HTTP endpoint's for the same files (bit for bit, or within TOLERANCE for a
plugin whose CPU kernels round with the batch); a gRPC and an HTTP request
share one batch (/metrics counts it as a batch of several requests), and 32
concurrent clients of both kinds all get their own answers; bad requests get
INVALID_ARGUMENT and the server keeps serving; an unknown model NOT_FOUND; a
request over the queue, or a message over serve.max_body_bytes,
RESOURCE_EXHAUSTED; serve.request_timeout_ms
DEADLINE_EXCEEDED; SIGTERM answers the queued call, refuses new ones with
UNAVAILABLE (or a closed connection), and exits 0. Waits only by polling, a
bounded number of times; no decision rests on elapsed time.

usage: serve_grpc_e2e.py ENCGRAPH PLUGIN_DIR CONFIG WORKDIR TOLERANCE PROTO_FILE
"""
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

try:
    import grpc
    import numpy as np
    import requests
    from PIL import Image
except ImportError as missing:  # Debian python3-grpcio, -numpy, -requests, -pil
    print(f"skipped: {missing}")
    sys.exit(77)

PROTO = os.path.abspath(sys.argv[6])
del sys.argv[6]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_e2e as http_e2e  # noqa: E402  (the HTTP test's helpers; same arguments)
from serve_e2e import (CONFIG, ENCGRAPH, MODEL, OUTPUTS, PLUGIN_DIR, WORK, check,  # noqa: E402
                       expected, json_request, make_images, outputs_of, read_safetensors,
                       same_values)

SERVICE = "/inference.GRPCInferenceService/"


def load_messages():
    """inference_pb2, generated here by protoc from the server's own proto."""
    out = os.path.join(WORK, "pb")
    os.makedirs(out, exist_ok=True)
    subprocess.run(["protoc", "-I", os.path.dirname(PROTO), "--python_out", out, PROTO], check=True)
    sys.path.insert(0, out)
    import inference_pb2
    return inference_pb2


pb = None


class Server:
    """`encgraph serve --http 127.0.0.1:0 --grpc 127.0.0.1:0`, and a channel to it."""

    def __init__(self, *settings, source=("--config", CONFIG)):
        args = [ENCGRAPH, "serve", *source, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
                "--set", f'runtime.plugin_dirs=["{PLUGIN_DIR}"]']
        for s in http_e2e.COMMON + list(settings):
            args += ["--set", s]
        Server.count = getattr(Server, "count", 0) + 1
        self.log = os.path.join(WORK, f"grpc_server{Server.count}.log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True, cwd=WORK)
        lines = [self.proc.stdout.readline(), self.proc.stdout.readline()]
        if not lines[0].startswith("listening on http://") or not lines[1].startswith("listening on grpc://"):
            self.proc.kill()
            sys.exit(f"the server did not start: {lines!r}\n{open(self.log).read()}")
        self.url = lines[0].split()[-1]
        self.target = lines[1].split()[-1][len("grpc://"):]
        self.channel = grpc.insecure_channel(self.target)
        grpc.channel_ready_future(self.channel).result(timeout=60)
        for _ in range(200):
            if self.call("ServerReady", pb.ServerReadyRequest()).ready:
                return
            time.sleep(0.05)
        sys.exit("the server never became ready")

    def call(self, method, request, timeout=120):
        response_type = getattr(pb, type(request).__name__.replace("Request", "Response"))
        stub = self.channel.unary_unary(SERVICE + method, request_serializer=type(request).SerializeToString,
                                        response_deserializer=response_type.FromString)
        return stub(request, timeout=timeout)

    def error(self, method, request):
        """The status code and details of a call that must fail (None if it succeeded)."""
        try:
            self.call(method, request)
            return None, ""
        except grpc.RpcError as e:
            return e.code(), e.details()

    def metric(self, name):
        text = requests.get(self.url + "/metrics", timeout=10).text
        return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name + " ") or
                   l.startswith(name + "{"))

    def stop(self):
        self.channel.close()
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)


def file_bytes(name):
    return open(os.path.join(WORK, name), "rb").read()


def infer_request(files, model=MODEL, raw=True, outputs=()):
    """ModelInferRequest of `files` as the BYTES input "images": in
    raw_input_contents (Triton's layout: a 4-byte length, then the bytes) or
    in contents.bytes_contents."""
    r = pb.ModelInferRequest(model_name=model, id="req-" + "-".join(files))
    t = r.inputs.add(name="images", datatype="BYTES", shape=[len(files)])
    if raw:
        r.raw_input_contents.append(b"".join(struct.pack("<I", len(b)) + b for b in map(file_bytes, files)))
    else:
        t.contents.bytes_contents.extend(map(file_bytes, files))
    for name, datatype in outputs:
        o = r.outputs.add(name=name)
        if datatype:
            o.parameters["datatype"].string_param = datatype
    return r


def grpc_outputs(response):
    """{name: (shape, little-endian bytes)}, as outputs_of gives HTTP's."""
    check(len(response.raw_output_contents) == len(response.outputs),
          "raw_output_contents do not match the outputs one for one")
    return {o.name: (list(o.shape), raw) for o, raw in zip(response.outputs, response.raw_output_contents)}


def grpc_matches(got, reference, files, what):
    want = expected(reference, files)
    for name, (shape, raw) in want.items():
        if name not in got:
            check(False, f"{what}: no output {name}")
            return False
        if got[name][0] != shape or not same_values(name, got[name][1], raw):
            check(False, f"{what}: output {name} differs from encode's (shape {got[name][0]} vs {shape})")
            return False
    return True


def infer(server, request, reference, files, what):
    try:
        response = server.call("ModelInfer", request)
    except grpc.RpcError as e:
        check(False, f"{what}: {e.code()} {e.details()}")
        return None
    check(response.model_name == request.model_name and response.id == request.id,
          f"{what}: model_name/id not echoed: {response.model_name!r} {response.id!r}")
    got = grpc_outputs(response)
    grpc_matches(got, reference, files, what)
    return got


def check_metadata(server):
    check(server.call("ServerLive", pb.ServerLiveRequest()).live, "ServerLive is not live")
    meta = server.call("ServerMetadata", pb.ServerMetadataRequest())
    check(meta.name == "encgraph" and meta.version, f"ServerMetadata: {meta}")
    model = server.call("ModelMetadata", pb.ModelMetadataRequest(name=MODEL))
    http_meta = requests.get(server.url + f"/v2/models/{MODEL}", timeout=10).json()
    check([(t.name, t.datatype, list(t.shape)) for t in model.outputs] ==
          [(o["name"], o["datatype"], o["shape"]) for o in http_meta["outputs"]],
          f"ModelMetadata outputs differ from HTTP's: {model.outputs} vs {http_meta['outputs']}")
    check([(t.name, t.datatype, list(t.shape)) for t in model.inputs] ==
          [(i["name"], i["datatype"], i["shape"]) for i in http_meta["inputs"]],
          f"ModelMetadata inputs differ from HTTP's: {model.inputs} vs {http_meta['inputs']}")
    check([t.name for t in model.inputs][:2] == ["images", "pixels"], f"ModelMetadata inputs: {model.inputs}")
    check(model.platform == http_meta["platform"] and list(model.versions) == ["1"], f"ModelMetadata: {model}")
    OUTPUTS.extend(o["name"] for o in http_meta["outputs"] if not o["name"].endswith("_rows"))
    check(server.call("ModelReady", pb.ModelReadyRequest(name=MODEL)).ready, "ModelReady is not ready")
    code, details = server.error("ModelReady", pb.ModelReadyRequest(name="no_such_model"))
    check(code == grpc.StatusCode.NOT_FOUND and "no_such_model" in details, f"ModelReady unknown: {code} {details}")
    code, details = server.error("RepositoryIndex", pb.RepositoryIndexRequest())
    check(code == grpc.StatusCode.NOT_FOUND and "--model-repository" in details,
          f"RepositoryIndex without a repository: {code} {details}")


def check_embeddings(server, reference, files):
    """gRPC's embeddings against encode's and against HTTP's for the same files."""
    for batch in (files[:1], files[1:5]):
        for raw in (True, False):
            got = infer(server, infer_request(batch, raw=raw), reference, batch,
                        f"gRPC {'raw' if raw else 'contents'} {len(batch)} image(s)")
            r = requests.post(server.url + f"/v2/models/{MODEL}/infer", json=json_request(batch), timeout=60)
            check(r.status_code == 200, f"HTTP: {r.status_code} {r.text[:200]}")
            if got and r.status_code == 200:
                http = outputs_of(r)
                for name, (shape, data) in http.items():
                    check(name in got and got[name][0] == shape and same_values(name, got[name][1], data),
                          f"gRPC's {name} differs from HTTP's for {batch}")
    # Raw UINT8 pixels of a PNG, in raw_input_contents and in uint_contents.
    png = next(f for f in files[5:] if f.endswith(".png"))
    pixels = np.asarray(Image.open(os.path.join(WORK, png)).convert("RGB"))
    for raw in (True, False):
        r = pb.ModelInferRequest(model_name=MODEL)
        t = r.inputs.add(name="pixels", datatype="UINT8", shape=list(pixels.shape))
        if raw:
            r.raw_input_contents.append(pixels.tobytes())
        else:
            t.contents.uint_contents.extend(pixels.flatten().tolist())
        infer(server, r, reference, [png], f"gRPC UINT8 pixels ({'raw' if raw else 'uint_contents'})")
    # Frames of a video (plugins that take videos): gRPC's rows are HTTP's,
    # which serve_video_e2e.py holds to encode's.
    if "frames" in [t.name for t in server.call("ModelMetadata", pb.ModelMetadataRequest(name=MODEL)).inputs]:
        frames = np.random.default_rng(5).integers(0, 256, (4, 28, 42, 3), dtype=np.uint8)
        r = pb.ModelInferRequest(model_name=MODEL)
        r.inputs.add(name="frames", datatype="UINT8", shape=list(frames.shape))
        r.raw_input_contents.append(frames.tobytes())
        got = grpc_outputs(server.call("ModelInfer", r))
        h = requests.post(server.url + f"/v2/models/{MODEL}/infer", timeout=60, json={
            "inputs": [{"name": "frames", "datatype": "UINT8", "shape": list(frames.shape),
                        "data": frames.flatten().tolist()}],
            "parameters": {"binary_data_output": True}})
        check(h.status_code == 200, f"HTTP frames: {h.status_code} {h.text[:200]}")
        if h.status_code == 200:
            for name, (shape, data) in outputs_of(h).items():
                check(name in got and got[name] == (shape, data), f"gRPC's {name} of frames differs from HTTP's")
    # One BF16 output: encode's floats rounded to bfloat16 (nearest, ties to even).
    response = server.call("ModelInfer", infer_request(files[:1], outputs=[(OUTPUTS[1], "BF16")]))
    check([o.name for o in response.outputs] == [OUTPUTS[1]] and response.outputs[0].datatype == "BF16",
          f"BF16 output: {[(o.name, o.datatype) for o in response.outputs]}")
    if response.outputs:
        f32 = np.frombuffer(reference[files[0] + "/" + OUTPUTS[1]][1], dtype=np.float32)
        got = np.frombuffer(response.raw_output_contents[0], dtype=np.uint16)
        bits = f32.view(np.uint32)
        want = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        if http_e2e.TOLERANCE == 0:
            check(np.array_equal(got, want), "BF16 output is not encode's output rounded to nearest-even")
        else:
            as_f32 = (got.astype(np.uint32) << 16).view(np.float32)
            check(got.shape == f32.shape and bool(np.all(np.abs(as_f32 - f32) <= np.abs(f32) / 128 + 1e-4)),
                  "BF16 output is not within bfloat16 rounding of encode's")


def check_bad_requests(server, reference, files):
    good = infer_request(files[:1])
    cases = []
    r = infer_request(files[:1])
    r.inputs[0].datatype = "FP32"
    cases.append(("wrong datatype", r, "datatype FP32"))
    r = infer_request(files[:1])
    r.inputs[0].shape[:] = [3]
    cases.append(("shape larger than the data", r, "element 1"))
    r = infer_request(files[:1])
    r.raw_input_contents[0] = r.raw_input_contents[0][:-10]
    cases.append(("truncated raw BYTES", r, "truncated"))
    r = infer_request(files[:1], raw=False)
    r.inputs[0].contents.bytes_contents[0] = b"GIF89a...."
    cases.append(("not an image", r, "images[0]"))
    r = infer_request(files[:1])
    r.inputs[0].name = "text"
    cases.append(("unknown input", r, "'text'"))
    r = infer_request(files[:1], outputs=[("no_such_output", None)])
    cases.append(("unknown output", r, "no_such_output"))
    r = infer_request(files[:1])
    r.raw_input_contents.append(b"")
    cases.append(("raw contents for no input", r, "raw_input_contents"))
    for what, request, says in cases:
        code, details = server.error("ModelInfer", request)
        check(code == grpc.StatusCode.INVALID_ARGUMENT and says in details, f"{what}: {code} {details}")
    # A message over serve.max_body_bytes (2000000 here): refused by gRPC itself.
    r = infer_request(files[:1])
    r.raw_input_contents[0] = struct.pack("<I", 2100000) + b"x" * 2100000
    code, details = server.error("ModelInfer", r)
    check(code == grpc.StatusCode.RESOURCE_EXHAUSTED, f"message over the limit: {code} {details}")
    code, details = server.error("ModelInfer", infer_request(files[:1], model="no_such_model"))
    check(code == grpc.StatusCode.NOT_FOUND and "no_such_model" in details, f"unknown model: {code} {details}")
    check(server.metric('encgraph_requests_total{code="400"}') >= len(cases), "the gRPC 400s are not counted")
    infer(server, good, reference, files[:1], "gRPC after the bad requests")


def check_mixed_batch(reference, files):
    """A gRPC request and an HTTP request of 4 images each on a server whose
    batches hold 8 items and whose deadline is a minute away: neither fills a
    batch alone, so exactly one batch runs, holding both."""
    server = Server("serve.max_queue_delay_us=60000000", "budgets.max_items_per_batch=8")
    plans = [files[40:44], files[44:48]]
    results = {}

    def via_grpc():
        try:
            results["grpc"] = grpc_outputs(server.call("ModelInfer", infer_request(plans[0])))
        except grpc.RpcError as e:
            results["grpc"] = e

    def via_http():
        results["http"] = requests.post(server.url + f"/v2/models/{MODEL}/infer", json=json_request(plans[1]),
                                        timeout=120)

    threads = [threading.Thread(target=via_grpc), threading.Thread(target=via_http)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if isinstance(results["grpc"], dict):
        grpc_matches(results["grpc"], reference, plans[0], "the gRPC half of the shared batch")
    else:
        check(False, f"the gRPC half of the shared batch: {results['grpc']}")
    http_e2e.matches(results["http"], reference, plans[1], "the HTTP half of the shared batch")
    check(server.metric("encgraph_batches_total") == 1, "the gRPC and HTTP requests did not run as one batch")
    check(server.metric("encgraph_batches_multi_request_total") == 1,
          "/metrics shows no batch holding both the gRPC and the HTTP request")
    check(server.metric("encgraph_batch_items_total") == 8, "the shared batch does not hold 8 items")
    check(server.stop() == 0, "the batching server did not exit 0")


def check_concurrent(server, reference, files):
    """32 clients at once, alternately gRPC and HTTP, 1 to 3 fresh images each."""
    fresh = files[16:40]
    plans = [[fresh[(3 * c + k) % len(fresh)] for k in range(1 + c % 3)] for c in range(32)]
    results = [None] * 32

    def client(c):
        if c % 2:
            try:
                results[c] = grpc_outputs(server.call("ModelInfer", infer_request(plans[c])))
            except grpc.RpcError as e:
                results[c] = e
        else:
            results[c] = requests.post(server.url + f"/v2/models/{MODEL}/infer",
                                       json=json_request(plans[c]), timeout=120)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in range(32):
        if c % 2 == 0:
            http_e2e.matches(results[c], reference, plans[c], f"concurrent HTTP client {c}")
        elif isinstance(results[c], dict):
            grpc_matches(results[c], reference, plans[c], f"concurrent gRPC client {c}")
        else:
            check(False, f"concurrent gRPC client {c}: {results[c]}")


def check_timeout(files):
    server = Server("serve.max_queue_delay_us=10000000", "serve.request_timeout_ms=100")
    code, details = server.error("ModelInfer", infer_request(files[30:31]))
    check(code == grpc.StatusCode.DEADLINE_EXCEEDED and "serve.request_timeout_ms" in details,
          f"timeout: {code} {details}")
    check(server.call("ServerLive", pb.ServerLiveRequest()).live, "not live after a timeout")
    check(server.metric('encgraph_requests_total{code="504"}') == 1, "the gRPC timeout is not counted as 504")
    check(server.stop() == 0, "the server did not exit 0 after a timeout")


def check_overload_and_drain(reference, files):
    """A tiny queue whose batches wait long: a gRPC request of 2 images sits
    queued while one more gets RESOURCE_EXHAUSTED; SIGTERM then answers the
    queued call, refuses new ones, and the process exits 0."""
    small = Server("serve.max_queue_items=2", "serve.max_queue_delay_us=3000000", "serve.cache_bytes=0")
    held = {}
    queued = files[10:12]

    def send_held():
        try:
            held["r"] = grpc_outputs(small.call("ModelInfer", infer_request(queued)))
        except grpc.RpcError as e:
            held["r"] = e

    holder = threading.Thread(target=send_held)
    holder.start()
    for _ in range(400):
        if small.metric("encgraph_queued_items") == 2:
            break
        time.sleep(0.01)
    check(small.metric("encgraph_queued_items") == 2, "the held gRPC request never reached the queue")
    code, details = small.error("ModelInfer", infer_request(files[12:13]))
    check(code == grpc.StatusCode.RESOURCE_EXHAUSTED and "serve.max_queue_items" in details,
          f"overload: {code} {details}")
    small.proc.send_signal(signal.SIGTERM)
    # Once draining, a new call is refused: UNAVAILABLE from the server, or
    # from gRPC itself once the server has stopped listening.
    refused = None
    for _ in range(400):
        try:
            if not small.call("ServerReady", pb.ServerReadyRequest(), timeout=10).ready:
                refused = small.error("ModelInfer", infer_request(files[13:14]))[0]
                break
        except grpc.RpcError as e:
            refused = e.code()
            break
        time.sleep(0.01)
    check(refused == grpc.StatusCode.UNAVAILABLE, f"a call while draining: {refused}")
    holder.join()
    if isinstance(held["r"], dict):
        grpc_matches(held["r"], reference, queued, "the gRPC call queued at SIGTERM")
    else:
        check(False, f"the gRPC call queued at SIGTERM: {held['r']}")
    small.channel.close()
    code = small.proc.wait(timeout=120)
    check(code == 0, f"the draining server exited {code}")


def check_repository(reference, files):
    repo = os.path.join(WORK, "grpc_repository")
    os.makedirs(repo)
    shutil.copy(CONFIG, os.path.join(repo, "first.toml"))
    server = Server(source=("--model-repository", repo))
    index = server.call("RepositoryIndex", pb.RepositoryIndexRequest())
    check([m.name for m in index.models] == ["first"], f"RepositoryIndex: {index}")
    server.call("RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name="first"))
    code, _ = server.error("ModelInfer", infer_request(files[:1], model="first"))
    check(code == grpc.StatusCode.NOT_FOUND, f"an unloaded model answers: {code}")
    server.call("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="first"), timeout=300)
    infer(server, infer_request(files[:2], model="first"), reference, files[:2], "reloaded model")
    code, details = server.error("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="third"))
    check(code == grpc.StatusCode.NOT_FOUND and "third.toml" in details, f"load without a file: {code} {details}")
    check(server.stop() == 0, "the repository server did not exit 0")


def main():
    global pb
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    if not shutil.which("protoc"):
        print("skipped: no protoc (Debian protobuf-compiler)")
        return 77
    pb = load_messages()
    rng = np.random.default_rng(13)
    files = make_images(48, rng)
    sets = [a for s in http_e2e.COMMON for a in ("--set", s)]
    subprocess.run([ENCGRAPH, "encode", "--config", CONFIG, "--set", f'runtime.plugin_dirs=["{PLUGIN_DIR}"]']
                   + sets + ["-o", "ref.safetensors"] + files, cwd=WORK, check=True)
    reference = read_safetensors(os.path.join(WORK, "ref.safetensors"))

    server = Server("serve.max_queue_delay_us=100000", "serve.max_body_bytes=2000000", "serve.threads=4")
    check_metadata(server)
    check_embeddings(server, reference, files)
    check_bad_requests(server, reference, files)
    check_concurrent(server, reference, files)
    check(server.stop() == 0, "the server did not exit 0 on SIGTERM")
    check_mixed_batch(reference, files)
    check_overload_and_drain(reference, files)
    check_timeout(files)
    check_repository(reference, files)
    if http_e2e.failures:
        print(f"{len(http_e2e.failures)} check(s) failed")
        return 1
    print("serve over gRPC end to end: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
