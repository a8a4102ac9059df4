"""flamegraph: sampled stacks drawn as an SVG flame graph, in pure Python.

The classic layout of a flame graph: the root ("all", every sample) is the
bottom row and spans the width; each frame is a box above the frame that
called it, as wide as the samples whose stack passes through it, its
callees sorted by name from left to right; identical stacks are merged,
and a box narrower than MIN_WIDTH is left out with everything above it.
Each box is a <g> holding a <title> ("NAME (N samples, P%)", shown on
hover), a <rect> and its name cut to fit (".." where cut); the <g> also
carries data-s (the samples left of the box, from the root's left edge)
and data-n (its samples).  The colours are warm and come from a hash of
the name, so the same stacks give the same bytes.

A small script zooms into a box on a click (Reset Zoom, or Escape, goes
back) and searches (the Search button or Ctrl-F asks for a regular
expression; the matching boxes turn purple, and the share of samples under
them shows at the bottom right).  URL parameters do the same on load:
?s=REGEX searches, ?z=I zooms into the I-th box of the file (0: the root).

    data = svg([(("main", "app.lua:12"), 7), (("main",), 2)], title="ljgdb profile")

Geometry, in SVG user units (pixels at 100%): the picture is WIDTH wide;
the root spans WIDTH - 2 * XPAD from x = XPAD; a box starting `s` samples
from the left and `n` samples wide has x = XPAD + s * k and width n * k,
k = (WIDTH - 2 * XPAD) / total, each written to 3 decimals.  Depth d has
its rect at y = height - BOTTOM - (d + 1) * FRAME_H, FRAME_H - 1 high.

    python3 -m ljgdb.commands.flamegraph [--title T] [--countname N] [FOLDED] > out.svg

draws a file of folded stacks ("outer;...;inner COUNT" a line, standard
input without FOLDED).
"""
import re
import sys
import zlib
from collections import namedtuple

WIDTH = 1200
XPAD = 10
FRAME_H = 16
FONT_SIZE = 12
FONT_W = 0.6          # a character's advance over the font size (monospace)
TOP = FONT_SIZE * 3   # room for the title and the buttons
BOTTOM = FONT_SIZE * 2 + 10  # room for the line that names the box under the mouse
MIN_WIDTH = 0.1       # boxes narrower than this (user units) are left out
SEARCH_FILL = "rgb(230,0,230)"

Box = namedtuple("Box", "name depth start count")
Box.__doc__ = """A box of the graph: its name, its row (0: the root), the
samples left of it and its samples."""


class _Node(object):
    __slots__ = ("name", "count", "children")

    def __init__(self, name):
        self.name = name
        self.count = 0
        self.children = {}


def layout(stacks, min_width=MIN_WIDTH):
    """(total, [Box]) of [(names outermost first, count)]: the root first,
    then each box before the boxes above it, callees in name order; boxes
    narrower than min_width user units left out."""
    root = _Node("all")
    for names, count in stacks:
        root.count += count
        node = root
        for name in names:
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = _Node(name)
            child.count += count
            node = child
    if root.count <= 0:
        raise ValueError("no stacks to draw: the profile has no samples")
    k = (WIDTH - 2.0 * XPAD) / root.count
    out = []
    todo = [(root, 0, 0)]
    while todo:
        node, depth, start = todo.pop()
        if node.count * k < min_width:
            continue
        out.append(Box(node.name, depth, start, node.count))
        above = []
        for name in sorted(node.children):
            child = node.children[name]
            above.append((child, depth + 1, start))
            start += child.count
        todo.extend(reversed(above))
    return root.count, out


