"""commands/profout.py without its consumers: the folded text, the speedscope
document and the pprof protobuf (read back with a decoder written here from
profile.proto's field numbers), and write()'s one-line errors.  The programs
that read each format are run in tests/e2e/test_profout_consumers.py; the
flame graph's drawing is tests/unit/test_flamegraph.py's."""
import gzip
import os
import stat
import xml.etree.ElementTree as ET

import pytest

import ljgdb  # noqa: F401
from ljgdb.commands import profout
from ljgdb.commands.profout import FORMATS, Frame, OutputError, Profile, write
from ljgdb.gdb_ext.backends.coredump import uleb128

MAIN = Frame("C:main", "host.c", 40)
PCALL = Frame("C:lua_pcall")
F12 = Frame("busy (app.lua:12)", "app.lua", 12, "busy", 10)
F14 = Frame("busy (app.lua:14)", "app.lua", 14, "busy", 10)
PAIRS = Frame("[builtin#pairs]")


def sample_profile():
    return Profile([((MAIN, PCALL, F12), 2),
                    ((MAIN, PCALL, F14, PAIRS), 5),
                    ((MAIN, PCALL, F12), 1),          # the first stack again: 3 in all
                    ((MAIN, Frame("a;b")), 4)],
                   rate_hz=250.0, duration_s=0.048, name="ljgdb record pid 123")


# --- a decoder of protobuf's wire format, for the tests only ---------------

def varint(data, i):
    """A protobuf varint at data[i] (unsigned LEB128, as DWARF's; the core
    reader's decoder, independent of profout's writer): (value, next i)."""
    return uleb128(data, i)


def fields(data):
    """[(field number, int or bytes)] of one message."""
    out = []
    i = 0
    while i < len(data):
        key, i = varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(data, i)
        elif wire == 2:
            n, i = varint(data, i)
            v, i = data[i:i + n], i + n
        else:
            raise AssertionError("wire type %d" % wire)
        out.append((field, v))
    return out


def packed(data):
    out, i = [], 0
    while i < len(data):
        v, i = varint(data, i)
        out.append(v)
    return out


def one(msg, field, default=0):
    vals = [v for f, v in fields(msg) if f == field]
    assert len(vals) <= 1
    return vals[0] if vals else default


def decode_profile(data):
    top = fields(data)
    strings = [v.decode() for f, v in top if f == 6]
    sub = lambda n: [v for f, v in top if f == n]  # noqa: E731
    functions = {one(m, 1): (strings[one(m, 2)], strings[one(m, 3)], strings[one(m, 4)],
                             one(m, 5))
                 for m in sub(5)}
    locations = {}
    for m in sub(4):
        lines = [v for f, v in fields(m) if f == 4]
        assert len(lines) == 1 and one(m, 2) == 1     # one Line, the one Mapping
        locations[one(m, 1)] = (functions[one(lines[0], 1)], one(lines[0], 2))
    samples = [(tuple(locations[i] for i in packed(one(m, 1, b""))), packed(one(m, 2, b"")))
               for m in sub(2)]
    (mapping,) = sub(3)
    assert fields(mapping) == [(1, 1), (7, 1), (8, 1), (9, 1)]   # id 1, has functions, files, lines
    vtype = lambda m: (strings[one(m, 1)], strings[one(m, 2)])  # noqa: E731
    return {"strings": strings, "functions": functions, "samples": samples,
            "sample_type": [vtype(m) for m in sub(1)],
            "period_type": [vtype(m) for m in sub(11)],
            "period": [v for f, v in top if f == 12], "duration": [v for f, v in top if f == 10],
            "comments": [strings[c] for m in sub(13) for c in packed(m)]}


# --- tests -----------------------------------------------------------------

def test_frame_defaults():
    assert Frame("x") == ("x", None, None, None, None)
    assert Frame("x", "a.lua", 3).function is None


