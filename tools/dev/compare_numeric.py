#!/usr/bin/env python3
"""Compares two output files with a numeric tolerance: the tolerance mode of compare-outputs.sh (issue 29).

    tools/dev/compare_numeric.py A B --rel 1e-9 [--abs 0] [--limit 20]

A change that is exact only to a relative tolerance (a faster step simulator, a reordered sum) moves the
last digits of printed numbers; this checks that nothing else moved. Non-numeric text must match exactly;
two numbers match when |a - b| <= max(rel * max(|a|, |b|), abs).

- JSON files (both parse, to an object or an array) are compared as parsed values: the same keys in the
  same order, the same list lengths, strings, booleans and nulls equal, numbers within the tolerance.
  JSON carries full precision, so its numbers get no rounding allowance.
- Every other file is compared line by line, each line split by a regular expression into text and
  numbers (integers, decimals, exponent forms). Text tables and CSV print numbers rounded to a few
  digits ("%.3f", "%.3g", "%.9g"), where a change far below the tolerance can still flip the last
  printed digit (12.35 -> "12.3" or "12.4"). Where a number is printed as a float (a decimal point or an
  exponent on either side) a difference of at most one unit in the last printed digit is accepted as a
  "last-digit flip" and reported apart. Two integers get no such allowance: they are counts (batch
  sizes, requests, exit statuses) far more often than rounded floats, and a flip there is a real change.
  The whitespace that pads a table cell may change width where the number beside it changed width.

Prints each difference (file:line:column, the two values, the relative difference) up to --limit, then
one summary line. Exit status: 0 everything within the tolerance, 1 a difference, 2 a usage or read
error.
"""
import argparse
import decimal
import json
import math
import re
import sys

# A number in free text: not glued to a word or a preceding dot (so "h100", "sm_80", "llama-3.1-8b"'s
# "3.1" aside, identifiers stay text), with its sign only where the sign is not glued either (in "2-3"
# the "-" is a dash). The exponent needs digits, so "3e" in "3elements" is not one.
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
# Number literals in JSON text, strings skipped: to give parsed numbers their line and column.
JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?(?:Infinity|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|NaN')
WS = re.compile(r"[ \t]*")


class Num:
    """A number with the text it was printed as (for the last-digit allowance and the report)."""

    __slots__ = ("text", "value", "index")

    def __init__(self, text, index=-1):
        self.text = text
        self.value = float(text)  # "NaN", "Infinity", "-Infinity" included
        self.index = index


def rel_diff(a, b):
    """|a - b| / max(|a|, |b|); 0 for two equal values (two NaNs, two equal infinities included)."""
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b))


def last_digit_unit(text):
    """One unit in the last printed digit of a decimal literal, exactly: "12.3" -> 0.1, "1.29e+03" -> 10."""
    m = re.fullmatch(r"[-+]?(\d*)(?:\.(\d*))?(?:[eE]([-+]?\d+))?", text)
    if m is None:
        return None
    return decimal.Decimal(1).scaleb(int(m.group(3) or 0) - len(m.group(2) or ""))


def is_float_literal(text):
    return any(c in text for c in ".eE")


class Comparison:
    def __init__(self, path_a, path_b, rel, abs_tol, limit):
        self.path_a, self.path_b = path_a, path_b
        self.rel, self.abs = rel, abs_tol
        self.limit = limit
        self.compared = 0  # numbers compared
        self.within = 0  # numbers that differ but within the tolerance
        self.max_rel = 0.0  # largest relative difference among those within the tolerance
        self.flips = 0
        self.max_flip_rel = 0.0
        self.outside = 0
        self.text = 0  # text or structure differences
        self.printed = 0

    def report(self, where, message):
        if self.printed < self.limit:
            print(f"{self.path_a}:{where}: {message}")
        elif self.printed == self.limit:
            print(f"... (further differences not printed; --limit {self.limit})")
        self.printed += 1

    def number(self, where, a, b, flips_allowed):
        """Compares two numbers; counts and reports the outcome."""
        self.compared += 1
        if a.text == b.text:
            return
        r = rel_diff(a.value, b.value)
        tol = max(self.rel * max(abs(a.value), abs(b.value)), self.abs)
        if r == 0.0 or (math.isfinite(r) and abs(a.value - b.value) <= tol):
            self.within += 1
            self.max_rel = max(self.max_rel, r)
            return
        if flips_allowed and self.is_flip(a.text, b.text):
            self.flips += 1
            self.max_flip_rel = max(self.max_flip_rel, r)
            self.report(where, f"last-digit flip: {a.text} vs {b.text} (relative difference {r:.3g})")
            return
        self.outside += 1
        self.report(where, f"number differs: {a.text} vs {b.text} (relative difference {r:.3g})")

    @staticmethod
    def is_flip(ta, tb):
        """At most one unit in the last printed digit of the more precise of the two, one being a float."""
        if not (is_float_literal(ta) or is_float_literal(tb)):
            return False
        ua, ub = last_digit_unit(ta), last_digit_unit(tb)
        if ua is None or ub is None:
            return False
        try:
            diff = abs(decimal.Decimal(ta) - decimal.Decimal(tb))
        except decimal.InvalidOperation:
            return False
        return diff <= min(ua, ub)

    def mismatch(self, where, message):
        self.text += 1
        self.report(where, message)

    def ok(self):
        return self.outside == 0 and self.text == 0

    def summary(self):
        verdict = "within tolerance" if self.ok() else "DIFFERENT"
        return (f"summary: {self.compared} numbers compared, {self.within} differ within the tolerance "
                f"(max relative difference {self.max_rel:.3g}), {self.flips} last-digit flips "
                f"(max relative difference {self.max_flip_rel:.3g}), {self.outside} outside the tolerance, "
                f"{self.text} text differences (rel {self.rel:g}, abs {self.abs:g}): {verdict}")


