"""What the hostile cases are made of: the Case record, the scratch folder a
case runs in, the run and its checks, and small writers for the files the
cases feed the command (TOML configs naming the in-tree toy plugin, PNG,
safetensors). Standard library only."""
import dataclasses
import fnmatch
import hashlib
import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import tempfile
import time
import zlib
from typing import Callable, Dict, List, Optional, Union


class _Env:
    encgraph = ""
    plugin_dir = ""
    test_plugin_dir = ""  # the build's test plugins, searched after plugin_dir
    source_dir = ""


ENV = _Env()


@dataclasses.dataclass
class Result:
    rc: int
    out: str
    err: str
    timed_out: bool = False

    @property
    def text(self):
        return self.out + self.err


@dataclasses.dataclass
class Case:
    name: str                                   # "<class>/<what>", unique
    args: Union[List[str], Callable] = None     # argv after `encgraph`, or fn(ctx) -> argv
    exit: int = 2                               # expected exit code
    message: Union[str, List[str]] = ()         # regexes that must all occur in stdout+stderr
    files: Dict[str, Union[bytes, str]] = dataclasses.field(default_factory=dict)
    setup: Optional[Callable] = None            # fn(ctx), after files are written
    outputs: List[str] = dataclasses.field(default_factory=list)  # fnmatch patterns allowed to change/appear
    check: Optional[Callable] = None            # fn(ctx, result) -> list of problems
    run: Optional[Callable] = None              # fn(ctx) -> Result, replaces the single run
    timeout: float = 60.0
    env: Dict[str, str] = dataclasses.field(default_factory=dict)
    stdin: Optional[bytes] = None


