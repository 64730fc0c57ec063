#!/usr/bin/env python3
"""Print the include graph between the folders (layers) of strata's library sources.

Usage: scripts/include_graph.py [--dot] [--strict] [--why FROM TO]

Every #include in src/ and kernels/ is resolved the way the compiler does (the including
file's folder, then src/, include/, kernels/include/, kernels/), and counted as an edge
between the two files' layers. A layer is a folder of src/ (its public headers in
include/strata/<same name>/ belong to it), or one of the sub-layers named in SUB_LAYERS.
LAYER_ORDER lists the layers from the bottom up; an edge that points up the list is printed
as a violation unless ALLOWED names it (each with the reason, as docs/architecture.md does).
--strict exits 1 when an unallowed upward edge exists (CI runs it so); --why lists the
includes behind one edge.

It also checks the one include spelling (docs/architecture.md "One include spelling"): a project
header is included in quotes by its path from a root of the including file's tree (ROOTS:
"strata/<layer>/x.h" from include/, "strata_kernels/..." from kernels/include/, a private
header of src/ as "ops/nn_common.h", a test helper as "unit/ops/x.h" or "test_util.h" from
tests/, a tool's or an example's from tools/ or examples/), never bare beside the including
file, never relative ("./", "../"); system and third-party headers in <>. Each include that
breaks the rule is printed as file:line; --strict exits 1 on any.
"""
import os
import re
import sys
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEARCH = ["src", "include", "kernels/include", "kernels"]
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)

# Folders whose sub-folders are layers of their own.
SUB_LAYERS = {"src/backend"}

# Bottom to top. Layers on one line share a level (neither may include the other).
# backend/cuda sits above backend/cpu: its host-side steps run the CPU's code (strided
# copies through host staging buffers, dimension layouts, the index checks, so that a bad
# index gets the CPU's message); its interface speaks only backend/kernel_types.h.
LAYER_ORDER = [
    ["kernels/common"],
    ["core", "kernels"],
    ["profiler"],
    ["tensor"],
    ["backend"],
    ["backend/cpu"],
    ["backend/cuda"],
    ["backend/dispatch"],
    ["autograd"],
    ["ops"],
    ["nn", "optim"],
    ["distributed"],
    ["checkpoint"],
    ["data", "profile"],
    ["parallel"],
    ["train"],
]

# (from, to): why this upward edge is accepted.
ALLOWED = {}


# The include spelling: each tree of the repository (first matching prefix) and the roots its
# quoted includes are spelled from, in the order its targets' include directories give them.
# None: not checked (tests/consumer builds against the installed package, <strata/...>).
ROOTS = [
    ("include/strata", ["include"]),
    ("kernels/include", ["kernels/include"]),
    ("kernels", ["kernels/include", "kernels"]),
    ("src", ["include", "src", "kernels/include"]),
    ("tests/consumer", None),
    ("tests", ["include", "tests", "src", "kernels/include"]),
    ("tools", ["include", "tools", "tests"]),
    ("examples", ["include", "examples"]),
    ("benchmarks", ["include", "benchmarks", "src", "kernels/include"]),
]
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cu", ".cuh")
INCLUDE_LINE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
PROJECT_PREFIXES = ("strata/", "strata_kernels/")


def roots_of(rel):
    for tree, roots in ROOTS:
        if rel == tree or rel.startswith(tree + "/"):
            return roots
    return None


def spelling_problem(rel, roots, quote, name):
    """Why `#include <quote>name` in rel breaks the spelling rule, or None."""
    if quote == "<":
        return f"<{name}> is a project header: include it in quotes" if name.startswith(PROJECT_PREFIXES) else None
    if name.startswith(("./", "../")) or "/../" in name or "/./" in name:
        return f'"{name}" is relative: spell it from one of {", ".join(r + "/" for r in roots)}'
    hits = [r for r in roots if os.path.isfile(os.path.join(ROOT, r, name))]
    beside = os.path.normpath(os.path.join(os.path.dirname(rel), name))
    if not hits:
        if os.path.isfile(os.path.join(ROOT, beside)):
            fix = next((os.path.relpath(beside, r) for r in sorted(roots, key=len, reverse=True)
                        if beside.startswith(r + "/")), None)
            return f'"{name}" is bare (found only beside the file): spell it "{fix}"' if fix else \
                f'"{name}" is found only beside the file, outside {", ".join(r + "/" for r in roots)}'
        return f'"{name}" does not resolve under {", ".join(r + "/" for r in roots)} (a system header goes in <>)'
    if len(hits) > 1:
        return f'"{name}" is ambiguous: it resolves under both {hits[0]}/ and {hits[1]}/'
    if os.path.isfile(os.path.join(ROOT, beside)) and beside != os.path.normpath(os.path.join(hits[0], name)):
        return f'"{name}" is shadowed by {beside} beside the file (the compiler takes that one)'
    return None


