"""ljgdb inside gdb: the Host that answers from gdb (commands.host), the
settings as gdb parameters, the commands and functions as gdb's own, and
register() that installs them all."""
import contextlib
import os

import gdb

from ...gdb_ext.layouts.distro import owning_package
from ...gdb_ext.errors import CorruptError, FaultError, LjError, NotLuaJITError
from ...gdb_ext.backends.gdbtarget import (LUAJIT_SYMBOLS, GdbTarget, active_match, core_mismatch,
                                           core_truncation, frame_candidates, luajit_symbol,
                                           profile_failure, selected_thread_running)
from ...gdb_ext.layouts.layout import Layout
from ...gdb_ext.vm.objects import decode_tv
from ..base import CommandError, UsageError, get_vm, help_text, param, side_effect
from ..format import value_text
from ..host import SETTINGS, Host, Operand, install, truncation_text


class GdbHost(Host):
    name = "gdb"

    def target_and_layout(self):
        return get_target_and_layout()

    def check_environment(self):
        """(target, layout) when gdb has what every command needs: a program
        with LuaJIT's debug info, a stopped process or a core, and a core
        that this binary wrote.  Else an LjError that says what is missing
        and what to do."""
        target, lay = get_target_and_layout()
        self._check_process()
        mismatch = core_mismatch(
            give="load the files that wrote the core (gdb BINARY CORE, with the same library "
                 "versions)",
            off="'set ljgdb check-build-id off'") if param("check-build-id") else None
        if mismatch:
            raise LjError(mismatch)
        return target, lay

    def check_memory(self):
        if not gdb.objfiles():
            raise LjError("no program loaded: start gdb with the program (gdb PROG CORE or "
                          "gdb -p PID)")
        self._check_process()
        return GdbTarget()

    @staticmethod
    def _check_process():
        if not has_memory():
            raise LjError("no process or core file: run the program, attach with 'attach PID' "
                          "or load a core with 'core-file FILE'")
        if selected_thread_running():
            raise LjError("the selected thread is running, and ljgdb reads stopped processes "
                          "only: stop it first ('interrupt', or Ctrl-C) and run the command "
                          "again")

    def frame_candidates(self, lay):
        return frame_candidates(lay)

    def operand(self, expr, what="expression"):
        return gdb_operand(eval_value(expr, what))

    def split(self, arg):
        try:
            return gdb.string_to_argv(arg)
        except gdb.error as e:
            raise UsageError(str(e))

    def param(self, name):
        return PARAMS[name].value if name in PARAMS else SETTINGS[name][1]

    def write(self, text):
        gdb.write(text)
        gdb.flush()

    def error_text(self, e, name):
        if isinstance(e, gdb.GdbError):
            return str(e)
        if isinstance(e, gdb.error):
            return "%s: %s" % (name, str(e).rstrip("."))
        return None

    def truncation_note(self):
        """A note for error lines when the loaded core file is cut short."""
        try:
            return truncation_text(core_truncation())
        except (gdb.error, OSError):
            return ""

    def profile_match(self):
        return active_match()

    def disassemble(self, lo, hi):
        """gdb's disassembler over [lo, hi) (it reads the process or core;
        it writes nothing)."""
        if hi <= lo:
            return []
        try:
            arch = gdb.selected_inferior().architecture()
            insns = arch.disassemble(lo, hi - 1)
        except (gdb.error, gdb.MemoryError, AttributeError):
            return None
        return [(i["addr"], i["asm"]) for i in insns if i["addr"] < hi]


# --------------------------------------------------------------------------
# Settings: set ljgdb <name> <value>

class _Prefix(gdb.Command):
    """Settings of ljgdb, the LuaJIT extension (see 'show ljgdb')."""

    def __init__(self, verb):
        self.verb = verb
        super().__init__("%s ljgdb" % verb, gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)

    def invoke(self, arg, from_tty):
        if self.verb == "show" and not arg.strip():
            # Every setting with its value (gdb's own prefixes list theirs).
            for name, p in sorted(PARAMS.items()):
                value = p.value
                if isinstance(value, bool):
                    value = "on" if value else "off"
                gdb.write("%s:  %s (%s)\n" % (name, value, p.show_doc.rstrip(".")))
            return
        raise gdb.GdbError("%s ljgdb: name a setting (%s); 'show ljgdb' lists them with their "
                           "values" % (self.verb, ", ".join(sorted(PARAMS))))


