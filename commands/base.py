"""What every ljgdb command shares: settings, argument parsing, finding the
VM, and the single error handler that turns any failure into one line."""
import contextlib
import json
import os
import re
import traceback

import gdb

from ..gdb_ext.distro import owning_package
from ..gdb_ext.errors import CorruptError, FaultError, LjError, NotLuaJITError
from ..gdb_ext.gdbtarget import (LUAJIT_SYMBOLS, GdbTarget, core_mismatch, core_truncation,
                                 frame_candidates, luajit_symbol, profile_failure,
                                 selected_thread_running)
from ..gdb_ext.layout import Layout
from ..gdb_ext.state import _Bare, check_thread, make_vm


class UsageError(Exception):
    pass


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
    PARAMS["max-string"] = _Param(
        "max-string", gdb.PARAM_ZUINTEGER, 200,
        "Bytes of a Lua string shown before it is cut (its length is shown).",
        "Set the number of string bytes ljgdb shows.", "Bytes of a string ljgdb shows")
    PARAMS["max-entries"] = _Param(
        "max-entries", gdb.PARAM_ZUINTEGER, 100,
        "Entries of a table ltab shows before it stops.",
        "Set the number of table entries ljgdb shows.", "Table entries ljgdb shows")
    PARAMS["heap-cache"] = _Param(
        "heap-cache", gdb.PARAM_ZUINTEGER, 1024,
        "Megabytes of heap memory a heap walk (lgcstat) keeps read at most.\n"
        "Heaps larger than this are walked in address order where LuaJIT's lists allow.",
        "Set the megabytes of memory a heap walk keeps.", "Megabytes a heap walk keeps")
    PARAMS["check-build-id"] = _Param(
        "check-build-id", gdb.PARAM_BOOLEAN, True,
        "Refuse a core whose ELF build-id at LuaJIT's address differs from the loaded file's.\n"
        "Off: read it anyway (a core from before a library upgrade, a debug file added by\n"
        "add-symbol-file); structures that changed between the two builds read wrong.",
        "Set whether ljgdb checks a core's build-ids.", "Whether ljgdb checks a core's build-ids")
    PARAMS["debug"] = _Param(
        "debug", gdb.PARAM_BOOLEAN, False,
        "Show a Python traceback when an ljgdb command fails unexpectedly.",
        "Set whether ljgdb shows tracebacks.", "Whether ljgdb shows tracebacks")


def param(name):
    return PARAMS[name].value


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
    gdb.events.new_objfile.connect(_clear_layouts)
    if hasattr(gdb.events, "clear_objfiles"):
        gdb.events.clear_objfiles.connect(_clear_layouts)


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


def check_environment():
    """(target, layout) when gdb has what every command needs: a program
    with LuaJIT's debug info, a stopped process or a core, and a core that
    this binary wrote.  Else an LjError that says what is missing and what
    to do."""
    target, lay = get_target_and_layout()
    if not has_memory():
        raise LjError("no process or core file: run the program, attach with 'attach PID' "
                      "or load a core with 'core-file FILE'")
    if selected_thread_running():
        raise LjError("the selected thread is running, and ljgdb reads stopped processes only: "
                      "stop it first ('interrupt', or Ctrl-C) and run the command again")
    mismatch = core_mismatch() if param("check-build-id") else None
    if mismatch:
        raise LjError("%s; load the files that wrote the core (gdb BINARY CORE, with the same "
                      "library versions), or 'set ljgdb check-build-id off' to go on at your own "
                      "risk" % mismatch)
    return target, lay


def has_memory():
    inf = gdb.selected_inferior()
    if inf.pid:
        return True
    try:
        return bool(inf.threads())
    except gdb.error:
        return False


class StateArg(object):
    """The L=<expr> and G=<expr> arguments of a command line."""

    def __init__(self, L=None, G=None):
        self.L = L
        self.G = G


def get_vm(state=None):
    """The VM to work on: L=<expr> or G=<expr> if given (a StateArg, or the
    text of an L expression), else what the frames show, else what a search
    of the process's memory finds."""
    target, lay = check_environment()
    if isinstance(state, str):
        state = StateArg(L=state)
    explicit = explicit_G = None
    if state is not None and state.L is not None:
        explicit = eval_address(state.L, "L")
    if state is not None and state.G is not None:
        explicit_G = eval_address(state.G, "G")
    candidates = frame_candidates(lay)
    vm = make_vm(target, lay, explicit, candidates if explicit is None else (), explicit_G)
    if explicit is not None:
        # Still note which thread the C frames show (the running one on 2.0).
        for kind, addr, _ in candidates:
            if kind == "L":
                try:
                    if check_thread(target, lay, addr) == vm.G:
                        vm.frame_L = addr
                        break
                except (LjError, Exception):
                    continue
    return vm


