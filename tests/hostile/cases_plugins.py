"""Class 1 (plugin discovery) and class 8 (a build without CUDA): bad files in a
plugin folder beside a good copy of the toy plugin. `plugin.name = X` must load
only libencgraph_X.so, so `run`, `encode`, `bench` and `check-config` with the
toy succeed whatever else the folder holds; naming a bad file is a clear plugin
error (exit 1) naming the file and the reason; `encgraph plugins` lists every
bad file as rejected and never crashes or hangs. The broken libraries that
abort, fault or hang come from the loader suite's build
(<build>/tests/loader/plugins); damaged ELF files are made here from the toy."""
import os
import shutil
import struct

import hostile_support as hs
from hostile_support import Case, encgraph_source, png, toml_str

EM_AARCH64 = 183
ET_EXEC = 2


def build_dir():
    if getattr(hs.ENV, "build_dir", ""):
        return hs.ENV.build_dir
    return os.path.dirname(os.path.dirname(hs.ENV.encgraph))  # <build>/host/encgraph


def loader_plugin(scenario, name):
    path = os.path.join(build_dir(), "tests", "loader", "plugins", scenario, f"libencgraph_{name}.so")
    if not os.path.isfile(path):
        raise RuntimeError(f"{path} is missing: build the loader suite's test plugins")
    return path


def toy_bytes():
    with open(os.path.join(hs.ENV.plugin_dir, "libencgraph_toy.so"), "rb") as f:
        return f.read()


def patched(offset, fmt, value):
    def make():
        b = bytearray(toy_bytes())
        struct.pack_into(fmt, b, offset, value)
        return bytes(b)
    return make


def cut(length):
    return lambda: toy_bytes()[:length(len(toy_bytes()))]


# Bad entries named libencgraph_<key>.so: key -> (how to make it, regex of the reason).
def _bytes(make):
    def setup(path):
        with open(path, "wb") as f:
            f.write(make())
    return setup


def _dir(path):
    os.mkdir(path)


def _fifo(path):
    os.mkfifo(path)


def _dangling(path):
    os.symlink(os.path.join(os.path.dirname(path), "gone.so"), path)


def _loop(path):
    os.symlink(os.path.basename(path), path)


def _copy_of(scenario, name):
    return lambda path: shutil.copyfile(loader_plugin(scenario, name), path)


