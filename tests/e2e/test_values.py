"""linfo, lval and ltab on every build variant, live and from a core.

testprogs/lua/values.lua puts 23 values of every kind on the stack of a C
call (ljgdb_stop -> ljgdb_break), plus gc.total as slot 24, and writes what
LuaJIT itself says about each (type, tostring, debug.getinfo, ffi.typeof,
ffi.sizeof) to the expected file.
"""
import json
import re
import struct

import pytest

from support.stop import BOTH_ARCHES, Stop, lua_quote, unhex

NSLOTS = 24
ASIZE = "print/r ((GCtab *)$tab)->asize"
HMASK = "print/r ((GCtab *)$tab)->hmask"
GCTOTAL = "print/r ((double *)L->base)[%d]" % (NSLOTS - 1)
FFITAB = ('python gdb.execute("ltab --json (GCtab *)" + [l.split()[2] for l in '
          'open("expected.txt") if l.startswith("ffitab")][0])')
CTYPETAB = ('python gdb.execute("ltab --json (GCtab *)" + [l.split()[2] for l in '
            'open("expected.txt") if l.startswith("ctypetab")][0])')
COMMANDS = (["linfo"] + ["lval L %d" % i for i in range(1, NSLOTS + 1)] +
            ["lval --raw L 2", "lval --raw L 23", "lval --raw L 1", "lval --raw L 17",
             "ltab L->base+8", "ltab L->base+8 --depth 2", "ltab L->base+8 --limit 2",
             "lval (GCtab *)0", "lval L 0", "lval L 99", "lval nosuchsymbol", "lval --bogus L 1",
             "ltab L->base", "ltab", "linfo extra", "ltab L->base+8 --depth x",
             "linfo L=ljgdb_thread", "linfo L=8", "linfo L=0",
             # frame 2 is the VM's lj_BC_FUNCC: no C variables, only registers
             "frame 2", "linfo", "lval L 2", "frame 0",
             # slot 9's table as a bare number (the GC reference bits)
             "set $tab = sizeof(GCRef) == 8 ? ((L->base+8)->u64 & 0x7fffffffffff) : "
             "((L->base+8)->u64 & 0xffffffff)", "lval $tab",
             # gdb's own reading of that table's sizes and of the number in
             # slot 24 (gc.total as collectgarbage("count") gave it): what
             # ljgdb prints is compared with these, not with itself.
             ASIZE, HMASK, GCTOTAL,
             "print $lua_value(L->base[0])", "print $lua_value(L->base+1)",
             "print $lua_value(L->base+8)"] +
            # The same data as JSON documents (docs/json.md).
            ["linfo --json", "ltab --json L->base+8 --depth 2", "lval --json (GCtab *)0"] +
            ["lval --json L %d" % i for i in range(1, NSLOTS + 1)] +
            # The cdata values.lua keeps in a table (its address is in the
            # expected file, in gdb's working directory), and its ctype objects.
            [FFITAB, CTYPETAB])
MODES = ("live", "core")


@pytest.fixture(scope="module", params=BOTH_ARCHES)
def stop(request, tmp_path_factory):
    return Stop(request.param, "values.lua", COMMANDS,
                str(tmp_path_factory.mktemp(request.param)))


def records(stop, kind):
    return [r[1:] for r in stop.expected if r[0] == kind]


def one(stop, kind):
    rs = records(stop, kind)
    assert len(rs) == 1, (kind, rs)
    return rs[0]


def addr_of(tostring_text):
    return int(tostring_text.rsplit(" ", 1)[1], 16)