# ---- JSON ----------------------------------------------------------------------------------------


def parse_json(text):
    """The parsed document with every number a Num (index: its order in the text), or None."""
    counter = iter(range(1 << 62))
    hook = lambda s: Num(s, next(counter))  # noqa: E731 - one hook for ints, floats and constants
    try:
        doc = json.loads(text, parse_float=hook, parse_int=hook, parse_constant=hook)
    except ValueError:
        return None
    return doc if isinstance(doc, (dict, list)) else None


def number_positions(text):
    """line:column of every number literal of a JSON text, in document order (the parser's order)."""
    out = []
    for m in JSON_TOKEN.finditer(text):
        if m.group(0)[0] != '"':
            line = text.count("\n", 0, m.start()) + 1
            out.append(f"{line}:{m.start() - (text.rfind(chr(10), 0, m.start()) + 1) + 1}")
    return out


def compare_json(cmp, a, b, positions, path="$"):
    where = lambda n: positions[n.index] if 0 <= n.index < len(positions) else path  # noqa: E731
    if isinstance(a, Num) and isinstance(b, Num):
        cmp.number(f"{where(a)}: {path}", a, b, flips_allowed=False)
    elif isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            kind = "key order differs" if sorted(a) == sorted(b) else "keys differ"
            only_a = [k for k in a if k not in b]
            only_b = [k for k in b if k not in a]
            cmp.mismatch(path, f"{kind}: only in A {only_a}, only in B {only_b}")
        for k in a:
            if k in b:
                compare_json(cmp, a[k], b[k], positions, f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            cmp.mismatch(path, f"list length differs: {len(a)} vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            compare_json(cmp, x, y, positions, f"{path}[{i}]")
    elif a != b:  # strings, booleans, null; a Num against any of them
        show = lambda v: v.text if isinstance(v, Num) else json.dumps(v)[:80]  # noqa: E731
        cmp.mismatch(path, f"value differs: {show(a)} vs {show(b)}")


# ---- text ----------------------------------------------------------------------------------------


def split_line(line):
    """[text, Num, text, Num, ..., text]: always odd length, text at the even positions."""
    parts, pos = [], 0
    for m in NUMBER.finditer(line):
        parts.append(line[pos:m.start()])
        parts.append(Num(m.group(0)))
        parts[-1].index = m.start()
        pos = m.end()
    parts.append(line[pos:])
    return parts


def text_equal(ta, tb, pad_before, pad_after):
    """Text between numbers: equal, apart from the width of the padding beside a number whose printed
    width changed (pad_before: the number before this text changed width; pad_after: the one after)."""
    if ta == tb:
        return True
    lead_a, lead_b = (WS.match(ta).end(), WS.match(tb).end()) if pad_before else (0, 0)
    core_a, core_b = ta[lead_a:], tb[lead_b:]
    if pad_after:
        core_a, core_b = core_a.rstrip(" \t"), core_b.rstrip(" \t")
    return core_a == core_b


def compare_lines(cmp, la, lb, lineno):
    pa, pb = split_line(la), split_line(lb)
    if len(pa) != len(pb):
        cmp.mismatch(f"{lineno}:1", f"line differs: {la.rstrip()[:120]!r} vs {lb.rstrip()[:120]!r}")
        return
    widths = [len(pa[i].text) != len(pb[i].text) for i in range(1, len(pa), 2)]
    for i in range(0, len(pa), 2):
        before = i > 0 and widths[i // 2 - 1]
        after = i + 1 < len(pa) and widths[i // 2]
        if not text_equal(pa[i], pb[i], before, after):
            cmp.mismatch(f"{lineno}:1", f"text differs: {la.rstrip()[:120]!r} vs {lb.rstrip()[:120]!r}")
            return
    for i in range(1, len(pa), 2):
        cmp.number(f"{lineno}:{pa[i].index + 1}", pa[i], pb[i], flips_allowed=True)


def compare_text(cmp, a, b):
    la, lb = a.split("\n"), b.split("\n")
    for n, (x, y) in enumerate(zip(la, lb), 1):
        if x != y:
            compare_lines(cmp, x, y, n)
        else:
            cmp.compared += len(NUMBER.findall(x))
    if len(la) != len(lb):
        # split("\n") counts a final newline as an empty last line; the message counts lines
        na, nb = len(a.splitlines()), len(b.splitlines())
        what = f"line count differs: {na} vs {nb}" if na != nb else "final newline differs"
        cmp.mismatch(f"{min(len(la), len(lb))}:1", what)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rel", type=float, required=True, help="relative tolerance, e.g. 1e-9")
    p.add_argument("--abs", type=float, default=0.0, help="absolute tolerance (default 0)")
    p.add_argument("--limit", type=int, default=20, help="differences printed at most (default 20)")
    args = p.parse_args(argv)
    try:
        # surrogateescape: a stray non-UTF-8 byte stays comparable instead of stopping the comparison
        a = open(args.a, encoding="utf-8", errors="surrogateescape").read()
        b = open(args.b, encoding="utf-8", errors="surrogateescape").read()
    except OSError as e:
        print(f"compare_numeric: {e}", file=sys.stderr)
        return 2
    cmp = Comparison(args.a, args.b, args.rel, args.abs, args.limit)
    ja, jb = parse_json(a), parse_json(b)
    if ja is not None and jb is not None:
        compare_json(cmp, ja, jb, number_positions(a))
    else:
        compare_text(cmp, a, b)
    print(cmp.summary())
    return 0 if cmp.ok() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
