"""The source tree keeps the layers docs/architecture.md draws: every file of src/ has a layer
in its diagram, and includes headers only from its own layer or below, so there is no include
cycle. Reads files only (no servers)."""

from __future__ import annotations

import pathlib
import re
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def layers() -> dict[str, int]:
    """file name (x.c / x.h) -> layer, from the diagram; a .c's header shares its layer unless
    the diagram names the header itself (journal.h is below journal.c)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("so there is no include cycle", 1)[1].split("```", 2)[1]
    out: dict[str, int] = {}
    layer = None
    for line in block.splitlines():
        m = re.match(r"\s*(\d)\s{2}", line)
        if m:
            layer = int(m.group(1))
        if layer is None:
            continue
        for name in re.findall(r"\b([a-z_]+\.[ch])\b", line):
            out.setdefault(name, layer)
        for stem in re.findall(r"\b([a-z_]+)\.h/", line):  # "journal.h/dbtask.h/..."
            out.setdefault(stem + ".h", layer)
    for name, lay in list(out.items()):
        if name.endswith(".c"):
            out.setdefault(name[:-2] + ".h", lay)
    return out


def includes(path: pathlib.Path) -> list[str]:
    return re.findall(r'^#include "([a-z_]+\.h)"', path.read_text(), re.M)


class LayersTest(unittest.TestCase):
    def test_every_file_has_a_layer(self):
        known = layers()
        missing = sorted(p.name for p in SRC.glob("*.[ch]") if p.name not in known)
        self.assertEqual(missing, [], "src files the diagram in docs/architecture.md does not place")

    def test_files_include_only_their_layer_or_below(self):
        known = layers()
        wrong = []
        for p in sorted(SRC.glob("*.[ch]")):
            for h in includes(p):
                if h in known and p.name in known and known[h] > known[p.name]:
                    wrong.append(f"{p.name} (layer {known[p.name]}) includes {h} (layer {known[h]})")
        self.assertEqual(wrong, [])

    def test_no_include_cycle_between_modules(self):
        # module = file stem: x.c and x.h together; an edge when x.c or x.h includes y.h
        graph: dict[str, set[str]] = {}
        for p in SRC.glob("*.[ch]"):
            graph.setdefault(p.stem, set()).update(h[:-2] for h in includes(p) if h[:-2] != p.stem)
        state: dict[str, int] = {}
        path: list[str] = []

        def visit(m: str) -> None:
            state[m] = 1
            path.append(m)
            for n in sorted(graph.get(m, ())):
                if state.get(n) == 1:
                    self.fail("include cycle: " + " -> ".join(path[path.index(n):] + [n]))
                if n not in state:
                    visit(n)
            path.pop()
            state[m] = 2

        for m in sorted(graph):
            if m not in state:
                visit(m)


if __name__ == "__main__":
    unittest.main()