def expected_text(stop, typ, shown):
    """What lval prints for a value LuaJIT described as (type, tostring)."""
    if typ == "string":
        return re.escape(lua_quote(unhex(shown)))
    if typ in ("number", "boolean", "nil"):
        return re.escape(shown)
    if typ == "table":
        return re.escape("table: (GCtab *)0x%x" % addr_of(shown))
    if typ == "thread":
        return re.escape("thread: (lua_State *)0x%x" % addr_of(shown))
    if typ == "function":
        if shown.startswith("function: builtin#"):
            ffid = int(shown.split("#")[1])
            names = {int(r[0]): r[1] for r in records(stop, "ffname")}
            return r"function: \(GCfuncC \*\)0x[0-9a-f]+ \[builtin#%s\]" % re.escape(
                names.get(ffid, str(ffid)))
        addr = addr_of(shown)
        src, line = one(stop, "func")
        if addr == int(_slot_shown(stop, 10), 16):
            return re.escape("function: (GCfuncL *)0x%x %s:%s" % (addr, src, line))
        return re.escape("function: (GCfuncC *)0x%x C:ljgdb_ccall" % addr)
    if typ == "cdata":
        payload = addr_of(shown)
        for ctid, size, text in records(stop, "cdata"):
            if addr_of(text) == payload:
                # The type as tostring() names it; the value follows.
                return (r"%s: \(GCcdata \*\)0x[0-9a-f]+ ctypeid %s, size %s, data at 0x%x = .*"
                        % (re.escape(text.split(">: ")[0] + ">"), ctid, size, payload))
        raise AssertionError("no cdata record for " + shown)
    if typ == "userdata":
        if shown == "userdata: NULL":
            return re.escape("light userdata (void *) 0x0")
        ptr = addr_of(shown)
        if ptr < 0x100000:   # our light userdata is 0x1234
            return re.escape("light userdata (void *) 0x%x" % ptr)
        return r"userdata: \(GCudata \*\)0x[0-9a-f]+ userdata, 0 bytes at 0x%x" % ptr
    raise AssertionError("unexpected type " + typ)


def _slot_shown(stop, i):
    for r in records(stop, "slot"):
        if int(r[0]) == i:
            return r[2].rsplit(" ", 1)[1]
    raise AssertionError(i)


def dual_numbers(stop):
    """Whether the build keeps integers as their own TValues: its flags."""
    return stop.build["dualnum"]


@pytest.mark.parametrize("mode", MODES)
def test_linfo_reports_build_mode(stop, mode):
    out = stop.out(mode, "linfo")
    info = dict(re.findall(r"^([A-Za-z0-9_. ]+):\s+(.*)$", out, re.M))
    gc64 = one(stop, "gc64")[0] == "true"
    assert gc64 == stop.build["gc64"], "the build flags and LuaJIT's ffi.abi disagree"
    assert info["mode"].startswith("GC64" if gc64 else "X64"), out
    # On x86-64, LJ_FR2 follows LJ_GC64 in every variant we build.
    assert info["FR2"].startswith("yes" if gc64 else "no"), out
    # x86-64's default is off; LUAJIT_NUMMODE=2 turns it on (r21-dualnum).
    assert info["DUALNUM"].startswith("yes" if dual_numbers(stop) else "no"), out
    assert info["JIT"].startswith("yes" if one(stop, "jitstatus")[0] == "true" else "no"), out
    assert info["pointer size"] == "8"
    version = one(stop, "version")[0]
    assert info["version"].startswith(version + " ("), (info["version"], version)
    fork = "OpenResty" if stop.variant.startswith("or-") else "upstream"
    branch = "2.0" if stop.variant.startswith("r20") else "2.1"
    assert info["version"].endswith("(%s %s)" % (fork, branch)), info["version"]
    # gc.total as collectgarbage("count") saw it right before the stop.
    total = _gc_total(stop)
    assert info["gc.total"] == "%d bytes" % total, (info["gc.total"], total)
    assert info["VM state"] == "C", out
    assert re.match(r"\(lua_State \*\)0x[0-9a-f]+  \[frame #0 ljgdb_break: L\]$",
                    info["selected L"]), out
    assert info["selected L"].startswith(info["main lua_State"] + " "), out


