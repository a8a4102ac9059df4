"""The heap graph's memory bound (set ljgdb heap-memory MB; --set
heap-memory=MB in the core reader): a command that builds the graph
(lgcpath, lgcref, lgcstat --retained, --save, --diff, the V8 heap
snapshot) on a heap whose graph needs more refuses in one line, before it
builds it, naming the heap's objects, the limit and how to raise it, and
writes no file; with the default (0: half the memory available) the same
commands answer.  On testprogs/lua/heap.lua (N objects made and counted by
the program itself, one probe table), live in gdb, from the core in gdb
and in the core reader."""
import json
import os
import re
import subprocess
import sys

import pytest

from support.stop import ROOT, Stop, addr_of, driver_command, sysroot_args

N = 20000

DRIVER = r'''
import json, os
work = os.path.dirname(os.path.abspath(%r))
mode = "core" if "core dump file" in gdb.execute("info target", to_string=True) else "live"
probe = [l.split("\t")[1].split()[1] for l in open(os.path.join(work, "expected.txt"))
         if l.startswith("probe")][0]
def run(cmd):
    try:
        return gdb.execute(cmd, to_string=True)
    except gdb.error as e:
        return "error: " + str(e)
out = {"mode": mode, "refused": {}}
base = os.path.join(work, mode + "-base.snap")
out["base"] = run("lgcstat --save " + base)
gdb.execute("set ljgdb heap-memory 1")
for name, cmd in (("lgcpath", "lgcpath " + probe), ("lgcref", "lgcref " + probe),
                  ("retained", "lgcstat --retained"),
                  ("save", "lgcstat --save " + os.path.join(work, mode + "-small.snap")),
                  ("heapsnapshot", "lgcstat --save %%s --format heapsnapshot"
                   %% os.path.join(work, mode + "-small.heapsnapshot")),
                  ("diff", "lgcstat --diff " + base)):
    out["refused"][name] = run(cmd)
out["show"] = run("show ljgdb heap-memory")
gdb.execute("set ljgdb heap-memory 0")
out["lgcref"] = run("lgcref " + probe)
print("@@HEAPMEM@@" + json.dumps(out))
'''

LINE = re.compile(r"^error: (lgcpath|lgcref|lgcstat): the heap has (\d+) objects: the graph "
                  r"(lgcpath|lgcref|lgcstat --retained|lgcstat --save|lgcstat --diff|"
                  r"lgcstat --save --format heapsnapshot) builds would take about (\d+) MB, "
                  r"more than the 1 MB it may use \(the heap-memory setting\); lgcstat alone "
                  r"and lgcstat --top count the heap without the graph; to allow more: "
                  r"(.*)$")
COMMAND = {"lgcpath": "lgcpath", "lgcref": "lgcref", "retained": "lgcstat --retained",
           "save": "lgcstat --save", "heapsnapshot": "lgcstat --save --format heapsnapshot",
           "diff": "lgcstat --diff"}


@pytest.fixture(scope="module")
def stop(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("heapmem"))
    st = Stop("r21-gc64", "heap.lua", [driver_command(work, DRIVER)], work, args=(str(N),))
    st.work = work
    return st


def made(stop):
    return int([r for r in stop.expected if r[0] == "made"][0][1])


def check_refusal(text, name, stop, hint):
    m = LINE.match(text.strip())
    assert m and "\n" not in text.strip(), (name, text)
    assert m.group(3) == COMMAND[name], (name, text)
    # Every object the program made, and the VM's own.
    assert int(m.group(2)) >= made(stop), (name, text, made(stop))
    assert int(m.group(4)) > 1, text
    assert m.group(5).startswith(hint), text


@pytest.mark.parametrize("mode", ("live", "core"))
def test_refused_in_one_line_in_gdb(stop, mode):
    text = stop.out(mode, stop.commands[0])
    assert "@@HEAPMEM@@" in text, text[-3000:]
    res = json.loads(text.split("@@HEAPMEM@@", 1)[1].strip().splitlines()[0])
    assert res["mode"] == mode
    assert res["base"].startswith("Saved "), res["base"]
    for name, out in res["refused"].items():
        check_refusal(out, name, stop, "set ljgdb heap-memory ")
    # Nothing written by a refused command.
    for f in ("-small.snap", "-small.heapsnapshot"):
        assert not os.path.exists(os.path.join(stop.work, mode + f))
    assert re.search(r"\b1\b", res["show"]), res["show"]
    # The default allows it: the probe's one holder, keep's slot.
    probe = [r for r in stop.expected if r[0] == "probe"][0][1]
    assert res["lgcref"].startswith("references to table (GCtab *)0x%x: 1\n" % addr_of(probe)), \
        res["lgcref"]


def test_refused_in_one_line_in_the_core_reader(stop):
    probe = "0x%x" % addr_of([r for r in stop.expected if r[0] == "probe"][0][1])
    for name, args in (("lgcpath", ["lgcpath", probe]), ("retained", ["lgcstat", "--retained"]),
                       ("heapsnapshot", ["lgcstat", "--save", os.path.join(stop.work, "r.hs"),
                                         "--format", "heapsnapshot"])):
        p = subprocess.run([sys.executable, "-m", "ljgdb", "--set", "heap-memory=1"] +
                           sysroot_args(stop.build) + [stop.core, stop.build["host"]] + args,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, timeout=300)
        err = p.stderr.decode()
        assert p.returncode != 0 and not p.stdout and "Traceback" not in err, (name, err)
        check_refusal("error: " + err, name, stop, "--set heap-memory=")
    assert not os.path.exists(os.path.join(stop.work, "r.hs"))
