"""ljgdb's gdb commands, one module each.  register() installs them."""


def register():
    import gdb
    from . import base, linfo, lval, ltab
    base.register_params()
    base.connect_events()
    for cls in (linfo.LInfo, lval.LVal, ltab.LTab):
        cls()
    return [c.NAME for c in (linfo.LInfo, lval.LVal, ltab.LTab)]
