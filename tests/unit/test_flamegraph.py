"""commands/flamegraph.py, the SVG flame graph of profout's --format
flamegraph, read back with xml.etree (tests/support/flamesvg.py): every box
against the profile's own folded counts (its width over the root's is its
count over the total, to 1e-6: the coordinates are written to 3 decimals of
a 1180-unit width), the boxes' places (a callee one row above its caller,
within it, callees in name order), names escaped, narrow boxes left out,
the same bytes for the same profile.  tests/e2e/test_profout_consumers.py
opens it in Chromium."""
import os
import re
import subprocess
import sys

import pytest

import ljgdb  # noqa: F401
from ljgdb.commands import flamegraph, profout
from ljgdb.commands.profout import Frame, Profile, write
from support.flamesvg import NS, POS, TOL, by_path, check_flame_graph, prefix_counts, read

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MAIN = Frame("C:main", "host.c", 40)
PCALL = Frame("C:lua_pcall")
F12 = Frame("app.lua:12", "app.lua", 12, "function app.lua:10")
F14 = Frame("app.lua:14", "app.lua", 14, "function app.lua:10")
PAIRS = Frame("[builtin#pairs]")
ANON = Frame("C:<anon>")
EVAL = Frame('[string "<eval>"]:1 a;b & c')


def sample_profile():
    return Profile([((MAIN, PCALL, F12), 4),
                    ((MAIN, PCALL, F14, PAIRS), 25),
                    ((MAIN, PCALL, F14), 6),
                    ((MAIN, PCALL, F12), 3),              # the first stack again: 7 in all
                    ((MAIN, ANON, F12), 3),                # app.lua:12 on a second path
                    ((MAIN, EVAL), 2),
                    ((ANON,), 1)],
                   rate_hz=100.0, duration_s=0.5, name="ljgdb record pid 123")


def test_every_path_is_one_box_of_its_count():
    p = sample_profile()
    folded = profout.folded_counts(p)
    # each path's box: its count (in samples), share and width
    svg, got = check_flame_graph(profout.flamegraph_svg(p), folded, p.name)
    want = prefix_counts(folded)
    total = want[()]
    assert total == p.total() == 44
    assert sorted(got) == sorted(want)          # none too narrow here
    root = got[()]
    assert (root["x"], root["w"]) == (flamegraph.XPAD, flamegraph.WIDTH - 2 * flamegraph.XPAD)
    for path, b in got.items():
        assert b["n"] == b["count"], path
        assert abs(b["x"] - (root["x"] + root["w"] * b["s"] / total)) <= POS, path
        assert b["h"] == flamegraph.FRAME_H - 1
    # app.lua:12 on two paths: two boxes, 7 and 3.
    assert sorted(b["count"] for b in got.values() if b["name"] == "app.lua:12") == [3, 7]


def test_callees_in_name_order_side_by_side():
    svg, boxes = read(profout.flamegraph_svg(sample_profile()))
    got = by_path(boxes)
    for path, b in got.items():
        callees = sorted((c for p, c in got.items() if p[:-1] == path and len(p) == len(path) + 1),
                         key=lambda c: c["x"])
        assert [c["name"] for c in callees] == sorted(c["name"] for c in callees)
        x = b["x"]                              # packed from the caller's left edge
        for c in callees:
            assert abs(c["x"] - x) <= POS, (path, c["name"])
            assert c["y"] == b["y"] - flamegraph.FRAME_H
            x += c["w"]
        assert x <= b["x"] + b["w"] + POS
    assert [c["name"] for c in sorted((c for p, c in got.items() if len(p) == 1), key=lambda c: c["x"])] \
        == ["C:<anon>", "C:main"]


def test_the_graph_and_its_texts():
    p = sample_profile()
    p.unit = "cycles"
    data = profout.flamegraph_svg(p)
    svg, boxes = read(data)
    assert svg.tag == NS + "svg"
    w, h = int(svg.get("width")), int(svg.get("height"))
    assert svg.get("viewBox") == "0 0 %d %d" % (w, h) and w == flamegraph.WIDTH
    rows = max(len(path) for path in by_path(boxes)) + 1
    assert h == flamegraph.TOP + rows * flamegraph.FRAME_H + flamegraph.BOTTOM
    assert [t.text for t in svg.iter(NS + "text") if t.get("id") == "title"] == [p.name]
    assert {b["unit"] for b in boxes} == {"cycles"}
    assert [b["pct"] for b in boxes if b["name"] == "all"] == ["100.00"]
    # the script that zooms and searches, and the buttons it uses
    ids = {e.get("id") for e in svg.iter()}
    assert {"frames", "unzoom", "search", "matched", "details"} <= ids
    assert "function zoom(" in svg.find(NS + "script").text
    # Each box shows its name, or as much of it as fits followed by '..'.
    charw = flamegraph.FONT_SIZE * flamegraph.FONT_W
    for b in boxes:
        t = b["text"]
        assert t == b["name"] or (t.endswith("..") and b["name"].startswith(t[:-2])) or t == "", b
        assert len(t) * charw <= b["w"] - 6, b
    assert any(b["text"] == "[builtin#pairs]" for b in boxes)
    assert any(b["text"].endswith("..") for b in boxes)