def colour(name):
    """A warm colour ('rgb(r,g,b)': red high, some green, little blue) from
    a hash of the name."""
    h = zlib.crc32(name.encode("utf-8", "replace"))
    a, b, c = h & 0xff, (h >> 8) & 0xff, (h >> 16) & 0xff
    return "rgb(%d,%d,%d)" % (205 + 50 * a // 255, 230 * b // 255, 55 * c // 255)


def fit(name, width):
    """The name as a box `width` wide shows it: whole, or cut with '..';
    nothing where fewer than 3 characters fit."""
    n = int((width - 6) // (FONT_SIZE * FONT_W))
    if n < 3:
        return ""
    return name if len(name) <= n else name[:n - 2] + ".."


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text):
    """Text escaped for XML (also inside an attribute's quotes); characters
    XML cannot hold become U+FFFD."""
    text = _NOT_XML.sub("\ufffd", text)
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def num(v):
    """A coordinate: 3 decimals, trailing zeros dropped."""
    return ("%.3f" % v).rstrip("0").rstrip(".")


STYLE = """
text { font-family: monospace; font-size: %dpx; fill: #000; }
#title { text-anchor: middle; font-size: 17px; }
#search, #matched { text-anchor: end; }
#search, #unzoom, #frames > g { cursor: pointer; }
#frames > g:hover rect { stroke: #000; stroke-width: 0.5; }
.hide { display: none; }
.parent { opacity: 0.5; }
""" % FONT_SIZE

SCRIPT = """
const $ = (id) => document.getElementById(id);
const boxes = Array.from(document.querySelectorAll("#frames > g"), (g) => {
  const rect = g.querySelector("rect"), title = g.querySelector("title").textContent;
  return {g: g, rect: rect, text: g.querySelector("text"), fill: rect.getAttribute("fill"),
          name: title.slice(0, title.lastIndexOf(" (")), y: +rect.getAttribute("y"),
          s: +g.getAttribute("data-s"), n: +g.getAttribute("data-n")};
});
const root = boxes[0];
let searching = false;

function fit(name, w) {
  const n = Math.floor((w - 6) / (FONT * FONT_W));
  return n < 3 ? "" : name.length <= n ? name : name.slice(0, n - 2) + "..";
}

// Box b spans the width and its callees scale with it; its callers span
// the width, half seen; the other boxes hide.
function zoom(b) {
  const k = (WIDTH - 2 * XPAD) / b.n;
  for (const c of boxes) {
    const above = c.y <= b.y;          // on b's row or higher
    const shown = above ? c.s >= b.s && c.s + c.n <= b.s + b.n : c.s <= b.s && c.s + c.n >= b.s + b.n;
    c.g.classList.toggle("hide", !shown);
    c.g.classList.toggle("parent", shown && !above);
    if (shown) {
      const x = above ? XPAD + (c.s - b.s) * k : XPAD, w = above ? c.n * k : WIDTH - 2 * XPAD;
      c.rect.setAttribute("x", x);
      c.rect.setAttribute("width", w);
      c.text.setAttribute("x", x + 3);
      c.text.textContent = fit(c.name, w);
    }
  }
  $("unzoom").classList.toggle("hide", b === root);
}

// The boxes whose name matches re purple, and the share of the samples
// under them (a match above a match counts once); re null: no search.
function search(re) {
  const spans = [];
  for (const c of boxes) {
    const hit = re !== null && re.test(c.name);
    c.rect.setAttribute("fill", hit ? SEARCH_FILL : c.fill);
    if (hit) spans.push([c.s, c.s + c.n]);
  }
  spans.sort((p, q) => p[0] - q[0]);
  let n = 0, end = 0;
  for (const [s, e] of spans) {
    if (e > end) {
      n += e - Math.max(s, end);
      end = e;
    }
  }
  searching = re !== null;
  $("search").textContent = searching ? "Reset Search" : "Search";
  $("matched").textContent = searching ? "Matched: " + (100 * n / root.n).toFixed(2) + "%" : "";
}

function searchFor(term) {
  try {
    search(new RegExp(term));
  } catch (e) {
    $("matched").textContent = "not a regular expression: " + term;
  }
}

function ask() {
  const term = prompt("Search for (a regular expression):", "");
  if (term) searchFor(term);
}

const boxOf = (e) => boxes.find((c) => c.g === e.target.closest("#frames > g"));
$("frames").addEventListener("click", (e) => { const b = boxOf(e); if (b) zoom(b); });
$("frames").addEventListener("mouseover", (e) => {
  const b = boxOf(e);
  $("details").textContent = b ? b.g.querySelector("title").textContent : " ";
});
$("unzoom").addEventListener("click", () => zoom(root));
$("search").addEventListener("click", () => searching ? search(null) : ask());
document.addEventListener("keydown", (e) => {
  if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === "f") {
    e.preventDefault();
    ask();
  } else if (e.key === "Escape") {
    search(null);
    zoom(root);
  }
});
const query = new URLSearchParams(location.search);
if (query.get("z") && boxes[+query.get("z")]) zoom(boxes[+query.get("z")]);
if (query.get("s")) searchFor(query.get("s"));
"""


def svg(stacks, title="ljgdb profile", countname="samples", min_width=MIN_WIDTH):
    """The SVG flame graph (UTF-8 bytes) of [(names outermost first,
    count)]; ValueError when there are no samples."""
    total, boxes = layout(stacks, min_width)
    depth = max(b.depth for b in boxes) + 1
    height = TOP + depth * FRAME_H + BOTTOM
    k = (WIDTH - 2.0 * XPAD) / total
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n',
           '<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" '
           'viewBox="0 0 %d %d">\n' % (WIDTH, height, WIDTH, height),
           "<!-- A flame graph drawn by ljgdb (commands/flamegraph.py): click a box to zoom, "
           "Ctrl-F to search. -->\n",
           "<style>%s</style>\n" % STYLE,
           '<defs><linearGradient id="background" x1="0" y1="0" x2="0" y2="1">'
           '<stop offset="5%" stop-color="#eeeeee"/><stop offset="95%" stop-color="#eeeeb0"/>'
           '</linearGradient></defs>\n',
           '<rect x="0" y="0" width="%d" height="%d" fill="url(#background)"/>\n' % (WIDTH, height),
           '<text id="title" x="%d" y="%d">%s</text>\n' % (WIDTH // 2, FONT_SIZE * 2, xml_text(title)),
           '<text id="unzoom" class="hide" x="%d" y="%d">Reset Zoom</text>\n' % (XPAD, FONT_SIZE * 2),
           '<text id="search" x="%d" y="%d">Search</text>\n' % (WIDTH - XPAD, FONT_SIZE * 2),
           '<text id="details" x="%d" y="%d"> </text>\n' % (XPAD, height - BOTTOM // 2),
           '<text id="matched" x="%d" y="%d"></text>\n' % (WIDTH - XPAD, height - BOTTOM // 2),
           '<g id="frames">\n']
    for b in boxes:
        x, w = XPAD + b.start * k, b.count * k
        y = height - BOTTOM - (b.depth + 1) * FRAME_H
        out.append('<g data-s="%d" data-n="%d"><title>%s</title>'
                   '<rect x="%s" y="%d" width="%s" height="%d" fill="%s"/>'
                   '<text x="%s" y="%d">%s</text></g>\n'
                   % (b.start, b.count,
                      xml_text("%s (%s %s, %.2f%%)" % (b.name, "{:,}".format(b.count), countname,
                                                       100.0 * b.count / total)),
                      num(x), y, num(w), FRAME_H - 1, colour(b.name),
                      num(x + 3), y + FRAME_H - 4, xml_text(fit(b.name, w))))
    out.append('</g>\n<script><![CDATA[\n"use strict";\nconst WIDTH = %d, XPAD = %d, FONT = %d, '
               'FONT_W = %s, SEARCH_FILL = "%s";%s]]></script>\n</svg>\n'
               % (WIDTH, XPAD, FONT_SIZE, FONT_W, SEARCH_FILL, SCRIPT))
    return "".join(out).encode("utf-8")


_COUNT = re.compile(r"[0-9]+\Z")


def read_folded(lines):
    """[(names, count)] of folded lines ('outer;...;inner COUNT'; ' COUNT'
    for a stack without frames); ValueError names a line that is not one."""
    out = []
    for i, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        stack, _, count = line.rpartition(" ")
        if not _COUNT.match(count):
            raise ValueError("line %d is not 'outer;...;inner COUNT': %r" % (i, line[:80]))
        out.append((tuple(stack.split(";")) if stack else (), int(count)))
    return out


def main(argv=None):
    """python3 -m ljgdb.commands.flamegraph: a folded file's flame graph on
    standard output."""
    import argparse
    ap = argparse.ArgumentParser(prog="python3 -m ljgdb.commands.flamegraph",
                                 description="Draw folded stacks as an SVG flame graph.")
    ap.add_argument("--title", default="ljgdb profile")
    ap.add_argument("--countname", default="samples")
    ap.add_argument("folded", nargs="?", help="the folded file (default: standard input)")
    args = ap.parse_args(argv)
    try:
        if args.folded:
            with open(args.folded, encoding="utf-8", errors="replace") as f:
                stacks = read_folded(f)
        else:
            stacks = read_folded(sys.stdin)
        data = svg(stacks, args.title, args.countname)
    except (OSError, ValueError) as e:
        sys.stderr.write("ljgdb flamegraph: %s\n" % e)
        return 1
    sys.stdout.buffer.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
