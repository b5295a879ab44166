"""A second hostile pass over the CLI, on what the other files leave out:
outputs in odd places (a missing or read-only folder, a full disk, a file-size
limit, a dangling or looping symlink, a name ending in '/', the plugin's
library, the program itself), signals at other moments and of other kinds,
traces with CRLF, BOM, NUL bytes, duplicate keys, out-of-range and
megabyte-long values and a million lines, frame globs over thousands of files
or with '**' and braces, PNG and JPEG variants (16-bit, interlaced, palette
with tRNS, 1-bit, 1x1, CMYK, YCCK, progressive, wider than the decoder takes),
[limits] at both ends, and the same bad inputs through run and bench. Each
case asserts the exit code, the message and that nothing was damaged or left
behind (the runner's snapshot)."""
import ctypes
import ctypes.util
import errno
import json
import os
import resource
import shutil
import signal
import struct
import subprocess
import time
import zlib

from hostile_support import ENV, Case, Result, png, png_header_only, toy_config

CFG = toy_config()
PNG = png(28, 28)
BAD_DATA_PNG = png(56, 56)[:60]  # a good header, pixel data cut short: fails when decoded
GOOD = b"a good embeddings file from an earlier run"
SMALL_RUN = ["--set", "workload.count=2", "--set", "workload.min_side=28",
             "--set", "workload.max_side=56"]


def encode(*args):
    return ["encode", "-c", "c.toml"] + list(args)


def line(**fields):
    return json.dumps(fields) + "\n"


OK_LINE = line(height=28, width=28)


def unchanged(name, content=GOOD):
    def check(ctx, result):
        try:
            same = ctx.read(name) == content
        except OSError as e:
            return [f"{name} cannot be read: {e}"]
        return [] if same else [f"{name} was changed"]
    return check


def short_message(limit=1500):
    """The whole output stays short, whatever the size of the bad value."""
    def check(ctx, result):
        n = len(result.text)
        return [] if n <= limit else [f"the output is {n} characters long"]
    return check


def run_with(preexec=None, env=None):
    """fn(ctx, argv) -> Result, the command started with `preexec` in the child."""
    def run(ctx, argv):
        proc = subprocess.Popen([ENV.encgraph] + argv, cwd=ctx.dir, env=ctx.environ(env),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, preexec_fn=preexec,
                                start_new_session=True)
        return ctx.finish(proc, ctx.case.timeout)
    return run


# ---- image writers (PNG of any depth, colour type and interlace; flat JPEGs) ----

def _chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
_ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2)]


def png_any(width, height, depth=8, color_type=2, interlace=0, palette=None, trns=None):
    """A PNG with a gradient, of any bit depth, colour type and interlace."""
    channels = _PNG_CHANNELS[color_type]
    top = (1 << depth) - 1

    def sample(x, y, c):
        return ((x * 7 + y * 13 + c * 50) % 251 if color_type != 3 else (x + y) % 4) & top

    def rows(xs, ys):
        out = bytearray()
        for y in ys:
            out.append(0)
            if depth >= 8:
                for x in xs:
                    for c in range(channels):
                        out += sample(x, y, c).to_bytes(depth // 8, "big")
            else:
                bits = nbits = 0
                for x in xs:
                    bits, nbits = (bits << depth) | sample(x, y, 0), nbits + depth
                    if nbits == 8:
                        out.append(bits)
                        bits = nbits = 0
                if nbits:
                    out.append(bits << (8 - nbits))
        return out

    if interlace:
        raw = bytearray()
        for x0, y0, dx, dy in _ADAM7:
            xs, ys = range(x0, width, dx), range(y0, height, dy)
            if len(xs) and len(ys):
                raw += rows(xs, ys)
    else:
        raw = rows(range(width), range(height))
    out = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth,
                                                              color_type, 0, 0, interlace))
    if palette is not None:
        out += _chunk(b"PLTE", bytes(palette))
    if trns is not None:
        out += _chunk(b"tRNS", bytes(trns))
    return out + _chunk(b"IDAT", zlib.compress(bytes(raw))) + _chunk(b"IEND", b"")


def png_blank(width, height):
    """A grey 8-bit PNG of zeros, made fast for any width."""
    raw = (b"\x00" + bytes(width)) * height
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b""))


def _segment(marker, payload):
    return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload


