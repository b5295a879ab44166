#!/usr/bin/env python3
"""Turns benchmark reports into the PNG plots of docs/performance.md.

usage: python3 scripts/plot_benchmarks.py --out docs/benchmarks FILE...

Each FILE's kind is read from its content, not its name:

  bench results   {workload: {system: {seconds, items, p50, p99, ...}}}, as
                  scripts/gpu/bench.py --model qwen2_5_vl, qwen3_vl, glm4v, dsocr2, internvl
                  write them (qwen-bench.json, ...); or the same under "results"
                  with "schema": "encgraph.bench-results/1" and optional "name",
                  "title", "unit", "source", "workload_labels" (the hand-copied
                  tables in docs/benchmarks/data/). A system may give "items_per_s"
                  instead of seconds and items.
                  -> throughput-NAME.png (items/s per workload and system) and,
                     where p50 is known, latency-NAME.png (p50 bars, p99 whiskers).
  encgraph report "schema": "encgraph.report/1" (`encgraph bench --report`).
                  -> report-NAME.png (items/s and latency per mode); where a mode
                     has per-budget figures ("budgets": [{"budget", "latency_ms":
                     {"p50", "p99"}}, ...]; encgraph.report/1 has no such key
                     yet), latency-per-budget-NAME.png; with two
                     or more reports that captured graphs, capture-time.png.
  kernel layer    "schema": "encgraph.kernel-layer/1": {"kernels": [{"name",
                  "us" (one launch) | "flops" and "tflops" (a number or [low,
                  high]), "count" (launches per layer, 1), "group" (product,
                  attention, memory)}], "title", "source", "layer_ms"}
                  -> kernel-time-layer[-NAME].png (time per kernel in one layer).
  kernels table   bench_kernels --table output ("== kernels (median of ..."): the
                  layer is summed from its rows as bench_kernels sums it.
                  -> kernel-time-layer[-NAME].png.

NAME is the file's "name" key, else its file name without .json (qwen-bench.json
is named qwen2_5_vl, qwen3-bench.json qwen3_vl, dsocr2-bench.json deepseek_ocr2,
glm4v-bench.json glm4v, internvl-bench.json internvl).
Needs matplotlib only (Debian: apt-get install python3-matplotlib, for
/usr/bin/python3). Exit 2 on a file it cannot read or does not know, 1 when
matplotlib is missing or a plot cannot be written.
"""
import argparse
import json
import math
import os
import re
import sys
import tempfile

SCRIPT_NAMES = {"qwen-bench": "qwen2_5_vl", "qwen3-bench": "qwen3_vl",
                "glm4v-bench": "glm4v", "dsocr2-bench": "deepseek_ocr2",
                "internvl-bench": "internvl", "kernels": ""}
# The same system keeps its colour in every plot.
SYSTEM_COLOURS = {"encgraph graphs": "#1f4e9c", "encgraph eager": "#7fa7e0",
                  "encgraph": "#1f4e9c", "transformers sdpa": "#e07b1f",
                  "transformers eager": "#f2c08f", "transformers": "#e07b1f"}
OTHER_COLOURS = ["#2a9d5c", "#9d2a6b", "#6b6b6b", "#b8a21f", "#1fb8b0", "#8c5a2e"]
GROUP_COLOURS = {"product": "#1f4e9c", "attention": "#2a9d5c", "memory": "#e07b1f"}


class InputError(Exception):
    """A file this script cannot use; the message names it and says why."""


def load_matplotlib():
    try:
        import matplotlib
    except ImportError:
        here = sys.executable or "python3"
        hint = ""
        if os.path.realpath(here) != os.path.realpath("/usr/bin/python3") and \
                os.path.exists("/usr/bin/python3"):
            hint = (f" ({here} is not Debian's /usr/bin/python3, which python3-matplotlib"
                    " installs for: run the script with /usr/bin/python3)")
        sys.exit("plot_benchmarks: matplotlib is missing" + hint + ". Fix: apt-get install "
                 "python3-matplotlib (or pip install matplotlib for this interpreter).")
    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt
    return plt


