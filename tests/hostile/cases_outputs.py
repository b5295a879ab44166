"""Outputs never destroy inputs (class 2): an embeddings file or report that is
an input (the config, an image, a frame, the trace, the weights, a file a
plugin setting names; by any path: symlink, hard link, ./x) or the other
output is refused; a target that is not a regular file (a folder, a device
node, a FIFO) is refused untouched; a failed, empty or interrupted run leaves
a good earlier output as it was and no staging file behind; two runs writing
one file leave one run's complete output."""
import json
import os
import signal
import stat
import struct
import time

from hostile_support import Case, Result, png, toy_config

CFG = toy_config()
PNG = png(28, 28)
GOOD = b"a good embeddings file from an earlier run"


def encode(*args, config="c.toml"):
    return ["encode", "-c", config] + list(args)


def refused(name, args, message, files=None, setup=None, exit=2):
    """A run refused before anything is written: every file stays as it was."""
    f = {"c.toml": CFG, "a.png": PNG}
    f.update(files or {})
    return Case(name="outputs/" + name, files=f, args=args, message=message, setup=setup,
                exit=exit)


def symlink(target, name):
    return lambda ctx: os.symlink(target, ctx.path(name))


def hardlink(target, name):
    return lambda ctx: os.link(ctx.path(target), ctx.path(name))


def mkdir(name):
    return lambda ctx: os.makedirs(ctx.path(name), exist_ok=True)


def mkfifo(name):
    return lambda ctx: os.mkfifo(ctx.path(name))


