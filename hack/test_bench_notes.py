"""docs/BENCHMARKS.md is rendered by hack/bench.sh: its generated tables, then
hack/bench/notes.md verbatim. An analysis written into one and not the other
is lost at the next render (or never rendered), as three HNS sections nearly
were; this keeps the two the same."""

import os
import unittest

HACK = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HACK)


class BenchNotesTest(unittest.TestCase):
    def test_benchmarks_md_ends_with_the_notes(self):
        with open(os.path.join(ROOT, "docs", "BENCHMARKS.md")) as f:
            rendered = f.read()
        with open(os.path.join(HACK, "bench", "notes.md")) as f:
            notes = f.read()
        self.assertTrue(notes.strip(), "hack/bench/notes.md is empty")
        self.assertTrue(
            rendered.endswith(notes),
            "docs/BENCHMARKS.md's analysis differs from hack/bench/notes.md: edit notes.md, then copy it over "
            "everything after the generated tables",
        )


if __name__ == "__main__":
    unittest.main()