# ---------------------------------------------------------------- inputs

def read_input(path):
    """(kind, data) for one file; InputError when it is none of the known kinds."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read it ({e})") from None
    if text.lstrip().startswith("== kernels"):
        return "kernel-layer", kernels_table_layer(path, text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON ({e.msg} at line {e.lineno} column {e.colno}), "
                         "and not a bench_kernels table") from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema == "encgraph.report/1":
        return "report", check_report(path, data)
    if schema == "encgraph.kernel-layer/1":
        return "kernel-layer", check_kernel_layer(path, data)
    if schema == "encgraph.bench-results/1":
        return "bench", check_bench(path, data.get("results"), data)
    if isinstance(data, dict) and schema is None and looks_like_bench(data):
        return "bench", check_bench(path, data, {})
    raise InputError(
        f"{path}: not a benchmark report this script knows"
        f"{f' (schema {schema!r})' if schema else ''}. Expected an "
        "encgraph bench --report file (encgraph.report/1), the JSON of bench.py --model "
        "qwen2_5_vl / qwen3_vl / dsocr2 ({workload: {system: {seconds, items, ...}}}), "
        "an encgraph.bench-results/1 or encgraph.kernel-layer/1 file, or a bench_kernels "
        "table; see the top of scripts/plot_benchmarks.py")


def looks_like_bench(data):
    return bool(data) and all(isinstance(v, dict) and all(isinstance(r, dict) for r in v.values())
                              for v in data.values())


def number(path, where, value, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{path}: {where} is {value!r}, expected a finite number")
    return float(value)


def check_bench(path, results, meta):
    if not isinstance(results, dict) or not looks_like_bench(results):
        raise InputError(f"{path}: \"results\" must map workload -> system -> figures")
    rows = []  # (workload, system, items_per_s, p50, p99)
    for workload, systems in results.items():
        for system, r in systems.items():
            where = f"results[{workload!r}][{system!r}]"
            if "items_per_s" in r:
                rate = number(path, where + ".items_per_s", r["items_per_s"])
            elif "seconds" in r and "items" in r:
                seconds = number(path, where + ".seconds", r["seconds"])
                if seconds <= 0:
                    raise InputError(f"{path}: {where}.seconds is {seconds}, expected > 0")
                rate = number(path, where + ".items", r["items"]) / seconds
            else:
                raise InputError(f"{path}: {where} has neither items_per_s nor seconds and items")
            if rate < 0:
                raise InputError(f"{path}: {where} gives a negative rate")
            rows.append((workload, system, rate, number(path, where + ".p50", r.get("p50"), True),
                         number(path, where + ".p99", r.get("p99"), True)))
    if not rows:
        raise InputError(f"{path}: no system has figures (every workload is empty)")
    labels = meta.get("workload_labels") or {}
    return dict(name=output_name(path, meta), rows=rows, labels=labels,
                title=meta.get("title") or output_name(path, meta),
                unit=meta.get("unit", "items"), source=meta.get("source"))


def check_report(path, data):
    results = data.get("results")
    if not isinstance(results, list) or not results:
        raise InputError(f"{path}: an encgraph report with no \"results\" modes")
    modes = []
    for i, m in enumerate(results):
        where = f"results[{i}]"
        if not isinstance(m, dict) or not isinstance(m.get("latency_ms"), dict):
            raise InputError(f"{path}: {where} has no latency_ms")
        lat = {k: number(path, f"{where}.latency_ms.{k}", m["latency_ms"].get(k))
               for k in ("p50", "p99", "mean", "max")}
        budgets = []
        for j, b in enumerate(m.get("budgets") or []):
            bw = f"{where}.budgets[{j}]"
            if not isinstance(b, dict) or not isinstance(b.get("latency_ms"), dict):
                raise InputError(f"{path}: {bw} needs budget and latency_ms")
            budgets.append((number(path, bw + ".budget", b.get("budget")),
                            number(path, bw + ".latency_ms.p50", b["latency_ms"].get("p50")),
                            number(path, bw + ".latency_ms.p99", b["latency_ms"].get("p99"),
                                   True)))
        modes.append(dict(mode=str(m.get("mode", f"mode {i}")),
                          rate=number(path, where + ".items_per_s", m.get("items_per_s")),
                          latency=lat, budgets=sorted(budgets),
                          capture_s=number(path, where + ".capture_s", m.get("capture_s", 0)),
                          graphs=int(number(path, where + ".graphs", m.get("graphs", 0)))))
    plugin = (data.get("plugin") or {}).get("name", "?")
    device = (data.get("device") or {}).get("name", "?")
    workload = data.get("workload") or {}
    title = (f"{plugin} on {device}: {workload.get('items', '?')} items, requests of "
             f"{workload.get('request_size', '?')}")
    return dict(name=output_name(path, data), modes=modes, title=title)


def check_kernel_layer(path, data):
    kernels = data.get("kernels")
    if not isinstance(kernels, list) or not kernels:
        raise InputError(f"{path}: \"kernels\" must be a non-empty list")
    rows = []
    for i, k in enumerate(kernels):
        where = f"kernels[{i}]"
        if not isinstance(k, dict) or not isinstance(k.get("name"), str):
            raise InputError(f"{path}: {where} needs a \"name\"")
        if "us" in k:
            lo = hi = number(path, where + ".us", k["us"])
        elif "flops" in k and "tflops" in k:
            flops = number(path, where + ".flops", k["flops"])
            rate = k["tflops"] if isinstance(k["tflops"], list) else [k["tflops"]] * 2
            if len(rate) != 2:
                raise InputError(f"{path}: {where}.tflops must be a number or [low, high]")
            fast, slow = (number(path, where + ".tflops", r) for r in sorted(rate, reverse=True))
            if slow <= 0:
                raise InputError(f"{path}: {where}.tflops must be > 0")
            lo, hi = flops / fast * 1e-6, flops / slow * 1e-6  # µs
        else:
            raise InputError(f"{path}: {where} needs \"us\", or \"flops\" and \"tflops\"")
        count = int(number(path, where + ".count", k.get("count", 1)))
        if count < 1:
            raise InputError(f"{path}: {where}.count must be at least 1")
        rows.append(dict(name=k["name"], lo=lo * count, hi=hi * count,
                         group=k.get("group", "other"), count=count))
    return dict(name=output_name(path, data), rows=rows,
                title=data.get("title") or "Time per kernel in one encoder layer",
                source=data.get("source"),
                layer_ms=number(path, "layer_ms", data.get("layer_ms"), True))


ROW = re.compile(r"^(?P<kernel>.{22}) (?P<shape>.*?)\s+(?P<us>\d+\.\d)\s+(?P<tf>\d+\.\d)\s+"
                 r"(?P<gbs>\d+)\s*(?P<note>.*)$")
# bench_kernels' own layer sum (bench/kernels/bench_kernels.cpp): kernel, note
# prefix, how many per layer, group.
LAYER = [("gemm qkv", "heuristic", 1, "product"), ("rms_norm", "", 2, "memory"),
         ("rotary", "", 1, "memory"), ("attn window", "default", 1, "attention"),
         ("gemm o_proj+res", "heuristic", 1, "product"),
         ("gemm gate_up 3424", "heuristic", 1, "product"), ("silu_mul", "", 1, "memory"),
         ("gemm down 3424 +res", "heuristic", 1, "product")]


def kernels_table_layer(path, text):
    found = {}
    for line in text.splitlines()[2:]:
        m = ROW.match(line)
        if m:
            found.setdefault((m["kernel"].strip(), m["note"].strip()), float(m["us"]))
    rows = []
    for kernel, note, count, group in LAYER:
        us = next((v for (k, n), v in found.items() if k == kernel and n.startswith(note)), None)
        if us is None:
            raise InputError(f"{path}: the bench_kernels table has no {kernel!r} row "
                             f"(note {note or 'any'}); rerun bench_kernels --table")
        rows.append(dict(name=kernel, lo=us * count, hi=us * count, group=group, count=count))
    return dict(name=output_name(path, {}), rows=rows, source=f"{os.path.basename(path)} "
                "(bench_kernels --table)", title="Time per kernel in one encoder layer "
                "(window attention), summed as bench_kernels sums it", layer_ms=None)


def output_name(path, meta):
    if isinstance(meta, dict) and isinstance(meta.get("name"), str):
        return meta["name"]
    stem = os.path.basename(path)
    for ext in (".json", ".table", ".txt"):
        if stem.endswith(ext):
            stem = stem[:-len(ext)]
    return SCRIPT_NAMES.get(stem, stem)


# ---------------------------------------------------------------- plots

def colours(systems):
    out, spare = {}, iter(OTHER_COLOURS * 4)
    for s in systems:
        out[s] = SYSTEM_COLOURS.get(s) or next(spare)
    return out


def short(v):
    if v >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def grouped_bars(ax, workloads, systems, value, colour, labels, log):
    width = 0.8 / max(1, len(systems))
    for j, s in enumerate(systems):
        xs, ys, errs = [], [], []
        for i, w in enumerate(workloads):
            v = value(w, s)
            if v is not None:
                xs.append(i + (j - (len(systems) - 1) / 2) * width)
                ys.append(v[0])
                errs.append(v[1])
        if not xs:
            continue
        yerr = None
        if any(e is not None for e in errs):
            yerr = [[0] * len(errs), [max(0.0, (e or y) - y) for e, y in zip(errs, ys)]]
        bars = ax.bar(xs, ys, width, label=s, color=colour[s], yerr=yerr, capsize=3,
                      error_kw=dict(elinewidth=0.8, ecolor="#333333"))
        for b, y, e in zip(bars, ys, errs):  # above the whisker, where there is one
            ax.annotate(short(y), (b.get_x() + b.get_width() / 2, max(y, e or y)), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=6.5)
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels([labels.get(w, w) for w in workloads], fontsize=8)
    if log:
        ax.set_yscale("log")
    bottom, top = ax.get_ylim()  # room above the tallest label
    ax.set_ylim(bottom, top * (1.8 if log else 1.08))
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def spread(values):
    values = [v for v in values if v and v > 0]
    return max(values) / min(values) if values else 1.0


def footnote(fig, text):
    if text:
        fig.text(0.01, 0.005, text, fontsize=6, color="#555555", ha="left", va="bottom",
                 wrap=True)


def plot_bench(plt, d, save):
    workloads = list(dict.fromkeys(r[0] for r in d["rows"]))
    systems = list(dict.fromkeys(r[1] for r in d["rows"]))
    table = {(w, s): (rate, p50, p99) for w, s, rate, p50, p99 in d["rows"]}
    colour = colours(systems)
    unit = d["unit"]

    fig, ax = plt.subplots(figsize=(max(7.5, 1.6 * len(workloads) + 3.5), 4.4))
    rates = [r[2] for r in d["rows"]]
    log = spread(rates) > 10
    grouped_bars(ax, workloads, systems,
                 lambda w, s: (table[(w, s)][0], None) if (w, s) in table else None,
                 colour, d["labels"], log)
    ax.set_ylabel(f"{unit}/s" + (" (log scale)" if log else ""))
    ax.set_title(f"{d['title']}\nthroughput", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # off the bars
    footnote(fig, d["source"])
    fig.tight_layout(rect=(0, 0.05 if d["source"] else 0, 1, 1))
    save(fig, f"throughput-{d['name']}.png")

    with_p50 = [r for r in d["rows"] if r[3] is not None]
    if not with_p50:
        return
    workloads = [w for w in workloads if any(r[0] == w for r in with_p50)]
    fig, ax = plt.subplots(figsize=(max(7.5, 1.6 * len(workloads) + 3.5), 4.4))
    lat = [r[3] for r in with_p50] + [r[4] for r in with_p50 if r[4]]
    log = spread(lat) > 10
    grouped_bars(ax, workloads, systems,
                 lambda w, s: (table[(w, s)][1], table[(w, s)][2])
                 if (w, s) in table and table[(w, s)][1] is not None else None,
                 colour, d["labels"], log)
    ax.set_ylabel("ms per request" + (" (log scale)" if log else ""))
    whisker = ", p99 (whisker)" if any(r[4] is not None for r in with_p50) else ""
    ax.set_title(f"{d['title']}\nlatency per request: p50 (bar){whisker}", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # off the bars
    footnote(fig, d["source"])
    fig.tight_layout(rect=(0, 0.05 if d["source"] else 0, 1, 1))
    save(fig, f"latency-{d['name']}.png")


def plot_report(plt, d, save):
    modes = d["modes"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8),
                                 gridspec_kw=dict(width_ratios=[1, 2]))
    names = [m["mode"] for m in modes]
    colour = colours(["encgraph " + n for n in names])
    bars = a1.bar(names, [m["rate"] for m in modes],
                  color=[colour["encgraph " + n] for n in names])
    for b in bars:
        a1.annotate(short(b.get_height()), (b.get_x() + b.get_width() / 2, b.get_height()),
                    xytext=(0, 2), textcoords="offset points", ha="center", fontsize=7)
    a1.set_ylabel("items/s")
    a1.grid(axis="y", alpha=0.3)
    a1.set_axisbelow(True)
    stats = ["p50", "p99", "mean", "max"]
    grouped_bars(a2, stats, ["encgraph " + n for n in names],
                 lambda st, s: (modes[names.index(s[len("encgraph "):])]["latency"][st], None),
                 colour, {}, False)
    a2.set_ylabel("ms per request")
    a2.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(d["title"], fontsize=9)
    fig.tight_layout()
    save(fig, f"report-{d['name']}.png")

    per_budget = [m for m in modes if m["budgets"]]
    if not per_budget:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for m in per_budget:
        xs = [b[0] for b in m["budgets"]]
        line = ax.plot(xs, [b[1] for b in m["budgets"]], marker="o",
                       color=colour["encgraph " + m["mode"]], label=f"{m['mode']} p50")[0]
        p99 = [(b[0], b[2]) for b in m["budgets"] if b[2] is not None]
        if p99:
            ax.plot([p[0] for p in p99], [p[1] for p in p99], marker="^", linestyle="--",
                    color=line.get_color(), alpha=0.6, label=f"{m['mode']} p99")
    ax.set_xscale("log", base=2)
    ticks = sorted({b[0] for m in per_budget for b in m["budgets"]})
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}" for t in ticks], rotation=45 if len(ticks) > 8 else 0)
    ax.minorticks_off()
    ax.set_xlabel("budget (tokens)")
    ax.set_ylabel("ms per batch")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"{d['title']}\nlatency per budget", fontsize=9)
    fig.tight_layout()
    save(fig, f"latency-per-budget-{d['name']}.png")


def plot_capture(plt, reports, save):
    rows = []
    for d in reports:
        captured = [m for m in d["modes"] if m["graphs"] > 0]
        if captured:
            m = max(captured, key=lambda m: m["capture_s"])
            rows.append((d["name"], m["capture_s"], m["graphs"]))
    if len(rows) < 2:
        return
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(rows) + 2), 3.6))
    bars = ax.bar([r[0] for r in rows], [r[1] for r in rows], color="#1f4e9c")
    for b, r in zip(bars, rows):
        ax.annotate(f"{short(r[1])} s, {r[2]} graphs", (b.get_x() + b.get_width() / 2,
                    b.get_height()), xytext=(0, 2), textcoords="offset points", ha="center",
                    fontsize=7)
    ax.set_ylim(0, max(r[1] for r in rows) * 1.12)
    ax.set_ylabel("capture seconds")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.set_title("Graph capture time per report", fontsize=10)
    fig.tight_layout()
    save(fig, "capture-time.png")


def plot_kernels(plt, d, save):
    rows = d["rows"]
    total = sum((r["lo"] + r["hi"]) / 2 for r in rows)
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(rows) + 1.6))
    ys = list(range(len(rows)))[::-1]
    mids = [(r["lo"] + r["hi"]) / 2 for r in rows]
    ax.barh(ys, mids, color=[GROUP_COLOURS.get(r["group"], "#6b6b6b") for r in rows])
    ranged = [(y, m, r) for y, m, r in zip(ys, mids, rows) if r["hi"] > r["lo"]]
    if ranged:  # whiskers only where the source gives a range
        ax.errorbar([m for _, m, _ in ranged], [y for y, _, _ in ranged],
                    xerr=[[m - r["lo"] for _, m, r in ranged], [r["hi"] - m for _, m, r in ranged]],
                    fmt="none", ecolor="#333333", elinewidth=0.8, capsize=3)
    for y, m, r in zip(ys, mids, rows):
        ax.annotate(f"{m:,.0f} µs ({100 * m / total:.1f}%)", (r["hi"], y), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=7)
    ax.set_yticks(ys)
    ax.set_yticklabels([r["name"] + (f" ×{r['count']}" if r["count"] > 1 else "")
                        for r in rows], fontsize=8)
    ax.set_xlabel("µs per layer")
    ax.set_xlim(0, max(r["hi"] for r in rows) * 1.3)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for g, c in GROUP_COLOURS.items()
               if any(r["group"] == g for r in rows)]
    ax.legend(handles, [g for g in GROUP_COLOURS if any(r["group"] == g for r in rows)],
              fontsize=7, loc="lower right")
    summed = f"sum of the bars {total / 1000:.2f} ms"
    if d.get("layer_ms"):
        summed += f" (the source's layer sum: {d['layer_ms']:g} ms)"
    ax.set_title(f"{d['title']}\n{summed}", fontsize=9)
    footnote(fig, d["source"])
    fig.tight_layout(rect=(0, 0.06 if d["source"] else 0, 1, 1))
    suffix = f"-{d['name']}" if d["name"] else ""
    save(fig, f"kernel-time-layer{suffix}.png")


# ---------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(description="Benchmark reports to PNG plots "
                                 "(see the top of this file for the inputs).")
    ap.add_argument("--out", required=True, help="folder for the PNG files (created)")
    ap.add_argument("files", nargs="+", help="report files; each kind is read from its content")
    args = ap.parse_args(argv)

    inputs, names = [], {}
    try:
        for path in args.files:
            kind, data = read_input(path)
            # Checked before any plot is drawn: one input's plots never replace another's.
            key = (kind, data["name"])
            if key in names:
                raise InputError(f"{names[key]} and {path} would write the same plots "
                                 f"(name {data['name']!r}): rename one of the files or give "
                                 "it a \"name\" key")
            names[key] = path
            inputs.append((path, kind, data))
    except InputError as e:
        print(f"plot_benchmarks: {e}", file=sys.stderr)
        return 2
    plt = load_matplotlib()
    plt.rcParams.update({"font.size": 8})

    umask = os.umask(0)
    os.umask(umask)

    def save(fig, name):
        # Written beside and renamed: an interrupted run never leaves half a PNG.
        fd, tmp = tempfile.mkstemp(prefix=".plot-", suffix=".png", dir=args.out)
        os.close(fd)
        try:
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; a plot is not
            fig.savefig(tmp, dpi=110, metadata={"Software": None})
            os.replace(tmp, os.path.join(args.out, name))
        finally:
            plt.close(fig)
            if os.path.exists(tmp):
                os.unlink(tmp)
        print(os.path.join(args.out, name))

    try:
        os.makedirs(args.out, exist_ok=True)
        reports = []
        for path, kind, data in inputs:
            if kind == "bench":
                plot_bench(plt, data, save)
            elif kind == "report":
                plot_report(plt, data, save)
                reports.append(data)
            else:
                plot_kernels(plt, data, save)
        plot_capture(plt, reports, save)
    except InputError as e:
        print(f"plot_benchmarks: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"plot_benchmarks: cannot write the plots into {args.out}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