def _gdb_number(stop, cmd):
    """A number gdb itself printed ('$7 = 5'), live."""
    return int(float(stop.out("live", cmd).strip().split("= ", 1)[1]))


def _gc_total(stop):
    """gc.total as collectgarbage("count") saw it right before the stop (slot
    24, read by gdb)."""
    return _gdb_number(stop, GCTOTAL)


@pytest.mark.parametrize("mode", MODES)
def test_lval_every_slot(stop, mode):
    slots = records(stop, "slot")
    assert len(slots) == NSLOTS - 1
    for idx, typ, shown in slots:
        out = stop.out(mode, "lval L %s" % idx)
        first = out.splitlines()[0]
        pat = r"slot %s \(TValue \*\)0x[0-9a-f]+: %s$" % (idx, expected_text(stop, typ, shown))
        assert re.match(pat, first), "slot %s: %r does not match %r" % (idx, first, pat)


@pytest.mark.parametrize("mode", MODES)
def test_lval_slot_addresses_follow_the_stack(stop, mode):
    addrs = [int(re.search(r"\(TValue \*\)(0x[0-9a-f]+)", stop.out(mode, "lval L %d" % i))
                 .group(1), 16) for i in range(1, NSLOTS + 1)]
    assert [b - a for a, b in zip(addrs, addrs[1:])] == [8] * (NSLOTS - 1)


@pytest.mark.parametrize("mode", MODES)
def test_lval_details(stop, mode):
    long_len = int(one(stop, "longlen")[0])
    assert re.search(r"^  \(GCstr \*\)0x[0-9a-f]+ len %d, data at" % long_len,
                     stop.out(mode, "lval L 19"), re.M)
    src, line = one(stop, "func")
    assert "defined at %s:%s, 2 params, 0 upvalues" % (src, line) in stop.out(mode, "lval L 10")
    assert "<lj_cf_print>" in stop.out(mode, "lval L 11")
    assert re.search(r"^  status yield, stack \d+ slots", stop.out(mode, "lval L 13"), re.M)


@pytest.mark.parametrize("mode", MODES)
def test_lval_raw_split(stop, mode):
    gc64 = stop.build["gc64"]
    out = stop.out(mode, "lval --raw L 2")
    if dual_numbers(stop):
        # 42 is an integer TValue: LJ_TISNUM over the int32 (R lj_obj.h
        # setintV: LJ_TNUMX << 47 in GC64, 0xfffeffff << 32 in X64).
        bits = ((0xFFFFFFF2 << 47) & (2 ** 64 - 1) if gc64 else 0xFFFEFFFF << 32) | 42
        assert "tag: an int32" in out
    else:
        bits = struct.unpack("<Q", struct.pack("<d", 42.0))[0]
        assert "tag: a double" in out
    assert out.splitlines()[0] == "raw 0x%016x" % bits
    # Slot 23 is 42 made by a division: a double in every build, and
    # LuaJIT prints it as it prints the integer 42.
    assert [r[1:] for r in records(stop, "slot") if r[0] in ("2", "23")] == [["number", "42"]] * 2
    out = stop.out(mode, "lval --raw L 23")
    assert out.splitlines()[0] == "raw 0x%016x" % struct.unpack("<Q", struct.pack("<d", 42.0))[0]
    assert "tag: a double" in out
    out = stop.out(mode, "lval --raw L 1")
    assert ("GC64: itype = bits >> 47" if gc64 else "X64: itype = high 32 bits") in out
    assert "tag: LJ_TSTR" in out
    raw = int(out.splitlines()[0].split()[1], 16)
    if gc64:
        assert raw >> 47 == 0x1FFFB               # ~LJ_TSTR in the top 17 bits
    else:
        assert raw >> 32 == 0xFFFFFFFB
    out = stop.out(mode, "lval --raw L 17")
    if not gc64:
        assert "light userdata ((int32)itype >> 15 == -2)" in out
    else:
        assert "tag: LJ_TLIGHTUD" in out


