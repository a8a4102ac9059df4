"""Where the commands run: inside gdb (commands.hosts.gdbhost) or in the core
reader without gdb (commands.hosts.corehost, python3 -m ljgdb CORE ...).

A command parses its argument, asks the engine and formats; what it needs
from its surroundings goes through the one Host that is current:

  target_and_layout()   the Target and Layout to read with, or LjError
  check_environment()   the same, after checking there is memory to read
                        (a stopped process or a core that fits the files)
  frame_candidates(lay) state pointers the stack frames hold (gdbtarget's
                        shape: ('L' or 'G', address, where))
  operand(expr, what)   an Operand: what an argument expression denotes
  split(arg)            the words of a command line, as gdb splits them
  param(name)           a setting's value (SETTINGS gives the defaults)
  write(text)           text out (partial reports before an error line)
  error_text(e, name)   the one line of command `name` failing with one of
                        the host's own exceptions, or None
  truncation_note()     '; note: ...' when the core file is cut short
  profile_match()       the layout profile in use (profiles.ProfileMatch)
  frames_note()         why the selected thread's machine frames end early,
                        when the backend knows and gdb would say nothing
  disassemble(lo, hi)   [(address, instruction text)] of the machine code in
                        [lo, hi), or None where there is no disassembler
  setting_hint(n, v)    how a user sets setting n to v here ('set ljgdb n v')
"""
from .words import shell_words

# name -> (kind, default, doc, set_doc, show_doc); kind is 'uint', 'bool' or 'string'.
SETTINGS = {
    "max-string": (
        "uint", 200,
        "Bytes of a Lua string shown before it is cut (its length is shown).",
        "Set the number of string bytes ljgdb shows.", "Bytes of a string ljgdb shows"),
    "max-entries": (
        "uint", 100,
        "Entries of a table ltab shows before it stops.",
        "Set the number of table entries ljgdb shows.", "Table entries ljgdb shows"),
    "heap-cache": (
        "uint", 1024,
        "Megabytes of heap memory a heap walk (lgcstat) keeps read at most.\n"
        "Heaps larger than this are walked in address order where LuaJIT's lists allow.",
        "Set the megabytes of memory a heap walk keeps.", "Megabytes a heap walk keeps"),
    "heap-memory": (
        "uint", 0,
        "Megabytes of memory a command that builds the heap graph (lgcpath, lgcref,\n"
        "lgcstat --retained, --save, --diff) may add; 0: half of what the machine has\n"
        "available when the command starts.  A bigger heap is refused in one line.",
        "Set the megabytes of memory the heap graph may take.",
        "Megabytes the heap graph may take (0: half the memory available)"),
    "check-build-id": (
        "bool", True,
        "Refuse a core whose ELF build-id at LuaJIT's address differs from the loaded file's.\n"
        "Off: read it anyway (a core from before a library upgrade, a debug file added by\n"
        "add-symbol-file); structures that changed between the two builds read wrong.",
        "Set whether ljgdb checks a core's build-ids.", "Whether ljgdb checks a core's build-ids"),
    "source-path": (
        "string", "",
        "Directories, separated by ':', where llist looks for a chunk's source file\n"
        "when its name does not lead to it from the working directory.",
        "Set where llist looks for Lua source files.", "Where llist looks for Lua source files"),
    "debug": (
        "bool", False,
        "Show a Python traceback when an ljgdb command fails unexpectedly.",
        "Set whether ljgdb shows tracebacks.", "Whether ljgdb shows tracebacks"),
}


def setting_value(name, text):
    """The value the words `text` give setting `name` (a known one): True or
    False for on/off, an int, a string; ValueError(what it takes)."""
    kind = SETTINGS[name][0]
    if kind == "bool" and text in ("on", "off"):
        return text == "on"
    if kind == "uint" and text.isdigit():
        return int(text)
    if kind == "string":
        return text
    raise ValueError("on or off" if kind == "bool" else "a number")


def truncation_text(cut):
    """The '; note: ...' of a core cut short (cut: (bytes there, bytes
    needed), or None for a whole core: '')."""
    if not cut:
        return ""
    return ("; note: the core file is truncated (%d of its %d bytes), so memory past its "
            "end is missing: get a complete core" % cut)


class Operand(object):
    """What an argument expression denotes, in the terms the commands ask:
    value: its number when it is a pointer, an integer or an enum, else None
    pointee: the name of the type a pointer points to ('GCtab', 'void'), or
             None when it is not a pointer
    type_name: the name of a struct or union value ('TValue', 'GCRef'), else
             None; address: where such a value is (None when nowhere)
    ref: for a GCRef value, the pointer it holds
    floating: value is a floating-point number converted (as C does)"""

    __slots__ = ("value", "pointee", "type_name", "address", "ref", "floating")

    def __init__(self, value=None, pointee=None, type_name=None, address=None, ref=None,
                 floating=False):
        self.floating = floating
        self.value = value
        self.pointee = pointee
        self.type_name = type_name
        self.address = address
        self.ref = ref


class Host(object):
    """The interface; see the module's text."""

    name = "host"
    debug_hint = "'set ljgdb debug on' shows a traceback"

    def target_and_layout(self):
        raise NotImplementedError

    def check_environment(self):
        raise NotImplementedError

    def check_memory(self):
        """The target of a process or core to read, without LuaJIT's layout
        (lmalloc: glibc's heap needs none); an LjError saying what is
        missing.  A host that can give one without LuaJIT overrides it."""
        return self.check_environment()[0]

    def frame_candidates(self, lay):
        return []

    def operand(self, expr, what="expression"):
        raise NotImplementedError

    def split(self, arg):
        raise NotImplementedError

    def param(self, name):
        return SETTINGS[name][1]

    def write(self, text):
        raise NotImplementedError

    def error_text(self, e, name):
        return None

    def truncation_note(self):
        return ""

    def profile_match(self):
        return None

    def frames_note(self):
        return None

    def disassemble(self, lo, hi):
        return None

    def setting_hint(self, name, value):
        return "set ljgdb %s %s" % (name, value)


class OwnSettings(Host):
    """A host without gdb's parameters and argument splitter: the settings
    in self.settings (the defaults, updated by `settings`), command lines
    split as a shell splits them."""

    def __init__(self, settings=None):
        self.settings = {k: v[1] for k, v in SETTINGS.items()}
        self.settings.update(settings or {})

    def param(self, name):
        return self.settings[name]

    def split(self, arg):
        return shell_words(arg)


_current = [None]


def current():
    if _current[0] is None:
        raise RuntimeError("no ljgdb host: load ljgdb.py in gdb, or run python3 -m ljgdb")
    return _current[0]


def install(host):
    _current[0] = host
    return host
