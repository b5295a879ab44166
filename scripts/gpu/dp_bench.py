#!/usr/bin/env python3
"""Data parallel on the Qwen2.5-VL-7B tower: `encgraph bench` (graphs and eager)
on one GPU, with runtime.data_parallel over every GPU of the machine in one
process, and as one process per GPU under mpirun (the Open MPI runtime the
bundle carries, scripts/gpu/mpi_env.sh), on qwen_bench.py's mixed and 1344
workloads. Exits 77 (skipped) with fewer than two GPUs. Making items
(preprocessing) is outside the timed calls in every case.

usage: dp_bench.py --bundle gpu-bundle --out-dir DIR
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen_bench  # noqa: E402  (the workloads and the encgraph runner)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--only", default="mixed,1344")
    ap.add_argument("--config", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "configs", "qwen2_5_vl_bench.toml"))
    ap.add_argument("--mpirun", default=os.environ.get("ENCGRAPH_MPIRUN", ""),
                    help="the mpirun command line (without -np) for the multi-process runs")
    ap.add_argument("--ranks", default="",
                    help="devices of the ranks, e.g. cpu,cpu (default: every GPU)")
    args = ap.parse_args()
    devices = args.ranks.split(",") if args.ranks else [
        f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if len(devices) < 2:
        print(f"skipped: data parallel needs 2 GPUs, {len(devices)} present")
        return 77
    gpus = len(devices)
    os.makedirs(args.out_dir, exist_ok=True)
    config = os.path.abspath(args.config)
    ranks = "[" + ", ".join(f'"{d}"' for d in devices) + "]"
    rows = [f"Qwen2.5-VL-7B tower, bf16, {gpus} ranks ({', '.join(devices)}), "
            f"{torch.cuda.get_device_name()}", "",
            "| workload | system | images/s | tokens/s | p50 ms | p99 ms | speed-up over 1 GPU |",
            "|---|---|---|---|---|---|---|"]
    loads = {k: v for k, v in qwen_bench.workloads().items() if k in args.only.split(",")}
    for name, items in loads.items():
        trace = os.path.join(args.out_dir, f"dp-bench-{name}.jsonl")
        with open(trace, "w") as fh:
            for it in items:
                fh.write(json.dumps(it) + "\n")
        tokens = sum(qwen_bench.output_tokens(it) for it in items)
        single = qwen_bench.run_encgraph(args.bundle, config, trace, args.out_dir, name + "-1gpu",
                                         qwen_bench.REQUEST)
        dp = qwen_bench.run_encgraph(args.bundle, config, trace, args.out_dir,
                                     name + f"-{gpus}gpu", qwen_bench.REQUEST,
                                     ("--set", f"runtime.data_parallel={ranks}"))
        runs = [("1 GPU", single), (f"1 process, {gpus} GPUs", dp)]
        if args.mpirun:
            mp = qwen_bench.run_encgraph(
                args.bundle, config, trace, args.out_dir, name + f"-{gpus}proc",
                qwen_bench.REQUEST, ("--set", 'runtime.device="cuda:{local_rank}"'),
                launcher=(*args.mpirun.split(), "-np", str(gpus)))
            runs.append((f"{gpus} processes (mpirun)", mp))
        base = single["encgraph graphs"]["seconds"]
        for label, res in runs:
            for system, r in res.items():
                rows.append(f"| {name} | {label} {system} | {r['items'] / r['seconds']:.1f} | "
                            f"{tokens / r['seconds']:.0f} | {r['p50']:.1f} | {r['p99']:.1f} | "
                            f"{base / r['seconds']:.2f}x |")
    table = "\n".join(rows)
    print("\n" + table, flush=True)
    with open(os.path.join(args.out_dir, "dp_bench.table"), "w") as fh:
        fh.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