def table_expect(stop, kind):
    lines = set()
    for ktype, kshown, vtype, vshown in records(stop, kind):
        if ktype == "string":
            key = unhex(kshown)
            if re.match(rb"^[A-Za-z_][A-Za-z0-9_]*$", key):
                k = key.decode()
            else:
                k = "[%s]" % lua_quote(key)
        else:
            k = "[%s]" % kshown
        if vtype == "string":
            v = lua_quote(unhex(vshown))
        elif vtype == "table":
            v = "table: (GCtab *)0x%x" % addr_of(vshown)
        else:
            v = vshown
        lines.add("%s = %s," % (k, v))
    return lines


@pytest.mark.parametrize("mode", MODES)
def test_ltab(stop, mode):
    out = stop.out(mode, "ltab L->base+8").splitlines()
    t_addr = addr_of(_full_slot(stop, 9))
    assert out[0] == "table: (GCtab *)0x%x asize=%d hmask=0x%x metatable=nil" % (
        t_addr, _gdb_number(stop, ASIZE), _gdb_number(stop, HMASK))
    assert out[1] == "{" and out[-1] == "}"
    got = {ln.strip() for ln in out[2:-1]}
    assert got == table_expect(stop, "t")


def _full_slot(stop, i):
    for r in records(stop, "slot"):
        if int(r[0]) == i:
            return r[2]
    raise AssertionError(i)


@pytest.mark.parametrize("mode", MODES)
def test_ltab_depth_and_limit(stop, mode):
    out = stop.out(mode, "ltab L->base+8 --depth 2").splitlines()
    nested_addr = [addr_of(r[3]) for r in records(stop, "t") if r[2] == "table"]
    start = out.index("  nested = {  -- (GCtab *)0x%x" % nested_addr[0])
    end = out.index("  },", start)
    inner = {ln.strip() for ln in out[start + 1:end]}
    want = table_expect(stop, "nested")
    assert want <= inner
    # y = { z = "deep" } is a table at depth 3: shown as a reference only.
    assert len([ln for ln in inner if ln.startswith("y = table: (GCtab *)0x")]) == 1
    assert len(inner) == len(want) + 1
    out = stop.out(mode, "ltab L->base+8 --limit 2").splitlines()
    total = len(table_expect(stop, "t"))
    assert len(out) == 1 + 1 + 2 + 1 + 1
    assert out[-2] == "  ... (%d more entries; see --limit)" % (total - 2)


@pytest.mark.parametrize("mode", MODES)
def test_bad_input_gives_one_line(stop, mode):
    cases = {
        "lval (GCtab *)0": "lval: cannot access memory at 0x0",
        "lval L 0": "lval: slot 0 does not exist",
        "lval L 99": "lval: slot 99 is outside the 24 slots of this frame",
        "lval nosuchsymbol": "lval: cannot evaluate expression 'nosuchsymbol'",
        "lval --bogus L 1": "lval: unknown option '--bogus'. Usage: lval",
        "ltab L->base": "ltab: TValue at 0x",
        "ltab": "ltab: missing table expression. Usage: ltab",
        "linfo extra": "linfo: unexpected argument 'extra'. Usage: linfo",
        "ltab L->base+8 --depth x": "ltab: --depth needs a number",
    }
    for cmd, start in cases.items():
        out = stop.out(mode, cmd).strip()
        assert "\n" not in out, (cmd, out)
        assert out.startswith(start), (cmd, out)
    whole = stop.live_text if mode == "live" else stop.core_text
    assert "Traceback" not in whole
    assert "internal error" not in whole


