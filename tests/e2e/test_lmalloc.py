"""lmalloc against glibc's own report: testprogs/lua/malloc.lua fragments
glibc's heap (thousands of blocks of many sizes, most freed; small ones
freed past the tcache into the fastbins; a thread's own arena; a chunk
mmapped on its own), writes malloc_info()'s XML, and stops with nothing
allocated or freed in between.  Every arena's figures must be the
report's: its fastbins, its "rest" (top and bins), each bin's
from/to/total/count, its system memory and address space, and the mmapped
chunks; live and from the core in gdb, and in the core reader (gdb's
text on the core).  On arm64 the cross libc has no debug info: one line
says so."""
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from support.host import core_outputs
from support.stop import (ARM64_VARIANTS, LOADER, ROOT, Stop, cut_outputs, manifest, run_gdb,
                          wrap_commands)
from test_corereader import core_reader, differs

CMDS = ["lmalloc --json", "lmalloc", "lmalloc --bins", "lmalloc extra", "lmalloc L=0x8"]
MODES = ("live", "core")


@pytest.fixture(scope="module", params=["r21-gc64", "r20-x64", "deb-x64"])
def stop(request, tmp_path_factory):
    work = str(tmp_path_factory.mktemp("lmalloc-" + request.param))
    return Stop(request.param, "malloc.lua", CMDS, work)


def report(stop):
    """malloc_info's XML the program wrote: parse_report's."""
    return parse_report([r[1] for r in stop.expected if r[0] == "xml"][0])


def parse_report(path):
    """malloc_info's XML as ([per heap: its figures], mmap totals)."""
    root = ET.parse(path).getroot()
    heaps = []
    for h in root.findall("heap"):
        def total(kind, tag="total", h=h):
            e = [x for x in h.findall(tag) if x.get("type") == kind][0]
            return {k: int(v) for k, v in e.attrib.items() if k != "type"}
        sizes = [{k: int(v) for k, v in e.attrib.items()}
                 for e in h.find("sizes") if e.tag in ("size", "unsorted")]
        unsorted = [e for e in h.find("sizes") if e.tag == "unsorted"]
        heaps.append({"fast": total("fast"), "rest": total("rest"),
                      "system": total("current", "system")["size"],
                      "max_system": total("max", "system")["size"],
                      "aspace": total("total", "aspace")["size"],
                      "aspace_mprotect": total("mprotect", "aspace")["size"],
                      "sizes": sizes, "has_unsorted": bool(unsorted)})
    mmap = [x for x in root.findall("total") if x.get("type") == "mmap"][0]
    return heaps, {"count": int(mmap.get("count")), "size": int(mmap.get("size"))}


def check_arenas(doc, heaps, mmap):
    """lmalloc's document holds malloc_info's figures, heap by heap."""
    assert doc["glibc"] and doc["mmap"] == mmap
    assert len(doc["arenas"]) == len(heaps)
    for a, h in zip(doc["arenas"], heaps):
        for k in ("fast", "rest", "system", "max_system", "aspace", "aspace_mprotect"):
            assert a[k] == h[k], (a["number"], k, a[k], h[k])
        # malloc_info prints the unsorted bin after the others.
        bins = [b for b in a["bins"] if b["kind"] != "unsorted"] + \
            [b for b in a["bins"] if b["kind"] == "unsorted"]
        assert [{"from": b["from"], "to": b["to"], "total": b["total"], "count": b["count"]}
                for b in bins] == h["sizes"], a["number"]
        assert a["free"] <= a["fast"]["size"] + a["rest"]["size"]
        assert a["in_use"] == a["system"] - a["free"]
        assert sum(c["count"] for c in a["free_size_classes"]) == \
            a["fast"]["count"] + a["rest"]["count"] - 1
    assert doc["arenas"][0]["main"] and not any(a["main"] for a in doc["arenas"][1:])


@pytest.mark.parametrize("mode", MODES)
def test_as_malloc_info_reports(stop, mode):
    heaps, mmap = report(stop)
    doc = json.loads(stop.out(mode, "lmalloc --json"))
    check_arenas(doc, heaps, mmap)
    assert heaps[0]["fast"]["count"] >= 50           # (the workload did reach the fastbins)
    assert len(heaps) >= 2
    text = stop.out(mode, "lmalloc").split("\n")
    assert text[0].startswith("glibc %s malloc: %d arenas; 1 chunk mmapped on its own (%d bytes)"
                              % (doc["glibc"], len(heaps), mmap["size"]))
    assert stop.out(mode, "lmalloc extra").startswith(
        "lmalloc: unexpected argument 'extra'. Usage: lmalloc [--bins]")
    assert stop.out(mode, "lmalloc L=0x8").startswith("lmalloc: unexpected argument")


def test_core_reader_as_gdb(stop):
    m = manifest()[stop.variant]
    for cmd, res in zip(CMDS, core_reader(stop.core, m["host"], CMDS)):
        d = differs(res, stop.out("core", cmd), cmd)
        assert d is None, d


def test_shipped_profile_without_debug_info(stop):
    """gdb on the core with libc's debug file out of its sight: the layout
    profile of this libc build (pkg/profiles/glibc/, written from libc6-dbg
    by testprogs/make_profiles.py) gives the same figures, and one line
    says where the layout came from."""
    m = manifest()[stop.variant]
    outs = dict(core_outputs(m["host"], stop.core, ["lmalloc --json", "lmalloc"],
                             gdb_init=["set debug-file-directory /nonexistent"]))
    doc = json.loads(outs["lmalloc --json"])
    assert doc["layout_from"].startswith("the layout profile debian-libc6_"), doc["layout_from"]
    heaps, mmap = report(stop)
    check_arenas(doc, heaps, mmap)
    assert outs["lmalloc"].split("\n")[1] == "(glibc's layout from %s)" % doc["layout_from"]


