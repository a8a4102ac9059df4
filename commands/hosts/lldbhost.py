"""ljgdb inside lldb: the Host that answers from lldb (commands.host), the
settings as `ljgdb set NAME VALUE`, and register() that adds the commands
to lldb's command interpreter.

`command script import /path/to/ljgdb.py` in lldb (or in ~/.lldbinit)
loads it: ljgdb.py, imported by lldb as the module `ljgdb`, is the
package's root, and its __lldb_init_module calls register().  The
commands are gdb's, with the same options, the same L=/G= selection, the
same --json and the same help text.  Where gdb takes an expression, lldb
takes an address (0x7f..., or a cast such as (GCtab *)0x7f...) or a
variable's name or path in the selected frame or among the globals, read
by lldb without evaluating anything in the process."""
import re
import shlex

import lldb

from ...gdb_ext.backends import corefile
from ...gdb_ext.backends.lldbtarget import LldbTarget, frame_candidates
from ...gdb_ext.layouts import buildid
from ...gdb_ext.errors import LjError, NotLuaJITError
from ...gdb_ext.layouts.layout import Layout
from ..base import CommandError, UsageError, display_vm, help_text
from .corehost import parse_operand
from ..host import (SETTINGS, Operand, OwnSettings, current, install, setting_value,
                    truncation_text)
from ..summaries import GC_TYPES, global_text, guarded, object_text, tvalue_text

# The commands lldb has (lmalloc reads glibc's types through gdb's scopes
# and lprofile runs the process: gdb only, for now).
LLDB_COMMANDS = ("linfo", "lval", "ltab", "lbt", "lthreads", "lstates", "lgcstat", "lgcref",
                 "lgcpath", "lmcode", "ltrace", "lbc", "lir", "lstr", "lheap", "lframe", "lup",
                 "ldown", "llocals", "lprint", "llist", "lmalloc")


