"""Capture time with and without the GEMM tuning cache (issue 15: the bench
config's graphs ready in <= 3 s on a warm start).

Runs `encgraph bench` on configs/qwen2_5_vl_bench.toml (a short 224x224
workload: the run itself is not what is measured) in a fresh cache folder
(ENCGRAPH_CACHE_DIR):
  cold  - empty folder: every product is timed, the cache is written;
  warm  - the same folder: every choice comes from the cache;
  untuned - tune_gemm = false, for reference (cuBLASLt's first heuristic).
Prints each run's capture seconds (the report's capture_s), graph count and
wall time, where the capture time went (the report's capture_phases_s), the
cache file's entries, and a table last (also written to
<out-dir>/capture_bench.table), followed by the phases per run. Standard
library only.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def log(*a):
    print(*a, flush=True)


def run(bundle, config, out_dir, name, cache_dir, extra):
    report = os.path.join(out_dir, f"capture-bench-{name}.json")
    cmd = [os.path.join(bundle, "bin", "encgraph"), "bench", "--config", config,
           "--set", "workload.count=32", "--report", report, *extra]
    env = dict(os.environ, ENCGRAPH_CACHE_DIR=cache_dir)
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.time() - t0
    log(f"== {name}: {' '.join(cmd)}")
    log(proc.stdout[-2000:], proc.stderr[-2000:])
    if proc.returncode != 0:
        raise RuntimeError(f"encgraph bench failed ({proc.returncode}) on {name}")
    with open(report) as fh:
        rep = json.load(fh)
    modes = [m for m in rep["results"] if m.get("graphs", 0) > 0]
    if not modes:
        raise RuntimeError(f"{name}: no mode captured graphs")
    best = max(modes, key=lambda m: m["capture_s"])
    warnings = [l for l in proc.stderr.splitlines() if "tuning cache" in l]
    phases = best.get("capture_phases_s", {})  # absent in reports of older builds
    log(f"{name}: capture {best['capture_s']:.2f} s = {phases_text(phases)}")
    return dict(capture_s=best["capture_s"], graphs=best["graphs"], wall_s=wall,
                warnings=warnings, phases=phases)


PHASES = ("prepare_device", "warmup", "capture", "instantiate", "calibrate", "other")


def phases_text(phases):
    if not phases:
        return "no capture_phases_s in the report"
    return ", ".join(f"{p} {phases.get(p, 0.0):.2f}" for p in PHASES)


def cache_entries(cache_dir):
    files = glob.glob(os.path.join(cache_dir, "gemm-*.txt"))
    n = 0
    for f in files:
        with open(f) as fh:
            n += sum(1 for l in fh if l.startswith("gemm:"))
    return len(files), n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--config", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "configs", "qwen2_5_vl_bench.toml"))
    ap.add_argument("--skip-untuned", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    config = os.path.abspath(args.config)
    cache_dir = tempfile.mkdtemp(prefix="encgraph-capture-cache-")
    rows = []
    try:
        cold = run(args.bundle, config, args.out_dir, "cold", cache_dir, [])
        files, entries = cache_entries(cache_dir)
        log(f"cache after the cold run: {files} file(s), {entries} entries in {cache_dir}")
        warm = run(args.bundle, config, args.out_dir, "warm", cache_dir, [])
        rows.append(("cold (tunes, writes cache)", cold))
        rows.append(("warm (reads cache)", warm))
        if not args.skip_untuned:
            off = run(args.bundle, config, args.out_dir, "untuned", cache_dir,
                      ["--set", "plugin.config.tune_gemm=false"])
            rows.append(("tune_gemm = false", off))
        for label, r in rows:
            for w in r["warnings"]:
                log(f"warning in {label}: {w}")
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)

    lines = ["capture time, Qwen2.5-VL-7B bench config (configs/qwen2_5_vl_bench.toml)",
             f"{'run':<28} {'graphs':>6} {'capture s':>10} {'process s':>10}"]
    for label, r in rows:
        lines.append(f"{label:<28} {r['graphs']:>6} {r['capture_s']:>10.2f} {r['wall_s']:>10.1f}")
    lines.append(f"cache: {entries} entries; target: warm capture <= 3 s -> "
                 f"{'met' if rows[1][1]['capture_s'] <= 3.0 else 'NOT met'}")
    lines.append("")
    lines.append("capture phases, s (the report's capture_phases_s)")
    lines.append(f"{'run':<28} " + " ".join(f"{p:>14}" for p in PHASES))
    for label, r in rows:
        if r["phases"]:
            lines.append(f"{label:<28} " +
                         " ".join(f"{r['phases'].get(p, 0.0):>14.2f}" for p in PHASES))
    table = "\n".join(lines)
    with open(os.path.join(args.out_dir, "capture_bench.table"), "w") as fh:
        fh.write(table + "\n")
    log("")
    log(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
