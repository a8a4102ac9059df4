"""The SVG flame graph of commands/flamegraph.py (profout's --format
flamegraph, python3 -m ljgdb.commands.flamegraph) read back with
xml.etree: its boxes, each box's path of names from the root, the samples
through each path of folded counts, and the check of a graph against
those counts that the unit tests (tests/unit/test_flamegraph.py) and the
end-to-end ones (test_profout_consumers.py, test_lprofile.py,
test_record.py) share."""
import re
import xml.etree.ElementTree as ET

import ljgdb  # noqa: F401
from ljgdb.commands import flamegraph

NS = "{http://www.w3.org/2000/svg}"
# A box's <title>: "NAME (COUNT UNIT, PCT%)", the count with thousands' commas.
TITLE = re.compile(r"^(.*) \(([\d,]+) (\S+), (\d+\.\d\d)%\)$", re.S)
TOL = 1e-6          # on a box's width over the root's (the coordinates have 3 decimals)
POS = 0.0011        # on a coordinate (written to 3 decimals)


def read(data):
    """(the <svg> element, [box]) of a flame graph, the boxes in the
    document's order, each a dict of its <g>: name, count, unit, pct (from
    its <title>), x, w, y, h, fill (its <rect>), text (its <text>), s, n
    (data-s, data-n), index (among the frames' <g>s) and g (the <g>
    itself)."""
    svg = ET.fromstring(data)
    (frames,) = [g for g in svg.iter(NS + "g") if g.get("id") == "frames"]
    boxes = []
    for i, g in enumerate(frames.findall(NS + "g")):
        m = TITLE.match(g.find(NS + "title").text)
        assert m, g.find(NS + "title").text
        rect = g.find(NS + "rect")
        boxes.append({"name": m.group(1), "count": int(m.group(2).replace(",", "")),
                      "unit": m.group(3), "pct": m.group(4),
                      "x": float(rect.get("x")), "w": float(rect.get("width")),
                      "y": float(rect.get("y")), "h": float(rect.get("height")),
                      "fill": rect.get("fill"), "text": g.find(NS + "text").text or "",
                      "s": int(g.get("data-s")), "n": int(g.get("data-n")),
                      "index": i, "g": g})
    return svg, boxes


def by_path(boxes):
    """{path of names from the root: box} of read's boxes, () the root (the
    one box of the bottom row, "all"): a box's caller is the one box one
    row (FRAME_H) below whose span holds it; one box a path."""
    bottom = max(b["y"] for b in boxes)
    paths = {}
    for b in sorted(boxes, key=lambda b: -b["y"]):
        if b["y"] == bottom:
            assert b["name"] == "all" and () not in paths, b
            paths[()] = b
            continue
        callers = [(p, c) for p, c in paths.items() if c["y"] == b["y"] + flamegraph.FRAME_H
                   and c["x"] - POS <= b["x"] and b["x"] + b["w"] <= c["x"] + c["w"] + POS]
        assert len(callers) == 1, (b, callers)
        path = callers[0][0] + (b["name"],)
        assert path not in paths, path
        paths[path] = b
    assert len(paths) == len(boxes)
    return paths


def flame_boxes(data, unit="samples"):
    """(the <svg> element, {path: box}) of a flame graph (read, by_path),
    every box counting in unit (None: any)."""
    svg, boxes = read(data)
    if unit is not None:
        assert [b for b in boxes if b["unit"] != unit] == [], unit
    return svg, by_path(boxes)


def prefix_counts(folded):
    """{path of names from the root: samples through it} of folded counts
    ({'outer;...;inner': count}); () is the root."""
    out = {}
    for text, count in folded.items():
        names = tuple(text.split(";")) if text else ()
        for i in range(len(names) + 1):
            out[names[:i]] = out.get(names[:i], 0) + count
    return out


def check_flame_graph(data, folded, title=None, unit="samples"):
    """Asserts that the flame graph has one box a path of the folded
    stacks (but those too narrow to draw), with that path's count (in
    unit) and share, as wide as its share of the root (and the title);
    returns (svg, boxes by path)."""
    svg, paths = flame_boxes(data, unit)
    want = prefix_counts(folded)
    total = want[()]
    # (a box narrower than MIN_WIDTH is left out, with those above it)
    k = (flamegraph.WIDTH - 2 * flamegraph.XPAD) / float(total)
    assert sorted(paths) == sorted(p for p, n in want.items() if n * k >= flamegraph.MIN_WIDTH)
    root = paths[()]
    for path, b in paths.items():
        assert b["count"] == want[path], path
        assert b["pct"] == "%.2f" % (100.0 * want[path] / total), path
        assert abs(b["w"] / root["w"] - want[path] / float(total)) <= TOL, path
    if title is not None:
        assert [t.text for t in svg.iter(NS + "text") if t.get("id") == "title"] == [title]
    return svg, paths