class LldbHost(OwnSettings):
    """The Host over one lldb debugger: its selected target, process (live
    or core), thread and frame."""

    name = "lldb"
    debug_hint = "'ljgdb set debug on' shows a traceback"
    reader = "lldb"

    def __init__(self, debugger):
        OwnSettings.__init__(self)
        self.debugger = debugger
        self.pending = []
        self._layouts = {}
        self.target = None          # this command's (or this stop's) Target: fresh()

    def fresh(self):
        """Forget the Target: the next command (or the next stop's
        summaries) makes its own, as the process may have run since.  One
        command makes one, whatever it asks of the host (the state search,
        the checks, the notes of its error line)."""
        self.target = None

    def _target(self):
        if self.target is None:
            self.target = LldbTarget(self.debugger)
        return self.target

    def _modules_key(self, sbt):
        return tuple(sbt.GetModuleAtIndex(i).GetFileSpec().fullpath
                     for i in range(sbt.GetNumModules()))

    def target_and_layout(self):
        """This command's Target and the Layout, read once per set of
        loaded modules."""
        target = self._target()
        key = self._modules_key(target.sbt)
        lay = self._layouts.get(key)
        if lay is None:
            try:
                lay = Layout(target)
            except NotLuaJITError:
                if target.type_info("lua_State") is None:
                    raise LjError(no_luajit_message(target))
                raise
            self._layouts.clear()
            self._layouts[key] = lay
        return target, lay

    def check_environment(self):
        target, lay = self.target_and_layout()
        self._check_process(target)
        if self.param("check-build-id"):
            mismatch = core_mismatch(target)
            if mismatch:
                raise LjError(mismatch)
        return target, lay

    def check_memory(self):
        target = self._target()
        self._check_process(target)
        return target

    @staticmethod
    def _check_process(target):
        proc = target.process
        if not proc.IsValid() or proc.GetState() in (lldb.eStateInvalid, lldb.eStateUnloaded,
                                                     lldb.eStateExited, lldb.eStateDetached):
            raise LjError("no process or core file: launch the program ('process launch'), "
                          "attach ('process attach -p PID') or load a core ('target create "
                          "--core FILE')")
        if proc.GetState() in (lldb.eStateRunning, lldb.eStateStepping):
            raise LjError("the process is running, and ljgdb reads stopped processes only: "
                          "stop it first ('process interrupt', or Ctrl-C) and run the command "
                          "again")

    def frame_candidates(self, lay):
        target, _ = self.target_and_layout()
        return frame_candidates(target, lay)

    def operand(self, expr, what="expression"):
        got = self._c_operand(expr, what)
        if got is None:
            raise UsageError("%s '%s' is neither an address (0x7f..., or a cast such as "
                             "(GCtab *)0x7f...), nor a variable of the selected frame or a "
                             "global that lldb knows, nor such a pointer plus or minus a number "
                             "(L->base+1)" % (what, expr))
        return got

    def _arithmetic(self, expr, what):
        """The C subset that the README's arguments use, read without
        running anything: lldb's expression evaluator would allocate
        memory in a live process (measured: a mapping of about 540 KB
        appeared), so it is not used.  A variable path as lldb reads one
        (`L->base[2].u64`), member access and indexing after a
        parenthesized one (`((lua_State *)0x7f...)->base`), a pointer cast
        of any of these (`(GCtab *)L->base`), and a pointer plus or minus
        an integer, scaled by the pointee's size as C scales it
        (`L->base+2`); parentheses around any of them.  An assignment or
        increment is refused in one line; anything else (a call) is not C
        this reads.  None when expr is not
        of these forms."""
        if WRITES.search(expr):
            raise UsageError("%s '%s' assigns: ljgdb never writes to the process" % (what, expr))
        text = _unparen(expr.strip())
        m = _ARITH_RE.match(text)
        if m:
            base = self._c_operand(m.group(1), what)
            if base is None or base.pointee is None:
                return None
            size = self._size_of(base.pointee)
            if size is None:
                raise UsageError("%s '%s': the size of %s is not known to lldb, so the pointer "
                                 "cannot be moved" % (what, expr, base.pointee))
            n = int(m.group(3), 0) * (1 if m.group(2) == "+" else -1)
            return Operand(value=(base.value + n * size) & 0xFFFFFFFFFFFFFFFF, pointee=base.pointee)
        m = _MEMBER_RE.match(text)
        if m and _unparen(m.group(1)) != m.group(1):
            return self._member(m.group(1), m.group(2).strip(), what)
        m = _CAST_ANY_RE.match(text)
        if m:
            inner = self._c_operand(m.group(3), what)
            if inner is None or inner.value is None:
                return None
            return Operand(value=inner.value,
                           pointee=m.group(1) if len(m.group(2)) == 1 else "pointer")
        return None

    def _c_operand(self, expr, what):
        """An Operand of one of _arithmetic's forms, a number, a variable
        path or a cast of a number; None when it is none of them."""
        text = _unparen(expr.strip())
        try:
            return parse_operand(text, what, "lldb")
        except UsageError:
            pass
        v = self._variable(text)
        if v is not None:
            return sb_operand(v)
        return self._arithmetic(text, what)

    def _member(self, head, path, what):
        """(HEAD)->member... or (HEAD).member...: lldb reads the path from
        the object HEAD points to (or is), by its type; None when HEAD is
        neither a pointer to nor a value of a type lldb knows."""
        base = self._c_operand(head, what)
        if base is None:
            return None
        sbt = self.debugger.GetSelectedTarget()
        if path.startswith("->") and base.pointee is not None:
            name, addr, path = base.pointee, base.value, "." + path[2:].lstrip()
        elif path.startswith(".") and base.type_name is not None and base.address is not None:
            name, addr = base.type_name, base.address
        else:
            return None
        t = sbt.FindFirstType(name)
        if not t.IsValid():
            return None
        v = sbt.CreateValueFromAddress("ljgdb", lldb.SBAddress(addr, sbt), t)
        got = v.GetValueForExpressionPath(path) if v.IsValid() else None
        if got is None or not got.IsValid() or got.GetError().Fail():
            return None
        return sb_operand(got)

    def _size_of(self, name):
        if name == "void":
            return 1            # (as GNU C moves a void *)
        if name == "pointer":
            return 8
        t = self.debugger.GetSelectedTarget().FindFirstType(name)
        return t.GetByteSize() if t.IsValid() and t.GetByteSize() else None

    def _variable(self, path):
        """The SBValue of a variable path in the selected frame, else of a
        global; None when there is none (nothing is evaluated)."""
        sbt = self.debugger.GetSelectedTarget()
        proc = sbt.GetProcess()
        if proc.IsValid():
            frame = proc.GetSelectedThread().GetSelectedFrame()
            if frame.IsValid():
                v = frame.GetValueForVariablePath(path)
                if v.IsValid() and v.GetError().Success():
                    return v
        v = sbt.FindFirstGlobalVariable(path)
        return v if v.IsValid() and v.GetError().Success() else None

    def write(self, text):
        self.pending.append(text)

    def setting_hint(self, name, value):
        return "ljgdb set %s %s" % (name, value)

    def profile_match(self):
        target, _ = self.target_and_layout()
        return target.match

    def disassemble(self, lo, hi):
        """lldb's disassembler over [lo, hi) (it reads the process or the
        core; gdb's flavour on x86-64, AT&T): [(address, 'mnemonic
        operands')], or None when it cannot read there."""
        if hi <= lo:
            return []
        sbt = self.debugger.GetSelectedTarget()
        err = lldb.SBError()
        data = sbt.GetProcess().ReadMemory(lo, hi - lo, err)
        if err.Fail() or data is None:
            return None
        insns = sbt.GetInstructions(lldb.SBAddress(lo, sbt), data)
        out = []
        addr = lo
        for i in range(insns.GetSize()):
            ins = insns.GetInstructionAtIndex(i)
            at = ins.GetAddress().GetLoadAddress(sbt)
            addr = addr if at == lldb.LLDB_INVALID_ADDRESS else at
            if addr >= hi:
                break
            ops = ins.GetOperands(sbt)
            out.append((addr, ("%-6s %s" % (ins.GetMnemonic(sbt), ops)).rstrip() if ops
                        else ins.GetMnemonic(sbt)))
            addr += ins.GetByteSize()
        return out

    def truncation_note(self):
        try:
            path = self._target().core_path()
        except LjError:
            return ""           # (no target: nothing to say of a core)
        return truncation_text(corefile.truncation(path) if path else None)

    def take_written(self):
        text, self.pending = "".join(self.pending), []
        return text


