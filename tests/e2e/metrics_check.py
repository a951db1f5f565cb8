#!/usr/bin/env python3
"""metrics_check.py: validate a Prometheus text exposition (format 0.0.4)
as lockgate writes it, and print selected sample values.

    metrics_check.py FILE [SERIES...]
    metrics_check.py --moved BEFORE AFTER SERIES MIN [SERIES MIN]...

Checks: every sample belongs to a family declared by a TYPE line before it;
one HELP and one TYPE per family; names prefixed lockgate_; counters end in
_total; label syntax; values are numbers; histogram series have increasing
le bounds, cumulative counts that never decrease, a +Inf bucket equal to
_count, and a _sum.  Exits 1 with one line per problem.  Then prints, for
each SERIES argument (name with labels, exactly as in the text), its value
or 0 when absent.  With --moved, checks both files and that each SERIES
grew by at least MIN from BEFORE to AFTER (absent counts as 0).
"""
import math
import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
SAMPLE = re.compile(r"^(%s)(?:\{((?:%s)(?:,%s)*)?\})? (\S+)$" % (NAME, LABEL, LABEL))


def parse_labels(s):
    return re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', s or "")


def check(path):
    """Return (problems, samples) of the exposition in PATH."""
    text = open(path).read()
    problems = []
    types, helps = {}, set()
    samples = {}
    hist = {}  # (family, labels without le) -> dict
    if not text.endswith("\n"):
        problems.append("exposition does not end with a newline")
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("# HELP "):
            fam = line.split(" ")[2]
            if fam in helps:
                problems.append("line %d: second HELP for %s" % (n, fam))
            helps.add(fam)
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            if len(parts) != 4 or parts[3] not in (
                    "counter", "gauge", "histogram", "summary", "untyped"):
                problems.append("line %d: bad TYPE line" % n)
                continue
            fam, typ = parts[2], parts[3]
            if fam in types:
                problems.append("line %d: second TYPE for %s" % (n, fam))
            types[fam] = typ
            if not fam.startswith("lockgate_"):
                problems.append("line %d: %s lacks the lockgate_ prefix" % (n, fam))
            if typ == "counter" and not fam.endswith("_total"):
                problems.append("line %d: counter %s does not end in _total" % (n, fam))
            continue
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        if not m:
            problems.append("line %d: not a sample: %r" % (n, line))
            continue
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        try:
            v = float(value)
        except ValueError:
            problems.append("line %d: value %r is not a number" % (n, value))
            continue
        fam, suffix = name, ""
        for suf in ("_bucket", "_sum", "_count"):
            if name.endswith(suf) and types.get(name[:-len(suf)]) == "histogram":
                fam, suffix = name[:-len(suf)], suf
        if fam not in types:
            problems.append("line %d: %s has no TYPE line before it" % (n, name))
        key = name + ("{" + labels + "}" if labels else "")
        if key in samples:
            problems.append("line %d: duplicate series %s" % (n, key))
        samples[key] = v
        if types.get(fam) == "counter" and v < 0:
            problems.append("line %d: negative counter" % n)
        if suffix:
            lab = parse_labels(labels)
            le = [val for k, val in lab if k == "le"]
            rest = ",".join('%s="%s"' % (k, val) for k, val in lab if k != "le")
            h = hist.setdefault((fam, rest), {"buckets": [], "sum": None, "count": None})
            if suffix == "_bucket":
                if len(le) != 1:
                    problems.append("line %d: bucket without one le" % n)
                    continue
                bound = math.inf if le[0] == "+Inf" else float(le[0])
                h["buckets"].append((bound, v))
            elif suffix == "_sum":
                h["sum"] = v
            else:
                h["count"] = v
    for (fam, rest), h in sorted(hist.items()):
        where = "%s{%s}" % (fam, rest)
        b = h["buckets"]
        if not b:
            problems.append("%s: no buckets" % where)
            continue
        for (b1, c1), (b2, c2) in zip(b, b[1:]):
            if not b2 > b1:
                problems.append("%s: le bounds not increasing" % where)
            if c2 < c1:
                problems.append("%s: bucket counts decrease (le=%s)" % (where, b2))
        if b[-1][0] != math.inf:
            problems.append("%s: no +Inf bucket" % where)
        if h["count"] is None or h["count"] != b[-1][1]:
            problems.append("%s: _count %s != +Inf bucket %s" % (where, h["count"], b[-1][1]))
        if h["sum"] is None or h["sum"] < 0:
            problems.append("%s: _sum missing or negative" % where)
    return problems, samples


def main():
    if sys.argv[1] == "--moved":
        p1, before = check(sys.argv[2])
        p2, after = check(sys.argv[3])
        problems = p1 + p2
        args = sys.argv[4:]
        for series, least in zip(args[::2], args[1::2]):
            d = after.get(series, 0) - before.get(series, 0)
            if d < float(least):
                problems.append("%s moved by %g, want >= %s" % (series, d, least))
        if problems:
            print("\n".join("metrics: " + p for p in problems))
            sys.exit(1)
        return
    problems, samples = check(sys.argv[1])
    if problems:
        print("\n".join("metrics: " + p for p in problems))
        sys.exit(1)
    for s in sys.argv[2:]:
        v = samples.get(s, 0)
        print(int(v) if v == int(v) else v)


main()
