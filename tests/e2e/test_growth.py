"""lgcstat --save at one stop and --diff at the next, against what
testprogs/lua/growth.lua made in between (and recorded after): exactly its
new tables, closures, strings and upvalue objects, nothing freed, the
change of g->gc.total it measured, and where the new objects hang.  Every
variant: live, on gdb's cores, and in the core reader (one core saved,
the other compared)."""
import json
import os
import subprocess
import sys

import pytest

from support.stop import BOTH_ARCHES, ROOT, addr_of, sysroot_args
from support.multistop import MultiStop, build_of

# At the first stop: save; at the second: diff (JSON and text); nothing at
# the third (the program's records are written then).  The
# snapshot's name says live or core: the second gdb's saves are its own.
DRIVER = r'''
import json, os
_n = globals().get("_growth_stop", 0)
globals()["_growth_stop"] = _n + 1
_conn = getattr(gdb.selected_inferior(), "connection", None)
_snap = os.path.join(%r, "snap-%%s" %% ("core" if _conn is not None and _conn.type == "core"
                                       else "live"))
if _n == 0:
    print("@@GROWTH@@" + json.dumps(json.loads(gdb.execute("lgcstat --save --json " + _snap,
                                                           to_string=True))))
elif _n == 1:
    _doc = json.loads(gdb.execute("lgcstat --diff %%s --list --top 5 --json" %% _snap,
                                  to_string=True))
    _doc["text"] = gdb.execute("lgcstat --diff %%s" %% _snap, to_string=True)
    print("@@GROWTH@@" + json.dumps(_doc))
'''


@pytest.fixture(scope="module", params=BOTH_ARCHES)
def run(request, tmp_path_factory):
    work = str(tmp_path_factory.mktemp("growth-" + request.param))
    driver = os.path.join(work, "driver.py")
    with open(driver, "w") as f:
        f.write(DRIVER % work)
    ms = MultiStop(request.param, "growth.lua", ["python exec(open(%r).read())" % driver], 3,
                   work, keep_cores=True)
    ms.work = work
    return ms


def doc_of(text):
    return json.loads(text.split("@@GROWTH@@", 1)[1].strip().splitlines()[0])


def core_of(run, n):
    """The core reader's arguments for the core of stop n: the core and the
    binary (after --sysroot for an arm64 core, whose libraries are under
    the cross toolchain's sysroot)."""
    build = build_of(run.variant)
    return sysroot_args(build) + [os.path.join(run.work, "core.%d" % n), build["host"]]


