"""No function of the operator (src/), the agent (agent/) or the build tools
(hack/tools/) is longer than 80 lines, unit tests aside, and no function of
the integration suite (tests/) longer than 150: a function a newcomer cannot
read on one screen hides the decision it makes, and a test that long hides
what it proves. Counted from the line that declares it to its closing brace,
braces inside string and character literals and comments not counted."""

import os
import re
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 80
TEST_LIMIT = 150
RUST_FN = re.compile(r"\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)")
# Rust files compiled only for tests (`#[cfg(test)] mod ...;`).
TEST_ONLY = {"tests.rs", "fixtures.rs", "fake_api.rs"}
GO_FUNC = re.compile(r"func\s+(\([^)]*\)\s*)?(\w+)")


def code_only(text, rust):
    """`text` with the contents of its string and character literals and its
    line comments blanked out, newlines kept: a brace in `"{"` or `'}'` is
    not a block."""
    out, i, n = [], 0, len(text)
    newlines = lambda chunk: "\n" * chunk.count("\n")  # noqa: E731
    while i < n:
        rest = text[i : i + 3]
        raw = re.match(r'r(#*)"', text[i : i + 40]) if rust and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) else None
        if rest.startswith("//"):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif raw:
            close = '"' + raw.group(1)
            end = text.find(close, i + len(raw.group(0)))
            end = n if end < 0 else end + len(close)
            out.append(newlines(text[i:end]))
            i = end
        elif text[i] == '"' or (not rust and text[i] == "`"):
            quote, j = text[i], i + 1
            while j < n and text[j] != quote:
                j += 2 if text[j] == "\\" and quote == '"' else 1
            out.append(newlines(text[i : j + 1]))
            i = j + 1
        elif text[i] == "'" and (m := re.match(r"'(\\.|[^\\'])'", text[i : i + 4])):
            i += len(m.group(0))
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def long_functions(path, limit=LIMIT):
    """(name, first line, length) of each function in the file longer than limit."""
    rust = path.endswith(".rs")
    with open(path, encoding="utf-8") as f:
        lines = code_only(f.read(), rust).split("\n")
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
    for top in ("src", "agent", "hack/tools"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                path = os.path.join(dirpath, f)
                if f.endswith(".rs") and f not in TEST_ONLY or f.endswith(".go") and not f.endswith("_test.go"):
                    yield path


def integration_tests():
    for dirpath, _, files in os.walk(os.path.join(ROOT, "tests")):
        yield from (os.path.join(dirpath, f) for f in files if f.endswith(".rs"))


class FunctionLength(unittest.TestCase):
    def test_no_function_is_longer_than_a_screen(self):
        long = [f"{os.path.relpath(p, ROOT)}:{line} {name} ({n} lines)" for p in sources() for name, line, n in long_functions(p)]
        self.assertEqual(long, [], f"functions over {LIMIT} lines")

    def test_no_integration_test_is_longer_than_two_screens(self):
        long = [
            f"{os.path.relpath(p, ROOT)}:{line} {name} ({n} lines)"
            for p in integration_tests()
            for name, line, n in long_functions(p, TEST_LIMIT)
        ]
        self.assertEqual(long, [], f"integration test functions over {TEST_LIMIT} lines")

    def test_braces_in_literals_and_comments_are_not_blocks(self):
        rust = 'fn f() {\n    let a = "{"; let b = \'{\';\n    // {\n    let c = r#"{ "x": 1"#;\n}\n\nfn g<\'a>(x: &\'a str) {}\n'
        self.assertEqual(code_only(rust, True).count("{"), code_only(rust, True).count("}"))
        self.assertEqual(code_only(rust, True).count("\n"), rust.count("\n"), "line numbers kept")
        go = "func f() {\n\ts := `{`\n\tc := \'}\'\n}\n"
        self.assertEqual(code_only(go, False).count("{"), code_only(go, False).count("}"))

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
