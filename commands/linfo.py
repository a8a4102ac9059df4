"""linfo: what LuaJIT this is and where its state lives."""
from ..gdb_ext.errors import CorruptError, FaultError
from ..gdb_ext.vm.runtime import jit_version
from ..gdb_ext.vm.state import TRACE_UNKNOWN
from ..gdb_ext.stack.vmstack import locate
from .base import LjCommand, UsageError, get_vm, split_args
from .host import current
from .format import hexa


class LInfo(LjCommand):
    """Show the LuaJIT build and VM state: version and fork, GC64 or X64, FR2,
DUALNUM, JIT, pointer size, the addresses of global_State and of the main,
current and selected lua_State, the VM state (interpreter, C, GC, trace N...), how the running
thread's innermost frame is found at this moment (registers, L->base or a
trace snapshot) and what cannot be known there,
the GC state and gc.total.

Usage: linfo [L=<lua_State *>]
Example:
  (gdb) linfo
  version:        LuaJIT 2.1.ROLLING (upstream 2.1)
  mode:           GC64 (64-bit GC references)
  ..."""

    NAME = "linfo"
    SUMMARY = "the LuaJIT build, the VM state and how the running frame is found"
    USAGE = "linfo [L=<lua_State *>]"

    def run(self, arg, from_tty):
        return ["%-17s %s" % (k + ":", v) for k, v in self.data(arg)[0]]

    def run_json(self, arg, from_tty):
        pairs, raw = self.data(arg)
        raw["fields"] = [{"name": k, "value": v} for k, v in pairs]
        return raw

    def data(self, arg):
        """([(name, text)] as linfo prints them, {the same as numbers and
        flags})."""
        flags, opts, L_expr, rest = split_args(arg)
        if rest:
            raise UsageError("unexpected argument '%s'" % rest[0])
        vm = get_vm(L_expr)
        lay = vm.lay
        ver = jit_version(vm)
        verline = "%s (%s %s)" % (ver, lay.fork, lay.branch) if ver else \
            "LuaJIT %s, %s (jit.version not found: jit library not loaded)" % (lay.branch, lay.fork)
        out = [
            ("version", verline),
            ("mode", "GC64 (64-bit GC references)" if lay.gc64 else
             "X64 (32-bit GC references, GC heap below 4 GB)"),
            ("FR2", "yes (two-slot frames)" if lay.fr2 else "no (one-slot frames)"),
            ("DUALNUM", "yes (integers as int32 TValues)" if lay.dualnum else "no (all numbers are doubles)"),
            ("JIT", "yes" if lay.jit else "no (built with LUAJIT_DISABLE_JIT)"),
            ("pointer size", "%d" % lay.ptr_size),
            ("global_State", "(global_State *)0x%x" % vm.G),
            ("main lua_State", "(lua_State *)0x%x" % vm.main_L),
        ]
        if lay.has_cur_L:
            cur = vm.cur_L
            out.append(("cur_L", "(lua_State *)0x%x" % cur if cur else "NULL"))
        m = current().profile_match()
        prof = m.profile if m is not None else None
        out.append(("layout", "layout profile %s, chosen by %s (the binary has no DWARF for "
                              "LuaJIT); the VM's code labels %s" % (
                                  prof.describe(), m.how,
                                  "from the profile" if m.labels else
                                  "are not known (this build's machine code is not the "
                                  "profile's): where the running thread stands may not be")
                    if prof else "DWARF debug info"))
        out.append(("selected L", "(lua_State *)0x%x  [%s]" % (vm.L, vm.L_source)))
        name, trace = vm.vmstate_name()
        out.append(("VM state", name if name != "TRACE" else
                    "TRACE %d (running JIT-compiled code)" % trace if trace is not None else
                    "TRACE (%s)" % TRACE_UNKNOWN))
        try:
            start = locate(vm, vm.thread(vm.running_L), vm.machine_frames)
            out.append(("running frame", "%s%s" % (start.how, "" if start.warning is None
                                                   else "; " + start.warning)))
        except (FaultError, CorruptError) as e:
            out.append(("running frame", "unreadable: %s" % e))
        frames_note = current().frames_note()
        if frames_note:
            out.append(("C frames", frames_note))
        _, gcname = vm.gc_state
        out.append(("GC state", gcname[3:].lower() if gcname.startswith("GCS") else gcname))
        out.append(("gc.total", "%d bytes" % vm.gc_total))
        out.append(("gc.threshold", "%d bytes" % vm.gc_threshold))
        try:
            th = vm.thread()
            out.append(("selected L stack", "%d slots at 0x%x, status %d"
                        % (th.stacksize, th.stack, th.status)))
        except (FaultError, CorruptError) as e:
            out.append(("selected L stack", "unreadable: %s" % e))
        raw = {"version": ver, "fork": lay.fork, "branch": lay.branch, "gc64": lay.gc64,
               "fr2": lay.fr2, "dualnum": lay.dualnum, "jit": lay.jit,
               "pointer_size": lay.ptr_size, "G": hexa(vm.G), "main_L": hexa(vm.main_L),
               "cur_L": hexa(vm.cur_L) if lay.has_cur_L else None, "selected_L": hexa(vm.L),
               "selected_L_source": vm.L_source, "vmstate": name, "trace": trace,
               "gc_total": vm.gc_total, "gc_threshold": vm.gc_threshold,
               "layout_profile": prof.path if prof else None, "frames_note": frames_note}
        return out, raw
