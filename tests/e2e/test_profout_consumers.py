"""commands/profout.py's formats read by the programs people read them with:
go tool pprof (the pprof profile), a web browser (the SVG flame graph, in
headless Chromium: its screenshot, decoded here, and the document after its
script ran) and speedscope's own schema of its file format (validated with
jsonschema).  Each profile is built here with known counts and every
expected figure is computed from it.  testprogs/install-deps.sh installs
the consumers; a missing one fails the test with what to run."""
import json
import os
import re
import shutil
import struct
import subprocess
import urllib.parse
import xml.etree.ElementTree as ET
import zlib

import pytest

import ljgdb  # noqa: F401
from ljgdb.commands import flamegraph, profout
from ljgdb.commands.profout import Frame, Profile, write
from support.flamesvg import NS, TOL, check_flame_graph, prefix_counts
from support.stop import CACHE

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


# --- the flame graph (read back with tests/support/flamesvg.py) ---------------

def test_flamegraph_svg(tmp_path):
    prof = profile()
    path = str(tmp_path / "out.svg")
    write(prof, path, "flamegraph")
    svg, paths = check_flame_graph(open(path, "rb").read(), profout.folded_counts(prof), prof.name)
    assert svg.tag == NS + "svg"
    assert (svg.get("width"), svg.get("viewBox")) == ("1200", "0 0 1200 %s" % svg.get("height"))
    # One box a distinct path from the root: a name on two paths (worker.lua:3
    # here) has two boxes; a box's count is the samples whose stack passes
    # through it.
    assert sorted(b["count"] for p, b in paths.items() if p[-1:] == ("worker.lua:3",)) == [2, 3]
    assert ("C:main", '[string "<eval>"]:1 a,b') in paths
    assert paths[()]["count"] == prof.total() == 40


def chromium():
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium not found: testprogs/install-deps.sh installs chromium")
    return found


def browse(tmp_path, url, *args):
    """Headless Chromium's standard output for url, a window 1200x800."""
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--force-device-scale-factor=1", "--window-size=1200,800",
            "--user-data-dir=%s" % (tmp_path / "chromium")] + list(args) + [url]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    return p.stdout


