"""hack/bench/report.py re-renders docs/BENCHMARKS.md's measured part and keeps
the analysis written by hand below it: the analysis has one copy, in that page,
and a render that dropped it would lose it."""

import os
import sys
import tempfile
import unittest

HACK = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HACK, "bench"))
import report  # noqa: E402


class KeptAnalysisTest(unittest.TestCase):
    def test_the_analysis_below_the_tables_is_kept(self):
        with tempfile.TemporaryDirectory() as d:
            page = os.path.join(d, "BENCHMARKS.md")
            with open(page, "w") as f:
                f.write("# Benchmarks\n\n| old | table |\n\n## Analysis\n\nWhy it is slow.\n")
            self.assertEqual(report.kept_analysis(page), "## Analysis\n\nWhy it is slow.\n")

    def test_a_first_render_has_no_analysis(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(report.kept_analysis(os.path.join(d, "BENCHMARKS.md")), "")

    def test_the_published_page_has_its_analysis(self):
        kept = report.kept_analysis(os.path.join(os.path.dirname(HACK), "docs", "BENCHMARKS.md"))
        self.assertTrue(kept.startswith(report.ANALYSIS + "\n") and len(kept.splitlines()) > 10, kept[:200])


if __name__ == "__main__":
    unittest.main()