def test_names_are_escaped():
    p = sample_profile()
    p.name = 'title <&> "q"'
    p.add((MAIN, "x]]>y", "bell\x07 and \udcff"), 5)
    data = profout.flamegraph_svg(p)
    svg, boxes = read(data)                 # (it parses)
    names = {b["name"] for b in boxes}
    assert {"C:<anon>", '[string "<eval>"]:1 a,b & c', "x]]>y"} <= names
    assert "bell\ufffd and \ufffd" in names     # characters XML cannot hold
    assert [t.text for t in svg.iter(NS + "text") if t.get("id") == "title"] == [p.name]
    assert b"C:&lt;anon&gt;" in data and b"C:<anon>" not in data


def test_a_stack_without_frames_counts_in_the_root():
    svg, boxes = read(profout.flamegraph_svg(Profile([((), 2), (("a",), 1)])))
    got = by_path(boxes)
    assert sorted(got) == [(), ("a",)]
    assert (got[()]["count"], got[("a",)]["count"]) == (3, 1)
    assert abs(got[("a",)]["w"] / got[()]["w"] - 1 / 3.0) <= TOL


def test_narrow_boxes_are_left_out():
    # 1180 units for 20000 samples: one sample is 0.059 wide, under MIN_WIDTH
    # (0.1), two are 0.118.
    p = Profile([(("main", "big"), 19990), (("main", "one", "above"), 1),
                 (("main", "two", "above"), 2), (("main", "seven"), 7)])
    svg, boxes = read(profout.flamegraph_svg(p))
    want = prefix_counts(profout.folded_counts(p))
    k = (flamegraph.WIDTH - 2 * flamegraph.XPAD) / float(want[()])
    kept = {path for path, n in want.items() if n * k >= flamegraph.MIN_WIDTH}
    assert kept != set(want)
    got = by_path(boxes)
    assert sorted(got) == sorted(kept)
    assert ("main", "one") not in got and ("main", "one", "above") not in got
    assert got[("main", "two", "above")]["count"] == 2
    assert got[()]["count"] == 20000            # the root counts what it does not show
    assert all(b["w"] >= flamegraph.MIN_WIDTH for b in boxes)


def test_same_profile_same_bytes():
    p = sample_profile()
    data = profout.flamegraph_svg(p)
    assert profout.flamegraph_svg(sample_profile()) == data
    q = Profile(list(reversed(p.stacks)), name=p.name)      # the stacks in another order
    assert profout.flamegraph_svg(q) == data
    # Warm colours, one a name (app.lua:12 on both its paths).
    _, boxes = read(data)
    fills = {}
    for b in boxes:
        r, g, bl = map(int, re.match(r"^rgb\((\d+),(\d+),(\d+)\)$", b["fill"]).groups())
        assert r >= 205 and g <= 230 and bl <= 55, b
        fills.setdefault(b["name"], set()).add(b["fill"])
    assert all(len(f) == 1 for f in fills.values())
    assert len({f for s in fills.values() for f in s}) > 1


def test_a_folded_file_draws_the_same(tmp_path):
    p = sample_profile()
    path = str(tmp_path / "p.folded")
    write(p, path, "folded")
    with open(path) as f:
        assert flamegraph.svg(flamegraph.read_folded(f), title=p.name) == profout.flamegraph_svg(p)
    cmd = [sys.executable, "-m", "ljgdb.commands.flamegraph", "--title", p.name, path]
    out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert (out.returncode, out.stderr) == (0, b"")
    assert out.stdout == profout.flamegraph_svg(p)
    (tmp_path / "bad.folded").write_text("a;b 3\na;b three\n")
    out = subprocess.run(cmd[:-1] + [str(tmp_path / "bad.folded")], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert (out.returncode, out.stdout) == (1, b"")
    assert out.stderr == b"ljgdb flamegraph: line 2 is not 'outer;...;inner COUNT': 'a;b three'\n"


def test_nothing_to_draw(tmp_path):
    """(profout's --format flamegraph of no samples: test_profout.py's
    test_flamegraph_of_nothing.)"""
    for stacks in ([], [(("a",), 0)]):
        with pytest.raises(ValueError) as e:
            flamegraph.svg(stacks)
        assert str(e.value) == "no stacks to draw: the profile has no samples"
    (tmp_path / "empty.folded").write_text("")
    out = subprocess.run([sys.executable, "-m", "ljgdb.commands.flamegraph", str(tmp_path / "empty.folded")],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert (out.returncode, out.stdout) == (1, b"")
    assert out.stderr == b"ljgdb flamegraph: no stacks to draw: the profile has no samples\n"