def png_rows(path, nrows):
    """The first nrows rows of an 8-bit RGB or RGBA PNG as [[(r, g, b)]],
    decoded here (zlib and the five row filters)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    i, idat = 8, b""
    while i < len(data):
        n, kind = struct.unpack(">I4s", data[i:i + 8])
        body = data[i + 8:i + 8 + n]
        i += 12 + n
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
    assert (width, height) == (1200, 800)
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(nrows):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if kind == 1:
                line[x] = (line[x] + a) & 0xff
            elif kind == 2:
                line[x] = (line[x] + b) & 0xff
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xff
            elif kind == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xff
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return rows


def rgb(fill):
    return tuple(int(v) for v in re.match(r"^rgb\((\d+),(\d+),(\d+)\)$", fill).groups())


def near(p, q, tol=2):
    return all(abs(a - b) <= tol for a, b in zip(p, q))


def test_flamegraph_in_chromium(tmp_path):
    """Chromium draws the boxes where the SVG puts them, in their colours
    (pixels of its screenshot); its script zooms (?z=I) and searches (?s=RE)
    as the document it leaves shows: the zoomed box spans the width, its
    callees scale with it, the boxes outside it hide, the matched share is
    the profile's."""
    prof = profile()
    path = str(tmp_path / "out.svg")
    write(prof, path, "flamegraph")
    folded = profout.folded_counts(prof)
    svg, paths = check_flame_graph(open(path, "rb").read(), folded, prof.name)
    height = int(svg.get("height"))
    url = "file://" + path
    shot = str(tmp_path / "plain.png")
    browse(tmp_path, url, "--screenshot=%s" % shot)
    rows = png_rows(shot, height)
    # A point in a box's top line, clear of its text; the margin left of
    # the boxes is background.
    for p in [("C:main", "C:lua_pcall"), ("C:main", "C:lua_pcall", "app.lua:14", "[builtin#pairs]"),
              ("C:main", "worker.lua:3"), ("C:main", "C:lua_pcall", "app.lua:12")]:
        b = paths[p]
        y = int(b["y"]) + 1
        got = rows[y][int(b["x"] + b["w"] / 2)]
        assert near(got, rgb(b["fill"])), (p, got, b["fill"])
        assert not near(rows[y][flamegraph.XPAD // 2], rgb(b["fill"]), 30), p

    # Zoomed into app.lua:14, searched for the builtins.
    zoomed = ("C:main", "C:lua_pcall", "app.lua:14")
    query = urllib.parse.urlencode({"z": paths[zoomed]["index"], "s": r"^\[builtin#"})
    dom = browse(tmp_path, url + "?" + query, "--dump-dom")
    done = ET.fromstring(dom)
    (frames,) = [g for g in done.iter(NS + "g") if g.get("id") == "frames"]
    after = frames.findall(NS + "g")
    assert len(after) == len(paths)
    want = prefix_counts(folded)
    width = 1200 - 2 * flamegraph.XPAD
    for p, b in paths.items():
        g = after[b["index"]]
        cls = (g.get("class") or "").split()
        r = g.find(NS + "rect")
        if p[:len(zoomed)] == zoomed:
            x0 = b["x"] - paths[zoomed]["x"]
            assert "hide" not in cls and "parent" not in cls, p
            assert abs(float(r.get("width")) / width - want[p] / float(want[zoomed])) <= TOL, p
            assert abs(float(r.get("x")) - (flamegraph.XPAD + x0 * want[()] / want[zoomed])) <= 0.01, p
        elif p == zoomed[:len(p)]:
            assert "parent" in cls and float(r.get("width")) == width, p
        else:
            assert "hide" in cls, p
        hit = p[-1:] == ("[builtin#pairs]",)
        assert r.get("fill") == (flamegraph.SEARCH_FILL if hit else b["fill"]), p
    pairs = zoomed + ("[builtin#pairs]",)
    matched = [t.text for t in done.iter(NS + "text") if t.get("id") == "matched"]
    assert matched == ["Matched: %.2f%%" % (100.0 * want[pairs] / want[()])]
    # A match above a match counts once: app.lua:14 holds [builtin#pairs].
    regex = r"^app\.lua|pairs"
    dom = ET.fromstring(browse(tmp_path, url + "?" + urllib.parse.urlencode({"s": regex}), "--dump-dom"))
    hits = [p for p in paths if p and re.search(regex, p[-1])]
    share = sum(want[p] for p in hits if not any(p[:i] in hits for i in range(len(p))))
    assert share < sum(want[p] for p in hits)
    matched = [t.text for t in dom.iter(NS + "text") if t.get("id") == "matched"]
    assert matched == ["Matched: %.2f%%" % (100.0 * share / want[()])]

    # What a user does, as events: a click on a box's name, the mouse over
    # a box, Ctrl-F answered "worker", the Search button again, Reset Zoom,
    # a click on a box then Escape.  A second script, added to a copy,
    # sends them and leaves what it saw in the title (in a block: the
    # graph's script has its names in the global scope).
    driver = """<script><![CDATA[{
      const log = [], gs = document.querySelectorAll("#frames > g"), $ = (id) => document.getElementById(id);
      const send = (el, ev) => el.dispatchEvent(ev), click = () => new MouseEvent("click", {bubbles: true});
      const width = (i) => +gs[i].querySelector("rect").getAttribute("width");
      send(gs[%(z)d].querySelector("text"), click());
      log.push(width(%(z)d), $("unzoom").classList.contains("hide"));
      send(gs[%(p)d].querySelector("rect"), new MouseEvent("mouseover", {bubbles: true}));
      log.push($("details").textContent);
      window.prompt = () => "worker";
      send(document, new KeyboardEvent("keydown", {key: "f", ctrlKey: true}));
      log.push($("matched").textContent, $("search").textContent);
      send($("search"), click());
      log.push($("matched").textContent, $("search").textContent);
      send($("unzoom"), click());
      log.push(width(%(z)d), $("unzoom").classList.contains("hide"));
      send(gs[%(c)d], click());
      log.push(width(%(c)d));
      send(document, new KeyboardEvent("keydown", {key: "Escape"}));
      log.push(width(%(c)d));
      $("title").textContent = JSON.stringify(log);
    }]]></script></svg>"""
    driver %= {"z": paths[zoomed]["index"], "p": paths[pairs]["index"], "c": paths[zoomed[:2]]["index"]}
    with open(path) as f:
        driven = f.read().replace("</svg>", driver)
    with open(str(tmp_path / "driven.svg"), "w") as f:
        f.write(driven)
    dom = ET.fromstring(browse(tmp_path, "file://%s" % (tmp_path / "driven.svg"), "--dump-dom"))
    (log,) = [t.text for t in dom.iter(NS + "text") if t.get("id") == "title"]
    assert log != prof.name, "the events' script stopped before its end"
    log = json.loads(log)
    worker = sum(n for p, n in want.items() if p[-1:] == ("worker.lua:3",))
    assert log == [width, False,
                   "[builtin#pairs] (25 samples, %.2f%%)" % (100.0 * want[pairs] / want[()]),
                   "Matched: %.2f%%" % (100.0 * worker / want[()]), "Reset Search", "", "Search",
                   paths[zoomed]["w"], True, width, paths[zoomed[:2]]["w"]]

    shot = str(tmp_path / "zoomed.png")
    browse(tmp_path, url + "?" + query, "--screenshot=%s" % shot)
    rows = png_rows(shot, height)
    y = int(paths[zoomed]["y"]) + 1
    for x in (flamegraph.XPAD + 1, 1200 - flamegraph.XPAD - 2):
        assert near(rows[y][x], rgb(paths[zoomed]["fill"])), (x, rows[y][x])
    y = int(paths[pairs]["y"]) + 1
    x = int(flamegraph.XPAD + width * want[pairs] / want[zoomed] / 2)
    assert near(rows[y][x], rgb(flamegraph.SEARCH_FILL)), rows[y][x]


def test_speedscope_against_its_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema: testprogs/install-deps.sh installs it")
    schema_path = os.path.join(CACHE, "npm", "node_modules", "speedscope", "dist",
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