@pytest.mark.parametrize("mode", MODES)
def test_L_override(stop, mode):
    out = stop.out(mode, "linfo L=ljgdb_thread")
    co = addr_of(_full_slot(stop, 13))
    assert "selected L:       (lua_State *)0x%x  [L= argument]" % co in out
    main = re.search(r"main lua_State:\s+(.*)", out).group(1)
    assert main != "(lua_State *)0x%x" % co
    out = stop.out(mode, "linfo L=8")
    assert out.startswith("linfo: 0x8 is not a lua_State: cannot access memory at 0x8"), out
    out = stop.out(mode, "linfo L=0")
    assert out.strip() == "linfo: lua_State pointer is NULL", out


@pytest.mark.parametrize("mode", MODES)
def test_state_from_vm_register(stop, mode):
    assert "lj_BC_FUNCC" in stop.out(mode, "frame 2")
    out = stop.out(mode, "linfo", nth=1)
    info = dict(re.findall(r"^([A-Za-z0-9_. ]+):\s+(.*)$", out, re.M))
    first = dict(re.findall(r"^([A-Za-z0-9_. ]+):\s+(.*)$", stop.out(mode, "linfo"), re.M))
    assert info["global_State"] == first["global_State"]
    # With only G known, the thread is g->cur_L (2.1) or the main thread (2.0).
    src = "g->cur_L" if stop.variant != "r20-x64" else "main thread"
    # The VM keeps its dispatch table (x86-64) or global_State (arm64) there.
    reg = "x22" if stop.build.get("arch") == "arm64" else "r14"
    assert info["selected L"] == "%s  [%s (from frame #2 lj_BC_FUNCC: register %s)]" % (
        first["main lua_State"], src, reg), out


@pytest.mark.parametrize("mode", MODES)
def test_lval_slot_of_the_selected_thread(stop, mode):
    """In a frame with no C variable L, `lval L N` reads slot N of the
    selected thread (the one linfo names), and says so."""
    idx, typ, shown = [r for r in records(stop, "slot") if r[0] == "2"][0]
    out = stop.out(mode, "lval L 2", nth=1).splitlines()[0]
    pat = r"slot 2 of the selected thread \(lua_State \*\)0x[0-9a-f]+ \(TValue \*\)0x[0-9a-f]+: %s$" \
        % expected_text(stop, typ, shown)
    assert re.match(pat, out), (out, pat)


@pytest.mark.parametrize("mode", MODES)
def test_lval_of_a_bare_object_address(stop, mode):
    """A plain number that is a table's address reads as that table, with a
    line saying how to read the bytes as a TValue instead."""
    t_addr = addr_of(_full_slot(stop, 9))
    out = stop.out(mode, "lval $tab").splitlines()
    assert out[0].startswith("table: (GCtab *)0x%x" % t_addr), out
    assert out[-1] == ("(0x%x read as a GC object: its header says table; (TValue *)0x%x reads "
                       "the 8 bytes there as a TValue)" % (t_addr, t_addr)), out


@pytest.mark.parametrize("mode", MODES)
def test_lua_value_function(stop, mode):
    """$lua_value() gives the text lval gives, for a TValue and a TValue *."""
    for cmd, idx in (("print $lua_value(L->base[0])", "1"), ("print $lua_value(L->base+1)", "2"),
                     ("print $lua_value(L->base+8)", "9")):
        _, typ, shown = [r for r in records(stop, "slot") if r[0] == idx][0]
        out = stop.out(mode, cmd).strip()
        m = re.match(r'\$\d+ = "(.*)"$', out)
        assert m, out
        text = m.group(1).replace('\\"', '"').replace("\\\\", "\\")
        assert re.match(expected_text(stop, typ, shown) + "$", text), (cmd, text)


# --- --json: the same data as the text, as one JSON document ----------------

def doc_of(stop, mode, cmd):
    d = json.loads(stop.out(mode, cmd))
    assert d["command"] == cmd.split()[0]
    return d


