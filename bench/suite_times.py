#!/usr/bin/env python3
"""Where the test suite's time goes: a table of each test file's tests and
seconds, from the JUnit XML files of the last `bash testprogs/run-tests.sh`
(it writes them to $LJGDB_CACHE/last-run/: parallel.xml for the two
workers, serial.xml for the serial tests run alone).

  python3 bench/suite_times.py [--top N] [XML ...]

Prints, as Markdown: each phase's wall time and test count (pytest's own
figures), then the N files (default 15) with the most seconds of tests,
summed over their tests (set-up and tear-down included, as pytest's JUnit
report counts them; on two workers the sum is about twice the wall
time).  docs/testing.md's table comes from it."""
import argparse
import collections
import os
import sys
import xml.etree.ElementTree as ET

CACHE = os.environ.get("LJGDB_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ljgdb")
RUN = os.path.join(CACHE, "last-run")


def phases(paths):
    """[(name, wall seconds, tests, failures + errors, skipped, {file: [tests, seconds]})]."""
    out = []
    for path in paths:
        root = ET.parse(path).getroot()
        suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
        files = collections.defaultdict(lambda: [0, 0.0])
        wall = tests = bad = skipped = 0
        for s in suites:
            wall += float(s.get("time", 0))
            tests += int(s.get("tests", 0))
            bad += int(s.get("failures", 0)) + int(s.get("errors", 0))
            skipped += int(s.get("skipped", 0))
            for case in s.iter("testcase"):
                f = files[case.get("classname", "?").replace(".", "/") + ".py"]
                f[0] += 1
                f[1] += float(case.get("time", 0))
        out.append((os.path.splitext(os.path.basename(path))[0], wall, tests, bad, skipped, files))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--top", type=int, default=15, help="files listed (default 15)")
    ap.add_argument("xml", nargs="*", help="JUnit XML files (default: %s/*.xml)" % RUN)
    opts = ap.parse_args(argv)
    paths = opts.xml or [os.path.join(RUN, n) for n in ("parallel.xml", "serial.xml")
                         if os.path.exists(os.path.join(RUN, n))]
    if not paths:
        sys.exit("suite_times.py: no JUnit XML in %s: run bash testprogs/run-tests.sh first" % RUN)
    try:
        runs = phases(paths)
    except (OSError, ET.ParseError) as e:
        sys.exit("suite_times.py: %s" % e)
    print("| phase | wall | tests | failed | skipped |")
    print("| --- | --- | --- | --- | --- |")
    for name, wall, tests, bad, skipped, _ in runs:
        print("| %s | %d min %02d s | %d | %d | %d |" % (name, wall // 60, wall % 60, tests, bad, skipped))
    total = collections.defaultdict(lambda: [0, 0.0])
    for *_, files in runs:
        for f, (n, secs) in files.items():
            total[f][0] += n
            total[f][1] += secs
    print()
    print("| file | tests | seconds of tests |")
    print("| --- | --- | --- |")
    for f, (n, secs) in sorted(total.items(), key=lambda kv: -kv[1][1])[:opts.top]:
        print("| `%s` | %d | %.0f |" % (f, n, secs))
    rest = sorted(total.items(), key=lambda kv: -kv[1][1])[opts.top:]
    if rest:
        n, secs = sum(v[0] for _, v in rest), sum(v[1] for _, v in rest)
        print("| %d other files | %d | %.0f |" % (len(rest), n, secs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