def test_varint_matches_protobufs_own_examples():
    # (the encoding guide's 1 and 150; 300; an int64 -1 is ten bytes)
    assert profout._varint(1) == b"\x01"
    assert profout._varint(150) == b"\x96\x01"
    assert profout._varint(300) == b"\xac\x02"
    assert profout._varint(-1) == b"\xff" * 9 + b"\x01"
    assert profout._int(12, 0) == b""


def test_folded_sums_sorts_and_escapes():
    p = sample_profile()
    # The same names with another file and line read the same: summed too.
    p.add((Frame("C:main", "other.c", 1), "C:lua_pcall", "busy (app.lua:12)"), 3)
    p.add(("C:main", "two\nlines"), 4)
    assert profout.folded_text(p) == (
        "C:main;C:lua_pcall;busy (app.lua:12) 6\n"
        "C:main;C:lua_pcall;busy (app.lua:14);[builtin#pairs] 5\n"
        "C:main;a,b 4\n"
        "C:main;two lines 4\n")


def test_folded_counts_total():
    p = sample_profile()
    assert sum(profout.folded_counts(p).values()) == p.total() == 12


def test_a_stack_without_frames_counts():
    p = Profile([((), 2), (("a",), 1)], rate_hz=100.0)
    assert profout.folded_text(p) == " 2\na 1\n"
    (sp,) = profout.speedscope_doc(p)["profiles"]
    assert (sp["samples"], sp["weights"], sp["endValue"]) == ([[], [0]], [2, 1], 3)
    d = decode_profile(profout.pprof_bytes(p))
    assert d["samples"] == [((), [2, 20000000]), (((("a", "", "", 0), 0),), [1, 10000000])]


def test_speedscope_document():
    p = sample_profile()
    doc = profout.speedscope_doc(p)
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    (prof,) = doc["profiles"]
    assert prof["type"] == "sampled" and prof["unit"] == "none"
    assert (prof["startValue"], prof["endValue"]) == (0, 12)
    got = [(tuple(frames[i]["name"] for i in s), w) for s, w in zip(prof["samples"], prof["weights"])]
    assert got == [(("C:main", "C:lua_pcall", "busy (app.lua:12)"), 3),
                   (("C:main", "C:lua_pcall", "busy (app.lua:14)", "[builtin#pairs]"), 5),
                   (("C:main", "a;b"), 4)]
    # file and line where known, and no key at all where not (no nulls)
    assert {"name": "C:main", "file": "host.c", "line": 40} in frames
    assert {"name": "C:lua_pcall"} in frames
    assert len(frames) == 6


def test_pprof_structure():
    p = sample_profile()
    d = decode_profile(profout.pprof_bytes(p))
    assert d["strings"][0] == ""
    assert d["sample_type"] == [("samples", "count"), ("cpu", "nanoseconds")]
    assert d["period_type"] == [("cpu", "nanoseconds")] and d["period"] == [4000000]
    assert d["duration"] == [48000000] and d["comments"] == ["ljgdb record pid 123"]
    # (no system_name: pprof simplifies a name equal to it as a C++ name,
    # '[string "<eval>"]:1' to '[string ""]:1')
    fn = lambda name, file="", start=0: ((name, "", file, start))  # noqa: E731
    main, pcall = (fn("C:main", "host.c"), 40), (fn("C:lua_pcall"), 0)
    lua = fn("busy", "app.lua", 10)
    # innermost location first, as pprof has them; values count, count * period
    assert d["samples"] == [(((lua, 12), pcall, main), [3, 12000000]),
                            (((fn("[builtin#pairs]"), 0), (lua, 14), pcall, main), [5, 20000000]),
                            (((fn("a;b"), 0), main), [4, 16000000])]
    # one Function for the two lines of busy, with the line it starts on
    assert sorted(d["functions"].values()) == sorted({fn("C:main", "host.c"), fn("C:lua_pcall"), lua,
                                                      fn("[builtin#pairs]"), fn("a;b")})