@pytest.mark.parametrize("mode", MODES)
def test_json_linfo(stop, mode):
    d = doc_of(stop, mode, "linfo --json")
    gc64 = one(stop, "gc64")[0] == "true"
    assert d["gc64"] is gc64 and d["fr2"] is gc64 and d["dualnum"] is dual_numbers(stop)
    assert d["jit"] is (one(stop, "jitstatus")[0] == "true")
    assert d["version"] == one(stop, "version")[0]
    assert d["gc_total"] == _gc_total(stop)
    assert d["vmstate"] == "C" and d["trace"] is None
    assert d["selected_L"] == d["main_L"]
    assert [f["name"] for f in d["fields"]][:3] == ["version", "mode", "FR2"]


@pytest.mark.parametrize("mode", MODES)
def test_json_lval_every_slot(stop, mode):
    addrs = []
    for idx, typ, shown in records(stop, "slot"):
        d = doc_of(stop, mode, "lval --json L %s" % idx)
        assert d["label"] == "slot %s" % idx
        assert re.match(expected_text(stop, typ, shown) + "$", d["value"]), (idx, d)
        assert d["kind"] is not None
        addrs.append(int(d["tvalue"], 16))
    assert [b - a for a, b in zip(addrs, addrs[1:])] == [8] * (len(addrs) - 1)


@pytest.mark.parametrize("mode", MODES)
def test_json_ltab(stop, mode):
    d = doc_of(stop, mode, "ltab --json L->base+8 --depth 2")
    assert int(d["table"], 16) == addr_of(_full_slot(stop, 9))
    top = {"%s = %s," % (e["key"], e["value"]) for e in d["entries"] if "value" in e}
    nested = [e for e in d["entries"] if "entries" in e]
    assert len(nested) == 1 and nested[0]["key"] == "nested"
    want = table_expect(stop, "t")
    assert top | {"nested = table: (GCtab *)%s," % nested[0]["table"]} == want
    inner = {"%s = %s," % (e["key"], e["value"]) for e in nested[0]["entries"]}
    assert table_expect(stop, "nested") <= inner


@pytest.mark.parametrize("mode", MODES)
def test_json_error_document(stop, mode):
    out = stop.out(mode, "lval --json (GCtab *)0").splitlines()
    d = json.loads(out[0])
    assert d["command"] == "lval" and d["error"].startswith("lval: cannot access memory at 0x0")
    assert out[1] == d["error"]


def array_values(stop, mode, cmd, pattern):
    """{index: the groups of pattern} of the values in the array ltab
    --json lists (cmd); every value must match."""
    got = {}
    for e in json.loads(stop.out(mode, cmd))["entries"]:
        m = re.match(pattern, e["value"])
        assert m, e
        got[int(e["key"].strip("[]"))] = m.groups()
    return got


@pytest.mark.parametrize("mode", MODES)
def test_ctype_objects(stop, mode):
    """A ctype object (ffi.typeof's) as LuaJIT's tostring names it,
    ctype<int64_t>, then the object and the CTypeID it holds."""
    want = {int(i): (text,) for i, text in records(stop, "ctype")}
    assert len(want) == 6
    assert array_values(stop, mode, CTYPETAB, r"(ctype<.*>): \(GCcdata \*\)0x[0-9a-f]+ ctypeid \d+, "
                        r"the ctype object of CTypeID \d+$") == want


@pytest.mark.parametrize("mode", MODES)
def test_cdata_type_and_value(stop, mode):
    """Each cdata as cdata<TYPE>: TYPE as tostring(ffi.typeof(x)) names it,
    its value as the program set it."""
    want = {int(i): (typ, val) for i, typ, val in records(stop, "ffi")}
    assert len(want) == 11
    assert array_values(stop, mode, FFITAB, r"cdata<(.*)>: \(GCcdata \*\)0x[0-9a-f]+ ctypeid \d+, "
                        r"size \d+, data at 0x[0-9a-f]+ = (.*)$") == want
