#!/usr/bin/env python3
"""Import circles among the modules of one Rust module directory.

Usage: import_circles.py DIR MODPATH [DIR MODPATH ...]
  DIR      a module directory (crates/recovery/src, crates/lab/src/experiments)
  MODPATH  its path as code names it (`crate`, `crate::experiments`)

Each file or subdirectory of DIR is a module; the directory's own lib.rs or
mod.rs is `(root)`. A module depends on another when its code names it by
path (in `use` lines or in code): `MODPATH::other::...`, `super::other`
from a file at the top of DIR, or `other::...` from the root; naming an item defined in the root (a type of mod.rs, say) is a
dependency on `(root)`. `mod` declarations are not dependencies, and test
code (from the first `#[cfg(test)]` on, and files named tests.rs) is left
out. Prints each dependency circle and exits 1 when there is one.
"""

import os
import re
import sys

USE = re.compile(r"\buse\s+([^;]+);", re.S)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def production(text):
    cut = text.find("#[cfg(test)]")
    return text if cut < 0 else text[:cut]


def expand(path):
    """`a::{b, c::d}` -> ['a::b', 'a::c::d'] (first level of braces)."""
    path = re.sub(r"\s+", "", path)
    m = re.match(r"^(.*?)\{(.*)\}$", path)
    if not m:
        return [path]
    head, body = m.groups()
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    return [head + p for p in parts if p]


def modules(d):
    out = {}
    for name in sorted(os.listdir(d)):
        full = os.path.join(d, name)
        if name in ("lib.rs", "mod.rs", "main.rs"):
            out.setdefault("(root)", []).append(full)
        elif name == "tests.rs" or name == "tests":
            continue
        elif name.endswith(".rs"):
            out.setdefault(name[:-3], []).append(full)
        elif os.path.isdir(full):
            files = []
            for root, _, names in os.walk(full):
                files += [os.path.join(root, n) for n in names if n.endswith(".rs") and n != "tests.rs"]
            out.setdefault(name, []).extend(files)
    return out


def root_items(files):
    text = "".join(production(strip_comments(open(f).read())) for f in files)
    return set(re.findall(r"\b(?:struct|enum|fn|trait|type|const|static)\s+([A-Za-z_]\w*)", text)) | set(
        re.findall(r"\bpub\s+use\s+[^;]*?\b([A-Za-z_]\w*)\s*;", text)
    )


def edges(d, modpath):
    mods = modules(d)
    roots = root_items(mods.get("(root)", []))
    graph = {m: set() for m in mods}
    for m, files in mods.items():
        for f in files:
            top = os.path.dirname(f) == d
            text = production(strip_comments(open(f).read()))
            paths = [p for use in USE.findall(text) for p in expand(use)]
            # Paths in code outside `use` lines (`super::journal::fig19(..)`).
            paths += re.findall(r"(?<![\w:])((?:super|self|crate)(?:::\w+)+)", USE.sub("", text))
            for p in paths:
                target = None
                if p.startswith(modpath + "::"):
                    target = p[len(modpath) + 2:].split("::")[0]
                elif top and m != "(root)" and p.startswith("super::"):
                    target = p[len("super::"):].split("::")[0]
                elif m == "(root)":
                    # The root names its children relatively (`pub use defs::x`).
                    target = p.removeprefix("self::").split("::")[0]
                if not target or target in ("self", "*"):
                    continue
                if target in mods:
                    dep = target
                elif target in roots:
                    dep = "(root)"
                else:
                    continue
                if dep != m:
                    graph[m].add(dep)
    return graph


def circles(graph):
    found, seen = [], set()

    def walk(node, stack):
        for nxt in sorted(graph.get(node, ())):
            if nxt in stack:
                cyc = stack[stack.index(nxt):]
                key = frozenset(cyc)
                if key not in seen:
                    seen.add(key)
                    found.append(cyc + [nxt])
            elif len(stack) < 12:
                walk(nxt, stack + [nxt])

    for n in sorted(graph):
        walk(n, [n])
    return found


def main(args):
    if len(args) % 2 or not args:
        print(__doc__)
        return 2
    bad = 0
    for d, modpath in zip(args[::2], args[1::2]):
        found = circles(edges(d, modpath))
        for c in found:
            print(f"{d}: import circle: {' -> '.join(c)}")
        if not found:
            print(f"{d}: no import circle")
        bad += len(found)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