class _Param(gdb.Parameter):
    def __init__(self, name, kind, default, doc, set_doc, show_doc):
        self.__doc__ = doc
        self.set_doc = set_doc
        self.show_doc = show_doc
        super().__init__("ljgdb " + name, gdb.COMMAND_DATA, kind)
        self.value = default

    def get_show_string(self, svalue):
        return "%s is %s." % (self.show_doc.rstrip("."), svalue)

    def get_set_string(self):
        return ""


PARAMS = {}


def register_params():
    if PARAMS:
        return
    _Prefix("set")
    _Prefix("show")
    kinds = {"uint": gdb.PARAM_ZUINTEGER, "bool": gdb.PARAM_BOOLEAN, "string": gdb.PARAM_STRING}
    for name, (kind, default, doc, set_doc, show_doc) in SETTINGS.items():
        PARAMS[name] = _Param(name, kinds[kind], default, doc, set_doc, show_doc)


# --------------------------------------------------------------------------
# Layout cache: DWARF is read once per set of objfiles.

_layouts = {}


def _objfiles_key():
    try:
        return tuple(o.filename for o in gdb.objfiles() if o.is_valid())
    except gdb.error:
        return ()


def _clear_layouts(*_):
    _layouts.clear()


def connect_events():
    from ..lframe import forget
    gdb.events.new_objfile.connect(_clear_layouts)
    # (A selected Lua frame is the stop's: forgotten when the program runs,
    # ends, or another program or core is loaded.)
    gdb.events.cont.connect(forget)
    gdb.events.exited.connect(forget)
    gdb.events.new_objfile.connect(forget)
    if hasattr(gdb.events, "clear_objfiles"):
        gdb.events.clear_objfiles.connect(_clear_layouts)
        gdb.events.clear_objfiles.connect(forget)


def get_target_and_layout():
    if not gdb.objfiles():
        raise LjError("no program loaded: start gdb with the LuaJIT binary (gdb PROG CORE or "
                      "gdb -p PID)")
    target = GdbTarget()
    key = _objfiles_key()
    lay = _layouts.get(key)
    if lay is None:
        try:
            lay = Layout(target)
        except NotLuaJITError:
            if target.type_info("lua_State") is None:
                raise LjError(_no_luajit_message())
            raise
        _layouts[key] = lay
    return target, lay


def _no_luajit_message():
    """Why there is no LuaJIT debug info, and what to do."""
    found = luajit_symbol()
    if found is not None:
        name, where = found
        pkg = owning_package(where)
        how = ("install the debug symbols of %s, the package that ships it (on Debian: apt "
               "install %s-dbgsym, from the debug archive), or let gdb fetch them from a "
               "debuginfod server" % (pkg, pkg) if pkg else
               "install the debug symbols of the package that ships it (on Debian its -dbgsym "
               "package), or let gdb fetch them from a debuginfod server")
        bid = _build_id_of(where)
        failure = profile_failure()
        if failure:
            return ("LuaJIT is in %s (it has the symbol %s) but without debug info, and %s; "
                    "rebuild it with debug info (make CCDEBUG=-g), or %s, or put the layout "
                    "profile of this build%s in a directory named by $LJGDB_PROFILES"
                    % (where, name, failure, how, " (build-id %s)" % bid if bid else ""))
        return ("LuaJIT is in %s (it has the symbol %s) but without debug info, and ljgdb reads "
                "LuaJIT's structures from DWARF or from a layout profile of the same build: "
                "rebuild LuaJIT with debug info (make CCDEBUG=-g), or %s, or put the layout "
                "profile of this build%s (python3 -m ljgdb.profile on its debug file) in a "
                "directory named by $LJGDB_PROFILES" % (where, name, how,
                                                        " (build-id %s)" % bid if bid else ""))
    prog = gdb.current_progspace().filename or "the loaded program"
    msg = "no LuaJIT in %s: none of %s is among its symbols or its loaded libraries" % (
        prog, ", ".join(LUAJIT_SYMBOLS[:3]))
    if not has_memory():
        msg += ("; if LuaJIT is a shared library it is loaded when the program runs: 'run' or "
                "'starti' first, or load a core")
    else:
        msg += "; load a program that runs LuaJIT (gdb PROG CORE, or gdb -p PID)"
    return msg


