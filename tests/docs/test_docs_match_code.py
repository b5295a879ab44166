#!/usr/bin/env python3
"""The user documentation against the code it describes (ctest docs_match_code).

  test_docs_match_code.py REPO_ROOT ENCGRAPH PLUGIN_DIR [--without-cuda]

Fails, naming the file, the entry and the fix, when
  - README.md's "Supported models" table and `encgraph plugins` (PLUGIN_DIR) disagree:
    a plugin the command lists is missing from the table (the toy test encoders aside), a
    row names a plugin the command does not list, or a row's modalities or devices differ;
  - an ABI version README.md states differs from plugin_api/include/encgraph/plugin_api.h;
  - docs/config.md's key tables and `encgraph check-config --list-keys` disagree: a key
    the host reads is undocumented, or a documented key is not one the host reads.
"""
import os
import re
import subprocess
import sys

# The toy test encoders (plugins/toy: toy, toy_dual) are named in the README's text, not in
# its table of models.
TEST_ENCODER_PREFIX = "toy"


def table_rows(text, heading):
    """The cells of the first Markdown table under `## heading` (header row excluded)."""
    section = text.split(f"\n## {heading}\n", 1)
    if len(section) < 2:
        return None
    rows = []
    for line in section[1].split("\n## ", 1)[0].splitlines():
        if line.startswith("|") and not re.match(r"^\|[-| :]+\|$", line):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows and not line.startswith("|"):
            break
    return rows[1:]


def words(cell):
    return sorted(w for w in re.split(r"[,\s]+", cell.replace("`", "")) if w)


def check_plugins(root, encgraph, plugin_dir, errors):
    out = subprocess.run([encgraph, "plugins", "--plugin-dir", plugin_dir], capture_output=True,
                         text=True, env=dict(os.environ, ENCGRAPH_PLUGIN_PATH=""))
    if out.returncode != 0:
        errors.append(f"`{encgraph} plugins` failed ({out.returncode}): {out.stderr[-500:]}")
        return
    listed = {}
    for m in re.finditer(r"^  (\S+)  version (\S+)  abi (\S+)  modalities (\S+)  devices (\S+)",
                         out.stdout, re.M):
        listed[m.group(1)] = dict(abi=m.group(3), modalities=m.group(4).split(","),
                                  devices=m.group(5).split(","))
    if not listed:
        errors.append(f"`encgraph plugins --plugin-dir {plugin_dir}` listed no plugin:\n"
                      f"{out.stdout}")
        return
    readme = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    rows = table_rows(readme, "Supported models")
    if rows is None:
        errors.append("README.md: no '## Supported models' section with the plugin table")
        return
    header = [c.lower() for c in readme.split("\n## Supported models\n", 1)[1]
              .split("\n|", 1)[1].split("\n", 1)[0].strip("|").split("|")]
    header = [c.strip() for c in header]
    try:
        col = {k: header.index(k) for k in ("plugin", "modalities", "devices")}
    except ValueError:
        errors.append(f"README.md: the plugin table needs the columns plugin, modalities and "
                      f"devices; it has {header}")
        return
    seen = set()
    for row in rows:
        name = row[col["plugin"]].strip("`")
        seen.add(name)
        if name not in listed:
            errors.append(f"README.md, plugin table: row '{name}' names no plugin that "
                          f"`encgraph plugins` lists ({', '.join(sorted(listed))}); remove the "
                          f"row or fix its name")
            continue
        for key in ("modalities", "devices"):
            want = sorted(listed[name][key])
            got = words(row[col[key]])
            # A build without CUDA (the sanitizer stage) lists its plugins on the CPU only:
            # the README's devices hold for the CUDA build, so only its other devices count.
            if key == "devices" and WITHOUT_CUDA:
                got = [d for d in got if d != "cuda"]
            if got != want:
                errors.append(f"README.md, plugin table, row '{name}': {key} "
                              f"'{row[col[key]]}', but `encgraph plugins` says "
                              f"{', '.join(want)}; write that")
    for name in sorted(n for n in set(listed) - seen if not n.startswith(TEST_ENCODER_PREFIX)):
        errors.append(f"README.md, plugin table: plugin '{name}' (listed by `encgraph plugins`, "
                      f"modalities {','.join(listed[name]['modalities'])}) has no row; add one")
    return listed


WITHOUT_CUDA = False  # --without-cuda: the plugins were built without their CUDA path


def check_abi(root, errors):
    header = open(os.path.join(root, "plugin_api", "include", "encgraph", "plugin_api.h")).read()
    major = re.search(r"#define EG_ABI_VERSION_MAJOR (\d+)u", header)
    minor = re.search(r"#define EG_ABI_VERSION_MINOR (\d+)u", header)
    if not (major and minor):
        errors.append("plugin_api.h: EG_ABI_VERSION_MAJOR / _MINOR not found")
        return
    abi = f"{major.group(1)}.{minor.group(1)}"
    readme = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    stated = re.findall(r"(?:ABI version \(|plugin_api\.h`, version |ABI )(\d+\.\d+)", readme)
    if not stated:
        errors.append("README.md: states no ABI version (as 'ABI version (X.Y' or "
                      "'plugin_api.h`, version X.Y')")
    for v in stated:
        if v != abi:
            errors.append(f"README.md: states ABI version {v}, but plugin_api.h defines {abi}; "
                          f"write {abi}")


def check_config_keys(root, encgraph, errors):
    out = subprocess.run([encgraph, "check-config", "--list-keys"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        errors.append(f"`encgraph check-config --list-keys` failed ({out.returncode}): "
                      f"{out.stderr[-500:]}")
        return
    schema = {line.split("\t")[0] for line in out.stdout.splitlines() if line.strip()}
    sections = {k.split(".")[0] for k in schema}
    doc = open(os.path.join(root, "docs", "config.md"), encoding="utf-8").read()
    documented = set(re.findall(r"^\| `([a-z_]+\.[a-z_.]+)` \|", doc, re.M))
    documented = {k for k in documented if k.split(".")[0] in sections and
                  not k.startswith("plugin.config.")}
    for k in sorted(schema - documented):
        errors.append(f"docs/config.md: key '{k}' (read by the host, frontend/src/config_schema.cpp) "
                      f"has no row '| `{k}` | type | default | meaning |'; add one")
    for k in sorted(documented - schema):
        errors.append(f"docs/config.md: documents key '{k}', which the host does not read "
                      f"(`encgraph check-config --list-keys`); remove the row or add the key to "
                      f"frontend/src/config_schema.cpp")
    return schema


def main():
    global WITHOUT_CUDA
    args = sys.argv[1:]
    if args and args[-1] == "--without-cuda":
        WITHOUT_CUDA = True
        args = args[:-1]
    if len(args) != 3:
        print(__doc__)
        return 2
    root, encgraph, plugin_dir = args
    errors = []
    listed = check_plugins(root, encgraph, plugin_dir, errors)
    check_abi(root, errors)
    keys = check_config_keys(root, encgraph, errors)
    for e in errors:
        print("FAIL:", e)
    if not errors:
        print(f"ok: {len(listed or {})} plugins, the ABI version and {len(keys or ())} config keys "
              f"agree with README.md and docs/config.md")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