def no_luajit_message(target):
    """Why there is no LuaJIT layout, and what to do (gdbhost's
    _no_luajit_message in lldb's words)."""
    mod = target.luajit_module
    if mod is None or not mod.IsValid():
        return ("no LuaJIT among the loaded files' symbols (lua_newstate, luaL_newstate, "
                "lua_pcall): load a program that runs LuaJIT ('target create PROG --core CORE', "
                "or 'process attach -p PID'); a shared libluajit is loaded when the program runs")
    got = target.luajit_build_id()
    bid = " (build-id %s)" % got[1] if got else ""
    why = target.profile_failure or ("ljgdb reads LuaJIT's structures from DWARF or from a "
                                     "layout profile of the same build")
    return ("LuaJIT is in %s but without debug info, and %s: rebuild LuaJIT with debug info "
            "(make CCDEBUG=-g), add its debug file ('target symbols add FILE'), or put the "
            "layout profile of this build%s (python3 -m ljgdb.profile on its debug file) in a "
            "directory named by $LJGDB_PROFILES" % (mod.GetFileSpec().fullpath, why, bid))


def core_mismatch(target):
    """On a core: None when the module that holds LuaJIT wrote it (or when
    that cannot be told), else buildid.mismatch's line."""
    path = target.core_path()
    got = target.luajit_build_id()
    if path is None or got is None:
        return None
    return buildid.mismatch(corefile.build_ids(path), got[0], got[1],
                            give="load the files that wrote the core (target create BINARY "
                                 "--core CORE, with the same library versions)",
                            off="'ljgdb set check-build-id off'", loaded="lldb loaded it with")


