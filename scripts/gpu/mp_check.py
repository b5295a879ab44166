#!/usr/bin/env python3
"""Multi-process data parallelism on CUDA ranks (needs 2 GPUs; 77 otherwise):
`encode` of image files as one process, under mpirun (one process per GPU) and
from RANK/WORLD_SIZE/LOCAL_RANK with an id file; the three must agree item for
item (bf16, batched differently: at a tolerance). Then a rank is killed
mid-run under each launch: the job must end non-zero, promptly, naming what
failed, with no output file.

usage: mp_check.py --bundle gpu-bundle --out-dir DIR   (ENCGRAPH_MPIRUN set by steps.sh's mpi_env)
"""
import argparse
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

try:  # --help works without them; a run needs numpy and Pillow
    import numpy as np
    from PIL import Image
except ImportError:
    np = Image = None

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "..", "configs", "qwen2_5_vl.toml")
SMALL = ["--set", "plugin.config.depth=4", "--set", "plugin.config.fullatt_block_indexes=[1,3]",
         "--set", "budgets.token_budgets=[256,1024]", "--set", "distributed.timeout_s=30"]
failures = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def load(path):
    with open(path, "rb") as fh:
        data = fh.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        raw = np.frombuffer(data[8 + n + b:8 + n + e], dtype=np.uint16)
        out[name] = (raw.astype(np.uint32) << 16).view(np.float32).reshape(t["shape"])
    return out


def compare(a, b, what):
    ok = a.keys() == b.keys()
    worst = 0.0
    for k in a:
        if k not in b or a[k].shape != b[k].shape:
            ok = False
            continue
        scale = float(np.abs(a[k]).max()) or 1.0
        worst = max(worst, float(np.abs(a[k] - b[k]).max()) / scale)
    check(ok and worst < 3e-2 and len(a) > 0, f"{what}: {len(b)} items, worst difference "
          f"{worst:.2e} of the item's scale (bf16; < 3e-2)")


def run(cmd, log, env=None, timeout=600):
    with open(log, "w") as fh:
        return subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                              timeout=timeout).returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out-dir", required=True)
    args = ap.parse_args()
    if np is None or Image is None:
        raise SystemExit("mp_check.py needs numpy and Pillow (and torch)")
    import torch
    if torch.cuda.device_count() < 2:
        print(f"skipped: needs 2 GPUs, {torch.cuda.device_count()} present")
        return 77
    mpirun = os.environ.get("ENCGRAPH_MPIRUN", "").split()
    encgraph = os.path.join(args.bundle, "bin", "encgraph")
    tmp = tempfile.mkdtemp(prefix="mp-check-")
    rng = np.random.default_rng(0)
    files = []
    for i, (h, w) in enumerate([(448, 448), (224, 672), (896, 504), (336, 336), (1008, 756),
                                (280, 560), (644, 476), (224, 224)]):
        p = os.path.join(tmp, f"img{i}.png")
        Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(p)
        files.append(p)
    encode = [encgraph, "encode", "--config", CONFIG, *SMALL]

    single = os.path.join(tmp, "single.safetensors")
    rc = run([*encode, "--set", 'runtime.device="cuda:0"', "-o", single, *files],
             os.path.join(args.out_dir, "mp-single.log"))
    check(rc == 0, "one process on cuda:0")

    multi = os.path.join(tmp, "mpirun.safetensors")
    t0 = time.time()
    rc = run([*mpirun, "-np", "2", *encode, "--set", 'runtime.device="cuda:{local_rank}"',
              "-o", multi, *files], os.path.join(args.out_dir, "mp-mpirun.log"))
    check(rc == 0, f"mpirun -np 2 ({time.time() - t0:.1f} s)")
    if rc == 0 and os.path.exists(single):
        compare(load(single), load(multi), "mpirun -np 2 against one process")

    env_out = os.path.join(tmp, "env.safetensors")
    procs = []
    for r in range(2):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r),
                   ENCGRAPH_JOB_ID="mp-check-1")
        log = open(os.path.join(args.out_dir, f"mp-env-rank{r}.log"), "w")
        procs.append(subprocess.Popen(
            [*encode, "--set", f'distributed.id_file="{tmp}/nccl-id"', "-o", env_out, *files],
            stdout=log, stderr=subprocess.STDOUT, env=env))
    codes = [p.wait(timeout=600) for p in procs]
    check(codes == [0, 0], f"RANK/WORLD_SIZE launch, exit codes {codes}")
    if codes == [0, 0] and os.path.exists(single):
        compare(load(single), load(env_out), "RANK/WORLD_SIZE launch against one process")
    check(not os.path.exists(f"{tmp}/nccl-id"), "rank 0 removed its id file at the end")

    # A rank killed mid-run, under each launch.
    run_cmd = [encgraph, "run", "--config", CONFIG, *SMALL, "--set", "workload.count=20000",
               "--set", "distributed.timeout_s=20"]
    for launch in ("mpirun", "env"):
        out = os.path.join(tmp, f"killed-{launch}.safetensors")
        log_path = os.path.join(args.out_dir, f"mp-kill-{launch}.log")
        if launch == "mpirun":
            log = open(log_path, "w")
            job = subprocess.Popen([*mpirun, "-np", "2", *run_cmd, "--set",
                                    'runtime.device="cuda:{local_rank}"', "--embeddings", out],
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            jobs = [job]
        else:
            jobs = []
            for r in range(2):
                env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r),
                           ENCGRAPH_JOB_ID="mp-check-kill")
                log = open(f"{log_path}.rank{r}", "w")
                jobs.append(subprocess.Popen(
                    [*run_cmd, "--set", f'distributed.id_file="{tmp}/kill-id"',
                     "--embeddings", out], stdout=log, stderr=subprocess.STDOUT, env=env,
                    start_new_session=True))
        time.sleep(40)  # start-up, capture, into the run
        # "--" ends pgrep's options: the pattern itself starts with dashes.
        victims = subprocess.run(["pgrep", "-f", "--", f"--embeddings {out}"],
                                 capture_output=True, text=True).stdout.split()
        victims = [int(v) for v in victims if int(v) not in [j.pid for j in jobs]]
        if launch == "env":
            victims = victims or [j.pid for j in jobs]  # the ranks are the jobs
        check(len(victims) == 2, f"{launch}: both ranks found ({victims})")
        if not victims:
            continue
        os.kill(max(victims), signal.SIGKILL)
        t0 = time.time()
        codes = []
        for j in jobs:
            try:
                codes.append(j.wait(timeout=90))
            except subprocess.TimeoutExpired:
                os.killpg(j.pid, signal.SIGKILL)
                codes.append("hung")
        logs = open(log_path).read() if launch == "mpirun" else ""
        check("hung" not in codes and all(c != 0 for c in codes) and not os.path.exists(out),
              f"{launch}: a rank killed mid-run ends the job in {time.time() - t0:.1f} s "
              f"(exit codes {codes}), no output")
        if launch == "mpirun":
            check(-9 not in codes and "signal 9" in logs,
                  "mpirun: it outlives the killed rank and names it ('signal 9')")
    print("\n".join(["", "== mp_check ==", f"{len(failures)} failure(s)", *failures]))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
