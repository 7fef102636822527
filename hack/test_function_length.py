"""No function of the operator (src/) or the agent (agent/) is longer than
80 lines, tests aside: a function a newcomer cannot read on one screen hides
the decision it makes. Counted from the line that declares it to its closing
brace."""

import os
import re
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 80
RUST_FN = re.compile(r"\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)")
# Rust files compiled only for tests (`#[cfg(test)] mod ...;`).
TEST_ONLY = {"tests.rs", "fixtures.rs", "fake_api.rs"}
GO_FUNC = re.compile(r"func\s+(\([^)]*\)\s*)?(\w+)")


def long_functions(path, limit=LIMIT):
    """(name, first line, length) of each function in the file longer than limit."""
    rust = path.endswith(".rs")
    lines = open(path, encoding="utf-8").read().split("\n")
    found = []
    for i, line in enumerate(lines):
        # A Rust file's unit tests come last, in `#[cfg(test)] mod tests`.
        if rust and re.match(r"\s*#\[cfg\(test\)\]", line) and i + 1 < len(lines) and re.match(r"\s*mod tests", lines[i + 1]):
            break
        m = RUST_FN.match(line) if rust else GO_FUNC.match(line)
        if not m or line.rstrip().endswith(";"):
            continue
        depth, opened, end = 0, False, i
        for end in range(i, len(lines)):
            depth += lines[end].count("{") - lines[end].count("}")
            opened = opened or "{" in lines[end]
            if opened and depth <= 0:
                break
        if end - i + 1 > limit:
            found.append((m.group(6) if rust else m.group(2), i + 1, end - i + 1))
    return found


def sources():
    for top in ("src", "agent"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                path = os.path.join(dirpath, f)
                if f.endswith(".rs") and f not in TEST_ONLY or f.endswith(".go") and not f.endswith("_test.go"):
                    yield path


class FunctionLength(unittest.TestCase):
    def test_no_function_is_longer_than_a_screen(self):
        long = [f"{os.path.relpath(p, ROOT)}:{line} {name} ({n} lines)" for p in sources() for name, line, n in long_functions(p)]
        self.assertEqual(long, [], f"functions over {LIMIT} lines")

    def test_a_long_function_is_found(self):
        import tempfile

        body = "\n".join(["    let x = 1;"] * 5)
        with tempfile.NamedTemporaryFile("w", suffix=".rs", delete=False) as f:
            f.write(f"pub async fn long() {{\n{body}\n}}\n\nfn short() {{}}\n")
        try:
            self.assertEqual(long_functions(f.name, limit=6), [("long", 1, 7)])
            self.assertEqual(long_functions(f.name, limit=7), [])
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