# An assignment, a compound one or an increment: refused, never read as
# something else.
WRITES = re.compile(r"(?<![=!<>])=(?!=)|<<=|>>=|\+\+|--")
# LldbHost._arithmetic's forms: EXPR + N or EXPR - N (the last operator,
# as C's left-to-right + and -), and (TYPE *...)EXPR.
_ARITH_RE = re.compile(r"^(.+?)\s*([+-])\s*(0[xX][0-9a-fA-F]+|\d+)$")
# (HEAD) followed by member accesses and indexing: ((lua_State *)0x7f...)->base
_MEMBER_RE = re.compile(r"^(.*\))((?:\s*(?:->|\.)\s*[A-Za-z_]\w*|\s*\[\s*\d+\s*\])+)$")
_CAST_ANY_RE = re.compile(r"^\(\s*(?:struct\s+|union\s+)?([A-Za-z_]\w*)\s*(\*+)\s*\)\s*(.+)$")


def _unparen(text):
    """text without parentheses that enclose all of it."""
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, c in enumerate(text):
            depth += c == "("
            depth -= c == ")"
            if depth == 0 and i < len(text) - 1:
                return text
        text = text[1:-1].strip()
    return text


def sb_operand(v):
    """The Operand of lldb.SBValue v (gdbhost.gdb_operand's peer)."""
    ty = v.GetType().GetCanonicalType()
    tc = ty.GetTypeClass()
    if tc in (lldb.eTypeClassStruct, lldb.eTypeClassUnion):
        name = _tag(v.GetType())
        ref = None
        if name == "GCRef" and v.GetNumChildren():
            ref = v.GetChildAtIndex(0).GetValueAsUnsigned() & 0xFFFFFFFFFFFFFFFF
        addr = v.GetLoadAddress()
        return Operand(type_name=name, address=None if addr == lldb.LLDB_INVALID_ADDRESS
                       else addr, ref=ref)
    if ty.IsPointerType():
        return Operand(value=v.GetValueAsUnsigned() & 0xFFFFFFFFFFFFFFFF,
                       pointee=_tag(v.GetType().GetPointeeType()) or "void")
    if tc in (lldb.eTypeClassBuiltin, lldb.eTypeClassEnumeration):
        floating = ty.GetBasicType() in (lldb.eBasicTypeFloat, lldb.eBasicTypeDouble,
                                         lldb.eBasicTypeLongDouble)
        if floating:
            try:
                value = int(float(v.GetValue())) & 0xFFFFFFFFFFFFFFFF
            except (TypeError, ValueError, OverflowError):
                value = None        # (nan, inf: no number, as gdb's int() of one)
        else:
            value = v.GetValueAsSigned() & 0xFFFFFFFFFFFFFFFF
        return Operand(value=value, floating=floating)
    return Operand()


def _tag(t):
    """A type's name as gdb's tag or typedef name gives it: 'GCtab',
    'TValue' (no 'struct ' and no qualifiers)."""
    words = (t.GetName() or "").split()
    while words and words[0] in ("const", "volatile", "struct", "union", "enum"):
        words.pop(0)
    return " ".join(words)


# --------------------------------------------------------------------------
# Commands

def _host(debugger):
    try:
        host = current()
    except RuntimeError:
        host = None
    if not isinstance(host, LldbHost) or host.debugger.GetID() != debugger.GetID():
        host = install(LldbHost(debugger))
    return host


def run(cls, debugger, command, result):
    """Run command class cls with the argument text `command`; its output
    or its one error line into result (lldb.SBCommandReturnObject)."""
    host = _host(debugger)
    host.pending = []
    host.fresh()
    _forget_after_a_run(host)
    try:
        out = cls().execute(command or "")
    except CommandError as e:
        text = host.take_written() + (getattr(e, "output", "") or "")
        if text:
            result.AppendMessage(text.rstrip("\n"))
        result.SetError(str(e))
        return
    text = host.take_written() + out
    if text:
        result.AppendMessage(text.rstrip("\n"))
    result.SetStatus(lldb.eReturnStatusSuccessFinishResult)