def reader(run, *args):
    p = subprocess.run([sys.executable, "-m", "ljgdb"] + list(args), cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode()


def diffs(run):
    """{mode: the --diff document} for gdb live, gdb's cores and the core
    reader."""
    out = {"live": doc_of(run.out("live", 1)), "core": doc_of(run.out("core", 1))}
    snap = os.path.join(run.work, "snap-reader")
    reader(run, *core_of(run, 0), "lgcstat", "--save", snap)
    out["reader"] = json.loads(reader(run, *core_of(run, 1), "lgcstat", "--diff", snap, "--list",
                                      "--top", "5", "--json"))
    return out


def test_diff_lists_exactly_what_the_program_made(run):
    exp = run.expected
    (c1, c2), = [(int(r[1]), int(r[2])) for r in exp if r[0] == "total"]
    want = sorted((r[1], addr_of(r[2])) for r in exp if r[0] == "new")
    want_str = sorted(r[1] for r in exp if r[0] == "newstr")
    (nuv,), = [(int(r[1]),) for r in exp if r[0] == "upvalues"]
    want_owner = {r[1]: int(r[2]) for r in exp if r[0] == "owner"}
    for mode, doc in diffs(run).items():
        assert doc["same_process"], (mode, doc["then"], doc["now"])
        # g->gc.total moved by what collectgarbage("count") says, and the
        # per-type and other changes add up to it.
        assert (doc["gc_total_then"], doc["gc_total_now"]) == (c1, c2), mode
        change = sum(t["bytes_now"] - t["bytes_then"] for t in doc["types"]) + \
            sum(o["bytes_now"] - o["bytes_then"] for o in doc["other"])
        assert change == c2 - c1, (mode, doc["types"], doc["other"])
        assert doc["freed"] == {}, (mode, doc["freed"])
        got = sorted((e["type"], int(e["address"], 16)) for e in doc["list"]
                     if e["type"] in ("table", "function"))
        assert got == want, mode
        strs = sorted(json.loads(e["object"].split(" ", 3)[3]) for e in doc["list"]
                      if e["type"] == "string")
        assert strs == want_str, (mode, doc["list"])
        assert sum(1 for e in doc["list"] if e["type"] == "upvalue") == nuv, mode
        assert len(doc["list"]) == len(want) + len(want_str) + nuv, (mode, doc["list"])
        for t in doc["types"]:
            n = sum(1 for e in doc["list"] if e["type"] == t["type"])
            assert t["count_now"] - t["count_then"] == n, (mode, t)
        owners = {o["path"]: o["objects"] for o in doc["owners"]}
        assert owners == want_owner, (mode, doc["owners"])
        # Everything the program made hangs under _G.sessions: what it
        # retains grew by the whole change of g->gc.total.
        paths = {r["path"]: r["retained_now"] - r["retained_then"] for r in doc["paths"]}
        assert paths.get("_G.sessions") == c2 - c1, (mode, doc["paths"])


def test_diff_text_and_save_line(run):
    doc = doc_of(run.out("live", 1))
    text = doc["text"].splitlines()
    (c1, c2), = [(int(r[1]), int(r[2])) for r in run.expected if r[0] == "total"]
    assert "g->gc.total: %d then, %d now: %+d bytes" % (c1, c2, c2 - c1) in doc["text"], text
    assert "Freed: none" in text, text
    assert any(line.endswith("  _G.sessions.list") and line.split()[0] == "20"
               for line in text), text
    saved = doc_of(run.out("live", 0))
    assert saved["kind"] == "save" and saved["file"].endswith("snap-live"), saved


def test_snapshot_of_another_process_compares_types_only(run, tmp_path):
    """A snapshot of another process (the core reader's of the first core,
    its process id changed) gives the per-type figures, the retained bytes
    by path and the one line."""
    snap = str(tmp_path / "snap")
    reader(run, *core_of(run, 0), "lgcstat", "--save", snap)
    data = open(snap, "rb").read()
    # The magic line, an 8-byte length, the JSON header.  (Not the first
    # "{": the length's own bytes can hold one.)
    head_at = data.index(b"\n") + 1 + 8
    n = int.from_bytes(data[head_at - 8:head_at], "little")
    head = json.loads(data[head_at:head_at + n])
    head["identity"]["process"] += 1
    new = json.dumps(head, sort_keys=True).encode()
    with open(snap, "wb") as f:
        f.write(data[:head_at - 8] + len(new).to_bytes(8, "little") + new + data[head_at + n:])
    out = reader(run, *core_of(run, 1), "lgcstat", "--diff", snap)
    assert out.splitlines()[-1] == ("The snapshot is of another process or VM: objects cannot "
                                    "be matched by address, so only the figures per type and "
                                    "the retained bytes by path compare"), out
    assert "New objects" not in out
    # By path, the growth the program measured.
    (c1, c2), = [(int(r[1]), int(r[2])) for r in run.expected if r[0] == "total"]
    rows = [line.split() for line in out.splitlines() if line.endswith(" _G.sessions")]
    assert len(rows) == 1 and rows[0][2] == "%+d" % (c2 - c1), out


@pytest.mark.parametrize("args,line", [
    (["--diff", "/nonexistent/snap"], "lgcstat: cannot read /nonexistent/snap: No such file or "
                                      "directory"),
    (["--diff", "/etc/hostname"], "lgcstat: /etc/hostname is no heap snapshot of lgcstat --save"),
    (["--save", "x", "--diff", "y"], "lgcstat: --save and --diff do not go together"),
    (["--save", "/nonexistent/dir/snap"], "lgcstat: cannot write /nonexistent/dir/snap: No "
                                          "such file or directory"),
    (["--list"], "lgcstat: --list goes with --diff FILE"),
    (["--retained", "--by-chunk"], "lgcstat: --by-chunk and --retained do not go together"),
])
def test_bad_snapshot_input_is_one_line(run, args, line):
    p = subprocess.run([sys.executable, "-m", "ljgdb"] + core_of(run, 1) + ["lgcstat"] + args,
                       cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=600)
    err = p.stderr.decode().strip()
    assert p.returncode == 1 and err.startswith(line) and "\n" not in err, err
