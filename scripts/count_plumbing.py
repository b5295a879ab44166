#!/usr/bin/env python3
"""Counts a plugin source's plumbing lines: lines that are not model logic.

  scripts/count_plumbing.py FILE...          a table: code, plumbing, logic lines
  scripts/count_plumbing.py --show FILE      every code line with its class (P/L)

A code line is a line that is neither blank nor only a comment. It is plumbing
when it matches one of the rules below (the ABI table and entry point, error
reporting and guards, config parsing, struct copies and casts, declarations,
signatures, includes and lone braces); everything else is model logic: what the
model computes, how it lays out a batch, its shapes and its description. The
rules are deliberately simple and the same for C and C++, so the count can be
audited line by line with --show (docs/sdk.md has the figures).
"""
import re
import sys

PLUMBING = [
    # structure: includes, namespaces, braces, access labels, the entry point
    r"^\s*#",
    r"^\s*(namespace|using|extern \"C\"|typedef|template\b)",
    r"^[\s{}();,]*$",
    r"^\s*}\s*else\s*{\s*$",
    r"^\s*(public|private|protected):\s*$",
    r"ENCGRAPH_SDK_PLUGIN|EG_PLUGIN_EXPORT|encgraph_plugin_entry",
    r"^\s*(struct|class|enum)\b.*{\s*$",
    r"^\s*static constexpr sdk::Identity|^\s*EG_MODALITY_IMAGE, EG_DEVICE_CPU",
    r"^\s*\"[^\"]*\",\s*$",  # a string argument alone on a line (identity, messages)
    # the C table and its fields
    r"^\s*\.\w+ = ", r"eg_plugin_api\b", r"\babi_(major|minor)\b", r"\bstruct_size\b",
    # error reporting, guards, logging, host
    r"\beg_status\b", r"\beg_error\b", r"\berr\b", r"\bEG_OK\b", r"snprintf", r"\bfail\(",
    r"sdk::(fail|invalid)\(", r"\blog_message\b", r"\bg_host\b", r"\bhost\b",
    r"return\s*;", r"\(void\)",
    # config parsing
    r"\bparams->", r"\bnum_config\b", r"e->key|e->value", r"\bstrto[fdl]l?\(", r"char\* end",
    r"args\.(config|device|weights)",
    # memory management, casts and copies between C structs
    r"\bcalloc\(|\bmalloc\(|\bfree\(", r"\bmemset\(out", r"\*out = ", r"\bself\(", r"\bitem_of\(",
    r"\(eg_instance\*\)|\(eg_item\*\)|\(minimal_\w+\*\)", r"\bout->(ndim|dtype|device)\b",
    r"num_buffers != ", r"eg_instance\*|const eg_item\*|eg_item\*\*|eg_item_spec\*|eg_tensor\* out",
    # declarations of plumbing-only locals and members
    r"^\s*(const )?(minimal_\w+|eg_\w+)\*?\s+\w+;", r"^\s*int64_t (i|k|t, c|ph, pw, t, c);",
    r"^\s*minimal_\w+\* (in|it)\b", r"sdk::ModelInfo info_;", r"const sdk::ModelInfo& model_info",
    r"^\s*explicit \w+\(sdk::CreateArgs", r"^\s*struct Item {",
    r"^\s*}\s*\w+;", r"return (status|NULL|nullptr|&\w+);", r"if \(!\w+->\w+\) {",
    # function signatures (C functions and C++ members alike) and their continuations
    r"^\s*(static\s+)?(void|Item|float|sdk::\w+(<\w+>)?|const sdk::\w+&)\s+\w+\(.*[,{]\s*$",
    r"^\s+(const )?(sdk::\w+(<\w+>)?|eg_\w+|int32_t|int64_t|void)[&*]*\s+\w+(, .*)?[,)]( const)? {?$",
    r"^\s+(const )?(eg_\w+|sdk::\w+)[&*]*\s*\w*[,)]",
    # typed access to the runtime's memory, and copies into it
    r"args->buffers|args->output|args\.buffer<|args\.output<|buffers\.get<|\.staging\.",
    r"\(const \w+\*\)|\((float|int32_t|uint8_t)\*\)", r"\bmemcpy\(|\.append\(", r"\]\.rows = ",
]
PLUMBING_RE = [re.compile(p) for p in PLUMBING]


def code_lines(text):
    """Yields the code lines of a C/C++ source, comments removed."""
    in_block = False
    for raw in text.splitlines():
        line, out = raw, ""
        i = 0
        while i < len(line):
            if in_block:
                end = line.find("*/", i)
                if end < 0:
                    i = len(line)
                    continue
                in_block, i = False, end + 2
            elif line.startswith("/*", i):
                in_block, i = True, i + 2
            elif line.startswith("//", i):
                break
            else:
                out += line[i]
                i += 1
        if out.strip():
            yield out.rstrip()


def classify(line):
    return "P" if any(r.search(line) for r in PLUMBING_RE) else "L"


def main(argv):
    show = "--show" in argv
    files = [a for a in argv if a != "--show"]
    if not files:
        print(__doc__)
        return 2
    print(f"{'file':60} {'code':>5} {'plumbing':>9} {'logic':>6}")
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = list(code_lines(f.read()))
        kinds = [classify(line) for line in lines]
        if show:
            for kind, line in zip(kinds, lines):
                print(f"{kind} {line}")
        print(f"{path:60} {len(lines):5} {kinds.count('P'):9} {kinds.count('L'):6}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
