"""Hostile configs and --set arguments: injection through --set (class 4), a
config that is no regular file or too large (class 3), and values a typo makes
absurd (class 5: graph counts, item counts, sizes, numbers outside 64 bits,
non-finite floats). Every case must exit with its code, name the key, file or
argument, and write nothing: most runs also ask for a report, which must not
appear."""
import os
import re
import resource

from hostile_support import ENV, Case, toy_config

SMALL = "[workload]\ncount = 4\nmin_side = 28\nmax_side = 56\nrequest_size = 2\n"
CFG = toy_config(SMALL)


def run_args(*sets, config="c.toml", command="run"):
    """`encgraph run -c c.toml --set ...`, with a report asked for so that a
    run getting past the error shows up as a file left behind."""
    argv = [command, "-c", config, "--set", "output.report=r.json"]
    for s in sets:
        argv += ["--set", s]
    return argv


def check_args(*sets, config="c.toml"):
    argv = ["check-config", config]
    for s in sets:
        argv += ["--set", s]
    return argv


def set_case(name, value, message, exit=2):
    return Case(name="config/set-" + name, files={"c.toml": CFG}, args=run_args(value),
                exit=exit, message=message)


def file_case(name, text, message, args=None, exit=2):
    return Case(name="config/file-" + name, files={"c.toml": text},
                args=args or run_args(), exit=exit, message=message)


def mkfifo(name):
    return lambda ctx: os.mkfifo(ctx.path(name))


def mkdir(name):
    return lambda ctx: os.mkdir(ctx.path(name))


def nested_arrays(depth):
    return "[" * depth + "1" + "]" * depth


BUDGETS_300 = "[" + ", ".join(str(64 * i) for i in range(1, 301)) + "]"
Q = re.escape