def display_vm():
    """A VM for gdb's own printing (pretty-printers, frame filters): what
    the stack frames name, without a memory search (it must stay cheap);
    a VM without a state (state._Bare: values still decode) when no frame
    names one; None without LuaJIT or memory."""
    try:
        target, lay = check_environment()
    except (LjError, gdb.error):
        return None
    try:
        return make_vm(target, lay, candidates=frame_candidates(lay), search=False)
    except (LjError, FaultError, CorruptError, gdb.error):
        return _Bare(target, lay)


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
        check_environment()
        raise UsageError("cannot evaluate %s '%s': %s" % (what, expr, str(e).rstrip(". ")))


def side_effect(expr):
    """What in a gdb/C expression would change state (an assignment, ++ or
    --), or None.  String and character literals are skipped."""
    s = []
    quote = None
    i = 0
    while i < len(expr):
        c = expr[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
            s.append(" ")
        elif c in "\"'":
            quote = c
            s.append(" ")
        else:
            s.append(c)
        i += 1
    s = "".join(s)
    if "++" in s or "--" in s:
        return "increments or decrements"
    for i, c in enumerate(s):
        if c != "=":
            continue
        prev = s[i - 1] if i else ""
        nxt = s[i + 1] if i + 1 < len(s) else ""
        if nxt == "=" or (prev and prev in "=!"):
            continue                    # == and !=
        if prev and prev in "<>" and not (i >= 2 and s[i - 2] == prev):
            continue                    # <= and >= (but <<= and >>= assign)
        return "assigns"
    return None


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


def eval_address(expr, what="expression"):
    v = eval_value(expr, what)
    try:
        return int(v) & 0xFFFFFFFFFFFFFFFF
    except (gdb.error, ValueError, TypeError) as e:
        raise UsageError("%s '%s' is not a pointer or number: %s" % (what, expr, e))


def pointer_target_name(v):
    """For a pointer value, the name of what it points to; else None."""
    t = v.type.strip_typedefs()
    if t.code != gdb.TYPE_CODE_PTR:
        return None
    tt = t.target()
    name = tt.name or tt.strip_typedefs().tag or tt.strip_typedefs().name
    return name


# --------------------------------------------------------------------------
# Argument parsing: options, L=<expr>, the rest an expression.

def split_args(arg, flags=(), options=()):
    """Return (flags_set, options_dict, state, rest_tokens); state is a
    StateArg for L=<expr> / G=<expr>, or None."""
    try:
        tokens = gdb.string_to_argv(arg)
    except gdb.error as e:
        raise UsageError(str(e))
    got_flags, got_opts, state, rest = set(), {}, None, []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok[:2] in ("L=", "G=") and len(tok) > 2:
            # An expression split at its spaces ('L=(lua_State *) 0x...')
            # goes on while its brackets are open or it ends in a cast or
            # an operator (see _continues).
            expr = tok[2:]
            while i + 1 < len(tokens) and _continues(expr, tokens[i + 1], flags):
                i += 1
                expr += " " + tokens[i]
            state = state or StateArg()
            setattr(state, tok[0], expr)
        elif tok.startswith("--") and "=" in tok and tok.split("=", 1)[0][2:] in options:
            name, val = tok[2:].split("=", 1)
            got_opts[name] = val
        elif tok.startswith("--") and tok[2:] in options:
            if i + 1 >= len(tokens):
                raise UsageError("option %s needs a value" % tok)
            got_opts[tok[2:]] = tokens[i + 1]
            i += 1
        elif tok.startswith("--") and tok[2:] in flags:
            got_flags.add(tok[2:])
        elif tok.startswith("-") and len(tok) > 1 and not _is_number(tok):
            raise UsageError("unknown option '%s'" % tok)
        else:
            rest.append(tok)
        i += 1
    return got_flags, got_opts, state, rest


def _continues(expr, nxt, flags):
    """Whether the next argument word belongs to expression expr, which the
    command line split at a space: a bracket is still open, or expr ends
    with a cast or an operator, or nxt starts with an operator; never a
    word that is an option, a flag or another L=/G=."""
    if nxt.startswith("-") and not _is_number(nxt) or nxt[:2] in ("L=", "G=") or nxt in flags:
        return False
    if expr.count("(") + expr.count("[") > expr.count(")") + expr.count("]"):
        return True
    return expr.endswith(")") or expr[-1:] in "+-*/&|<>,." or nxt[:1] in "+-*/&|<>,.)]"


def _is_number(tok):
    try:
        int(tok, 0)
        return True
    except ValueError:
        return False


def int_option(opts, name, default, minimum=0):
    if name not in opts:
        return default
    try:
        v = int(opts[name], 0)
    except ValueError:
        raise UsageError("--%s needs a number, not '%s'" % (name, opts[name]))
    if v < minimum:
        raise UsageError("--%s must be at least %d" % (name, minimum))
    return v


# --------------------------------------------------------------------------

def _truncation_note():
    """A note for error lines when the loaded core file is cut short."""
    try:
        cut = core_truncation()
    except (gdb.error, OSError):
        return ""
    if not cut:
        return ""
    return ("; note: the core file is truncated (%d of its %d bytes), so memory past its end is "
            "missing: get a complete core" % cut)


class LjCommand(gdb.Command):
    """Base class.  Subclasses set NAME and USAGE, write a docstring (the
    help text) and implement run(arg, from_tty) that returns text lines."""

    NAME = None
    USAGE = None
    SUMMARY = None      # one line for 'help ljgdb'
    WORDS = ()          # its flags and options, completed on TAB

    def __init__(self):
        # No completer constant: complete() below offers the command's own
        # words and falls back to gdb's expression completion.
        super().__init__(self.NAME, gdb.COMMAND_DATA)

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
        found = [w[lead:] for w in self.WORDS + ("--json", "L=", "G=") if w.startswith(token)]
        if found or token.startswith("-"):
            return found
        return gdb.COMPLETE_EXPRESSION

    def invoke(self, arg, from_tty):
        arg, as_json = _json_flag(arg)
        try:
            if as_json:
                self._write_json(arg, from_tty)
                return
            out = self.run(arg, from_tty)
            note = _truncation_note()
            if out and note:
                # What was read may stop short where the core does.
                out.append("%s: %s" % (self.NAME, note[len("; note: "):]))
            if out:
                # Text from memory can hold a NUL, which gdb.write refuses.
                gdb.write("\n".join(out).replace("\0", "\\0") + "\n")
        except (Exception, KeyboardInterrupt) as e:  # the one place that catches everything
            try:
                self._one_line(e)
            except gdb.GdbError as err:
                if as_json:
                    gdb.write(json.dumps({"command": self.NAME, "error": str(err)},
                                         ensure_ascii=False) + "\n")
                raise

    def _one_line(self, e):
        """Raise exception e as the command's one line of error."""
        if isinstance(e, UsageError):
            raise gdb.GdbError("%s: %s. Usage: %s%s" % (self.NAME, e, self.USAGE,
                                                          _truncation_note()))
        if isinstance(e, LjError):
            raise gdb.GdbError("%s: %s%s" % (self.NAME, e, _truncation_note()))
        if isinstance(e, KeyboardInterrupt):
            raise gdb.GdbError("%s: interrupted (Ctrl-C); nothing was changed" % self.NAME)
        if isinstance(e, gdb.GdbError):
            raise e
        if isinstance(e, gdb.error):
            raise gdb.GdbError("%s: %s" % (self.NAME, str(e).rstrip(".")))
        if PARAMS.get("debug") is not None and param("debug"):
            traceback.print_exception(type(e), e, e.__traceback__)
        raise gdb.GdbError("%s: internal error (%s: %s); 'set ljgdb debug on' shows a "
                           "traceback" % (self.NAME, type(e).__name__, e))

    def _write_json(self, arg, from_tty):
        """--json: one JSON document, {"command": NAME, ...} (docs/json.md);
        on failure {"command": NAME, "error": the one line}, and the command
        fails as it does without --json."""
        doc = {"command": self.NAME}
        doc.update(self.run_json(arg, from_tty))
        note = _truncation_note()
        if note:
            doc.setdefault("notes", []).append(note[len("; note: "):])
        gdb.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")

    def run(self, arg, from_tty):
        raise NotImplementedError

    def run_json(self, arg, from_tty):
        """The command's data as one JSON-ready dict (docs/json.md)."""
        raise NotImplementedError


_JSON_RE = re.compile(r"(^|\s)--json(?=\s|$)")


def _json_flag(arg):
    """(the argument without --json, whether it had --json)."""
    if not _JSON_RE.search(arg or ""):
        return arg, False
    return _JSON_RE.sub(" ", arg).strip(), True


class HelpCommand(gdb.Command):
    """ljgdb: Lua-level views of a LuaJIT process or core (help ljgdb lists them)."""

    def __init__(self, classes):
        lines = ["ljgdb: Lua-level views of a LuaJIT process or core.", "", "Commands:"]
        for c in classes:
            lines.append("  %-9s %s" % (c.NAME, c.SUMMARY))
        lines += ["", "Every command takes L=<lua_State *> or G=<global_State *> to choose a "
                  "state, and --json to print one JSON document (docs/json.md); 'help "
                  "<command>' tells more.", "In gdb's own commands: bt shows the Lua frames "
                  "(frame filter ljgdb-lua), print decodes LuaJIT's types (pretty-printer "
                  "ljgdb).", "Settings: 'show ljgdb' lists them, 'set ljgdb <name> <value>' "
                  "changes one."]
        self.__doc__ = "\n".join(lines)
        super().__init__("ljgdb", gdb.COMMAND_DATA, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        gdb.write(self.__doc__ + "\n")