def _forget_after_a_run(host):
    """Forget the selected Lua frames (lframe) when the process has run, or
    another process or core is loaded, since the last command: gdb's
    events do that in gdb (commands.hosts.gdbhost), lldb's stop id here."""
    from ..lframe import forget
    sbt = host.debugger.GetSelectedTarget()
    proc = sbt.GetProcess()
    key = (sbt.GetExecutable().fullpath if sbt.IsValid() else None,
           proc.GetUniqueID() if proc.IsValid() else None,
           proc.GetStopID() if proc.IsValid() else None)
    if getattr(host, "stop_key", None) != key:
        forget()
        host.stop_key = key


def _lldb_command(cls):
    """A class lldb's `command script add -c` takes for command class cls."""

    class Command(object):
        def __init__(self, debugger, internal_dict):
            pass

        def get_short_help(self):
            return cls.SUMMARY or ""

        def get_long_help(self):
            return (cls.__doc__ or "").replace("(gdb) ", "(lldb) ")

        def __call__(self, debugger, command, exe_ctx, result):
            run(cls, debugger, command, result)

    Command.__name__ = Command.__qualname__ = "Cmd_" + cls.NAME
    return Command


class Settings(object):
    """ljgdb set NAME VALUE, ljgdb show [NAME], ljgdb help: ljgdb's settings
    in lldb (gdb's set ljgdb / show ljgdb)."""

    def __init__(self, debugger, internal_dict):
        pass

    def get_short_help(self):
        return "ljgdb's settings: ljgdb set NAME VALUE, ljgdb show [NAME]; ljgdb help"

    def __call__(self, debugger, command, exe_ctx, result):
        host = _host(debugger)
        try:
            words = shlex.split(command or "")
        except ValueError as e:
            result.SetError("ljgdb: %s" % e)
            return
        verb = words[0] if words else "help"
        if verb == "help" and len(words) <= 1:
            result.AppendMessage(help_text(classes()).split("\nIn gdb's")[0].replace(
                "'help <command>'", "'help <command>' (lldb's help)") + "\nSettings: 'ljgdb "
                "show' lists them, 'ljgdb set <name> <value>' changes one.")
            return
        if verb == "show" and len(words) <= 2:
            names = words[1:] or sorted(SETTINGS)
            for name in names:
                if name not in SETTINGS:
                    result.SetError("ljgdb show: no setting '%s' (%s)"
                                    % (name, ", ".join(sorted(SETTINGS))))
                    return
                value = host.settings[name]
                if isinstance(value, bool):
                    value = "on" if value else "off"
                result.AppendMessage("%s:  %s (%s)" % (name, value,
                                                       SETTINGS[name][4].rstrip(".")))
            return
        if verb == "set" and len(words) == 3 and words[1] in SETTINGS:
            try:
                host.settings[words[1]] = setting_value(words[1], words[2])
            except ValueError as e:
                result.SetError("ljgdb set %s takes %s" % (words[1], e))
            return
        result.SetError("ljgdb: takes 'set NAME VALUE', 'show [NAME]' or 'help', with NAME "
                        "one of %s" % ", ".join(sorted(SETTINGS)))


# --------------------------------------------------------------------------
# Type summaries: frame variable and p show LuaJIT's values as gdb's print
# does with ljgdb's pretty-printers (commands/hosts/printers.py), in the type
# category ljgdb (`type category disable ljgdb` turns them off).

def _summary_vm(valobj):
    """The VM to decode with (base.display_vm), made once per stop of the
    process (lldb asks for many summaries at one stop)."""
    target = valobj.GetTarget()
    host = _host(target.GetDebugger())
    proc = target.GetProcess()
    key = (target.GetDebugger().GetID(), proc.GetProcessID(), proc.GetStopID()) \
        if proc.IsValid() else None
    if key is None or getattr(host, "summary_key", None) != key:
        host.summary_key = key
        host.fresh()
        host.summary_vm = display_vm() if key is not None else None
    return host.summary_vm