BAD = {
    "empty": (_bytes(lambda: b""), r"is empty \(0 bytes\)"),
    "text": (_bytes(lambda: b"not a library\n"), r"not a shared library \(no ELF header\)"),
    "half": (_bytes(cut(lambda n: n // 2)), r"truncated: .* ends at byte \d+ but the file has \d+ bytes"),
    "header": (_bytes(cut(lambda n: 64)), r"truncated: its program header table"),
    "minus1": (_bytes(cut(lambda n: n - 1)), r"truncated: its section header table"),
    "aarch64": (_bytes(patched(18, "<H", EM_AARCH64)),
                r"built for AArch64 \(e_machine 183\); this machine is x86-64: rebuild the plugin for x86-64"),
    "elf32": (_bytes(patched(4, "B", 1)), r"a 32-bit ELF file \(ELFCLASS32\)"),
    "bigendian": (_bytes(patched(5, "B", 2)), r"a big-endian ELF file"),
    "exec": (_bytes(patched(16, "<H", ET_EXEC)), r"an executable \(ET_EXEC\)"),
    "magic": (_bytes(lambda: b"\x7fELF" + b"\xff" * 300), r"unknown class 255"),
    "dir": (_dir, r"is a directory, not a shared library"),
    "fifo": (_fifo, r"is a FIFO \(named pipe\)"),
    "dangling": (_dangling, r"a symbolic link to '.*gone\.so', which does not exist \(dangling\)"),
    "loop": (_loop, r"cannot be read: Too many levels of symbolic links"),
}

# Real libraries that misbehave when loaded: key -> (scenario, regex of the reason).
LOADER = {
    "loader_ctor_abort": ("ctor_abort", r"killed the probe process with SIGABRT"),
    "loader_ctor_exit": ("ctor_exit", r"ended the probe process with exit status 7"),
    "loader_entry_segv": ("entry_segv", r"its entry function \(encgraph_plugin_entry\) killed the probe process with SIGSEGV"),
    "loader_entry_garbage": ("entry_garbage", r"reading the table its entry function returned killed the probe process with SIGSEGV"),
    "loader_name_garbage": ("name_garbage", r"reading the strings its table points to killed the probe process with SIGSEGV"),
    "loader_entry_hang": ("entry_hang", r"did not finish within 1 s in the probe process, which was killed"),
    "loader_entry_throws": ("entry_throws", r"its entry function threw an exception"),
    "loader_wrong_major": ("wrong_major", r"built for plugin ABI 2\.0"),
    "loader_huge_table": ("huge_table", r"plugin table claims 2147418112 bytes"),
    "loader_no_entry": ("no_entry", r"does not export the entry symbol 'encgraph_plugin_entry'"),
    "loader_unresolved": ("unresolved", r"could not be loaded: .*eg_test_symbol_nobody_defines"),
}

PROBE_ENV = {"ENCGRAPH_PLUGIN_PROBE_TIMEOUT": "1"}  # the hanging plugin costs a second


def add_bad(ctx, key):
    """Puts the bad entry `key` into the case's plugin folder."""
    path = os.path.join(ctx.path("plugins"), f"libencgraph_{key}.so")
    if key in BAD:
        BAD[key][0](path)
    else:
        _copy_of(LOADER[key][0], key)(path)


def reason(key):
    return BAD[key][1] if key in BAD else LOADER[key][1]


def folder(*bad, toy=True):
    """A setup: plugins/ with a copy of the toy plugin and the bad entries."""
    def setup(ctx):
        os.makedirs(ctx.path("plugins"), exist_ok=True)
        if toy:
            shutil.copyfile(os.path.join(hs.ENV.plugin_dir, "libencgraph_toy.so"),
                            ctx.path("plugins/libencgraph_toy.so"))
        for key in bad:
            add_bad(ctx, key)
    return setup


def config(ctx, name="toy", device="cpu", dirs=None, extra=""):
    """Writes c.toml: plugin `name` from the case's plugin folder, a tiny workload."""
    dirs = [ctx.path("plugins")] if dirs is None else dirs
    ctx.write("c.toml", (
        f"[runtime]\ndevice = \"{device}\"\nlog_level = \"warn\"\nprefer_faster_path = false\n"
        f"plugin_dirs = [{', '.join(toml_str(d) for d in dirs)}]\n"
        f"[plugin]\nname = {toml_str(name)}\n"
        f"[plugin.config]\nhidden = 8\n"
        f"[workload]\nkind = \"synthetic\"\ncount = 4\nmin_side = 28\nmax_side = 56\n"
        f"request_size = 2\nwarmup_requests = 0\n{extra}"))


def with_config(setup, **kw):
    def both(ctx):
        setup(ctx)
        config(ctx, **kw)
    return both


RUN_OK = r"plugin toy on cpu(.|\n)*items 4 \(0 videos\)"   # the run's summary
TOY_LISTED = r"\n  toy  version 1\.0\.0  abi 1\.[0-9]+  modalities image,video  devices cpu(,cuda)?  .*/plugins/libencgraph_toy\.so\n"
ALL_BAD = list(BAD) + [k for k in LOADER if k != "loader_entry_hang"]

CASES = []

# --- the toy runs whatever else its folder holds (nothing else is opened) ---
for key in ["empty", "half", "aarch64", "elf32", "dir", "fifo", "dangling", "loop",
            "loader_ctor_abort", "loader_entry_segv", "loader_entry_garbage", "loader_entry_hang",
            "loader_unresolved"]:
    CASES.append(Case(
        name=f"plugins/run-toy-beside-{key}",
        setup=with_config(folder(key)),
        args=["run", "--config", "c.toml"], exit=0, message=RUN_OK, timeout=60))

CASES.append(Case(
    name="plugins/run-toy-beside-every-bad-file",
    setup=with_config(folder(*ALL_BAD, "loader_entry_hang")),
    args=["run", "--config", "c.toml"], exit=0, message=RUN_OK))

CASES.append(Case(
    name="plugins/encode-toy-beside-bad-files",
    files={"a.png": png(28, 28)},
    setup=with_config(folder("half", "loader_ctor_abort", "fifo")),
    args=["encode", "--config", "c.toml", "-o", "e.safetensors", "a.png"],
    exit=0, message=r"wrote 1 embeddings", outputs=["e.safetensors"]))

CASES.append(Case(
    name="plugins/bench-toy-beside-bad-files",
    setup=with_config(folder("aarch64", "loader_entry_segv", "dir")),
    args=["bench", "--config", "c.toml"], exit=0, message=r"toy"))

CASES.append(Case(
    name="plugins/check-config-toy-beside-bad-files",
    setup=with_config(folder(*ALL_BAD)),
    args=["check-config", "c.toml"], exit=0, message=[r"plugin: toy", r"\nok\n"]))

# --- naming a bad file: a plugin error naming the file and the reason ---
for key in list(BAD) + list(LOADER):
    if key in ("dir", "fifo", "dangling", "half", "aarch64", "elf32", "loop") or key in LOADER:
        CASES.append(Case(
            name=f"plugins/run-names-{key}",
            setup=with_config(folder(key), name=key),
            args=["run", "--config", "c.toml"], exit=1,
            message=[r"libencgraph_" + key + r"\.so: ", reason(key)], env=PROBE_ENV))

for key in ["empty", "minus1", "exec", "loader_ctor_abort", "loader_entry_garbage"]:
    CASES.append(Case(
        name=f"plugins/check-config-names-{key}",
        setup=with_config(folder(key), name=key),
        args=["check-config", "c.toml"], exit=1,
        message=[r"libencgraph_" + key + r"\.so: ", reason(key)]))

CASES.append(Case(
    name="plugins/encode-names-crashing-plugin",
    files={"a.png": png(28, 28)},
    setup=with_config(folder("loader_entry_segv"), name="loader_entry_segv"),
    args=["encode", "--config", "c.toml", "-o", "e.safetensors", "a.png"],
    exit=1, message=[reason("loader_entry_segv")]))

# --- a file's name is the plugin's name ---
def _renamed_toy(ctx):
    folder(toy=False)(ctx)
    shutil.copyfile(os.path.join(hs.ENV.plugin_dir, "libencgraph_toy.so"),
                    ctx.path("plugins/libencgraph_other.so"))


CASES.append(Case(
    name="plugins/run-file-name-differs-from-declared-name",
    setup=with_config(_renamed_toy, name="other"),
    args=["run", "--config", "c.toml"], exit=1,
    message=[r"libencgraph_other\.so: declares the plugin name 'toy', but its file name stands "
             r"for 'other'", r"rename the file to libencgraph_toy\.so"]))

def _renamed_loader_ok(ctx):
    folder(toy=False)(ctx)
    shutil.copyfile(loader_plugin("valid", "loader_ok"), ctx.path("plugins/libencgraph_renamed.so"))


CASES.append(Case(
    name="plugins/run-declared-name-without-its-file",
    setup=with_config(_renamed_loader_ok, name="loader_ok"),
    args=["run", "--config", "c.toml"], exit=2,
    message=[r"plugin 'loader_ok' not found: no libencgraph_loader_ok\.so", r"Available: renamed .*toy"]))


def _shadowing_broken_toy(ctx):
    folder(toy=False)(ctx)
    with open(ctx.path("plugins/libencgraph_toy.so"), "wb") as f:
        f.write(toy_bytes()[:5000])


def _shadow_setup(ctx):
    _shadowing_broken_toy(ctx)
    config(ctx, dirs=[ctx.path("plugins"), hs.ENV.plugin_dir])


CASES.append(Case(
    name="plugins/run-earlier-broken-toy-is-the-one-loaded",
    setup=_shadow_setup, args=["run", "--config", "c.toml"], exit=1,
    message=[r"plugins/libencgraph_toy\.so: truncated"]))

CASES.append(Case(
    name="plugins/list-later-toy-is-a-duplicate",
    setup=folder("empty", toy=False),
    args=lambda ctx: ["plugins", "--plugin-dir", hs.ENV.plugin_dir, "--plugin-dir", ctx.path("plugins")],
    exit=0, message=[r"toy  version", r"libencgraph_empty\.so: is empty"]))

# --- names that map to no file ---
CASES.append(Case(
    name="plugins/run-unknown-name-lists-dirs-and-file-names",
    setup=with_config(folder("loader_ctor_abort", "aarch64"), name="nosuch"),
    args=["run", "--config", "c.toml"], exit=2,
    message=[r"plugin 'nosuch' not found", r"Searched: .*/plugins",
             r"Available: aarch64 loader_ctor_abort toy", r"--plugin-dir or ENCGRAPH_PLUGIN_PATH"]))

CASES.append(Case(
    name="plugins/run-plugin-dir-is-a-file",
    files={"notadir": "x"},
    setup=lambda ctx: config(ctx, dirs=[ctx.path("notadir")]),
    args=["run", "--config", "c.toml"], exit=0, message=RUN_OK))  # the build's toy

CASES.append(Case(
    name="plugins/check-config-unknown-name-is-structural",
    setup=with_config(folder("half"), name="nosuch"),
    args=["check-config", "c.toml"], exit=0,
    message=r"checked structurally only: the plugin is not on the search path yet"))

# --- the listing survives everything ---
CASES.append(Case(
    name="plugins/list-every-bad-file",
    setup=folder(*ALL_BAD, "loader_entry_hang"),
    args=lambda ctx: ["plugins", "--plugin-dir", ctx.path("plugins")], env=PROBE_ENV,
    exit=0, message=[TOY_LISTED, r"rejected \(%d\):" % (len(ALL_BAD) + 2)] +
    [r"libencgraph_" + k + r"\.so: .*" + reason(k) for k in ALL_BAD + ["loader_entry_hang"]]))

for key in ["fifo", "dir", "dangling", "loader_ctor_abort", "loader_entry_hang"]:
    CASES.append(Case(
        name=f"plugins/list-only-{key}",
        setup=folder(key, toy=False), env=PROBE_ENV,
        args=lambda ctx: ["plugins", "--plugin-dir", ctx.path("plugins")],
        exit=0, message=[r"rejected \(1\):\n  \S*/plugins/libencgraph_" + key + r"\.so: .*" + reason(key)]))

CASES.append(Case(
    name="plugins/list-missing-dir",
    args=["plugins", "--plugin-dir", "no/such/dir"], exit=0, message=r"no/such/dir"))


def _many(ctx):
    folder()(ctx)
    for k in range(60):
        ctx.write(f"plugins/libencgraph_junk{k}.so", b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 40)


CASES.append(Case(
    name="plugins/list-many-junk-files",
    setup=_many, args=lambda ctx: ["plugins", "--plugin-dir", ctx.path("plugins")],
    exit=0, message=[TOY_LISTED, r"rejected \(61\):",  # and the build's toy, a duplicate
                     r"libencgraph_junk59\.so: truncated: its ELF header ends at byte 64"]))

CASES.append(Case(
    name="plugins/run-toy-beside-many-junk-files",
    setup=lambda ctx: (_many(ctx), config(ctx)),
    args=["run", "--config", "c.toml"], exit=0, message=RUN_OK))


def _toy_link(ctx):
    folder(toy=False)(ctx)
    os.symlink(os.path.join(hs.ENV.plugin_dir, "libencgraph_toy.so"), ctx.path("plugins/libencgraph_toy.so"))
    config(ctx)


CASES.append(Case(
    name="plugins/run-toy-through-a-symlink",
    setup=_toy_link, args=["run", "--config", "c.toml"], exit=0, message=RUN_OK))

def _other_link(ctx):
    folder()(ctx)
    os.symlink("libencgraph_toy.so", ctx.path("plugins/libencgraph_other.so"))
    config(ctx, name="other")


CASES.append(Case(
    name="plugins/run-link-under-another-name",
    setup=_other_link, args=["run", "--config", "c.toml"], exit=1,
    message=r"libencgraph_other\.so: declares the plugin name 'toy'"))

# --- the probe's escape hatch and its settings ---
CASES.append(Case(
    name="plugins/run-without-probe",
    setup=with_config(folder("loader_ctor_abort")), env={"ENCGRAPH_PLUGIN_PROBE": "0"},
    args=["run", "--config", "c.toml"], exit=0, message=RUN_OK))

CASES.append(Case(
    name="plugins/probe-setting-malformed",
    setup=with_config(folder()), env={"ENCGRAPH_PLUGIN_PROBE": "yes"},
    args=["run", "--config", "c.toml"], exit=2, message=r"ENCGRAPH_PLUGIN_PROBE='yes': use 1"))

CASES.append(Case(
    name="plugins/probe-timeout-malformed",
    setup=with_config(folder()), env={"ENCGRAPH_PLUGIN_PROBE_TIMEOUT": "-3"},
    args=["run", "--config", "c.toml"], exit=2,
    message=r"ENCGRAPH_PLUGIN_PROBE_TIMEOUT='-3': use a number of seconds"))

# --- class 8: a CUDA config in any build is checked, not refused ---
CASES.append(Case(
    name="plugins/check-config-qwen-cuda-config",
    args=["check-config", encgraph_source("configs/qwen2_5_vl.toml")],
    exit=0, message=[r"budgets checked structurally only: (a CUDA config|the plugin is not on)",
                     r"\nok\n"]))
