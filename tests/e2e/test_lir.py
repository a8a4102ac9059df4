"""lir against LuaJIT's own jit.dump: testprogs/lua/irdump.lua runs code
that makes traces of many kinds (numbers, bit operations, tables, strings,
closures, calls, side exits, recursion, the FFI) with jit.dump on (-jdump=is,
plain text, into a file), records every live trace and its machine code
(jit.util.tracemc), and stops.  For every live trace, lir's IR part must be
the section "---- TRACE n IR" that jit.dump wrote when the trace stopped,
line for line, live, from gdb's core and in the core reader; the machine
code must be the trace's (jit.util.tracemc's address, size and loop)."""
import difflib
import json
import os
import re
import subprocess
import sys

import pytest

from support.stop import BOTH_ARCHES, NOJIT_VARIANTS, ROOT, Stop, sysroot_args

CORERUN = os.path.join(ROOT, "tests", "support", "corerun.py")

DRIVER = r'''
import json, os
exp = os.path.join(os.path.dirname(os.path.abspath(%r)), "expected.txt")
out = {}
for line in open(exp):
    r = line.rstrip("\n").split("\t")
    if r[0] != "trace":
        continue
    for opts in ("", " --no-snap", " --json"):
        try:
            out[r[1] + opts] = gdb.execute("lir " + r[1] + opts, to_string=True)
        except gdb.error as e:
            out[r[1] + opts] = "error: %%s" %% e
for cmd in ("lir", "lir 99999", "lir foo", "lir 1 --bogus", "lir 0"):
    try:
        out[cmd] = gdb.execute(cmd, to_string=True)
    except gdb.error as e:
        out[cmd] = "error: " + str(e)
print("@@LIR@@" + json.dumps(out))
'''


def lua_text(data):
    """jit.dump's bytes as lir writes them: a byte above 127 as \\ddd."""
    return "".join("\\%03d" % b if b > 127 else chr(b) for b in data)


def dump_sections(path):
    """{trace number: IR section lines} of a jit.dump file; a number that
    was used twice (an aborted trace's number is given again) keeps the
    section of the trace that stopped last."""
    text = lua_text(open(path, "rb").read())
    out = {}
    cur = None
    for line in text.split("\n"):
        m = re.match(r"^---- TRACE (\d+) IR$", line)
        if m:
            cur = out[int(m.group(1))] = [line]
        elif line.startswith("---- TRACE"):
            cur = None
        elif cur is not None:
            cur.append(line)
    return out


@pytest.fixture(scope="module", params=BOTH_ARCHES)
def stop(request, tmp_path_factory):
    work = str(tmp_path_factory.mktemp("lir-" + request.param))
    driver = os.path.join(work, "driver.py")
    with open(driver, "w") as f:
        f.write(DRIVER % driver)
    return Stop(request.param, "irdump.lua", ["python exec(open(%r).read())" % driver], work)


def results(stop, mode):
    text = stop.out(mode, stop.commands[0])
    return json.loads(text.split("@@LIR@@", 1)[1].strip().splitlines()[0])


def live_traces(stop):
    """{n: (mcode address, size, loop offset)} from jit.util."""
    return {int(r[1]): (int(r[2]), int(r[3]), int(r[4]))
            for r in stop.expected if r[0] == "trace"}


def dumped(stop):
    paths = [r[1] for r in stop.expected if r[0] == "dump"]
    assert len(paths) == 1, stop.expected[:3]
    return dump_sections(paths[0])


def ir_part(text, n):
    lines = text.rstrip("\n").split("\n")
    head = "---- TRACE %d mcode " % n
    cut = next((i for i, line in enumerate(lines) if line.startswith(head)), len(lines))
    return lines[:cut], lines[cut:]


@pytest.mark.parametrize("mode", ("live", "core"))
def test_lir_is_what_jit_dump_wrote(stop, mode):
    want = dumped(stop)
    live = live_traces(stop)
    assert len(live) >= 15 and set(live) <= set(want), (sorted(live), sorted(want))
    got = results(stop, mode)
    bad = []
    for n, (addr, size, loop) in sorted(live.items()):
        ir, mcode = ir_part(got[str(n)], n)
        if ir != want[n]:
            bad.append((n, "\n".join(difflib.unified_diff(want[n], ir, "jit.dump", "lir",
                                                          lineterm=""))))
            continue
        # The IR without the snapshots: -jdump=i.
        assert ir_part(got["%d --no-snap" % n], n)[0] == \
            [line for line in want[n] if not line.startswith("....        SNAP")]
        # The machine code: jit.util.tracemc's size, addresses inside it, in
        # order, the loop label before the instruction at the loop offset.
        assert mcode[0] == "---- TRACE %d mcode %d" % (n, size), mcode[:2]
        addrs = [int(line.split()[0], 16) for line in mcode[1:] if line != "->LOOP:"]
        assert addrs[0] == addr and addrs == sorted(addrs) and addrs[-1] < addr + size, n
        if loop:
            i = mcode.index("->LOOP:")
            assert int(mcode[i + 1].split()[0], 16) == addr + loop
        else:
            assert "->LOOP:" not in mcode
    assert not bad, "%d of %d traces differ (%s); first:\n%s" % (
        len(bad), len(live), " ".join(str(b[0]) for b in bad), bad[0][1])