def jpeg_flat(width, height, components=3, progressive=False, adobe=None):
    """A JPEG of a flat grey image: every block is DC 0 and no AC, coded with
    one-symbol Huffman tables (2 bits a block), so any geometry is a few bytes.
    `adobe`: the APP14 colour transform (0 CMYK, 2 YCCK) for 4 components."""
    out = b"\xff\xd8"
    if adobe is not None:
        out += _segment(0xEE, b"Adobe" + struct.pack(">HHHB", 100, 0, 0, adobe))
    out += _segment(0xDB, b"\x00" + bytes([1] * 64))
    sof = struct.pack(">BHHB", 8, height, width, components)
    for i in range(components):
        sof += bytes([i + 1, 0x11, 0])
    out += _segment(0xC2 if progressive else 0xC0, sof)
    table = bytes([1] + [0] * 15) + b"\x00"  # one 1-bit code, for symbol 0
    out += _segment(0xC4, b"\x00" + table) + _segment(0xC4, b"\x10" + table)
    blocks = -(-width // 8) * -(-height // 8)

    def scan(comps, ss, se, nbits):
        header = bytes([len(comps)]) + b"".join(bytes([c + 1, 0]) for c in comps) + bytes([ss, se, 0])
        data = bytes(nbits // 8) + (bytes([(1 << (8 - nbits % 8)) - 1]) if nbits % 8 else b"")
        return _segment(0xDA, header) + data

    if progressive:  # the DCs of all components, then each one's (empty) ACs
        out += scan(range(components), 0, 0, blocks * components)
        for c in range(components):
            out += scan([c], 1, 63, blocks)
    else:
        out += scan(range(components), 0, 63, blocks * components * 2)
    return out + b"\xff\xd9"


def png_bomb(width, height, inflated):
    """A PNG whose IHDR says width x height RGB but whose data inflates to
    `inflated` bytes of zeros."""
    comp = zlib.compressobj(9)
    data = b"".join(comp.compress(bytes(1 << 20)) for _ in range(inflated >> 20)) + comp.flush()
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + _chunk(b"IDAT", data) + _chunk(b"IEND", b""))


def jpeg_header_only(width, height, components=3):
    return b"\xff\xd8" + _segment(0xC0, struct.pack(">BHHB", 8, height, width, components)
                                  + b"".join(bytes([i + 1, 0x11, 0]) for i in range(components)))


# ---- mounts (a full disk, a read-only folder) ----

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
MS_RDONLY = 1
MNT_DETACH = 2


def _mount_tmpfs(path, options, flags=0):
    if _libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", flags, options.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _unmount(path):
    _libc.umount2(os.fsencode(path), MNT_DETACH)


def _has_cap_sys_admin():
    try:
        with open("/proc/self/status") as f:
            for status_line in f:
                if status_line.startswith("CapEff:"):
                    return bool(int(status_line.split()[1], 16) & (1 << 21))
    except OSError:
        pass
    return False


def _mount_works():
    """True where a tmpfs can be mounted; only a process without the right to
    mount (not root, or a container without CAP_SYS_ADMIN) skips the cases:
    where mounting is permitted and still fails, they run and fail."""
    if os.geteuid() != 0 or not _has_cap_sys_admin():
        return False
    import tempfile
    probe = tempfile.mkdtemp(prefix="encgraph-hostile-mount-")
    try:
        _mount_tmpfs(probe, "size=64k")
        _unmount(probe)
        return True
    except OSError:
        return True  # permitted but failing: let the cases show the error
    finally:
        os.rmdir(probe)


def on_tmpfs(options, argv, prepare=None, flags=0, check_inside=None):
    """Runs argv with a tmpfs mounted at `disk` (prepare(ctx) fills it), checks
    what is inside with check_inside(ctx) -> problems before unmounting, and
    reports those as the run's own failure."""
    def run(ctx):
        disk = ctx.path("disk")
        os.makedirs(disk, exist_ok=True)
        try:
            _mount_tmpfs(disk, options)
        except OSError as e:
            return Result(99, "", f"mounting a tmpfs at {disk} failed: {e}")
        try:
            if prepare:
                prepare(ctx)
            if flags:  # remount read-only after filling
                _libc.mount(b"tmpfs", os.fsencode(disk), b"tmpfs", flags | 32, options.encode())
            result = ctx.run(argv(ctx) if callable(argv) else argv)
            problems = check_inside(ctx) if check_inside else []
            if problems:
                return Result(98, result.out, result.err + "\nPROBLEMS: " + "; ".join(problems))
            return result
        finally:
            _unmount(disk)
    return run


def fill(ctx):
    """A good old output on the disk, then filler up to the last byte."""
    ctx.write("disk/e.st", GOOD)
    try:
        with open(ctx.path("disk/filler"), "wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise


def only_these_on_disk(*names):
    def check(ctx):
        found = sorted(os.listdir(ctx.path("disk")))
        problems = [] if found == sorted(names) else [f"the disk holds {found}"]
        if "e.st" in names and ctx.read("disk/e.st") != GOOD:
            problems.append("disk/e.st was changed")
        return problems
    return check


TRACE_2000 = "".join(line(height=28, width=28, id=f"i{i}") for i in range(2000))

# ---- outputs ----


def mkdir(name):
    return lambda ctx: os.makedirs(ctx.path(name), exist_ok=True)


def symlink(target, name):
    return lambda ctx: os.symlink(target, ctx.path(name))


def local_plugin_config(ctx):
    """The toy plugin copied into the scratch folder and configured there, so
    that a damaged library shows in the folder's snapshot."""
    os.makedirs(ctx.path("plugins"))
    shutil.copy(os.path.join(ENV.plugin_dir, "libencgraph_toy.so"), ctx.path("plugins"))
    ctx.write("c.toml", toy_config().replace(json.dumps(ENV.plugin_dir),
                                             json.dumps(ctx.path("plugins"))))


def check_link_written_through(ctx, result):
    if not os.path.islink(ctx.path("dangling.st")):
        return ["dangling.st is no longer a symlink"]
    return [] if ctx.read("missing/e.st")[:8] != b"" else ["missing/e.st is empty"]


def run_program_copy_onto_itself(ctx):
    """A copy of the program in the scratch folder, asked to write over
    itself: a damaged copy shows in the snapshot, and the program under test
    is never at risk."""
    shutil.copy2(ENV.encgraph, ctx.path("encgraph-copy"))
    proc = subprocess.Popen([ctx.path("encgraph-copy"), "encode", "-c", "c.toml", "-o",
                             "encgraph-copy", "a.png"], cwd=ctx.dir, env=ctx.environ(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    result = ctx.finish(proc, ctx.case.timeout)
    if os.path.exists(ctx.path("encgraph-copy")):
        with open(ctx.path("encgraph-copy"), "rb") as f, open(ENV.encgraph, "rb") as g:
            if f.read() != g.read():
                return Result(96, result.out, result.err + "\nthe program's copy was overwritten")
        os.remove(ctx.path("encgraph-copy"))
    return result


def run_two_into_one_new_folder(ctx):
    """One run fails inside a folder both made; the other must still finish."""
    ctx.write("t.jsonl", TRACE_2000)
    good = ctx.spawn(encode("-o", "out/a.st", "--trace", "t.jsonl"))
    bad = ctx.spawn(encode("-o", "out/b.st", "a.png", "bad.png"))
    r_good, r_bad = ctx.finish(good, 120), ctx.finish(bad, 120)
    if r_bad.rc != 2 or "cannot be decoded" not in r_bad.text:
        return Result(97, r_bad.out, "the failing run did not fail as it should:\n" + r_bad.err)
    return r_good


OUTPUTS = [
    Case(name="redteam/o-new-folder-removed-when-the-run-fails",
         files={"c.toml": CFG, "a.png": PNG, "bad.png": BAD_DATA_PNG},
         args=encode("-o", "out/sub/e.st", "a.png", "bad.png"),
         message=r"image 'bad\.png' cannot be decoded \("),
    Case(name="redteam/o-report-new-folder-removed-when-the-run-fails",
         files={"c.toml": CFG, "a.png": PNG, "bad.png": BAD_DATA_PNG},
         args=encode("-o", "o1/e.st", "--report", "o2/deep/r.json", "a.png", "bad.png"),
         message=r"image 'bad\.png' cannot be decoded"),
    Case(name="redteam/o-ends-in-slash-names-a-folder", files={"c.toml": CFG, "a.png": PNG},
         args=encode("-o", "newdir/", "a.png"),
         message=r"embeddings output 'newdir/' names a folder, not a file \(it ends in '/'\): "
                 r"name the file to write, e.g\. 'newdir/output'"),
    Case(name="redteam/report-ends-in-dot-names-a-folder", files={"c.toml": CFG, "a.png": PNG},
         args=encode("-o", "e.st", "--report", "new/.", "a.png"),
         message=r"report 'new/\.' names a folder, not a file"),
    Case(name="redteam/o-is-dot", files={"c.toml": CFG, "a.png": PNG}, args=encode("-o", ".", "a.png"),
         message=r"embeddings output '\.' is a directory, not a regular file"),
    Case(name="redteam/o-is-empty", files={"c.toml": CFG, "a.png": PNG}, args=encode("-o", "", "a.png"),
         message=r"encode needs somewhere to write: give -o FILE"),
    Case(name="redteam/o-is-a-symlink-to-a-directory", files={"c.toml": CFG, "a.png": PNG},
         setup=lambda ctx: (os.mkdir(ctx.path("d")), os.symlink("d", ctx.path("to-d"))),
         args=encode("-o", "to-d", "a.png"), message=r"embeddings output 'to-d' is a directory"),
    Case(name="redteam/o-is-a-symlink-loop", files={"c.toml": CFG, "a.png": PNG},
         setup=lambda ctx: (os.symlink("b", ctx.path("a")), os.symlink("a", ctx.path("b"))),
         args=encode("-o", "a", "a.png"),
         message=r"embeddings output 'a' cannot be checked: Too many levels of symbolic links"),
    Case(name="redteam/o-dangling-symlink-is-written-through", files={"c.toml": CFG, "a.png": PNG},
         setup=symlink("missing/e.st", "dangling.st"), args=encode("-o", "dangling.st", "a.png"),
         exit=0, message=r"wrote 1 embeddings", outputs=["missing", "missing/e.st"],
         check=check_link_written_through),
    Case(name="redteam/o-dangling-symlink-to-the-report-is-one-file",
         files={"c.toml": CFG, "a.png": PNG}, setup=symlink("r.json", "to-report"),
         args=encode("-o", "to-report", "--report", "r.json", "a.png"),
         message=r"the embeddings output 'to-report' and the report 'r\.json' are the same file"),
    Case(name="redteam/report-inside-the-embeddings-output", files={"c.toml": CFG, "a.png": PNG},
         args=encode("-o", "out", "--report", "out/r.json", "a.png"),
         message=r"the report 'out/r\.json' lies inside the embeddings output 'out', which is "
                 r"written as a file"),
    Case(name="redteam/o-under-a-dangling-folder-link", files={"c.toml": CFG, "a.png": PNG},
         setup=symlink("nowhere", "dl"), args=encode("-o", "dl/e.st", "a.png"),
         message=r"embeddings output 'dl/e\.st' cannot be written: its folder 'dl' is a symlink "
                 r"to 'nowhere', which does not exist"),
    Case(name="redteam/o-named-like-a-staging-file", files={"c.toml": CFG, "a.png": PNG},
         args=encode("-o", "e.st.encgraph-AAAAAA.partial", "a.png"), exit=0,
         message=r"wrote 1 embeddings", outputs=["e.st.encgraph-AAAAAA.partial"]),
    Case(name="redteam/o-is-the-plugin-library", files={"a.png": PNG}, setup=local_plugin_config,
         args=lambda ctx: encode("-o", ctx.path("plugins/libencgraph_toy.so"), "a.png"),
         message=r"is the plugin library \(plugin\.name = \"toy\"\) .*writing it would destroy "
                 r"that input"),
    Case(name="redteam/run-report-is-the-plugin-library", setup=local_plugin_config,
         args=["run", "-c", "c.toml", *SMALL_RUN, "--report", "plugins/libencgraph_toy.so"],
         message=r"the report 'plugins/libencgraph_toy\.so' is the plugin library"),
    Case(name="redteam/o-is-the-encgraph-program", files={"c.toml": CFG, "a.png": PNG},
         run=run_program_copy_onto_itself,
         message=r"the embeddings output 'encgraph-copy' is the encgraph program"),
    Case(name="redteam/a-failing-run-does-not-remove-a-folder-another-run-writes-into",
         files={"c.toml": CFG, "a.png": PNG, "bad.png": BAD_DATA_PNG},
         run=run_two_into_one_new_folder, exit=0, message=r"wrote 2000 embeddings",
         outputs=["t.jsonl", "out", "out/a.st"], timeout=240),
    Case(name="redteam/o-over-a-file-size-limit",
         files={"c.toml": CFG, "t.jsonl": TRACE_2000, "e.st": GOOD},
         run=lambda ctx: run_with(preexec=lambda: resource.setrlimit(
             resource.RLIMIT_FSIZE, (16384, 16384)))(ctx, encode("-o", "e.st", "--trace", "t.jsonl")),
         exit=1, message=r"embeddings file 'e\.st' cannot be written: File too large; the file "
                         r"outgrew a size limit \(ulimit -f", check=unchanged("e.st")),
]

if os.geteuid() != 0:  # root may write anything; tests/host covers it as another user
    OUTPUTS.append(Case(
        name="redteam/o-read-only-file-is-kept", files={"c.toml": CFG, "a.png": PNG, "e.st": GOOD},
        setup=lambda ctx: os.chmod(ctx.path("e.st"), 0o444), args=encode("-o", "e.st", "a.png"),
        message=r"embeddings output 'e\.st' is read-only", check=unchanged("e.st")))

if _mount_works():
    OUTPUTS += [
        Case(name="redteam/o-on-a-full-disk", files={"c.toml": CFG, "t.jsonl": TRACE_2000},
             run=on_tmpfs("size=64k", encode("-o", "disk/e.st", "--trace", "t.jsonl"),
                          prepare=lambda ctx: ctx.write("disk/e.st", GOOD),
                          check_inside=only_these_on_disk("e.st")),
             exit=1, message=r"embeddings file 'disk/e\.st' cannot be written: No space left on "
                             r"device; free space on the disk holding 'disk'",
             outputs=["disk"]),
        Case(name="redteam/report-on-a-full-disk-keeps-both-outputs",
             files={"c.toml": CFG, "a.png": PNG, "e.st": GOOD},
             run=on_tmpfs("size=64k", encode("-o", "e.st", "--report", "disk/r.json", "a.png"),
                          prepare=fill, check_inside=only_these_on_disk("e.st", "filler")),
             exit=1, message=r"report 'disk/r\.json' cannot be written: No space left on device",
             outputs=["disk"], check=unchanged("e.st")),
        Case(name="redteam/o-in-a-read-only-folder", files={"c.toml": CFG, "a.png": PNG},
             run=on_tmpfs("size=64k", encode("-o", "disk/e.st", "a.png"),
                          prepare=lambda ctx: ctx.write("disk/e.st", GOOD), flags=MS_RDONLY,
                          check_inside=only_these_on_disk("e.st")),
             message=r"embeddings output 'disk/e\.st' cannot be written: the folder 'disk' is not "
                     r"writable \(Read-only file system\)", outputs=["disk"]),
    ]
else:
    print("cases_redteam: no right to mount a tmpfs here (not root, or no CAP_SYS_ADMIN): "
          "the full-disk and read-only-folder cases are skipped")

# ---- signals at other moments and of other kinds ----


def interrupted_when(sig, appears, argv, preexec=None):
    """Sends `sig` once a path matching `appears(names)` exists in the folder
    (the run is then under way), and reports death by the signal as 128+sig."""
    def run(ctx):
        ctx.write("t.jsonl", "".join(OK_LINE for _ in range(200000)))
        proc = subprocess.Popen([ENV.encgraph] + argv, cwd=ctx.dir, env=ctx.environ(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, preexec_fn=preexec, start_new_session=True)
        deadline = time.monotonic() + 60
        seen = False
        while time.monotonic() < deadline and proc.poll() is None and not seen:
            seen = appears(os.listdir(ctx.dir))
            time.sleep(0.005)
        if not seen:
            ctx.finish(proc, 60)
            return Result(99, "", "the run never reached the moment to interrupt")
        os.kill(proc.pid, sig)
        r = ctx.finish(proc, 60)
        return Result(128 + sig if r.rc == -sig else r.rc, r.out, r.err, r.timed_out)
    return run


def staging(names):
    return any(".encgraph-" in n for n in names)


def no_core():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


SIGNALS = [
    Case(name=f"redteam/{name}-during-encode-leaves-no-staging-file",
         files={"c.toml": CFG, "e.st": GOOD},
         run=interrupted_when(sig, staging, encode("-o", "e.st", "--trace", "t.jsonl"),
                              preexec=no_core),
         exit=128 + sig, outputs=["t.jsonl"], check=unchanged("e.st"), timeout=120)
    for name, sig in [("sighup", signal.SIGHUP), ("sigquit", signal.SIGQUIT),
                      ("sigusr1", signal.SIGUSR1), ("sigalrm", signal.SIGALRM),
                      ("sigpipe", signal.SIGPIPE), ("sigxcpu", signal.SIGXCPU)]
] + [
    Case(name="redteam/sigterm-leaves-no-folder-made-for-the-outputs", files={"c.toml": CFG},
         run=interrupted_when(signal.SIGTERM, lambda names: "out" in names,
                              encode("-o", "out/sub/e.st", "--trace", "t.jsonl")),
         exit=128 + signal.SIGTERM, outputs=["t.jsonl"], timeout=120),
    Case(name="redteam/sigterm-at-start-leaves-nothing", files={"c.toml": CFG},
         run=lambda ctx: _term_after(ctx, 0.02), exit=128 + signal.SIGTERM, outputs=["t.jsonl"],
         timeout=120),
]


def _term_after(ctx, seconds):
    ctx.write("t.jsonl", "".join(OK_LINE for _ in range(200000)))
    proc = ctx.spawn(encode("-o", "out/e.st", "--report", "out/r.json", "--trace", "t.jsonl"))
    time.sleep(seconds)
    os.kill(proc.pid, signal.SIGTERM)
    r = ctx.finish(proc, 60)
    return Result(128 + signal.SIGTERM if r.rc == -signal.SIGTERM else r.rc, r.out, r.err,
                  r.timed_out)


# ---- traces ----


def trace_case(name, text, message, exit=2, sets=(), files=None, check=None, command="encode",
               timeout=60.0):
    f = {"c.toml": CFG, "t.jsonl": text, "a.png": PNG}
    f.update(files or {})
    if command == "encode":
        argv = encode("-o", "e.st", "--trace", "t.jsonl")
    else:
        argv = [command, "-c", "c.toml", "--set", "workload.kind=trace", "--set",
                "workload.trace=t.jsonl", "--set", "workload.warmup_requests=0",
                "--report", "r.json"]
    for s in sets:
        argv += ["--set", s]
    return Case(name="redteam/trace-" + name, files=f, args=argv, exit=exit, message=message,
                outputs=["e.st", "r.json"] if exit == 0 else [], check=check, timeout=timeout)


def many_frames(count):
    def setup(ctx):
        os.makedirs(ctx.path("clip"))
        for i in range(count):
            with open(ctx.path(f"clip/{i:05d}.png"), "wb") as f:
                f.write(PNG)
    return setup


def tensors(*names):
    def check(ctx, result):
        raw = ctx.read("e.st")
        header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
        missing = [n for n in names if n not in header]
        return [f"no tensor {missing}: {sorted(header)[:5]}"] if missing else []
    return check


HUGE = 3 << 20
TRACES = [
    trace_case("crlf-line-endings", (OK_LINE + line(height=28, width=28, id="b")).replace("\n", "\r\n"),
               r"wrote 2 embeddings", exit=0, check=tensors("trace/1", "b")),
    trace_case("bom-first-line", "\ufeff" + line(height=28, width=28, id="x"), r"wrote 1 embeddings",
               exit=0, check=tensors("x")),
    trace_case("nul-after-the-object", (OK_LINE.rstrip("\n") + "\0" + line(height=99, width=99)),
               r"t\.jsonl:1: the line holds a NUL byte \(column 28\); a trace is UTF-8 text"),
    trace_case("nul-alone", OK_LINE + "\0\n",
               r"t\.jsonl:2: the line holds a NUL byte \(column 1\)"),
    trace_case("duplicate-key", '{"height": 28, "width": 28, "height": -5}\n',
               r"t\.jsonl:1: field 'height' is given twice; give each field once"),
    trace_case("duplicate-id-key", '{"height": 28, "width": 28, "id": "a", "id": "b"}\n',
               r"t\.jsonl:1 .*: field 'id' is given twice"),
    trace_case("number-1e400", '{"height": 1e400, "width": 28}\n',
               r"t\.jsonl:1: not valid JSON: the number 1e400 is out of range; sizes, frames and "
               r"seeds are integers that fit in 64 bits"),
    trace_case("number-a-megabyte-of-digits", '{"height": ' + "9" * (1 << 20) + ', "width": 28}\n',
               r"t\.jsonl:1: not valid JSON: the number 9{20,}\.\.\. \(1048576 bytes\) is out of "
               r"range", check=short_message()),
    trace_case("minus-zero-height", '{"height": -0, "width": 28}\n',
               r"t\.jsonl:1: 'height' must be a positive integer, got 0"),
    trace_case("height-2-63", '{"height": 9223372036854775808, "width": 28}\n',
               r"t\.jsonl:1: 'height' must be a positive integer, got 9223372036854775808"),
    trace_case("frames-2-63-minus-1",
               line(modality="video", frames=2**63 - 1, height=28, width=28),
               r"'frames' asks for 9223372036854775807 frames, over the limit of 4096"),
    trace_case("seed-minus-zero", '{"height": 28, "width": 28, "seed": -0}\n', r"wrote 1 embeddings",
               exit=0),
    trace_case("seed-2-64-minus-1", line(height=28, width=28, seed=2**64 - 1), r"wrote 1 embeddings",
               exit=0),
    trace_case("megabyte-unknown-key", '{"height": 28, "width": 28, "' + "k" * HUGE + '": 1}\n',
               r"t\.jsonl:1: unknown field 'k{20,}\.\.\. \(3145728 bytes\)'", check=short_message()),
    trace_case("megabyte-unclosed-string", '{"height": 28, "width": 28, "id": "' + "x" * HUGE + "\n",
               r"t\.jsonl:1: not valid JSON: .*missing closing quote; last read: '\"x+\.\.\. "
               r"\(3145729 bytes\)'", check=short_message()),
    trace_case("megabyte-modality", line(height=28, width=28, modality="v" * HUGE),
               r"'modality' must be \"image\" or \"video\", got \"v+\.\.\. \(3145730 bytes\)",
               check=short_message()),
    trace_case("megabyte-id-works", line(height=28, width=28, id="i" * 100000),
               r"wrote 1 embeddings", exit=0),
    trace_case("million-blank-lines-and-one-item", "\n" * 1000000 + OK_LINE, r"wrote 1 embeddings",
               exit=0, check=tensors("trace/1000001")),
    trace_case("million-and-one-items", OK_LINE * 1000001,
               r"t\.jsonl:1000001: the trace holds more than 1000000 items \(limits\.max_items",
               timeout=240),
    trace_case("frames-glob-5000-files", line(frames_glob="clip/*.png", id="v"),
               r"t\.jsonl:1 \(id \"v\"\): 'frames_glob' matches 5000 frames, over the limit of "
               r"4096 frames per video \(limits\.max_frames_per_video"),
    trace_case("frames-glob-matches-a-folder", line(frames_glob="clip/*", id="v"),
               r"'frames_glob': frame 3 of 3: image '.*clip/zz' is a directory"),
    trace_case("frames-glob-double-star", line(frames_glob="**/*.png"),
               r"matches no file .*'\*\*' is not recursive here"),
    trace_case("frames-glob-braces", line(frames_glob="clip/{a,b}.png"),
               r"matches no file .*braces are not expanded"),
    trace_case("frames-mix-grey-and-rgb", line(frames_files=["g.png", "a.png"]),
               r"frame 2 of 2 \('.*a\.png'\) has 3 channels but frame 1 of 2 \('.*g\.png'\) has 1",
               files={"g.png": png(28, 28, channels=1)}),
    trace_case("run-with-1e400", '{"height": 1e400, "width": 28}\n', r"t\.jsonl:1: not valid JSON",
               command="run"),
    trace_case("bench-with-a-nul-byte", OK_LINE + "\0\n", r"t\.jsonl:2: the line holds a NUL byte",
               command="bench"),
    trace_case("bench-with-a-duplicate-key", '{"height": 28, "height": 28, "width": 28}\n',
               r"field 'height' is given twice", command="bench"),
]
for c in TRACES:
    if c.name.endswith("frames-glob-5000-files"):
        c.setup = many_frames(5000)
    if c.name.endswith("frames-glob-matches-a-folder"):
        c.setup = lambda ctx: (many_frames(2)(ctx), os.mkdir(ctx.path("clip/zz")))

# ---- images ----


def image_ok(name, data, rows=None):
    """A valid image that must encode: exit 0, one tensor."""
    return Case(name="redteam/image-" + name, files={"c.toml": CFG, "x": data},
                args=encode("-o", "e.st", "x"), exit=0,
                message=r"wrote 1 embeddings" + (rf" \({rows} rows" if rows else ""),
                outputs=["e.st"])


def image_bad(name, data, message, extra=()):
    return Case(name="redteam/image-" + name, files={"c.toml": CFG, "x": data},
                args=encode("-o", "e.st", *extra, "x"), message=message)


IMAGES = [
    image_ok("png-16-bit-grey", png_any(28, 28, 16, 0)),
    image_ok("png-16-bit-rgba", png_any(28, 28, 16, 6)),
    image_ok("png-16-bit-grey-alpha", png_any(28, 28, 16, 4)),
    image_ok("png-interlaced", png_any(28, 28, 8, 2, interlace=1)),
    image_ok("png-interlaced-16-bit-odd-size", png_any(13, 11, 16, 6, interlace=1)),
    image_ok("png-palette-with-trns", png_any(28, 28, 8, 3, palette=range(12), trns=[0, 128])),
    image_ok("png-1-bit-palette", png_any(28, 28, 1, 3, palette=range(6))),
    image_ok("png-1-bit-grey", png_any(28, 28, 1, 0)),
    image_ok("png-4-bit-grey-odd-width", png_any(29, 28, 4, 0)),
    image_ok("png-1x1", png_any(1, 1), rows=1),
    image_ok("png-1x1-interlaced", png_any(1, 1, interlace=1), rows=1),
    image_bad("png-palette-without-plte", png_any(28, 28, 8, 3),
              r"image 'x' cannot be decoded \(IDAT: Missing PLTE before IDAT\); the file is "
              r"damaged"),
    # libpng has no side limit of its own (encgraph lifts its default): only
    # limits.max_image_pixels bounds the size.
    image_ok("png-wider-than-16777216-decodes", png_blank(16777217, 1)),
    image_bad("png-ihdr-4294967295-wide", png_header_only(0xFFFFFFFF, 1),
              r"is a damaged PNG: its header gives 4294967295x1 pixels \(each side must be 1 to "
              r"2\^31-1\)"),
    image_bad("png-ihdr-2-31-minus-1-wide", png_header_only(2**31 - 1, 2**31 - 1),
              r"is too large: 2147483647x2147483647 is over the limit"),
    image_bad("png-0x0", png_header_only(0, 0), r"its header gives 0x0 pixels"),
    image_bad("png-decompression-bomb", png_bomb(28, 28, 256 << 20),
              r"image 'x' is a damaged PNG: its \d+ bytes of compressed image data inflate to more "
              r"than the 2380 bytes its header's 28x28 pixels need"),
    Case(name="redteam/image-png-bomb-as-a-video-frame",
         files={"c.toml": CFG, "a.png": PNG, "b.png": png_bomb(28, 28, 64 << 20),
                "t.jsonl": line(frames_files=["a.png", "b.png"], id="v")},
         args=encode("-o", "e.st", "--trace", "t.jsonl"),
         message=r"frame 2 of 2: image '.*b\.png' is a damaged PNG: .*inflate to more than"),
    image_ok("jpeg-grey", jpeg_flat(28, 28, 1)),
    image_ok("jpeg-1x1", jpeg_flat(1, 1), rows=1),
    image_ok("jpeg-cmyk", jpeg_flat(28, 28, 4, adobe=0)),
    image_ok("jpeg-ycck", jpeg_flat(28, 28, 4, adobe=2)),
    image_ok("jpeg-progressive", jpeg_flat(28, 28, 3, progressive=True)),
    image_ok("jpeg-progressive-grey", jpeg_flat(30, 29, 1, progressive=True)),
    image_bad("jpeg-header-65535-square", jpeg_header_only(65535, 65535),
              r"image 'x' is too large: 65535x65535 is over the limit of 178956970 pixels"),
    image_bad("jpeg-2-components", jpeg_header_only(28, 28, 2),
              r"is a damaged JPEG: its frame header gives 2 colour components"),
    image_bad("png-1x2-over-a-limit-of-1", png_any(1, 2),
              r"image 'x' is too large: 1x2 is over the limit of 1 pixels",
              extra=["--set", "limits.max_image_pixels=1", "--set", "workload.sizes=[[1, 1]]"]),
    Case(name="redteam/image-png-1x1-at-a-limit-of-1", files={"c.toml": CFG, "x": png_any(1, 1)},
         args=encode("-o", "e.st", "--set", "limits.max_image_pixels=1", "--set",
                     "workload.sizes=[[1, 1]]", "x"),
         exit=0, message=r"wrote 1 embeddings", outputs=["e.st"]),
    Case(name="redteam/files-pattern-double-star", files={"c.toml": CFG},
         args=encode("-o", "e.st", "**/*.png"),
         message=r"workload\.files: the pattern '\*\*/\*\.png' matches no file; '\*\*' is not "
                 r"recursive here"),
]

# ---- [limits] at both ends, --set abuse ----

CEILINGS = ["limits.max_graphs=65536", "limits.max_items=4294967296",
            "limits.max_request_size=1048576", "limits.max_frames_per_video=1048576",
            "limits.max_image_pixels=4294967296", "limits.max_text_bytes=4294967296"]


def sets(*assignments):
    out = []
    for a in assignments:
        out += ["--set", a]
    return out


LIMITS = [
    Case(name="redteam/limits-all-1-check-config", files={"c.toml": CFG},
         args=["check-config", "c.toml", *sets("limits.max_graphs=1", "limits.max_items=1",
                                                "limits.max_request_size=1",
                                                "limits.max_frames_per_video=1",
                                                "limits.max_image_pixels=1",
                                                "limits.max_text_bytes=1")],
         message=r"exceeds limits\.max_"),
    Case(name="redteam/limits-text-bytes-1-refuses-the-trace",
         files={"c.toml": CFG, "t.jsonl": OK_LINE},
         args=encode("-o", "e.st", "--trace", "t.jsonl", *sets("limits.max_text_bytes=1")),
         message=r"trace 't\.jsonl' is 28 bytes, over the limit of 1 bytes for a trace "
                 r"\(limits\.max_text_bytes sets it\)"),
    Case(name="redteam/limits-at-their-ceilings-a-huge-video-is-refused",
         files={"c.toml": CFG,
                "t.jsonl": line(modality="video", frames=1048576, height=65536, width=65536)},
         args=encode("-o", "e.st", "--trace", "t.jsonl", *sets(*CEILINGS)),
         message=r"toy: item of 65536x65536 x 1048576 frames .* over the limit"),
    Case(name="redteam/limits-over-their-ceilings", files={"c.toml": CFG},
         args=["check-config", "c.toml", "--set", "limits.max_frames_per_video=1048577"],
         message=r"limits\.max_frames_per_video: must lie in \[1, 1048576\], got 1048577"),
    Case(name="redteam/set-a-5000-byte-value-is-shown-short", files={"c.toml": CFG},
         args=["check-config", "c.toml", "--set", "workload.count=\"" + "x" * 5000 + "\""],
         message=r"--set workload\.count=\"x+\.\.\. \(5017 bytes\): workload\.count: expected an "
                 r"integer, got a string", check=short_message()),
    Case(name="redteam/set-bool-key-with-an-array", files={"c.toml": CFG},
         args=["run", "-c", "c.toml", *SMALL_RUN, "--set", "runtime.use_graphs=[true]"],
         message=r"runtime\.use_graphs: expected a boolean, got an array"),
    Case(name="redteam/set-size-array-with-a-negative-side", files={"c.toml": CFG},
         args=["bench", "-c", "c.toml", *SMALL_RUN, "--set", "workload.sizes=[[-1, 5]]"],
         message=r"workload\.sizes"),
    Case(name="redteam/set-float-key-with-a-date", files={"c.toml": CFG},
         args=["run", "-c", "c.toml", *SMALL_RUN, "--set", "workload.video_fraction=1979-05-27"],
         message=r"workload\.video_fraction: expected a number"),
    Case(name="redteam/config-with-a-bom-and-crlf", files={"c.toml": "\ufeff" + CFG.replace("\n", "\r\n")},
         args=["check-config", "c.toml"], exit=0, message=r"keys and values ok"),
    Case(name="redteam/config-bom-inside", files={"c.toml": CFG.replace("[plugin]", "\ufeff[plugin]")},
         args=["check-config", "c.toml"], message=r"c\.toml:\d+:1: TOML syntax error"),
    Case(name="redteam/config-utf16", files={"c.toml": b"\xff\xfe" + CFG.encode("utf-16-le")},
         args=["run", "-c", "c.toml"], message=r"c\.toml:1:1: TOML syntax error.*utf-8"),
]

# ---- names that are not UTF-8 reach the JSON report ----

NOT_UTF8_CONFIG = os.fsdecode(b"c\xff.toml")
REPORTS = [
    Case(name="redteam/run-json-with-a-non-utf8-config-name", files={NOT_UTF8_CONFIG: CFG},
         args=["run", "-c", NOT_UTF8_CONFIG, *SMALL_RUN, "--json"], exit=0,
         message=r"\"command\": \"run\""),
    Case(name="redteam/bench-json-with-a-non-utf8-config-name", files={NOT_UTF8_CONFIG: CFG},
         args=["bench", "-c", NOT_UTF8_CONFIG, *SMALL_RUN, "--json"], exit=0,
         message=r"\"command\": \"bench\""),
    Case(name="redteam/report-is-a-frame-file",
         files={"c.toml": CFG, "clip/0001.png": PNG, "clip/0002.png": png(28, 28, seed=5),
                "t.jsonl": line(frames_glob="clip/*.png", id="v")},
         args=encode("-o", "e.st", "--report", "clip/0002.png", "--trace", "t.jsonl"),
         message=r"the report 'clip/0002\.png' is the frame of video 'v'"),
    Case(name="redteam/check-config-trace-with-a-duplicate-key",
         files={"c.toml": toy_config('[workload]\nkind = "trace"\ntrace = "t.jsonl"\n'),
                "t.jsonl": '{"height": 28, "width": 28, "width": 56}\n'},
         args=["check-config", "c.toml"], message=r"t\.jsonl:1: field 'width' is given twice"),
]

CASES = OUTPUTS + SIGNALS + TRACES + IMAGES + LIMITS + REPORTS