class Ctx:
    """The scratch folder of one case, and how to run the command there."""

    def __init__(self, case, folder):
        self.case = case
        self.dir = folder

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, data):
        p = self.path(name)
        os.makedirs(os.path.dirname(p) or self.dir, exist_ok=True)
        with open(p, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        return p

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()

    def environ(self, extra=None):
        env = dict(os.environ)
        env["ENCGRAPH_PLUGIN_PATH"] = ""
        env["TMPDIR"] = self.dir  # a temporary file left behind shows as a leftover
        env.update(self.case.env)
        env.update(extra or {})
        return env

    def spawn(self, args, env=None, stdin=None):
        return subprocess.Popen([ENV.encgraph] + list(args), cwd=self.dir, env=self.environ(env),
                                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)

    def finish(self, proc, timeout, stdin=None):
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
            return Result(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return Result(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"),
                          timed_out=True)

    def run(self, args, timeout=None, env=None, stdin=None):
        proc = self.spawn(args, env, stdin)
        return self.finish(proc, timeout or self.case.timeout, stdin)


def _snapshot(folder):
    """Regular files under folder -> sha256; other kinds -> their type."""
    snap = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = os.path.join(root, name)
            rel = os.path.relpath(p, folder)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                h = hashlib.sha256()
                with open(p, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        h.update(block)
                snap[rel] = "file " + h.hexdigest()
            elif stat.S_ISDIR(st.st_mode):
                snap[rel] = "dir"
            elif stat.S_ISFIFO(st.st_mode):
                snap[rel] = "fifo"
            elif stat.S_ISLNK(st.st_mode):
                snap[rel] = "link " + os.readlink(p)
            else:
                snap[rel] = "special %o" % st.st_mode
    return snap


def _allowed(rel, patterns):
    return any(fnmatch.fnmatch(rel, p) for p in patterns)


def _signal_name(rc):
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return str(-rc)


SANITIZER_MARKS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")


def run_case(case):
    """Runs one case in a fresh scratch folder; returns the list of problems."""
    folder = tempfile.mkdtemp(prefix="encgraph-hostile-")
    try:
        ctx = Ctx(case, folder)
        for name, data in case.files.items():
            ctx.write(name, data)
        if case.setup:
            case.setup(ctx)
        before = _snapshot(folder)
        if case.run:
            result = case.run(ctx)
        else:
            argv = case.args(ctx) if callable(case.args) else case.args
            result = ctx.run(argv, stdin=case.stdin)
        problems = []
        tail = "\n--- output (tail) ---\n" + result.text[-1500:]
        if result.timed_out:
            problems.append(f"hung: killed after {case.timeout:.0f} s" + tail)
        elif result.rc < 0:
            problems.append(f"crashed with {_signal_name(result.rc)}" + tail)
        elif result.rc != case.exit:
            problems.append(f"exit code {result.rc}, expected {case.exit}" + tail)
        for mark in SANITIZER_MARKS:
            if mark in result.err:
                problems.append(f"sanitizer report ({mark})" + tail)
        for rx in [case.message] if isinstance(case.message, str) else case.message:
            if not __import__("re").search(rx, result.text):
                problems.append(f"message /{rx}/ not found" + tail)
        after = _snapshot(folder)
        for rel in sorted(set(before) | set(after)):
            if before.get(rel) == after.get(rel) or _allowed(rel, case.outputs):
                continue
            if rel not in after:
                problems.append(f"{rel} was removed")
            elif rel not in before:
                problems.append(f"{rel} was left behind ({after[rel].split()[0]})")
            else:
                problems.append(f"{rel} was changed ({before[rel].split()[0]} -> {after[rel].split()[0]})")
        if case.check and not problems:
            problems += case.check(ctx, result) or []
        return problems
    finally:
        for root, dirs, _ in os.walk(folder):  # a case may have made a folder read-only
            for d in dirs:
                try:
                    os.chmod(os.path.join(root, d), 0o755)
                except OSError:
                    pass
        shutil.rmtree(folder, ignore_errors=True)


# ---- writers for the files cases feed the command ----

def toml_str(s):
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def toy_config(extra="", runtime="", plugin="", plugin_config="", device="cpu"):
    """A config for the in-tree toy plugin, found in the build's plugin folder
    (and the test plugins, by name, in the test plugin folder)."""
    dirs = ", ".join(toml_str(d) for d in (ENV.plugin_dir, ENV.test_plugin_dir) if d)
    return (f"[runtime]\ndevice = \"{device}\"\nlog_level = \"warn\"\nprefer_faster_path = false\n"
            f"plugin_dirs = [{dirs}]\n{runtime}\n"
            f"[plugin]\nname = \"toy\"\n{plugin}\n"
            f"[plugin.config]\nhidden = 8\n{plugin_config}\n{extra}")


def png(width, height, channels=3, seed=0):
    """An 8-bit PNG (grey, grey+alpha, RGB or RGBA) with a gradient."""
    color_type = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    rows = bytearray()
    for y in range(height):
        rows.append(0)
        for x in range(width):
            for c in range(channels):
                rows.append((x * 7 + y * 13 + c * 50 + seed) & 0xFF)

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(bytes(rows)))
            + chunk(b"IEND", b""))


def png_header_only(width, height):
    """A PNG signature and IHDR claiming width x height, and nothing else."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = b"IHDR" + ihdr
    return (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + body
            + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF))


def safetensors(tensors, metadata=None, header=None):
    """tensors: name -> (dtype, shape, raw bytes). `header` replaces the JSON header."""
    entries, data, offset = {}, b"", 0
    for name, (dtype, shape, raw) in tensors.items():
        entries[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    if metadata:
        entries["__metadata__"] = metadata
    text = header if header is not None else json.dumps(entries)
    raw_header = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw_header)) + raw_header + data


def f32(values):
    return struct.pack("<%df" % len(values), *values)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def encgraph_source(rel):
    return os.path.join(ENV.source_dir, rel)


# ---- builders the model plugins' cases share (internvl, llava_onevision, qwen3) ----

def patterned_checkpoint(shapes, norm="norm", poison=None, drop=(), reshape=None, extra=None):
    """A safetensors file of `shapes` ({name: shape}) holding a fixed small
    pattern (norm weights, names containing `norm`, about 1): `drop` leaves
    tensors out, `reshape` = (name, shape) lies about one shape, `poison` =
    (name, index, value) plants one value, `extra` ({name: shape}) adds
    tensors of 0.5."""
    tensors = {}
    for name, shape in shapes.items():
        if name in drop:
            continue
        if reshape and name == reshape[0]:
            shape = reshape[1]
        n = 1
        for x in shape:
            n *= x
        base = 1.0 if norm in name and name.endswith("weight") else 0.0
        v = [base + 0.02 * (((i * 5 + len(name)) % 11) - 5) for i in range(n)]
        if poison and poison[0] == name:
            v[poison[1]] = poison[2]
        tensors[name] = ("F32", shape, struct.pack("<%df" % n, *v))
    for name, shape in (extra or {}).items():
        n = 1
        for x in shape:
            n *= x
        tensors[name] = ("F32", shape, struct.pack("<%df" % n, *([0.5] * n)))
    return safetensors(tensors)


def run_args(*sets, cfg="c.toml"):
    """`encgraph run` on `cfg` asking for the report r.json, with --set each of `sets`."""
    argv = ["run", "-c", cfg, "--set", "output.report=r.json"]
    for s in sets:
        argv += ["--set", s]
    return argv


def model_case_builders(area, config, folder_config):
    """The case builders of a model plugin's suite, naming cases `area`/...:
    key_case (keys set on `config()`), config_json_case (a config.json given
    by plugin.config.config_json), folder_case (files under m/ with
    `folder_config()`) and weights_case (w.safetensors as plugin.weights)."""
    def key_case(name, sets, message, exit=2):
        return Case(name=f"{area}/key-{name}", files={"c.toml": config()}, args=run_args(*sets),
                    exit=exit, message=message)

    def config_json_case(name, text, message, exit=2):
        return Case(name=f"{area}/config-json-{name}",
                    files={"c.toml": config(), "config.json": text},
                    args=run_args('plugin.config.config_json="config.json"'), exit=exit,
                    message=message)

    def folder_case(name, message, files, sets=(), exit=2, outputs=()):
        f = {"c.toml": folder_config()}
        f.update({"m/" + k: v for k, v in files.items()})
        return Case(name=f"{area}/folder-{name}", files=f, args=run_args(*sets), exit=exit,
                    message=message, outputs=list(outputs), timeout=60)

    def weights_case(name, data, message, exit=2, outputs=(), sets=()):
        return Case(name=f"{area}/weights-{name}",
                    files={"c.toml": config(weights='"w.safetensors"'), "w.safetensors": data},
                    args=run_args(*sets), exit=exit, message=message, outputs=list(outputs),
                    timeout=60)

    return key_case, config_json_case, folder_case, weights_case
