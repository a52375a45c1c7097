"""Tests of render.py (stdlib unittest, no broker): `python3 bench/lib/test_render.py`.

The repository's own BENCHMARKS.md is checked by `scripts/bench report --check` (.ci/run);
these check the rules on small files in a temporary directory.
"""
import os
import tempfile
import unittest

import render

TOP = "# Benchmarks\n\nresults of peers\n\n## Findings (written by hand, today)\n\nwhy\n"
SINK = "## Sink\n\n| a | 1 |\n\n### What bounds it (hand-written, run x)\n\nthe fetch"
STEADY = "## Steady\n\nby hand, no heading that says so"


class RenderTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        self.saved = render.TARGET, render.RESULTS, render.FINDINGS
        render.TARGET = os.path.join(d, "BENCHMARKS.md")
        render.RESULTS = os.path.join(d, "results")
        render.FINDINGS = os.path.join(d, "findings")

    def tearDown(self):
        render.TARGET, render.RESULTS, render.FINDINGS = self.saved
        self.dir.cleanup()

    def write(self, text):
        open(render.TARGET, "w").write(text)

    def file(self, kind, name):
        path = os.path.join(render.RESULTS if kind == "results" else render.FINDINGS, name + ".md")
        return open(path).read() if os.path.exists(path) else None

    def benchmarks(self):
        return (TOP + "\n\n<!-- bench-sink:begin -->\n" + SINK + "\n\n<!-- bench-sink:end -->\n\n"
                + "<!-- bench-peers-steady:begin -->\n" + STEADY + "\n\n<!-- bench-peers-steady:end -->\n")

    def test_import_splits_results_from_findings_and_renders_the_same_text(self):
        self.write(self.benchmarks())
        render.import_file(render.TARGET)
        self.assertEqual(self.file("results", "sink"), "## Sink\n\n| a | 1 |\n")
        self.assertEqual(self.file("findings", "sink"), "### What bounds it (hand-written, run x)\n\nthe fetch\n")
        # A part no case writes is findings whole, whatever its headings say.
        self.assertEqual(self.file("findings", "peers-steady"), STEADY + "\n")
        self.assertIsNone(self.file("results", "peers-steady"))
        self.assertEqual(render.render(), self.benchmarks())

    def test_a_case_s_new_results_keep_the_findings_of_bench_findings(self):
        self.write(self.benchmarks())
        render.import_file(render.TARGET)
        # A case that still appends (an old copy of) its findings: the copy is dropped.
        render.store("bench-sink", "## Sink\n\n| a | 2 |\n\n### What bounds it (hand-written, old)\n\nstale")
        text = open(render.TARGET).read()
        self.assertIn("| a | 2 |", text)
        self.assertIn("the fetch", text)
        self.assertNotIn("stale", text)
        self.assertEqual(render.main(["--check"]), 0)

    def test_a_case_cannot_write_a_part_kept_by_hand(self):
        self.write(self.benchmarks())
        render.import_file(render.TARGET)
        with self.assertRaisesRegex(render.RenderError, "written by hand"):
            render.store("bench-peers-steady", "## Steady\n\nfrom a run")
        self.assertEqual(open(render.TARGET).read(), self.benchmarks())

    def test_check_fails_on_a_hand_edit(self):
        self.write(self.benchmarks())
        render.import_file(render.TARGET)
        self.write(self.benchmarks().replace("| a | 1 |", "| a | 3 |"))
        self.assertEqual(render.main(["--check"]), 1)

    def test_import_refuses_a_section_it_does_not_know_and_text_between_sections(self):
        self.write(self.benchmarks() + "\n<!-- mine:begin -->\nx\n<!-- mine:end -->\n")
        with self.assertRaisesRegex(render.RenderError, "no part 'mine'.*PARTS"):
            render.import_file(render.TARGET)
        self.write(self.benchmarks() + "\nloose text\n")
        with self.assertRaisesRegex(render.RenderError, "text after the last section"):
            render.import_file(render.TARGET)
        # Nothing was written by the refused imports.
        self.assertFalse(os.path.exists(render.RESULTS))


if __name__ == "__main__":
    unittest.main()