CASES = [
    # ---- class 4: a --set changes exactly the key it names ----
    set_case("newline-table-header", 'plugin.name="toy"\n[output]\nreport="injected.json"',
             [Q('--set plugin.name="toy"\\n[output]\\nreport="injected.json"'),
              r"raw control character", r"--set 'plugin\.config\.prompt="]),
    set_case("newline-extra-key", "workload.count=4\noutput.embeddings=\"e.safetensors\"",
             [Q("--set workload.count=4\\noutput.embeddings"), r"raw control character"]),
    set_case("carriage-return", "plugin.name=toy\r[output]", [r"\\r\[output\]", r"control"]),
    set_case("newline-in-key", "output.report\n[runtime]\nx=r.json",
             [r"the key 'output\.report\\n\[runtime\]\\nx' holds a control character"]),
    set_case("trailing-key-same-line", 'plugin.name="toy" report="injected.json"',
             [r"--set plugin\.name=", r"plugin\.name", r"may only hold letters"]),
    set_case("inline-table", 'output={report="injected.json"}',
             [Q("--set output={report=\"injected.json\"}"), r"the value is a table",
              r"--set output\.name=value"]),
    set_case("inline-table-plugin-config", "plugin.config={hidden=3}", [r"the value is a table"]),
    set_case("array-of-tables", 'workload.sizes=[{report="injected.json"}]',
             [r"workload\.sizes", r"the value is a table"]),
    set_case("unicode-escape-newline", 'plugin.name="toy\\u000a[output]"',
             [r"plugin\.name", r"may only hold letters"]),
    set_case("unicode-escape-nul-report", 'output.report="r\\u0000.json"',
             [r"--set output\.report=", r"output\.report: the string holds a NUL character"]),
    set_case("control-byte", "plugin.weights=w\x01.safetensors",
             [Q("--set plugin.weights=w\\x01.safetensors"), r"raw control character"]),
    set_case("escape-byte", "plugin.weights=\x1b[2Jw", [r"\\x1B\[2Jw", r"raw control character"]),
    set_case("del-byte", "plugin.weights=w\x7f", [r"w\\x7F", r"raw control character"]),
    set_case("invalid-utf8", "plugin.weights=w\udcff\udcfe",
             [r"--set plugin\.weights=w\\xFF\\xFE: is not valid UTF-8"]),
    set_case("table-header-key", "[output]=1", [r"'\[output\]' is not a valid key path"]),
    set_case("key-with-space", "output report=r.json", [r"'output report' is not a valid key path"]),
    set_case("through-a-string", "plugin.name.x=1",
             [r"--set plugin\.name\.x=1: 'plugin\.name' is a string in the config, not a table"]),
    set_case("unknown-key", "output.reprot=x.json",
             [r"unknown key 'output\.reprot'", r"did you mean 'report'\?"]),
    set_case("unknown-table", "outputs.report=x.json", [r"unknown key 'outputs'"]),
    set_case("no-equals", "output.report", [r"--set output\.report: expected key\.path=value"]),
    set_case("empty-key", "=r.json", [r"--set =r\.json: expected key\.path=value"]),
    set_case("seed-over-64-bits", "workload.seed=99999999999999999999",
             [r"--set workload\.seed=99999999999999999999: workload\.seed: expected an integer",
              r"64-bit"]),
    set_case("nan", "workload.video_fraction=nan",
             [r"--set workload\.video_fraction=nan: workload\.video_fraction: must be a finite"]),
    set_case("inf-plugin-config", "plugin.config.scale=inf",
             [r"plugin\.config\.scale: must be a finite number, got inf"]),
    set_case("table-replaced-by-value", "output=3", [r"'output' must be a table"]),
    set_case("token-step-1", "budgets.token_step=1",
             [r"the plan would capture 4033 graphs, more than limits\.max_graphs \(256\)",
              r"budgets\.token_step = 1", r"raise budgets\.token_step \(\d+ fits\)"]),
    set_case("count-huge", "workload.count=1000000000000",
             [r"--set workload\.count=1000000000000: workload\.count: 1000000000000 exceeds "
              r"limits\.max_items \(1000000\)"]),
    set_case("request-size-huge", "workload.request_size=9223372036854775807",
             [r"workload\.request_size: 9223372036854775807 exceeds limits\.max_request_size"]),
    set_case("limit-raised-past-ceiling", "limits.max_items=4611686018427387904",
             [r"--set limits\.max_items=4611686018427387904: limits\.max_items: must lie in \[1, "]),
    # A well-quoted --set still works, and writes only what it names.
    Case(name="config/set-quoted-string-works", files={"c.toml": CFG},
         args=["run", "-c", "c.toml", "--set", 'output.report="quoted report.json"',
               "--set", 'plugin.config.hidden=8'],
         exit=0, message=r"hit rate", outputs=["quoted report.json"]),

    # ---- class 3: the config file itself ----
    Case(name="config/file-fifo", setup=mkfifo("c.toml"), args=run_args(), timeout=20,
         message=[r"config 'c\.toml' is a FIFO", r"name a config file"]),
    Case(name="config/file-fifo-check-config", setup=mkfifo("c.toml"), args=["check-config", "c.toml"],
         timeout=20, message=r"config 'c\.toml' is a FIFO"),
    Case(name="config/file-dev-zero", args=["check-config", "/dev/zero"], timeout=20,
         message=r"config '/dev/zero' is a character device"),
    Case(name="config/file-dev-zero-run", args=["run", "-c", "/dev/zero"], timeout=20,
         message=r"config '/dev/zero' is a character device"),
    Case(name="config/file-directory", setup=mkdir("configs.toml"),
         args=run_args(config="configs.toml"), message=r"config 'configs\.toml' is a directory"),
    Case(name="config/file-missing", args=run_args(config="nope.toml"),
         message=r"config 'nope\.toml' does not exist"),
    Case(name="config/file-huge", files={"c.toml": CFG + "#" + "x" * (5 << 20) + "\n"},
         args=run_args(), message=r"config 'c\.toml' is \d+ bytes, over the limit of 4194304 bytes for a config \(a fixed cap"),
    file_case("binary-garbage", bytes(range(256)) * 64, [r"c\.toml:\d+:\d+: TOML syntax error"]),
    file_case("invalid-utf8", b"[plugin]\nname = \"t\xff\xfey\"\n",
              [r"c\.toml:2:\d+: TOML syntax error"]),
    file_case("nul-byte", CFG.encode() + b"\n[output]\nreport = \"a\x00b\"\n",
              [r"c\.toml:\d+:\d+: TOML syntax error"]),
    file_case("nul-escape", CFG + '\n[output]\nembeddings = "e\\u0000.safetensors"\n',
              [r"c\.toml:\d+:14: output\.embeddings: the string holds a NUL character"]),
    file_case("deeply-nested-arrays", CFG + "deep = " + nested_arrays(100000) + "\n",
              [r"c\.toml:\d+:\d+: TOML syntax error", r"nested"]),
    file_case("deep-dotted-key", toy_config(SMALL, plugin_config=".".join(["a"] * 100000) + " = 1"),
              [r"c\.toml:\d+:1: a dotted key or table header nests more than 64 levels"]),
    file_case("deep-table-header", "[" + ".".join(["a"] * 100000) + "]\n" + CFG,
              [r"c\.toml:1:2: a dotted key or table header nests more than 64 levels"]),
    Case(name="config/set-deep-key", files={"c.toml": CFG},
         args=run_args(".".join(["a"] * 30000) + "=1"),
         message=[r"--set a\.a\.a", r"nests more than 64 levels"]),
    file_case("many-dots-in-strings-are-fine",
              CFG + "# " + "." * 5000 + "\n[output]\nreport = \"r" + "." * 200 + "json\"\n",
              [r"keys and values ok"], args=check_args(), exit=0),
    file_case("duplicate-key", CFG + "count = 5\n", [r"c\.toml:\d+:\d+: TOML syntax error"]),
    file_case("duplicate-table", CFG + "[workload]\ncount = 5\n",
              [r"c\.toml:\d+:\d+: TOML syntax error"]),
    file_case("wrong-type", toy_config(SMALL, runtime="use_graphs = \"yes\""),
              [r"c\.toml:\d+:\d+: runtime\.use_graphs: expected a boolean, got a string"]),
    file_case("section-not-table", "output = 3\n" + CFG, [r"c\.toml:1:10: 'output' must be a table"],
              args=check_args()),
    file_case("integer-over-64-bits", CFG.replace("count = 4", "count = 99999999999999999999"),
              [r"c\.toml:\d+:\d+: TOML syntax error", r"\(in: `count = 99999999999999999999`\)"]),
    file_case("count-negative", CFG.replace("count = 4", "count = -1"),
              [r"c\.toml:\d+:9: workload\.count: must be >= 0, got -1"]),
    file_case("count-huge", CFG.replace("count = 4", "count = 1000000000000"),
              [r"workload\.count: 1000000000000 exceeds limits\.max_items", r"raise limits\.max_items"]),
    file_case("frames-over-limit", CFG + "video_fraction = 0.5\nframes = 1000000\n",
              [r"c\.toml:\d+:\d+: workload\.frames: 1000000 exceeds limits\.max_frames_per_video"]),
    file_case("image-size-huge", CFG + "sizes = [[100000, 100000]]\n",
              [r"workload\.sizes: \[100000, 100000\] has more pixels than limits\.max_image_pixels"]),
    file_case("max-side-huge", CFG.replace("max_side = 56", "max_side = 4611686018427387904"),
              [r"workload\.max_side: 4611686018427387904 x 4611686018427387904 pixels exceed"]),
    file_case("side-negative", CFG.replace("min_side = 28", "min_side = -28"),
              [r"workload\.min_side: must be >= 1, got -28"]),
    file_case("video-fraction-nan", CFG + "video_fraction = nan\n",
              [r"c\.toml:\d+:18: workload\.video_fraction: must be a finite number"]),
    file_case("plugin-config-inf", toy_config(SMALL, plugin_config="scale = -inf"),
              [r"plugin\.config\.scale: must be a finite number, got -inf"]),
    file_case("token-step-1", CFG + "[budgets]\ntoken_step = 1\n",
              [r"the plan would capture 4033 graphs", r"budgets\.token_step = 1",
               r"limits\.max_graphs"]),
    file_case("token-step-1-check-config", CFG + "[budgets]\ntoken_step = 1\n",
              [r"the plan would capture 4033 graphs"], args=check_args()),
    file_case("token-step-negative", CFG + "[budgets]\ntoken_step = -64\n",
              [r"budgets\.token_step: must be >= 0 \(0: powers of two\), got -64"]),
    file_case("token-step-2-62", CFG + "[budgets]\ntoken_step = 4611686018427387904\n",
              [r"c\.toml:\d+:14: budgets\.token_step: must be <= 1073741824"]),
    file_case("budget-2-62", CFG + "[budgets]\ntoken_budgets = [64, 4611686018427387904]\n",
              [r"budgets\.token_budgets: must be <= 1073741824"]),
    file_case("budgets-300", CFG + "[budgets]\ntoken_budgets = " + BUDGETS_300 + "\n",
              [r"budgets\.token_budgets: the plan would capture 300 graphs, more than "
               r"limits\.max_graphs \(256\)", r"list fewer budgets"], args=check_args()),
    file_case("limits-zero", CFG + "[limits]\nmax_graphs = 0\n",
              [r"c\.toml:\d+:14: limits\.max_graphs: must lie in \[1, 65536\], got 0"]),
    file_case("limits-huge", CFG + "[limits]\nmax_text_bytes = 9223372036854775807\n",
              [r"limits\.max_text_bytes: must lie in \[1, 4294967296\]"]),
    file_case("limits-wrong-type", CFG + "[limits]\nmax_graphs = \"many\"\n",
              [r"limits\.max_graphs: expected an integer, got a string"]),
    file_case("limits-typo", CFG + "[limits]\nmax_graph = 10\n",
              [r"unknown key 'limits\.max_graph'", r"did you mean 'max_graphs'\?"]),
    file_case("request-size-over-lowered-limit",
              CFG + "[limits]\nmax_request_size = 1\n",
              [r"workload\.request_size: 2 exceeds limits\.max_request_size \(1\)"]),
]

