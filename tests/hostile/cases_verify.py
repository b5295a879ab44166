"""`encgraph verify` against bad input and a plugin bug: a bad --tolerance, no
or a broken config, an empty or unrunnable workload, a rejected plugin config
(all exit 2, naming the argument or key); the test plugin whose cu_seqlens is
zero-padded where repeat-last is needed (exit 1, the buffer and both logics
named); a plugin whose item_spec_for_desc (ABI 1.2) differs from item_spec or
fails (exit 1, the plugin, the item's geometry and both specs named). verify writes nothing: every config here names a report and
embeddings, which must not appear."""
import re

import os

from hostile_support import ENV, Case, toml_str, toy_config

SMALL = ("[workload]\ncount = 6\nmin_side = 28\nmax_side = 84\nrequest_size = 3\n"
         "[output]\nreport = \"r.json\"\nembeddings = \"e.safetensors\"\n")
CFG = toy_config(SMALL)
Q = re.escape


def verify(*extra, config="c.toml"):
    return ["verify", "-c", config] + list(extra)


def sets(*values):
    argv = []
    for v in values:
        argv += ["--set", v]
    return argv


def case(name, args, message, exit=2, files=None, timeout=60.0):
    return Case(name="verify/" + name, files=files if files is not None else {"c.toml": CFG},
                args=args, exit=exit, message=message, timeout=timeout)


CASES = [
    # ---- what verify is for ----
    case("toy-matches", verify(), [r"\nOK: 6 items, 2 outputs \(rows, pooled\)",
                                   r"statistics: consistent"], exit=0),
    case("badpad-caught", verify(*sets('plugin.name="toy_badpad"', "workload.count=12")),
         [r"MISMATCH: item 'synthetic/\d+'", r"cu_seqlens \(zero\)",
          Q("buffer 'cu_seqlens' is declared zero padding; with repeat-last padding the batch "
            "matches: the plugin's padding logic is probably wrong")], exit=1),
    case("badpad-loose-tolerance-still-caught",
         verify("--tolerance", "1e-2", *sets('plugin.name="toy_badpad"', "workload.count=12")),
         [r"MISMATCH", r"buffer 'cu_seqlens' is declared zero padding"], exit=1),
    case("graphs-off-in-config", verify(*sets("runtime.use_graphs=false")),
         [r"note: captures graphs although runtime\.use_graphs = false", r"graph hit rate 100\.0%"],
         exit=0),
    case("data-parallel-first-rank", verify(*sets('runtime.data_parallel=["cpu", "cpu"]')),
         [r"note: runtime\.data_parallel: runs on the first rank's device \(cpu\) alone",
          r"\nOK: 6 items"], exit=0),
    # ---- bad arguments ----
    case("tolerance-negative", verify("--tolerance", "-1"),
         Q("--tolerance -1: the tolerance must be a finite number >= 0")),
    case("tolerance-nan", verify("--tolerance", "nan"),
         r"--tolerance nan: the tolerance must be a finite number"),
    case("tolerance-inf", verify("--tolerance", "inf"),
         r"--tolerance inf: the tolerance must be a finite number"),
    case("tolerance-text", verify("--tolerance", "tight"),
         r"encgraph verify: the argument \('tight'\) for option '--tolerance' is invalid"),
    case("tolerance-missing-value", verify("--tolerance"),
         r"encgraph verify: the required argument for option '--tolerance' is missing"),
    case("unknown-option", verify("--frobnicate"),
         r"encgraph verify: unrecognised option '--frobnicate'"),
    case("stray-argument", verify("extra.png"),
         r"encgraph verify: too many positional options have been specified"),
    case("no-config", ["verify"], Q("encgraph verify: --config FILE is required")),
    case("missing-config", verify(config="absent.toml"), r"absent\.toml"),
    case("config-is-folder", verify(config="."), r"is a (folder|directory)"),
    # ---- bad configs and workloads ----
    case("empty-workload", verify(*sets("workload.count=0")), r"verify needs at least one item"),
    case("unknown-plugin", verify(*sets('plugin.name="no_such_plugin"')), r"no_such_plugin"),
    case("plugin-config-rejected", verify(*sets("plugin.config.hidden=-3")),
         Q("[plugin.config] or plugin.weights rejected")),
    case("unknown-key", verify(*sets("runtime.poison=true")),
         r"unknown key 'runtime\.poison' \(known keys in \[runtime\]: .*poison_memory"),
    case("videos-without-frames",
         verify(*sets("workload.video_fraction=1.0", "budgets.video=false")),
         r"workload\.video_fraction: asks for videos but budgets\.video = false plans no frames"),
    case("missing-trace", verify(*sets('workload.kind="trace"', 'workload.trace="none.jsonl"')),
         r"none\.jsonl"),
    case("tolerance-out-of-range", verify("--tolerance", "1e999"),
         r"encgraph verify: the argument \('1e999'\) for option '--tolerance' is invalid"),
    Case(name="verify/image-only-plugin-given-videos",
         args=lambda ctx: ["verify", "-c", os.path.join(ENV.source_dir, "configs",
                                                         "siglip_small_cpu.toml"),
                           "--set", "runtime.plugin_dirs=[" + toml_str(ENV.plugin_dir) + "]",
                           "--set", "workload.video_fraction=0.5", "--set", "budgets.video=true",
                           "--set", "workload.count=4"],
         exit=2, message=r"video items but plugin 'siglip' takes images only"),
    case("two-paths-match", verify(*sets('plugin.name="toy_dual"')),
         [r"verify: plugin toy_dual ", r"\nOK: 6 items", r"statistics: consistent"], exit=0),
    case("budget-below-batch",
         verify(*sets("budgets.token_budgets=[4, 64]", "budgets.max_items_per_batch=8")),
         r"budgets\.max_items_per_batch: 8 must be <= the smallest token budget \(4\)"),
    # ---- ABI 1.2: the spec from an item's description against the made item's ----
    case("spec-for-desc-agrees", verify(),
         r"  specs: item_spec_for_desc gave every item's spec before it was made\n", exit=0),
    case("spec-for-desc-synthetic-fallback", verify(*sets('plugin.name="toy_v1_1"')),
         [r"verify: plugin toy_v1_1 ", r"\nOK: 6 items",
          r"  specs: a synthetic item gave every item's spec before it was made\n"], exit=0),
    case("spec-for-desc-skewed", verify(*sets('plugin.name="toy_faults"',
                                              "plugin.config.spec_for_desc_skew=2")),
         [r"\nSPEC MISMATCH: plugin 'toy_faults', item 'synthetic/\d+' \((image|video) ",
          r"item_spec_for_desc gives input_size \d+, output_tokens \d+, frames \d+, "
          r"path_tokens \[\d+\]; the item item_create made has input_size \d+",
          r"6 of 6 items differ"], exit=1),
    case("spec-for-desc-fails", verify(*sets('plugin.name="toy_faults"',
                                             "plugin.config.fail_spec_for_desc=true")),
         Q("item_spec_for_desc failed where item_create succeeded: plugin 'toy_faults': "
           "item_spec_for_desc failed (invalid argument)"), exit=1),
    case("spec-for-desc-skew-negative", verify(*sets('plugin.name="toy_faults"',
                                                     "plugin.config.spec_for_desc_skew=-1")),
         r"'spec_for_desc_skew' = -1 is outside"),
]