def test_the_traces_hold_what_they_are_meant_to(stop):
    """The program made the IR it is meant to (from jit.dump's text)."""
    text = "\n".join("\n".join(v) for v in dumped(stop).values())
    ops = set(re.findall(r"^\d{4} [ >][ +] \S{3} (\S+)", text, re.M))
    want = {"SLOAD", "HREFK", "HLOAD", "FLOAD", "CONV", "ADD", "MUL", "PHI", "TDUP", "ASTORE",
            "ULOAD", "UREFO", "BAND", "BXOR", "XLOAD", "XSTORE"}
    v20 = stop.variant == "r20-x64"
    want |= {"CALLL"} if v20 else {"BUFSTR", "BUFPUT", "CALLXS", "CALLL"}
    assert want <= ops, sorted(want - ops)
    # (bias: the constant of TOBIT, which dual-number builds do not need.)
    dual = stop.build["dualnum"]
    for shown in ('"bxor"', "LOOP", "bit.band", '"~', "SNAP") + (() if dual else ("bias",)):
        assert shown in text, shown
    if not v20:
        assert re.search(r"\+0x1\.[0-9a-f]+p-10\d\d", text), "no denormal constant"
        assert re.search(r"\[0x[0-9a-f]{8,}\]|NULL", text)


def test_lir_json(stop):
    got = results(stop, "live")
    n, (addr, size, loop) = sorted(live_traces(stop).items())[0]
    doc = json.loads(got["%d --json" % n])
    assert doc["command"] == "lir" and doc["trace"] == n
    assert doc["ir"] == dumped(stop)[n]
    assert doc["mcode"]["size"] == size and int(doc["mcode"]["start"], 16) == addr
    assert int(doc["mcode"]["lines"][0]["address"], 16) == addr


def test_lir_bad_input_is_one_line(stop):
    got = results(stop, "live")
    last = max(live_traces(stop))
    want = {
        "lir": "error: lir: missing trace number. Usage: lir <trace>",
        "lir 99999": "error: lir: no trace 99999: live traces are 1..%d" % last,
        "lir foo": "error: lir: 'foo' is not a trace number",
        "lir 1 --bogus": "error: lir: unknown option '--bogus'",
        "lir 0": "error: lir: no trace 0: live traces are 1..%d" % last,
    }
    for cmd, start in want.items():
        assert got[cmd].startswith(start) and "\n" not in got[cmd].strip(), (cmd, got[cmd])


def test_lir_in_the_core_reader(stop):
    """python3 -m ljgdb CORE lir N: the same IR; one line instead of the
    machine code, as it has no disassembler."""
    want = dumped(stop)
    live = live_traces(stop)
    cmds = ["lir %d" % n for n in sorted(live)]
    p = subprocess.run([sys.executable, CORERUN, stop.core, stop.build["host"]] +
                       sysroot_args(stop.build),
                       input=json.dumps(cmds).encode(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=600)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    for n, (out, err) in zip(sorted(live), json.loads(p.stdout)):
        assert err is None, err
        ir, mcode = ir_part(out, n)
        assert ir == want[n], n
        assert mcode == ["---- TRACE %d mcode %d" % (n, live[n][1]),
                         "(%d bytes at 0x%x: no disassembler here; run lir in gdb to see them)"
                         % (live[n][1], live[n][0])]


@pytest.mark.parametrize("variant", NOJIT_VARIANTS)
def test_lir_without_the_jit(variant, tmp_path):
    stop = Stop(variant, "irdump.lua", ["lir 1"], str(tmp_path))
    assert [r[0] for r in stop.expected] == ["nojit"]
    for mode in ("live", "core"):
        text = stop.out(mode, "lir 1").strip()
        assert text.startswith("lir: this LuaJIT was built without the JIT compiler") and \
            "\n" not in text, text