def _build_id_of(path):
    """The build-id gdb knows for the loaded file `path`, or None."""
    try:
        for o in gdb.objfiles():
            if o.is_valid() and o.filename and os.path.realpath(o.filename) == \
                    os.path.realpath(path):
                return getattr(o, "build_id", None)
    except (gdb.error, RuntimeError):
        pass
    return None


def has_memory():
    inf = gdb.selected_inferior()
    if inf.pid:
        return True
    try:
        return bool(inf.threads())
    except gdb.error:
        return False


# --------------------------------------------------------------------------
# Expressions

def eval_value(expr, what="expression"):
    """gdb's value of a user's expression.  ljgdb never changes the process:
    an expression that assigns is refused, and while gdb evaluates it no
    function of the process may be called and no memory written."""
    bad = side_effect(expr)
    if bad:
        raise UsageError("%s '%s' %s, and ljgdb never changes the process" % (what, expr, bad))
    try:
        with _read_only():
            return gdb.parse_and_eval(expr)
    except gdb.error as e:
        # A missing program, process or LuaJIT is the first thing to say.
        GdbHost().check_environment()
        raise UsageError("cannot evaluate %s '%s': %s" % (what, expr, str(e).rstrip(". ")))


def gdb_operand(v):
    """The Operand of gdb.Value v."""
    t = v.type.strip_typedefs()
    if t.code in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION):
        name = t.tag or t.name or str(v.type)
        ref = None
        if name == "GCRef":
            try:
                ref = int(v[t.fields()[0].name]) & 0xFFFFFFFFFFFFFFFF
            except (gdb.error, ValueError):
                ref = None
        return Operand(type_name=name, address=int(v.address) if v.address is not None
                       else None, ref=ref)
    pointee = None
    if t.code == gdb.TYPE_CODE_PTR:
        tt = t.target()
        pointee = tt.name or tt.strip_typedefs().tag or tt.strip_typedefs().name
    value = None
    if t.code in (gdb.TYPE_CODE_PTR, gdb.TYPE_CODE_INT, gdb.TYPE_CODE_ENUM,
                  gdb.TYPE_CODE_BOOL, gdb.TYPE_CODE_CHAR, gdb.TYPE_CODE_FLT):
        # (A floating-point value as C converts it: a trace number that Lua
        # wrote as a number.)
        try:
            value = int(v) & 0xFFFFFFFFFFFFFFFF
        except (gdb.error, ValueError, TypeError):
            value = None
    return Operand(value=value, pointee=pointee, floating=t.code == gdb.TYPE_CODE_FLT)


@contextlib.contextmanager
def _read_only():
    """gdb's own guards, off for the time of one evaluation: no calls into
    the process, no memory writes (restored as they were)."""
    changed = []
    for name in ("may-call-functions", "may-write-memory"):
        try:
            if gdb.parameter(name):
                gdb.execute("set %s off" % name, to_string=True)
                changed.append(name)
        except (gdb.error, RuntimeError):
            continue
    try:
        yield
    finally:
        for name in changed:
            try:
                gdb.execute("set %s on" % name, to_string=True)
            except gdb.error:
                pass


# --------------------------------------------------------------------------
# Commands and functions

class GdbCommand(gdb.Command):
    """One ljgdb command (a base.LjCommand) as a gdb command."""

    def __init__(self, command):
        self.command = command
        self.__doc__ = type(command).__doc__
        # No completer constant: complete() below offers the command's own
        # words and falls back to gdb's expression completion.
        super().__init__(command.NAME, gdb.COMMAND_DATA)

    def complete(self, text, word):
        """The command's words (flags, options, L=, G=) that start with the
        argument being typed; else what gdb completes in an expression.
        gdb replaces only `word` (it breaks words at '-' and '='), so each
        answer is cut to the part after what precedes `word`."""
        word = word or ""
        token = text.split(" ")[-1]
        lead = len(token) - len(word)
        if lead < 0:
            return gdb.COMPLETE_EXPRESSION
        found = [w[lead:] for w in self.command.WORDS + ("--json", "L=", "G=")
                 if w.startswith(token)]
        if found or token.startswith("-"):
            return found
        return gdb.COMPLETE_EXPRESSION

    def invoke(self, arg, from_tty):
        try:
            text = self.command.execute(arg, from_tty)
        except CommandError as e:
            if e.output:
                gdb.write(e.output)
            raise gdb.GdbError(str(e))
        if text:
            gdb.write(text)


