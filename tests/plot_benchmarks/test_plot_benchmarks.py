"""scripts/plot_benchmarks.py on small inputs of every kind it reads: the PNGs
it names appear (and are PNGs), unknown or broken inputs exit 2 naming the file
and leave the output folder as it was. With ENCGRAPH_BIN set, also on a real
`encgraph bench --report` of the toy plugin (the report schema the script reads).

usage: test_plot_benchmarks.py SOURCE_DIR [PLUGIN_DIR]   (exit 77: no matplotlib)
Standard library and matplotlib only.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("matplotlib missing (apt-get install python3-matplotlib): skipped")
    sys.exit(77)

SOURCE = sys.argv[1]
PLUGINS = sys.argv[2] if len(sys.argv) > 2 else None
SCRIPT = os.path.join(SOURCE, "scripts", "plot_benchmarks.py")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(out, *files):
    return subprocess.run([sys.executable, SCRIPT, "--out", out, *files],
                          capture_output=True, text=True, timeout=300)


def write(folder, name, obj):
    path = os.path.join(folder, name)
    with open(path, "w") as fh:
        fh.write(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def is_png(path):
    with open(path, "rb") as fh:
        return fh.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 1000


def report(items_per_s, capture_s, budgets=None):
    """The keys report.cpp writes that the script reads."""
    def mode(name, rate, graphs, cap):
        m = {"mode": name, "items_per_s": rate, "capture_s": cap, "graphs": graphs,
             "latency_ms": {"p50": 10.0, "p99": 14.0, "mean": 10.5, "max": 15.0}}
        if budgets and graphs:
            m["budgets"] = budgets
        return m
    return {"schema": "encgraph.report/1", "plugin": {"name": "toy"},
            "device": {"name": "cpu"}, "workload": {"items": 64, "request_size": 16},
            "results": [mode("graphs", items_per_s, 8, capture_s),
                        mode("eager", items_per_s * 0.8, 0, 0.0)]}


def kernels_table():
    """bench_kernels --table, printed with its own format string."""
    rows = [("gemm square", "8192x8192x8192", 1400.0, 785.0, 290, "heuristic"),
            ("gemm qkv", "65536x3840x1280", 945.0, 682.0, 900, "heuristic"),
            ("gemm qkv", "65536x3840x1280", 940.0, 685.0, 900, "tuned (best of 16)"),
            ("gemm o_proj+res", "65536x1280x1280", 384.0, 559.0, 1800, "heuristic"),
            ("gemm gate_up 3424", "65536x6848x1280", 1830.0, 628.0, 700, "heuristic"),
            ("gemm down 3424 +res", "65536x1280x3424", 922.0, 623.0, 900, "heuristic"),
            ("attn window", "65536 tok, seq 64, 16x80", 241.0, 89.0, 2790, "default"),
            ("attn window", "65536 tok, seq 64, 16x80", 431.0, 50.0, 1560, "8 warps"),
            ("rms_norm", "65536x1280", 95.0, 0.0, 3500, ""),
            ("silu_mul", "65536x3424 from [gate|up]", 373.0, 0.0, 3600, ""),
            ("rotary", "65536 tok 16x80 q,k", 180.0, 0.0, 3850, "")]
    text = ("== kernels (median of CUDA-event timings) ==\nkernel                 shape"
            "                                   us   TFLOP/s     GB/s  note\n")
    for r in rows:
        text += "%-22s %-34s %9.1f %9.1f %8.0f  %s\n" % r
    return text


def main():
    with tempfile.TemporaryDirectory(prefix="plot-bench-test-") as tmp:
        inp = os.path.join(tmp, "in")
        os.makedirs(inp)
        bench = {"224": {"encgraph graphs": {"seconds": 0.2, "p50": 12.3, "p99": 12.4,
                                             "efficiency": 1.0, "items": 256, "note": "x"},
                         "transformers sdpa": {"seconds": 1.8, "p50": 100.0, "p99": 141.0,
                                               "efficiency": None, "items": 256, "note": "y"}},
                 "mixed": {"encgraph graphs": {"seconds": 2.7, "p50": 175.0, "p99": 206.0,
                                               "efficiency": 0.9, "items": 256, "note": "x"}}}
        files = [
            write(inp, "qwen-bench.json", bench),
            write(inp, "siglip.json", {"schema": "encgraph.bench-results/1", "name": "sig",
                                       "title": "SigLIP", "source": "test",
                                       "results": {"so400m": {"encgraph graphs":
                                                              {"items_per_s": 695}}}}),
            write(inp, "cold.json", report(100.0, 16.8,
                                           [{"budget": 256, "latency_ms": {"p50": 2, "p99": 3}},
                                            {"budget": 1024, "latency_ms": {"p50": 6}}])),
            write(inp, "warm.json", report(100.0, 7.2)),
            write(inp, "layer.json", {"schema": "encgraph.kernel-layer/1", "name": "json",
                                      "layer_ms": 1.2, "kernels": [
                                          {"name": "qkv", "flops": 6.4e11, "tflops": [600, 680],
                                           "group": "product"},
                                          {"name": "rms_norm", "us": 95, "count": 2,
                                           "group": "memory"}]}),
            write(inp, "kernels.table", kernels_table()),
        ]
        out = os.path.join(tmp, "out")
        res = run(out, *files)
        check(res.returncode == 0, f"exit {res.returncode} on good inputs: {res.stderr}")
        want = ["throughput-qwen2_5_vl.png", "latency-qwen2_5_vl.png", "throughput-sig.png",
                "report-cold.png", "report-warm.png", "latency-per-budget-cold.png",
                "capture-time.png", "kernel-time-layer-json.png", "kernel-time-layer.png"]
        for name in want:
            path = os.path.join(out, name)
            check(os.path.exists(path) and is_png(path), f"{name} written as a PNG")
        umask = os.umask(0)
        os.umask(umask)
        for name in want:
            path = os.path.join(out, name)
            if os.path.exists(path):
                mode = os.stat(path).st_mode & 0o777
                check(mode == 0o666 & ~umask, f"{name}: mode {mode:o}, as the umask gives")
        made = sorted(os.listdir(out)) if os.path.isdir(out) else []
        check(made == sorted(want), f"only the named plots, no temporaries: {made}")
        check(not os.path.exists(os.path.join(out, "latency-sig.png")),
              "no latency plot without p50 figures")

        # Bad inputs: exit 2, the file named, nothing written or changed.
        before = {n: os.path.getmtime(os.path.join(out, n)) for n in made}
        other = os.path.join(tmp, "other")
        os.makedirs(other)
        cases = [
            ("unknown.json", {"a": 1}, "not a benchmark report"),
            ("list.json", [1, 2], "not a benchmark report"),
            ("broken.json", "{\"224\": ", "not JSON"),
            ("zero.json", {"224": {"g": {"seconds": 0, "items": 1}}}, "expected > 0"),
            ("nan.json", "{\"224\": {\"g\": {\"items_per_s\": NaN}}}", "finite number"),
            ("nofig.json", {"224": {"g": {"p50": 1}}}, "neither items_per_s"),
            ("norun.json", {"schema": "encgraph.report/1", "results": []}, "no \"results\""),
            ("nolat.json", {"schema": "encgraph.report/1", "results": [{"mode": "g"}]},
             "no latency_ms"),
            ("nokern.json", {"schema": "encgraph.kernel-layer/1", "kernels": []}, "non-empty"),
            ("badrate.json", {"schema": "encgraph.kernel-layer/1", "kernels": [
                {"name": "k", "flops": 1e9, "tflops": 0}]}, "> 0"),
            ("short.table", "== kernels (median of CUDA-event timings) ==\nkernel\n",
             "no 'gemm qkv' row"),
        ]
        for name, content, message in cases:
            path = write(other, name, content)
            res = run(out, files[0], path)
            check(res.returncode == 2, f"{name}: exit {res.returncode}, want 2")
            check(path in res.stderr and message in res.stderr,
                  f"{name}: message names the file and says {message!r}: {res.stderr!r}")
        res = run(out, os.path.join(other, "absent.json"))
        check(res.returncode == 2 and "absent.json: cannot read" in res.stderr,
              f"a missing file: {res.returncode} {res.stderr!r}")
        twin = os.path.join(other, "qwen-bench.json")
        write(other, "qwen-bench.json", bench)
        res = run(out, files[0], twin)
        check(res.returncode == 2 and "would write the same plots" in res.stderr,
              f"two inputs with one name: {res.returncode} {res.stderr!r}")
        after = {n: os.path.getmtime(os.path.join(out, n)) for n in os.listdir(out)}
        check(after == before, "failed runs left the output folder as it was")

        # A real report, if the encgraph binary is at hand.
        binary = os.environ.get("ENCGRAPH_BIN")
        if binary and PLUGINS:
            real = os.path.join(tmp, "toy-real.json")
            res = subprocess.run(
                [binary, "bench", "--config", os.path.join(SOURCE, "configs", "toy.toml"),
                 "--set", f"runtime.plugin_dirs=[\"{PLUGINS}\"]", "--set", "workload.count=32",
                 "--set", "runtime.log_level=\"error\"", "--report", real],
                capture_output=True, text=True, timeout=300)
            check(res.returncode == 0, f"encgraph bench: {res.returncode} {res.stderr[-500:]}")
            if res.returncode == 0:
                res = run(out, real)
                check(res.returncode == 0 and is_png(os.path.join(out, "report-toy-real.png")),
                      f"a real encgraph report plotted: {res.returncode} {res.stderr!r}")
                print("a real encgraph bench report: plotted")
        else:
            print("no ENCGRAPH_BIN and plugin folder: the real report is not tried")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
