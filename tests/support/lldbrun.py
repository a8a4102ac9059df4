"""Run ljgdb commands in lldb through lldb's own command interpreter (the
commands registered by ljgdb.py's __lldb_init_module), collecting each
command's output and error line.  Imported by lldb after ljgdb.py:

  LJGDB_LLDB_COMMANDS=IN.json LJGDB_LLDB_OUT=OUT.json lldb-19 -b \\
      -o 'target create BINARY --core CORE' -o 'command script import ljgdb.py' \\
      -o 'command script import tests/support/lldbrun.py'

IN.json: [command, ...]; OUT.json: [[output, error line or null], ...]
(lldb's "error: " before an error line taken off: gdb writes the line
alone).
"""
import json
import os

import lldb


def context(debugger):
    """The selected target's execution context: its process's selected
    thread and frame, when it has a process."""
    target = debugger.GetSelectedTarget()
    thread = target.GetProcess().GetSelectedThread() if target.IsValid() else None
    if thread is not None and thread.IsValid():
        return lldb.SBExecutionContext(thread.GetSelectedFrame())
    return lldb.SBExecutionContext(target)


def __lldb_init_module(debugger, internal_dict):
    with open(os.environ["LJGDB_LLDB_COMMANDS"]) as f:
        commands = json.load(f)
    interp = debugger.GetCommandInterpreter()
    out = []
    for cmd in commands:
        res = lldb.SBCommandReturnObject()
        # (In the context of the moment: lldb's own commands, such as
        # `register read`, would otherwise see the context this module was
        # imported in, before a process launched by an earlier command.)
        interp.HandleCommand(cmd, context(debugger), res)
        err = res.GetError() or None
        if err is not None:
            err = err.rstrip("\n")
            if err.startswith("error: "):
                err = err[len("error: "):]
        text = res.GetOutput() or ""
        out.append([text, err])
    with open(os.environ["LJGDB_LLDB_OUT"], "w") as f:
        json.dump(out, f)