# [budgets.paths.<name>]: a path's own budgets, checked as the global list is;
# a name the plugin lacks (the toy has one path, "default") fails when the
# runtime asks the plugin, before anything is captured or written.
DUAL = CFG.replace('name = "toy"\n', 'name = "toy_dual"\n', 1)
CASES += [
    set_case("path-budgets-unknown-path", "budgets.paths.local.token_budgets=[64]",
             [Q("budgets.paths.local: the plugin has no path 'local' (its paths: 'default')"),
              r"remove \[budgets\.paths\.local\]"]),
    Case(name="config/check-path-budgets-unknown-path", files={"c.toml": DUAL},
         args=check_args("budgets.paths.lokal.token_step=64"), exit=2,
         message=[Q("the plugin has no path 'lokal' (its paths: 'global', 'local')")]),
    set_case("path-budgets-empty", "budgets.paths.default.token_budgets=[]",
             [r"budgets\.paths\.default: gives no budgets \(token_budgets is empty"]),
    set_case("path-budgets-negative", "budgets.paths.default.token_budgets=[64, -64]",
             [r"budgets\.paths\.default\.token_budgets: budgets must be positive, got -64"]),
    set_case("path-budgets-beyond-64-bits",
             "budgets.paths.default.token_budgets=[18446744073709551616]",
             [r"budgets\.paths\.default\.token_budgets: expected an array of integers"]),
    set_case("path-budgets-huge", "budgets.paths.default.token_budgets=[4611686018427387904]",
             [r"budgets\.paths\.default\.token_budgets: must be <= 1073741824"]),
    set_case("path-budgets-float-step", "budgets.paths.default.token_step=64.5",
             [r"budgets\.paths\.default\.token_step: expected an integer"]),
    set_case("path-budgets-control-name", 'budgets.paths."de\\u001bfault".token_step=64',
             [r"budgets\.paths\.de\\x1Bfault", r"non-empty printable text"]),
    set_case("path-budgets-step-one", "budgets.paths.default.token_step=1",
             [r"the plan would capture \d+ graphs, more than limits\.max_graphs \(256\)",
              r"budgets\.paths\.default\.token_step = 1 generates",
              r"raise budgets\.paths\.default\.token_step"]),
    file_case("path-budgets-not-a-table", CFG + "[budgets]\npaths = 3\n",
              [r"c\.toml:\d+:\d+: budgets\.paths: expected a table, got an integer"]),
    file_case("path-budgets-unknown-key",
              CFG + "[budgets.paths.default]\ntoken_budget = [64]\n",
              [Q("unknown key 'budgets.paths.default.token_budget'"),
               Q("did you mean 'token_budgets'?")]),
    file_case("path-budgets-list-and-step",
              CFG + "[budgets.paths.default]\ntoken_budgets = [64]\ntoken_step = 64\n",
              [r"budgets\.paths\.default\.token_step: shapes generated budgets", r"remove one"]),
]


def _asan_build():
    """An AddressSanitizer build reports a failed `new` instead of throwing, and
    cannot run under an address-space limit."""
    try:
        with open(ENV.encgraph, "rb") as f:
            return b"AddressSanitizer" in f.read()
    except OSError:
        return False


def _run_with_address_limit(ctx):
    limit = 4 << 30

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    import subprocess
    proc = subprocess.Popen([ENV.encgraph] + check_args("limits.max_items=4294967296",
                                                        "workload.count=4294967296"),
                            cwd=ctx.dir, env=ctx.environ(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=cap,
                            start_new_session=True)
    return ctx.finish(proc, ctx.case.timeout)


def _no_bare_bad_alloc(ctx, result):
    return ["std::bad_alloc was printed"] if "std::bad_alloc" in result.text else []


if not _asan_build():
    # 2^32 items, admitted by a raised limit, cannot be held in a 4 GiB address
    # space: the message says which command ran out of memory and what to lower.
    CASES.append(Case(name="config/out-of-memory-is-explained", files={"c.toml": CFG},
                      run=_run_with_address_limit, exit=1, timeout=60,
                      message=[r"out of memory while running `encgraph check-config`",
                               r"workload\.count"],
                      check=_no_bare_bad_alloc))
