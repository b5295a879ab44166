#!/usr/bin/env python3
"""The hostile-input suite: runs the `encgraph` command against bad inputs and
checks, for every case, the exit code, that the message names what is wrong,
that nothing hung or crashed, and that no file the case did not name as an
output was changed, removed or left behind.

usage: hostile.py --encgraph EXE --plugin-dir DIR [--test-plugin-dir DIR] --source-dir SRC
                  [--build-dir BUILD] [--filter REGEX] [--list] CASES.py...

Each CASES.py defines CASES, a list of hostile_support.Case. A case runs in a
fresh scratch folder (its working directory): its `files` are written there,
its `setup(ctx)` runs, every regular file under the folder is hashed, the
command runs, and the folder is compared afterwards.
"""
import argparse
import importlib.util
import os
import re
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile_support as hs  # noqa: E402


def load_cases(path):
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.CASES)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--encgraph", required=True)
    ap.add_argument("--plugin-dir", required=True)
    ap.add_argument("--test-plugin-dir", default="",
                    help="the build's test plugins (toy_faults, toy_badpad, toy_v1_1)")
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--build-dir", default="", help="the build tree (its test plugins)")
    ap.add_argument("--filter", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("case_files", nargs="+")
    args = ap.parse_args()
    hs.ENV.encgraph = os.path.abspath(args.encgraph)
    hs.ENV.plugin_dir = os.path.abspath(args.plugin_dir)
    hs.ENV.test_plugin_dir = os.path.abspath(args.test_plugin_dir) if args.test_plugin_dir else ""
    hs.ENV.source_dir = os.path.abspath(args.source_dir)
    hs.ENV.build_dir = os.path.abspath(args.build_dir) if args.build_dir else ""

    cases = []
    for f in args.case_files:
        cases += load_cases(f)
    names = [c.name for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        print("duplicate case names: " + ", ".join(sorted(dup)))
        return 1
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, c.name)]
    if args.list:
        for c in cases:
            print(c.name)
        return 0
    if not cases:
        print("no cases selected")
        return 1

    failed = []
    start = time.monotonic()
    for case in cases:
        t0 = time.monotonic()
        try:
            problems = hs.run_case(case)
        except Exception:  # a broken case is a failure, not a crash of the suite
            problems = ["the case itself raised:\n" + traceback.format_exc()]
        dt = time.monotonic() - t0
        if problems:
            failed.append(case.name)
            print(f"FAIL {case.name} ({dt:.1f} s)")
            for p in problems:
                print("     " + p.replace("\n", "\n     "))
        else:
            print(f"ok   {case.name} ({dt:.1f} s)")
    total = time.monotonic() - start
    print(f"\n{len(cases) - len(failed)} of {len(cases)} hostile cases passed in {total:.1f} s")
    if failed:
        print("failed: " + " ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