def device_node(name):
    """A character device like /dev/null in the scratch folder (a FIFO where
    creating device nodes is not permitted)."""
    def make(ctx):
        try:
            os.mknod(ctx.path(name), stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except (PermissionError, OSError):
            os.mkfifo(ctx.path(name))
    return make


def both(*fns):
    def run(ctx):
        for fn in fns:
            fn(ctx)
    return run


def read_safetensors(path):
    """(header dict, data bytes) of a safetensors file, checking its layout."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    end = max([t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"] or [0])
    if end != len(data):
        raise ValueError(f"data holds {len(data)} bytes, the tensors {end}")
    return header, data


def trace_lines(prefix, count, side=28):
    return "".join(json.dumps({"height": side, "width": side, "id": f"{prefix}/{i}"}) + "\n"
                   for i in range(count))


def good_output(name="e.safetensors"):
    return lambda ctx: ctx.write(name, GOOD)


def unchanged(name, content=GOOD):
    def check(ctx, result):
        return [] if ctx.read(name) == content else [f"{name} was changed"]
    return check


# ---- outputs that are inputs, or each other ----

SAME_AS_INPUT = [
    refused("o-is-the-image", encode("-o", "a.png", "a.png"),
            r"the embeddings output 'a\.png' is the image 'a\.png' \(the same file\): writing it "
            r"would destroy that input"),
    refused("o-is-a-symlink-to-the-image", encode("-o", "link.png", "a.png"),
            r"the embeddings output 'link\.png' is the image 'a\.png'",
            setup=symlink("a.png", "link.png")),
    refused("o-is-a-hard-link-to-the-image", encode("-o", "hard.png", "a.png"),
            r"the embeddings output 'hard\.png' is the image 'a\.png'",
            setup=hardlink("a.png", "hard.png")),
    refused("o-is-the-image-spelled-dot-slash", encode("-o", "./a.png", "a.png"),
            r"'\./a\.png' is the image 'a\.png'"),
    refused("o-is-the-image-through-a-folder", encode("-o", "sub/../a.png", "a.png"),
            r"'sub/\.\./a\.png' is the image", setup=mkdir("sub")),
    refused("o-is-the-image-by-absolute-path",
            lambda ctx: encode("-o", ctx.path("a.png"), "a.png"), r"is the image 'a\.png'"),
    refused("o-is-a-globbed-image", encode("-o", "b.png", "*.png"),
            r"the embeddings output 'b\.png' is the image 'b\.png'", files={"b.png": png(28, 28, seed=3)}),
    refused("o-is-the-config", encode("-o", "c.toml", "a.png"),
            r"the embeddings output 'c\.toml' is the config 'c\.toml'"),
    refused("report-is-the-config", encode("-o", "e.st", "--report", "c.toml", "a.png"),
            r"the report 'c\.toml' is the config 'c\.toml'"),
    refused("report-is-a-symlink-to-the-config",
            encode("-o", "e.st", "--report", "cfg-link.toml", "a.png"),
            r"the report 'cfg-link\.toml' is the config 'c\.toml'",
            setup=symlink("c.toml", "cfg-link.toml")),
    refused("report-is-the-image", encode("-o", "e.st", "--report", "a.png", "a.png"),
            r"the report 'a\.png' is the image 'a\.png'"),
    refused("o-is-the-report", encode("-o", "e.st", "--report", "e.st", "a.png"),
            r"the embeddings output 'e\.st' and the report 'e\.st' are the same file"),
    refused("o-is-the-report-spelled-differently",
            encode("-o", "e.st", "--report", "sub/../e.st", "a.png"),
            r"and the report 'sub/\.\./e\.st' are the same file", setup=mkdir("sub")),
    refused("o-is-the-existing-report-by-hard-link",
            encode("-o", "e.st", "--report", "r.json", "a.png"), r"are the same file",
            files={"e.st": GOOD}, setup=hardlink("e.st", "r.json")),
    refused("o-is-the-trace", encode("-o", "t.jsonl", "--trace", "t.jsonl"),
            r"the embeddings output 't\.jsonl' is the trace 't\.jsonl'",
            files={"t.jsonl": '{"file": "a.png"}\n'}),
    refused("o-is-an-image-the-trace-names", encode("-o", "a.png", "--trace", "t.jsonl"),
            r"the embeddings output 'a\.png' is the image",
            files={"t.jsonl": '{"file": "a.png"}\n'}),
    refused("o-is-a-video-frame", encode("-o", "clip/0002.png", "--trace", "t.jsonl"),
            r"is the frame of video 'v'",
            files={"t.jsonl": '{"frames_glob": "clip/*.png", "id": "v"}\n',
                   "clip/0001.png": PNG, "clip/0002.png": png(28, 28, seed=1)}),
    refused("o-is-the-weights", encode("-o", "w.safetensors", "a.png"),
            r"is the weights \(plugin\.weights\) 'w\.safetensors'",
            files={"c.toml": toy_config(plugin='weights = "w.safetensors"'),
                   "w.safetensors": b"weights"}),
    refused("o-inside-the-weights-folder", encode("-o", "model/part1.safetensors", "a.png"),
            r"lies inside the weights \(plugin\.weights\) 'model'",
            files={"c.toml": toy_config(plugin='weights = "model"'),
                   "model/part1.safetensors": b"weights"}),
    refused("o-is-a-file-a-plugin-setting-names", encode("-o", "config.json", "a.png"),
            r"is the file named by plugin\.config\.config_json 'config\.json'",
            files={"c.toml": toy_config(plugin_config='config_json = "config.json"'),
                   "config.json": "{}"}),
    refused("run-embeddings-is-the-config",
            ["run", "-c", "c.toml", "--set", "workload.count=2", "--embeddings", "c.toml"],
            r"the embeddings output 'c\.toml' is the config"),
    refused("run-outputs-from-the-config-are-one-file",
            ["run", "-c", "c.toml", "--set", "workload.count=2"],
            r"the embeddings output 'o\.st' and the report 'o\.st' are the same file",
            files={"c.toml": toy_config('[output]\nembeddings = "o.st"\nreport = "o.st"\n')}),
    refused("run-report-is-the-trace",
            ["run", "-c", "c.toml", "--report", "t.jsonl"],
            r"the report 't\.jsonl' is the trace",
            files={"c.toml": toy_config('[workload]\nkind = "trace"\ntrace = "t.jsonl"\n'),
                   "t.jsonl": '{"height": 28, "width": 28}\n'}),
    refused("bench-report-is-the-config", ["bench", "-c", "c.toml", "--set", "workload.count=2",
                                           "--report", "c.toml"],
            r"the report 'c\.toml' is the config"),
]

# ---- targets that are not regular files ----

NOT_REGULAR = [
    refused("o-is-a-device-node", encode("-o", "null", "a.png"),
            r"embeddings output 'null' is a (character device|FIFO \(named pipe\)), not a regular "
            r"file", setup=device_node("null")),
    refused("o-is-dev-null", encode("-o", "/dev/null", "a.png"),
            r"'/dev/null' is a character device, not a regular file"),
    refused("o-is-a-symlink-to-dev-null", encode("-o", "null-link", "a.png"),
            r"'null-link' is a character device", setup=symlink("/dev/null", "null-link")),
    refused("report-is-a-device-node", encode("-o", "e.st", "--report", "null", "a.png"),
            r"report 'null' is a (character device|FIFO)", setup=device_node("null")),
    refused("o-is-a-fifo", encode("-o", "fifo", "a.png"),
            r"'fifo' is a FIFO \(named pipe\), not a regular file", setup=mkfifo("fifo")),
    refused("o-is-a-directory", encode("-o", "out", "a.png"), r"'out' is a directory",
            setup=mkdir("out")),
    refused("o-is-a-directory-with-slash", encode("-o", "out/", "a.png"), r"'out/' is a directory",
            setup=mkdir("out")),
    refused("report-is-a-directory", encode("-o", "e.st", "--report", "out", "a.png"),
            r"report 'out' is a directory", setup=mkdir("out")),
    refused("o-under-a-file", encode("-o", "a.png/e.st", "a.png"),
            r"'a\.png/e\.st' cannot be written: 'a\.png' is a regular file, not a folder"),
    refused("run-report-is-a-directory",
            ["run", "-c", "c.toml", "--set", "workload.count=2", "--report", "out"],
            r"report 'out' is a directory", setup=mkdir("out")),
]
if os.geteuid() != 0:  # root may write anywhere
    NOT_REGULAR.append(refused(
        "o-in-a-read-only-folder", encode("-o", "ro/e.st", "a.png"),
        r"the folder 'ro' is not writable",
        setup=lambda ctx: (os.makedirs(ctx.path("ro")), os.chmod(ctx.path("ro"), 0o555))))

# ---- a good existing output survives a failed or empty run ----

KEPT = [
    Case(name="outputs/kept-when-an-image-fails-mid-run",
         files={"c.toml": CFG, "a.png": PNG, "b.png": png(56, 56)[:60], "e.safetensors": GOOD},
         args=encode("-o", "e.safetensors", "a.png", "b.png"),
         message=r"image 'b\.png' cannot be decoded \(", check=unchanged("e.safetensors")),
    Case(name="outputs/kept-when-a-trace-is-empty",
         files={"c.toml": CFG, "t.jsonl": "", "e.safetensors": GOOD},
         args=encode("-o", "e.safetensors", "--trace", "t.jsonl"),
         message=r"encode needs at least one item, and the workload holds none \(the trace "
                 r"'t\.jsonl' is empty"),
    Case(name="outputs/kept-when-a-trace-is-blank-lines",
         files={"c.toml": CFG, "t.jsonl": "\n   \n\t\n", "e.safetensors": GOOD},
         args=encode("-o", "e.safetensors", "--trace", "t.jsonl"),
         message=r"needs at least one item"),
    Case(name="outputs/kept-when-the-trace-is-a-directory",
         files={"c.toml": CFG, "e.safetensors": GOOD}, setup=mkdir("t.jsonl"),
         args=encode("-o", "e.safetensors", "--trace", "t.jsonl"),
         message=r"trace 't\.jsonl' is a directory, not a regular file"),
    Case(name="outputs/kept-when-an-image-is-missing",
         files={"c.toml": CFG, "a.png": PNG, "e.safetensors": GOOD},
         args=encode("-o", "e.safetensors", "a.png", "missing.png"),
         message=r"image 'missing\.png' does not exist"),
    Case(name="outputs/kept-when-a-pattern-matches-nothing",
         files={"c.toml": CFG, "e.safetensors": GOOD},
         args=encode("-o", "e.safetensors", "*.jpg"), message=r"the pattern '\*\.jpg' matches no file"),
    Case(name="outputs/kept-when-run-has-no-items",
         files={"c.toml": CFG, "e.safetensors": GOOD, "r.json": "{}"},
         args=["run", "-c", "c.toml", "--set", "workload.count=0", "--embeddings", "e.safetensors",
               "--report", "r.json"],
         message=r"run needs at least one item, and the workload holds none \(synthetic workload, "
                 r"workload\.count = 0"),
    Case(name="outputs/kept-report-when-a-frame-fails",
         files={"c.toml": CFG, "r.json": "{}", "e.st": GOOD,
                "t.jsonl": '{"frames_files": ["f1.png", "f2.png"], "id": "v"}\n',
                "f1.png": PNG, "f2.png": PNG[:60]},
         args=encode("-o", "e.st", "--report", "r.json", "--trace", "t.jsonl"),
         message=r"frame 2 of 2: image '.*f2\.png' cannot be decoded"),
]

# ---- what a good run writes, and how ----


def check_outputs_valid(*names):
    def check(ctx, result):
        problems = []
        for n in names:
            try:
                if n.endswith(".json"):
                    json.loads(ctx.read(n))
                else:
                    read_safetensors(ctx.path(n))
            except Exception as e:  # noqa: BLE001
                problems.append(f"{n} is not a valid output: {e}")
        return problems
    return check


def check_written_through_link(ctx, result):
    if not os.path.islink(ctx.path("link.st")):
        return ["link.st is no longer a symlink"]
    return [] if read_safetensors(ctx.path("real/e.st"))[0] else ["real/e.st holds nothing"]


WRITES = [
    Case(name="outputs/good-run-writes-only-its-outputs", files={"c.toml": CFG, "a.png": PNG},
         args=encode("-o", "e.st", "--report", "r.json", "a.png"), exit=0,
         message=r"wrote 1 embeddings", outputs=["e.st", "r.json"],
         check=check_outputs_valid("e.st", "r.json")),
    Case(name="outputs/good-run-replaces-an-old-output",
         files={"c.toml": CFG, "a.png": PNG, "e.st": GOOD, "r.json": "old"},
         args=encode("-o", "e.st", "--report", "r.json", "a.png"), exit=0,
         outputs=["e.st", "r.json"], check=check_outputs_valid("e.st", "r.json")),
    Case(name="outputs/missing-folders-are-created", files={"c.toml": CFG, "a.png": PNG},
         args=encode("-o", "out/sub/e.st", "--report", "out/r.json", "a.png"), exit=0,
         outputs=["out", "out/sub", "out/sub/e.st", "out/r.json"],
         check=check_outputs_valid("out/sub/e.st", "out/r.json")),
    Case(name="outputs/a-symlink-target-is-written-through",
         files={"c.toml": CFG, "a.png": PNG, "real/e.st": GOOD},
         setup=symlink("real/e.st", "link.st"), args=encode("-o", "link.st", "a.png"), exit=0,
         outputs=["real/e.st"], check=check_written_through_link),
]

# ---- two writers, and interrupted runs ----


def run_concurrent(ctx):
    """Two encodes of different traces into one file at once: the file must be
    one run's complete output, never a mix."""
    ctx.write("a.jsonl", trace_lines("a", 3000))
    ctx.write("b.jsonl", trace_lines("b", 3000))
    procs = [ctx.spawn(encode("-o", "e.st", "--trace", t)) for t in ("a.jsonl", "b.jsonl")]
    results = [ctx.finish(p, 120) for p in procs]
    bad = [r for r in results if r.rc != 0]
    return bad[0] if bad else Result(0, results[0].out + results[1].out, results[0].err + results[1].err)


def check_one_run(ctx, result):
    header, _ = read_safetensors(ctx.path("e.st"))
    prefixes = {k.split("/")[0] for k in header if k != "__metadata__"}
    count = len(header) - 1
    # One tensor per item and output ("<id>", "<id>/<output>"), docs/config.md.
    outputs = len(header.get("__metadata__", {}).get("outputs", "x").split(","))
    if len(prefixes) != 1 or count != 3000 * outputs:
        return [f"e.st mixes runs or is incomplete: prefixes {sorted(prefixes)}, {count} tensors"]
    return []


def run_interrupted(sig):
    def run(ctx):
        ctx.write("t.jsonl", "".join('{"height": 28, "width": 28}\n' for _ in range(200000)))
        proc = ctx.spawn(encode("-o", "e.safetensors", "--trace", "t.jsonl"))
        deadline = time.monotonic() + 60
        staged = False
        while time.monotonic() < deadline and proc.poll() is None and not staged:
            staged = any(".encgraph-" in n for n in os.listdir(ctx.dir))
            time.sleep(0.005)
        if not staged:
            ctx.finish(proc, 60)
            return Result(99, "", "no staging file appeared while the run was going")
        os.kill(proc.pid, sig)
        r = ctx.finish(proc, 60)
        # Killed by the signal, as it should be: report it as an exit code so
        # that the runner does not call it a crash.
        return Result(128 + sig if r.rc == -sig else r.rc, r.out, r.err, r.timed_out)
    return run


CONCURRENT = [
    Case(name="outputs/two-writers-leave-one-complete-file", files={"c.toml": CFG},
         run=run_concurrent, exit=0, outputs=["e.st", "a.jsonl", "b.jsonl"], check=check_one_run,
         timeout=240),
    Case(name="outputs/sigint-during-encode-leaves-no-staging-file",
         files={"c.toml": CFG, "e.safetensors": GOOD}, run=run_interrupted(signal.SIGINT),
         exit=128 + signal.SIGINT, outputs=["t.jsonl"], check=unchanged("e.safetensors"),
         timeout=120),
    Case(name="outputs/sigterm-during-encode-leaves-no-staging-file",
         files={"c.toml": CFG, "e.safetensors": GOOD}, run=run_interrupted(signal.SIGTERM),
         exit=128 + signal.SIGTERM, outputs=["t.jsonl"], check=unchanged("e.safetensors"),
         timeout=120),
]

CASES = SAME_AS_INPUT + NOT_REGULAR + KEPT + WRITES + CONCURRENT