def _summary(valobj, text):
    """text(vm), or "" (lldb's own view) without a process or LuaJIT."""
    vm = _summary_vm(valobj)
    return guarded(vm, text) if vm is not None else ""


def tvalue_summary(valobj, internal_dict):
    """A TValue: the Lua value, as lval prints it."""
    addr = valobj.GetLoadAddress()
    bits = None
    if addr == lldb.LLDB_INVALID_ADDRESS:
        # (an expression's result, a copy without an address: its bits)
        err = lldb.SBError()
        bits = valobj.GetData().GetUnsignedInt64(err, 0)
        if err.Fail():
            return ""
    return _summary(valobj, lambda vm: tvalue_text(vm, addr, bits))


def gcref_summary(valobj, internal_dict):
    """A GCRef: the object it references."""
    ref = valobj.GetChildAtIndex(0).GetValueAsUnsigned() & 0xFFFFFFFFFFFFFFFF
    return _summary(valobj, lambda vm: object_text(vm, None, ref))


def mref_summary(valobj, internal_dict):
    """An MRef: the address it holds."""
    return "0x%x" % (valobj.GetChildAtIndex(0).GetValueAsUnsigned() & 0xFFFFFFFFFFFFFFFF)


def _object_summary(valobj, name, addr):
    if name == "global_State":
        return _summary(valobj, lambda vm: global_text(vm, addr))
    return _summary(valobj, lambda vm: object_text(vm, GC_TYPES[name], addr))


def pointer_summary(valobj, internal_dict):
    """A pointer to a GC object or a global_State: the object."""
    name = _tag(valobj.GetType().GetPointeeType())
    if name not in GC_TYPES and name != "global_State":
        return ""
    return _object_summary(valobj, name, valobj.GetValueAsUnsigned() & 0xFFFFFFFFFFFFFFFF)


def struct_summary(valobj, internal_dict):
    """A GC object or a global_State itself (frame variable *L): the
    object's line, and lldb lists the members after it; nothing for a copy
    without an address (expression *L on a core)."""
    name = _tag(valobj.GetType())
    addr = valobj.GetLoadAddress()
    if (name not in GC_TYPES and name != "global_State") or addr == lldb.LLDB_INVALID_ADDRESS:
        return ""
    return _object_summary(valobj, name, addr)


def _add_summaries(debugger):
    interp = debugger.GetCommandInterpreter()
    names = sorted(GC_TYPES) + ["global_State"]
    adds = ["type category define ljgdb",
            "type summary add -w ljgdb -p -F %s.tvalue_summary TValue" % __name__,
            "type summary add -w ljgdb -p -F %s.gcref_summary GCRef" % __name__,
            "type summary add -w ljgdb -p -F %s.mref_summary MRef" % __name__,
            "type summary add -w ljgdb -p -e -F %s.struct_summary %s" % (__name__, " ".join(names)),
            "type summary add -w ljgdb -x -F %s.pointer_summary '^(struct )?(%s) \\*$'"
            % (__name__, "|".join(names)),
            "type category enable ljgdb"]
    for cmd in adds:
        interp.HandleCommand(cmd, lldb.SBCommandReturnObject())


def classes():
    from .. import command_classes
    return [c for c in command_classes(with_gdb_only=False) if c.NAME in LLDB_COMMANDS]


def register(debugger):
    """Add ljgdb's commands to debugger's command interpreter (again when
    imported again: the new code replaces the old); their names."""
    names = []
    for cls in classes():
        globals()["Cmd_" + cls.NAME] = _lldb_command(cls)
        debugger.HandleCommand("command script add -o -c %s.Cmd_%s %s"
                               % (__name__, cls.NAME, cls.NAME))
        names.append(cls.NAME)
    debugger.HandleCommand("command script add -o -c %s.Settings ljgdb" % __name__)
    _add_summaries(debugger)
    _host(debugger)
    return names
