"""profout: a sampled profile written in the formats other tools read.

One module for every writer of a sampling profile (lprofile's --folded,
python3 -m ljgdb record's --format): pure Python, the standard library only,
no debugger.  docs/formats.md says what each format is and which program
checks it in the tests.

    prof = Profile([((Frame("C:main"), Frame("app.lua:12", "app.lua", 12)), 7)],
                   rate_hz=99.0, duration_s=2.0, name="ljgdb record pid 123")
    write(prof, "out.pb.gz", "pprof")

A Frame is what one frame of a stack shows: `name`, the text a flame graph
and a folded line show ("busy (app.lua:12)" for a Lua frame its caller
called `busy`, "app.lua:12" without a name, "[builtin#pairs]",
"C:lua_pcall"); `file` and `line` (None when unknown), which speedscope and
pprof show beside it; `function` (None when unknown), the function the
frame runs ("busy", or "function app.lua:10"), and `start`, the line it is
defined on: pprof counts by function, so two frames of one function at two
lines are one row of `pprof -top` and two of `pprof -top -lines`.  Without
`function` a frame's name is its function.  The Profile carries no table of
functions of its own: each frame names its function.
"""
import gzip
import io
import json
import os
import tempfile
from collections import namedtuple

from . import flamegraph

FORMATS = ("flamegraph", "folded", "speedscope", "pprof")

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"

Frame = namedtuple("Frame", "name file line function start")
Frame.__new__.__defaults__ = (None, None, None, None)
Frame.__doc__ = """One frame: Frame(name, file=None, line=None, function=None,
start=None), start the line the function is defined on (pprof's)."""


class OutputError(Exception):
    """A profile could not be written: one line saying why."""


class Profile(object):
    """A sampled profile: `stacks`, a list of (frames, count) with frames a
    tuple of Frame, outermost first (a plain str stands for Frame(str)),
    and count the number of samples that had that stack; the same stack
    may come more than once (its counts add up).  A stack may have no
    frames (a thread in the VM between Lua frames, as lprofile keeps it):
    it counts in every format (in a flame graph, in the root box only).
    `rate_hz`: samples a second asked (0 when unknown: pprof then has no
    time values); `duration_s`: how long it sampled; `unit`: what a count
    counts; `name`: the title of the profile ("ljgdb record pid 123")."""

    def __init__(self, stacks=(), rate_hz=0.0, duration_s=0.0, unit="samples",
                 name="ljgdb profile"):
        self.stacks = list(stacks)
        self.rate_hz = float(rate_hz or 0.0)
        self.duration_s = float(duration_s or 0.0)
        self.unit = unit
        self.name = name

    def add(self, frames, count=1):
        self.stacks.append((tuple(frames), count))

    def merged(self):
        """[(tuple of Frame, count)]: each distinct stack once, counts
        summed, in the order each first came; stacks of count 0 left out."""
        out = {}
        for frames, count in self.stacks:
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise OutputError("a stack's count must be a whole number >= 0, not %r" % (count,))
            key = tuple(_frame(f) for f in frames)
            out[key] = out.get(key, 0) + count
        return [(k, c) for k, c in out.items() if c]

    def total(self):
        return sum(c for _, c in self.merged())


def _frame(f):
    if isinstance(f, Frame):
        return f
    if isinstance(f, str):
        return Frame(f)
    raise OutputError("a frame must be a Frame or a str, not %r" % (f,))


# --- folded (FlameGraph's stackcollapse output) ----------------------------

def folded_name(name):
    """A frame's text in a folded line: ';' separates frames there, so a
    ';' inside a name becomes ','; a line break would end the line, so it
    becomes a space; an empty name is '??'."""
    text = name.replace(";", ",").replace("\r", " ").replace("\n", " ")
    return text or "??"


def folded_counts(profile):
    """{folded stack text: count}: stacks that read the same summed."""
    out = {}
    for frames, count in profile.merged():
        text = ";".join(folded_name(f.name) for f in frames)
        out[text] = out.get(text, 0) + count
    return out


def folded_text(profile):
    """FlameGraph's folded format: 'outer;...;inner COUNT' a line, most
    samples first, then by text.  A stack with no frames is ' COUNT' (as
    lprofile has always written it): FlameGraph's flamegraph.pl and inferno
    skip that line with a warning."""
    rows = sorted(folded_counts(profile).items(), key=lambda e: (-e[1], e[0]))
    return "".join("%s %d\n" % (text, count) for text, count in rows)


# --- speedscope ------------------------------------------------------------

def speedscope_doc(profile):
    """speedscope's file format: one sampled profile, its samples the
    distinct stacks (indices into shared.frames, outermost first) and
    their weights the counts.  A frame's file and line are left out when
    unknown: the schema wants a string and a number there, never null."""
    index = {}
    frames = []
    samples = []
    weights = []
    for stack, count in profile.merged():
        ids = []
        for f in stack:
            key = (f.name, f.file, f.line)
            if key not in index:
                index[key] = len(frames)
                d = {"name": f.name}
                if f.file is not None:
                    d["file"] = f.file
                if f.line is not None:
                    d["line"] = f.line
                frames.append(d)
            ids.append(index[key])
        samples.append(ids)
        weights.append(count)
    return {"$schema": SPEEDSCOPE_SCHEMA,
            "name": profile.name,
            "exporter": "ljgdb",
            "activeProfileIndex": 0,
            "shared": {"frames": frames},
            "profiles": [{"type": "sampled", "name": profile.name, "unit": "none",
                          "startValue": 0, "endValue": sum(weights),
                          "samples": samples, "weights": weights}]}


