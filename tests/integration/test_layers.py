"""The source tree keeps its layers: src/ is one folder per layer, listed bottom first in
src/LAYERS; a file includes project headers by path, only from its own folder or those below;
no include cycle between modules; the diagram in docs/architecture.md is the one the folders
draw. The rules live in scripts/layers.py, which this test runs on the tree and, to show that
it can fail, on small trees that break each rule. Reads files only (no servers)."""

from __future__ import annotations

import importlib.util
import pathlib
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("layers", ROOT / "scripts" / "layers.py")
layers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(layers)


def tree(files: dict[str, str], order: str = "low\nhigh\n") -> pathlib.Path:
    src = pathlib.Path(tempfile.mkdtemp(prefix="hg-layers-")) / "src"
    src.mkdir()
    (src / "LAYERS").write_text("".join(f"{n} what {n} holds\n" for n in order.split()))
    for name, text in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    return src


class TreeTest(unittest.TestCase):
    def test_src_keeps_its_layers(self):
        self.assertEqual(layers.problems(), [])

    def test_architecture_md_shows_the_folders_diagram(self):
        self.assertEqual(layers.documented(), layers.diagram(),
                         "run: python3 scripts/layers.py --write")

    def test_diagram_lists_every_module(self):
        drawn = layers.diagram()
        for p in layers.SRC.glob("*/*.[ch]"):
            self.assertIn(p.stem, drawn)


class CheckerTest(unittest.TestCase):
    """The checker itself: each rule, broken once, is reported."""

    def test_a_clean_tree_passes(self):
        src = tree({"low/a.h": "", "low/a.c": '#include "low/a.h"\n', "high/b.c": '#include "low/a.h"\n'})
        self.assertEqual(layers.problems(src), [])

    def test_an_include_from_above_is_reported(self):
        src = tree({"low/a.c": '#include "high/b.h"\n', "high/b.h": ""})
        self.assertEqual(len(layers.problems(src)), 1)
        self.assertIn("above it", layers.problems(src)[0])

    def test_a_folder_missing_from_layers_is_reported(self):
        src = tree({"low/a.c": "", "stray/x.c": ""})
        self.assertIn("src/stray/ is not in src/LAYERS", layers.problems(src))

    def test_a_bare_include_is_reported(self):
        src = tree({"low/a.h": "", "low/b.c": '#include "a.h"\n'})
        self.assertIn("by their path", " ".join(layers.problems(src)))

    def test_a_cycle_inside_a_folder_is_reported(self):
        src = tree({"low/a.h": '#include "low/b.h"\n', "low/b.h": '#include "low/a.h"\n'})
        self.assertIn("include cycle: low/a -> low/b -> low/a", layers.problems(src))

    def test_a_file_outside_any_folder_is_reported(self):
        src = tree({"low/a.c": "", "loose.c": ""})
        self.assertIn("src/loose.c is in no folder", layers.problems(src))


if __name__ == "__main__":
    unittest.main()
