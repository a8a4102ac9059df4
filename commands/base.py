"""What every ljgdb command shares: argument parsing, finding the VM, and
the single error handler that turns any failure into one line.  Nothing
here imports gdb: the current Host (commands.host) answers what depends on
where the command runs."""
import json
import re

from ..gdb_ext.errors import CorruptError, FaultError, LjError
from ..gdb_ext.vm.check import Bare, check_thread
from ..gdb_ext.vm.state import make_vm
from .host import current
from .words import UsageError


class CommandError(Exception):
    """A command's one line of failure, for the host to show as an error."""


def param(name):
    return current().param(name)


def check_environment():
    """(target, layout) when there is a program with LuaJIT's layout and
    memory to read; else an LjError that says what is missing."""
    return current().check_environment()


def check_memory():
    """The target of a process or core, LuaJIT or not (Host.check_memory)."""
    return current().check_memory()


class StateArg(object):
    """The L=<expr> and G=<expr> arguments of a command line."""

    def __init__(self, L=None, G=None):
        self.L = L
        self.G = G


def get_vm(state=None):
    """The VM to work on: L=<expr> or G=<expr> if given (a StateArg, or the
    text of an L expression), else what the frames show, else what a search
    of the process's memory finds."""
    host = current()
    target, lay = host.check_environment()
    if isinstance(state, str):
        state = StateArg(L=state)
    explicit = explicit_G = None
    if state is not None and state.L is not None:
        explicit = eval_address(state.L, "L")
    if state is not None and state.G is not None:
        explicit_G = eval_address(state.G, "G")
    candidates = host.frame_candidates(lay)
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


def display_vm(cheap_errors=()):
    """A VM for printing values inside other views (pretty-printers, frame
    filters): what the stack frames name, without a memory search (it must
    stay cheap); a VM without a state (check.Bare: values still decode)
    when no frame names one; None without LuaJIT or memory.  cheap_errors:
    the host's own exceptions to treat like LjError."""
    host = current()
    try:
        target, lay = host.check_environment()
    except (LjError,) + tuple(cheap_errors):
        return None
    try:
        return make_vm(target, lay, candidates=host.frame_candidates(lay), search=False)
    except (LjError, FaultError, CorruptError) + tuple(cheap_errors):
        return Bare(target, lay)


def operand(expr, what="expression"):
    """What a user's expression denotes (host.Operand); UsageError when it
    cannot be evaluated."""
    return current().operand(expr, what)


def eval_address(expr, what="expression"):
    v = operand(expr, what)
    if v.value is None:
        raise UsageError("%s '%s' is not a pointer or number" % (what, expr))
    return v.value & 0xFFFFFFFFFFFFFFFF


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


# --------------------------------------------------------------------------
# Argument parsing: options, L=<expr>, the rest an expression.

def split_args(arg, flags=(), options=()):
    """Return (flags_set, options_dict, state, rest_tokens); state is a
    StateArg for L=<expr> / G=<expr>, or None."""
    tokens = current().split(arg)
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

class LjCommand(object):
    """Base class.  Subclasses set NAME and USAGE, write a docstring (the
    help text) and implement run(arg, from_tty) that returns text lines and
    run_json(arg, from_tty) that returns the same data as one dict."""

    NAME = None
    USAGE = None
    SUMMARY = None      # one line for 'help ljgdb'
    WORDS = ()          # its flags and options, completed on TAB

    def execute(self, arg, from_tty=False):
        """The command's whole output as text (with its final newline), or
        CommandError with its one line.  --json anywhere in arg: one JSON
        document (docs/json.md); on failure {"command", "error"} is the
        output and CommandError is raised too (its .output)."""
        arg, as_json = _json_flag(arg)
        host = current()
        try:
            if as_json:
                doc = {"command": self.NAME}
                doc.update(self.run_json(arg, from_tty))
                note = host.truncation_note()
                if note:
                    doc.setdefault("notes", []).append(note[len("; note: "):])
                return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
            out = self.run(arg, from_tty)
            note = host.truncation_note()
            if out and note:
                # What was read may stop short where the core does.
                out.append("%s: %s" % (self.NAME, note[len("; note: "):]))
            # Text from memory can hold a NUL, which gdb.write refuses.
            return "\n".join(out).replace("\0", "\\0") + "\n" if out else ""
        except (Exception, KeyboardInterrupt) as e:  # the one place that catches everything
            err = CommandError(self.failure_line(e))
            err.output = json.dumps({"command": self.NAME, "error": str(err)},
                                    ensure_ascii=False) + "\n" if as_json else ""
            raise err

    def failure_line(self, e):
        """The one line that says why the command failed with exception e."""
        host = current()
        if isinstance(e, CommandError):
            return str(e)
        if isinstance(e, UsageError):
            return "%s: %s. Usage: %s%s" % (self.NAME, e, self.USAGE, host.truncation_note())
        if isinstance(e, LjError):
            return "%s: %s%s" % (self.NAME, e, host.truncation_note())
        if isinstance(e, KeyboardInterrupt):
            return "%s: interrupted (Ctrl-C); nothing was changed" % self.NAME
        own = host.error_text(e, self.NAME)
        if own is not None:
            return own
        if param("debug"):
            import traceback
            traceback.print_exception(type(e), e, e.__traceback__)
        return "%s: internal error (%s: %s); %s" % (self.NAME, type(e).__name__, e,
                                                    host.debug_hint)

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


def help_text(classes):
    """The text of 'help ljgdb'."""
    lines = ["ljgdb: Lua-level views of a LuaJIT process or core.", "", "Commands:"]
    for c in classes:
        lines.append("  %-9s %s" % (c.NAME, c.SUMMARY))
    lines += ["", "Every command takes L=<lua_State *> or G=<global_State *> to choose a "
              "state, and --json to print one JSON document (docs/json.md); 'help "
              "<command>' tells more.", "In gdb's own commands: bt shows the Lua frames "
              "(frame filter ljgdb-lua), print decodes LuaJIT's types (pretty-printer "
              "ljgdb).", "Settings: 'show ljgdb' lists them, 'set ljgdb <name> <value>' "
              "changes one."]
    return "\n".join(lines)