def test_pprof_without_a_rate_has_counts_only():
    p = Profile([(("a", "b"), 7)], name="")
    d = decode_profile(profout.pprof_bytes(p))
    assert d["sample_type"] == [("samples", "count")]
    assert d["period"] == [] and d["period_type"] == [] and d["comments"] == []
    assert [v for _, v in d["samples"]] == [[7]]


def test_write_each_format(tmp_path):
    p = sample_profile()
    for fmt in FORMATS:
        path = str(tmp_path / ("out." + fmt))
        write(p, path, fmt)
        data = open(path, "rb").read()
        if fmt == "pprof":
            assert gzip.decompress(data) == profout.pprof_bytes(p)
            write(p, path, fmt)
            assert open(path, "rb").read() == data       # no time stamp in the gzip header
        elif fmt == "folded":
            assert data.decode() == profout.folded_text(p)
        elif fmt == "flamegraph":
            assert data == profout.flamegraph_svg(p)
            assert ET.fromstring(data).tag == "{http://www.w3.org/2000/svg}svg"
        umask = os.umask(0)
        os.umask(umask)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~umask
    assert sorted(os.listdir(str(tmp_path))) == sorted("out." + f for f in FORMATS)


@pytest.mark.parametrize("stacks, fmt, message", [
    ([(("a",), 1)], "svg", "unknown format 'svg': one of flamegraph, folded, speedscope, pprof"),
    ([(("a",), -1)], "folded", "a stack's count must be a whole number >= 0, not -1"),
    ([(("a",), 1.5)], "folded", "a stack's count must be a whole number >= 0, not 1.5"),
    ([((3,), 1)], "speedscope", "a frame must be a Frame or a str, not 3"),
])
def test_write_errors(tmp_path, stacks, fmt, message):
    path = str(tmp_path / "out")
    with pytest.raises(OutputError) as e:
        write(Profile(stacks), path, fmt)
    assert str(e.value) == message
    assert os.listdir(str(tmp_path)) == []


def test_write_no_directory(tmp_path):
    path = str(tmp_path / "none" / "out.folded")
    with pytest.raises(OutputError) as e:
        write(sample_profile(), path, "folded")
    assert str(e.value) == "%s: no directory %s" % (path, tmp_path / "none")
    with pytest.raises(OutputError) as e:
        write(sample_profile(), str(tmp_path), "folded")
    assert str(e.value) == "%s is a directory" % tmp_path


def test_flamegraph_of_nothing(tmp_path):
    path = str(tmp_path / "out.svg")
    for prof in (Profile(), Profile([(("a",), 0)])):
        with pytest.raises(OutputError) as e:
            write(prof, path, "flamegraph")
        assert str(e.value) == "no stacks to draw: the profile has no samples"
    assert os.listdir(str(tmp_path)) == []
    # The other formats write an empty profile.
    write(Profile(), path, "folded")
    assert open(path).read() == ""


def test_flamegraph_names_and_title():
    """The boxes are named as the folded lines name the frames (a ';' as a
    ','), the graph is titled with the profile's name, a box's title counts
    in the profile's unit."""
    p = sample_profile()
    p.unit = "ticks"
    svg = ET.fromstring(profout.flamegraph_svg(p))
    ns = "{http://www.w3.org/2000/svg}"
    assert [t.text for t in svg.iter(ns + "text") if t.get("id") == "title"] == [p.name]
    titles = [t.text for t in svg.iter(ns + "title")]
    names = {t.rsplit(" (", 1)[0] for t in titles}
    folded = {n for text in profout.folded_counts(p) for n in text.split(";")}
    assert names == folded | {"all"}
    assert "all (12 ticks, 100.00%)" in titles and "a,b (4 ticks, 33.33%)" in titles
    p.name = ""
    svg = ET.fromstring(profout.flamegraph_svg(p))
    assert [t.text for t in svg.iter(ns + "text") if t.get("id") == "title"] == ["ljgdb profile"]
