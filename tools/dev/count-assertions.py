#!/usr/bin/env python3
"""Every test and how many assertions its body holds: the check that a refactor kept the tests' checks.

    tools/dev/count-assertions.py [SOURCE_DIR] > counts.txt
    diff old-counts.txt new-counts.txt

One line per test, "NAME COUNT", sorted: the GoogleTest tests of tests/*.cpp (TEST, TEST_F, TEST_P as
Suite.Name; the assertions are the EXPECT_* / ASSERT_* macros in the test's body, counted in the source)
and the Python tests of python/tests/*.py (module.Class.test_name; the self.assert* calls). A helper an
assertion lives in is not followed: a test that calls one counts the call's macros where they are
written, so the counts compare like with like across two trees. The last line is the totals.
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
TEST = re.compile(r"^\s*(?:TEST|TEST_F|TEST_P|TYPED_TEST)\(\s*(\w+)\s*,\s*(\w+)\s*\)", re.M)
ASSERT = re.compile(r"\b(?:EXPECT|ASSERT)_[A-Z_]+\s*\(")


def body(text, start):
    """The text between the first '{' at or after start and its matching '}' (strings and comments skipped)."""
    i = text.index("{", start)
    depth, j, n = 0, i, len(text)
    while j < n:
        c = text[j]
        if c == '"' or c == "'":
            q = c
            j += 1
            while j < n and text[j] != q:
                j += 2 if text[j] == "\\" else 1
        elif text.startswith("//", j):
            j = text.find("\n", j)
            if j < 0:
                break
        elif text.startswith("/*", j):
            j = text.find("*/", j) + 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[i:j + 1]
        j += 1
    return text[i:]


rows = {}
for f in sorted((root / "tests").glob("*.cpp")):
    text = f.read_text()
    for m in TEST.finditer(text):
        rows[f"{m.group(1)}.{m.group(2)}"] = len(ASSERT.findall(body(text, m.end())))
for f in sorted((root / "python" / "tests").glob("test_*.py")):
    cls = None
    lines = f.read_text().splitlines()
    for k, line in enumerate(lines):
        if m := re.match(r"class (\w+)\(", line):
            cls = m.group(1)
        elif (m := re.match(r"    def (test_\w+)\(", line)) and cls:
            n = 0
            for rest in lines[k + 1:]:
                if rest.strip() and not rest.startswith("        "):
                    break
                n += len(re.findall(r"self\.assert\w+\(", rest))
            rows[f"{f.stem}.{cls}.{m.group(1)}"] = n
for name in sorted(rows):
    print(name, rows[name])
print(f"total: {len(rows)} tests, {sum(rows.values())} assertions")
