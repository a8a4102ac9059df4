"""commands/profout.py's formats read by the programs people read them with:
go tool pprof (the pprof profile), inferno-flamegraph (the flame graph, from
the folded text) and speedscope's own schema of its file format (validated
with jsonschema).  Each profile is built here with known counts and every
expected figure is computed from it.  testprogs/install-deps.sh installs
the consumers; a missing one fails the test with what to run."""
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

import ljgdb  # noqa: F401
from ljgdb.commands import profout
from ljgdb.commands.profout import Frame, Profile, write

MAIN = Frame("C:main", "host.c", 40)
PCALL = Frame("C:lua_pcall")
F12 = Frame("app.lua:12", "app.lua", 12, "function app.lua:10")
F14 = Frame("app.lua:14", "app.lua", 14, "function app.lua:10")
PAIRS = Frame("[builtin#pairs]")
WORKER = Frame("worker.lua:3", "worker.lua", 3)
EVAL = Frame('[string "<eval>"]:1 a;b')


def profile():
    """Innermost functions in shares 1:2:5 (worker.lua:3 5, function
    app.lua:10 10 at two lines, [builtin#pairs] 25)."""
    return Profile([((MAIN, PCALL, F12), 4),
                    ((MAIN, PCALL, F14, PAIRS), 25),
                    ((MAIN, PCALL, F14), 6),
                    ((MAIN, WORKER), 3),
                    ((MAIN, EVAL, WORKER), 2)],
                   rate_hz=250.0, duration_s=0.16, name="ljgdb record pid 123")


def function(f):
    return f.function or f.name


def expected_top(prof, key=function):
    """{row: (flat, cum)} as pprof -top computes it from the profile."""
    flat, cum = {}, {}
    for stack, count in prof.merged():
        flat[key(stack[-1])] = flat.get(key(stack[-1]), 0) + count
        for k in set(key(f) for f in stack):
            cum[k] = cum.get(k, 0) + count
    return {k: (flat.get(k, 0), cum[k]) for k in cum}


def go():
    found = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK)
                                   else None)
    if found is None:
        pytest.fail("go not found (PATH, /usr/local/go/bin): testprogs/install-deps.sh installs it")
    return found


def pprof(path, *args):
    p = subprocess.run([go(), "tool", "pprof", "-nodecount=1000", "-nodefraction=0"] + list(args)
                       + [path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode(), p.stderr.decode()


def top_rows(text):
    """{name: (flat, cum)} of pprof -top's table, as printed."""
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.split()[:2] == ["flat", "flat%"])
    rows = {}
    for ln in lines[head + 1:]:
        flat, _, _, cum, _, name = ln.split(None, 5)
        assert name not in rows, text
        rows[name] = (flat, cum)
    return rows


@pytest.mark.slow          # (four runs of go tool pprof: some 1.5 s)
def test_pprof_top_counts(tmp_path):
    prof = profile()
    path = str(tmp_path / "out.pb.gz")
    write(prof, path, "pprof")
    want = expected_top(prof)
    assert {k: v[0] for k, v in want.items() if v[0]} == {
        "worker.lua:3": 5, "function app.lua:10": 10, "[builtin#pairs]": 25}   # 1:2:5

    out, err = pprof(path, "-top", "-sample_index=samples")
    assert err == "", err                  # (no "Main binary filename not available")
    assert "Total samples = 40" in out, out
    assert top_rows(out) == {k: (str(f), str(c)) for k, (f, c) in want.items()}

    # The time values: count * period, the period 1e9 / rate ns.
    period = 4000000
    out, _ = pprof(path, "-top", "-unit=ns")
    ns = lambda n: "%dns" % (n * period) if n else "0"  # noqa: E731
    assert "Type: cpu" in out and "Duration: 160ms" in out, out
    assert top_rows(out) == {k: (ns(f), ns(c)) for k, (f, c) in want.items()}

    # By line, the two lines of function app.lua:10 apart.
    out, _ = pprof(path, "-top", "-lines", "-sample_index=samples")
    rows = top_rows(out)
    assert rows["function app.lua:10 app.lua:12"] == ("4", "4")
    assert rows["function app.lua:10 app.lua:14"] == ("6", "31")
    assert rows["worker.lua:3 worker.lua:3"] == ("5", "5")

    out, _ = pprof(path, "-comments")
    assert out.strip() == prof.name


def test_inferno_flamegraph_svg(tmp_path):
    if profout.find_inferno() is None:
        pytest.fail("inferno-flamegraph not found: testprogs/install-deps.sh installs it")
    prof = profile()
    path = str(tmp_path / "out.svg")
    write(prof, path, "flamegraph")
    root = ET.parse(path).getroot()
    svg = "{http://www.w3.org/2000/svg}"
    assert root.tag == svg + "svg"
    assert [t.text for t in root.iter(svg + "text") if t.get("id") == "title"] == [prof.name]
    # One box a distinct path from the root: a name on two paths (worker.lua:3
    # here) has two boxes; a box's count is the samples whose stack passes
    # through it.
    paths = {}
    for stack, count in prof.merged():
        for i in range(len(stack)):
            key = tuple(profout.folded_name(f.name) for f in stack[:i + 1])
            paths[key] = paths.get(key, 0) + count
    total = prof.total()
    want = {}
    for key, n in paths.items():
        want.setdefault(key[-1], []).append((n, "%.2f" % (100.0 * n / total)))
    got = {}
    for t in root.iter(svg + "title"):
        m = re.match(r"^(.*) \(([\d,]+) samples, ([\d.]+)%\)$", t.text)
        assert m, t.text
        got.setdefault(m.group(1), []).append((int(m.group(2).replace(",", "")), m.group(3)))
    assert got.pop("all") == [(total, "100")]
    assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in want.items()}
    assert '[string "<eval>"]:1 a,b' in got


def test_speedscope_against_its_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema: testprogs/install-deps.sh installs it")
    schema_path = os.path.join(profout.cache_dir(), "npm", "node_modules", "speedscope", "dist",
                               "release", "file-format-schema.json")
    if not os.path.exists(schema_path):
        pytest.fail("%s is missing: testprogs/install-deps.sh installs the npm package speedscope"
                    % schema_path)
    schema = json.load(open(schema_path))
    prof = profile()
    path = str(tmp_path / "out.speedscope.json")
    write(prof, path, "speedscope")
    doc = json.load(open(path))
    jsonschema.validators.validator_for(schema)(schema).validate(doc)

    frames = doc["shared"]["frames"]
    (sp,) = doc["profiles"]
    got = {}
    for sample, weight in zip(sp["samples"], sp["weights"]):
        stack = tuple(Frame(frames[i]["name"], frames[i].get("file"), frames[i].get("line"))
                      for i in sample)
        got[stack] = got.get(stack, 0) + weight
    assert got == {tuple(f._replace(function=None) for f in stack): n for stack, n in prof.merged()}
    assert sum(sp["weights"]) == sp["endValue"] - sp["startValue"] == prof.total() == 40

    # The schema is strict where it matters: a frame's unknown file must be
    # left out, not null (what profout does).
    frames[0]["file"] = None
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validators.validator_for(schema)(schema).validate(doc)
