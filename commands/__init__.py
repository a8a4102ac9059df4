"""ljgdb's gdb commands, one module each.  register() installs them."""


def register():
    from . import base, linfo, lval, ltab, lbt, lthreads, lgcstat, lmcode, ltrace, lstates, lprofile
    base.register_params()
    base.connect_events()
    classes = (linfo.LInfo, lval.LVal, ltab.LTab, lbt.LBt, lthreads.LThreads, lgcstat.LGcStat,
               lmcode.LMcode, ltrace.LTrace, lstates.LStates, lprofile.LProfile)
    for cls in classes:
        cls()
    base.HelpCommand(classes)
    lbt.LuaWhere()
    lval.LuaValue()
    from . import gdbframes, printers
    gdbframes.LuaFrameFilter()
    printers.register()
    return [c.NAME for c in classes]