def test_lldb_as_gdb(stop):
    """lmalloc in lldb on the same core: gdb's text (glibc's types from
    libc6-dbg's malloc.c, as lldb reads them)."""
    from test_lldb import lldb_commands, need_lldb
    need_lldb()
    m = manifest()[stop.variant]
    got = lldb_commands("%s --core %s" % (m["host"], stop.core), CMDS, os.path.dirname(stop.core))
    for cmd, res in zip(CMDS, got):
        d = differs(res, stop.out("core", cmd), cmd, "lldb")
        assert d is None, d


@pytest.mark.parametrize("variant", ARM64_VARIANTS[:1])
def test_without_libc_debug_info(variant, tmp_path):
    """The arm64 cross libc has neither the symbols nor the debug info: one
    line saying what is missing, live and from the core."""
    stop = Stop(variant, "malloc.lua", ["lmalloc"], str(tmp_path))
    for mode in MODES:
        out = stop.out(mode, "lmalloc").strip()
        assert out.startswith("lmalloc: ") and "libc6-dbg" in out and "\n" not in out, out


@pytest.mark.slow
def test_nginx_worker(tmp_path):
    """An nginx worker (lua-nginx-module) after five requests to /frag, each
    leaving a fragmented heap as a configuration's load does: gdb attached
    has the worker write malloc_info's report (unbuffered, so that writing
    it allocates nothing), and lmalloc in that gdb, then python3 -m ljgdb
    --pid on the idle worker once gdb is gone, give its figures."""
    from test_nginx import NGINX, LUA_MODULE, start_nginx
    from test_live import live
    from test_live_hosts import get
    if not (os.path.exists(NGINX) and os.path.exists(LUA_MODULE)):
        pytest.fail("nginx or the unpacked libnginx-mod-http-lua is missing "
                    "(testprogs/install-deps.sh installs nginx, testprogs/debs.py unpacks the module)")
    d = str(tmp_path)
    p, port = start_nginx(d, os.path.join(d, "expected.txt"))
    try:
        for _ in range(5):
            assert get(port, "/frag?n=3000") == "frag 3000\n"
        xml = os.path.join(d, "malloc.xml")
        cmds = ['call (void *) fopen("%s", "w")' % xml, "call (int) setvbuf($1, (char *) 0, 2, 0)",
                "call (int) malloc_info(0, $1)", "lmalloc --json"]
        out = dict(p.attach(cmds))
        assert out["call (int) malloc_info(0, $1)"].strip().endswith("= 0"), out
        heaps, mmap = parse_report(xml)
        check_arenas(json.loads(out["lmalloc --json"]), heaps, mmap)
        assert heaps[0]["rest"]["count"] >= 100, heaps[0]
        status, text, err = live(p.pid, ["lmalloc", "--json"])
        assert status == 0, err
        check_arenas(json.loads(text), heaps, mmap)
    finally:
        p.stop()


def test_a_program_without_luajit(tmp_path):
    """glibc's heap needs no Lua: testprogs/frag.c, a C program without
    LuaJIT, fragments its heap as malloc.lua does and writes malloc_info's
    report.  lmalloc gives every arena's figures of the report in gdb
    (live and from its core), in the core reader, in lldb on the core and
    with --pid on the running program, where lbt still says in one line
    that there is no LuaJIT."""
    exe = str(tmp_path / "frag")
    subprocess.run(["cc", "-g", "-O1", "-pthread", "-o", exe,
                    os.path.join(ROOT, "testprogs", "frag.c")], check=True)
    report, core = str(tmp_path / "report.xml"), str(tmp_path / "core")
    cmds = ["lmalloc --json", "lbt"]
    text = run_gdb(["-ex", "source " + LOADER, "-ex", "break frag_stop", "-ex", "run",
                    "-ex", "gcore " + core] + wrap_commands(cmds) + ["-ex", "kill", "--args",
                                                                     exe, report],
                   cwd=str(tmp_path))
    live = dict(cut_outputs(text, cmds))
    assert live["lbt"] is not None and live["lbt"].startswith("lbt: no LuaJIT in "), text[-3000:]
    heaps, mmap = parse_report(report)
    docs = {"gdb": json.loads(live["lmalloc --json"])}
    got = core_reader(core, exe, ["lmalloc --json", "lbt"])
    assert got[1][0] == "" and got[1][1].startswith("lbt: no LuaJIT in "), got[1]
    docs["core reader"] = json.loads(got[0][0])
    from test_lldb import lldb_binary, lldb_commands
    if lldb_binary() is not None:
        docs["lldb"] = json.loads(lldb_commands("%s --core %s" % (exe, core), ["lmalloc --json"],
                                                str(tmp_path))[0][0])
    waiting = subprocess.Popen([exe, report + ".pid", "wait"])
    try:
        deadline = time.time() + 20
        while not os.path.exists(report + ".pid.ready") and time.time() < deadline:
            time.sleep(0.05)
        p = subprocess.run([sys.executable, "-m", "ljgdb", "--pid", str(waiting.pid),
                            "lmalloc", "--json"], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        assert p.returncode == 0, p.stderr.decode()
        docs["--pid"] = json.loads(p.stdout)
        pid_report = parse_report(report + ".pid")
    finally:
        waiting.kill()
        waiting.wait()
    for where, doc in docs.items():
        check_arenas(doc, *(pid_report if where == "--pid" else (heaps, mmap)))
    assert len(heaps) >= 2 and heaps[0]["fast"]["count"] >= 50 and mmap["count"] == 1