class HelpCommand(gdb.Command):
    """ljgdb: Lua-level views of a LuaJIT process or core (help ljgdb lists them)."""

    def __init__(self, classes):
        self.__doc__ = help_text(classes)
        super().__init__("ljgdb", gdb.COMMAND_DATA, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        gdb.write(self.__doc__ + "\n")


class LuaWhere(gdb.Function):
    """$lua_where(): where the selected Lua thread stands, as chunk:line of
its innermost Lua frame (what lthreads shows as 'where'): "-" when it has no
Lua frame, "?" when that cannot be known at this moment.  For breakpoint
conditions and scripts:
  break lj_tab_new if $_streq($lua_where(), "app.lua:42")"""

    def __init__(self):
        super().__init__("lua_where")

    def invoke(self):
        from ..lbt import BtFormat
        try:
            vm = get_vm()
            fmt = BtFormat(vm)
            where = fmt.where(fmt.bt.backtrace(vm.L))
        except (LjError, UsageError, FaultError, CorruptError) as e:
            raise gdb.GdbError("$lua_where: %s" % e)
        return where.split(" ", 1)[0] if where.startswith("?") else where


class LuaValue(gdb.Function):
    """$lua_value(tv): the Lua value of a TValue (a TValue, a TValue * or an
address), as lval prints it ('"hello"', '42', 'table: (GCtab *)0x...'), for
conditions and scripts:
  break lj_tab_newkey if $_streq($lua_value(key), "\\"sessions\\"")"""

    def __init__(self):
        super().__init__("lua_value")

    def invoke(self, tv):
        try:
            t = tv.type.strip_typedefs()
            if t.code in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION) and tv.address is not None:
                addr = int(tv.address)
            else:
                addr = int(tv) & 0xFFFFFFFFFFFFFFFF
            vm = get_vm()
            return value_text(vm, decode_tv(vm, vm.t.u64(addr, "TValue")),
                              param("max-string"))
        except (LjError, UsageError, FaultError, CorruptError, gdb.error, ValueError) as e:
            raise gdb.GdbError("$lua_value: %s" % e)


class LuaLocal(gdb.Function):
    """$lua_local("name"): the value a name has in the selected Lua frame
(lframe), resolved as lprint resolves it (local, upvalue, global), as lval
prints it, for conditions and scripts:
  break lj_tab_new if $_streq($lua_local("label"), "\"mid\"")"""

    def __init__(self):
        super().__init__("lua_local")

    def invoke(self, name):
        from ..lframe import local_text
        try:
            return local_text(name.string())
        except (LjError, UsageError, FaultError, CorruptError, gdb.error) as e:
            raise gdb.GdbError("$lua_local: %s" % e)


class LuaFrameLine(gdb.Function):
    """$lua_frame_line([N]): the line the selected Lua frame (lframe), or
frame N, is at, as a number:
  break lj_tab_new if $lua_frame_line(2) == 67"""

    def __init__(self):
        super().__init__("lua_frame_line")

    def invoke(self, *level):
        from ..lframe import frame_line
        try:
            if len(level) > 1:
                raise UsageError("one frame number at most")
            return frame_line(int(level[0]) if level else None)
        except (LjError, UsageError, FaultError, CorruptError, gdb.error) as e:
            raise gdb.GdbError("$lua_frame_line: %s" % e)


def register(classes):
    """Install the settings, the commands (instances of `classes`), the
    help, the convenience functions, the frame filter and the printers."""
    install(GdbHost())
    register_params()
    connect_events()
    for cls in classes:
        GdbCommand(cls())
    HelpCommand(classes)
    LuaWhere()
    LuaValue()
    LuaLocal()
    LuaFrameLine()
    from . import gdbframes, printers
    gdbframes.LuaFrameFilter()
    printers.register()