# --- pprof (profile.proto, gzipped) ----------------------------------------

def _varint(n):
    n &= (1 << 64) - 1              # int64 as protobuf has it: two's complement
    out = bytearray()
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _int(field, n):
    """A varint field (wire type 0); a zero is left out, as proto3 does."""
    return _varint(field << 3) + _varint(n) if n else b""


def _bytes(field, data):
    """A length-delimited field (wire type 2)."""
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _packed(field, numbers):
    return _bytes(field, b"".join(_varint(n) for n in numbers)) if numbers else b""


class _Strings(object):
    def __init__(self):
        self.table = [""]
        self.index = {"": 0}

    def __call__(self, s):
        if s not in self.index:
            self.index[s] = len(self.table)
            self.table.append(s)
        return self.index[s]


def pprof_period(profile):
    """Nanoseconds between samples (0 when the rate is unknown)."""
    return int(round(1e9 / profile.rate_hz)) if profile.rate_hz > 0 else 0


def pprof_bytes(profile):
    """The profile as a serialized perftools.profiles.Profile (not yet
    gzipped).  Sample types: (samples, count), and (cpu, nanoseconds) =
    count * period when the rate is known; a Sample per distinct stack
    with its locations innermost first, as pprof has them; a Location per
    distinct frame with one Line; a Function per (function, file); one
    Mapping, already symbolized, that every Location is in."""
    s = _Strings()
    period = pprof_period(profile)
    types = [(profile.unit, "count")] + ([("cpu", "nanoseconds")] if period else [])
    functions = {}
    locations = {}
    body = []
    for vt in types:
        body.append(_bytes(1, _int(1, s(vt[0])) + _int(2, s(vt[1]))))
    for stack, count in profile.merged():
        ids = []
        for f in reversed(stack):
            if f not in locations:
                fkey = (f.function or f.name, f.file or "", f.start or 0)
                if fkey not in functions:
                    functions[fkey] = len(functions) + 1
                locations[f] = (len(locations) + 1, functions[fkey], f.line or 0)
            ids.append(locations[f][0])
        values = [count] + ([count * period] if period else [])
        body.append(_bytes(2, _packed(1, ids) + _packed(2, values)))
    # One Mapping that says the locations are symbolized already (functions,
    # files, lines): pprof neither tries to symbolize them nor warns that
    # "Main binary filename not available", as it does for locations with none.
    body.append(_bytes(3, _int(1, 1) + _int(7, 1) + _int(8, 1) + _int(9, 1)))
    for lid, fid, line in locations.values():
        body.append(_bytes(4, _int(1, lid) + _int(2, 1) + _bytes(4, _int(1, fid) + _int(2, line))))
    for (name, filename, start), fid in functions.items():
        n = s(name)
        body.append(_bytes(5, _int(1, fid) + _int(2, n) + _int(4, s(filename)) +
                           (_int(5, start) if start else b"")))
    comment = s(profile.name) if profile.name else 0
    tail = _int(10, int(round(profile.duration_s * 1e9)))
    if period:
        tail += _bytes(11, _int(1, s("cpu")) + _int(2, s("nanoseconds"))) + _int(12, period)
    if comment:
        tail += _packed(13, [comment])
    strings = b"".join(_bytes(6, t.encode("utf-8")) for t in s.table)
    return b"".join(body) + strings + tail


def gzipped(data):
    """gzip with no time stamp: the same profile gives the same bytes."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as z:
        z.write(data)
    return buf.getvalue()


# --- flame graph (commands/flamegraph.py's SVG) ---------------------------

def flamegraph_svg(profile):
    """The profile's flame graph (bytes of SVG, drawn by
    commands/flamegraph.py), titled with the profile's name; a box shows a
    frame's name as a folded line does, and a stack without frames counts
    in the root box only."""
    stacks = [(tuple(folded_name(f.name) for f in frames), count)
              for frames, count in profile.merged()]
    if not stacks:
        raise OutputError("no stacks to draw: the profile has no samples")
    return flamegraph.svg(stacks, title=profile.name or "ljgdb profile",
                          countname=profile.unit or "samples")


# --- writing ---------------------------------------------------------------

def render(profile, fmt):
    """The bytes of the profile in format `fmt` (one of FORMATS)."""
    if fmt == "folded":
        return folded_text(profile).encode("utf-8")
    if fmt == "speedscope":
        return (json.dumps(speedscope_doc(profile), separators=(",", ":")) + "\n").encode("utf-8")
    if fmt == "pprof":
        return gzipped(pprof_bytes(profile))
    if fmt == "flamegraph":
        return flamegraph_svg(profile)
    raise OutputError("unknown format '%s': one of %s" % (fmt, ", ".join(FORMATS)))


def write(profile, path, fmt):
    """Write the profile to `path` in format `fmt`; OutputError says why
    not.  The file appears whole or not at all (written beside it, then
    renamed)."""
    if fmt not in FORMATS:
        raise OutputError("unknown format '%s': one of %s" % (fmt, ", ".join(FORMATS)))
    path = os.path.expanduser(path)
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise OutputError("%s: no directory %s" % (path, d))
    if os.path.isdir(path):
        raise OutputError("%s is a directory" % path)
    data = render(profile, fmt)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=d)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise OutputError("%s: %s" % (path, e.strerror or e))
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
