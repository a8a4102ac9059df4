"""ljgdb's commands, one module each.  register() installs them in gdb;
COMMANDS lists them for any host (commands.host)."""


def command_classes(with_gdb_only=True):
    """The command classes; lprofile (it runs the process) only in gdb."""
    from . import (linfo, lval, ltab, lbt, lthreads, lgcstat, lgcref, lmcode, ltrace, lstates,
                   lbc, lheap, lir, lstr, lframe, lmalloc)
    classes = [linfo.LInfo, lval.LVal, ltab.LTab, lbt.LBt, lthreads.LThreads, lgcstat.LGcStat,
               lgcref.LGcRef, lgcref.LGcPath, lmcode.LMcode, ltrace.LTrace, lstates.LStates,
               lbc.LBc, lheap.LHeap, lir.LIr, lstr.LStr, lframe.LFrame, lframe.LUp,
               lframe.LDown, lframe.LLocals, lframe.LPrint, lframe.LList, lmalloc.LMalloc]
    if with_gdb_only:
        from . import lprofile
        classes.append(lprofile.LProfile)
    return tuple(classes)


def register():
    from .hosts import gdbhost
    classes = command_classes()
    gdbhost.register(classes)
    return [c.NAME for c in classes]