def spelling_problems():
    """file:line: problem, for every include in the repository's sources that breaks the rule."""
    problems = []
    for top in sorted({tree.split("/")[0] for tree, _ in ROOTS}):
        for folder, _, files in sorted(os.walk(os.path.join(ROOT, top))):
            for f in sorted(files):
                rel = os.path.relpath(os.path.join(folder, f), ROOT)
                roots = roots_of(rel)
                if not f.endswith(SOURCE_SUFFIXES) or roots is None:
                    continue
                with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
                    for number, line in enumerate(fh, 1):
                        m = INCLUDE_LINE.match(line)
                        why = m and spelling_problem(rel, roots, m.group(1), m.group(2))
                        if why:
                            problems.append(f"{rel}:{number}: {why}")
    return problems


def layer_of(path):
    """The layer of a repository-relative path, or None outside the library."""
    parts = path.split("/")
    if parts[0] == "kernels":
        return "kernels/common" if "/".join(parts[:4]) == "kernels/include/strata_kernels/common" else "kernels"
    if parts[0] == "include" and len(parts) > 3 and parts[1] == "strata":
        parts = ["src"] + parts[2:]
    elif parts[0] == "include" and len(parts) == 3 and parts[1] == "strata":
        name = parts[2].rsplit(".", 1)[0]  # strata/ops.h: the ops layer's umbrella
        return name if os.path.isdir(os.path.join(ROOT, "src", name)) else "umbrella"
    if parts[0] != "src" or len(parts) < 3:
        return None
    if "/".join(parts[:2]) in SUB_LAYERS and len(parts) > 3 and os.path.isdir(os.path.join(ROOT, *parts[:3])):
        return parts[1] + "/" + parts[2]
    return parts[1]


def resolve(including, name):
    candidates = [os.path.join(os.path.dirname(including), name)] + [os.path.join(d, name) for d in SEARCH]
    for c in candidates:
        c = os.path.normpath(c)
        if os.path.isfile(os.path.join(ROOT, c)):
            return c
    return None


def edges(why=None):
    counts = Counter()
    for top in ["src", "kernels", "include/strata"]:
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if not f.endswith((".h", ".hpp", ".cpp", ".cu", ".cuh")):
                    continue
                rel = os.path.relpath(os.path.join(folder, f), ROOT)
                src_layer = layer_of(rel)
                with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
                    text = fh.read()
                for name in INCLUDE.findall(text):
                    target = resolve(rel, name)
                    dst_layer = layer_of(target) if target else None
                    if src_layer in (None, "umbrella") or dst_layer in (None, "umbrella", src_layer):
                        continue
                    counts[(src_layer, dst_layer)] += 1
                    if why == (src_layer, dst_layer):
                        print(f"{rel}: {name}")
    return counts


def level(layer):
    for i, names in enumerate(LAYER_ORDER):
        if layer in names:
            return i
    return None


def main():
    if "--why" in sys.argv:
        i = sys.argv.index("--why")
        edges(why=(sys.argv[i + 1], sys.argv[i + 2]))
        return
    counts = edges()
    upward = []
    if "--dot" in sys.argv:
        print("digraph strata {")
        for (a, b), n in sorted(counts.items()):
            print(f'  "{a}" -> "{b}" [label={n}];')
        print("}")
    else:
        for (a, b), n in sorted(counts.items()):
            la, lb = level(a), level(b)
            mark = ""
            if la is None or lb is None:
                mark = "  (layer not in LAYER_ORDER)"
            elif lb >= la:
                mark = "  UP (allowed: " + ALLOWED[(a, b)] + ")" if (a, b) in ALLOWED else "  UP"
                if (a, b) not in ALLOWED:
                    upward.append((a, b, n))
            print(f"{a:16} -> {b:16} {n:4}{mark}")
        print(f"\n{len(counts)} edges, {len(upward)} pointing up or sideways without a reason in ALLOWED")
    problems = spelling_problems()
    sys.stdout.flush()  # the graph first, then the problems (stderr)
    for p in problems:
        print(p, file=sys.stderr)
    if "--dot" not in sys.argv:
        print(f"{len(problems)} includes not spelled by the rule (ROOTS)")
    if "--strict" in sys.argv and (upward or problems):
        sys.exit(1)


if __name__ == "__main__":
    main()
