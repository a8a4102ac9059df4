"""ltab: dump a Lua table."""
from .base import LjCommand, UsageError, get_vm, int_option, operand, param, split_args
from .format import hexa, table_data, table_header, table_lines
from ..gdb_ext.vm.objects import Tab, decode_tv


# Nested tables are expanded recursively: a bound far below Python's
# recursion limit.
MAX_DEPTH = 100


class LTab(LjCommand):
    """Dump a Lua table: array part in index order, then the hash part in node
order, as a Lua table constructor.  Nested tables are expanded to --depth
levels (default 1: only this table); at most --limit entries are shown per
table (default: 'show ljgdb max-entries').  The argument is a GCtab pointer,
a TValue (or a pointer to one) holding a table, or a GCRef (L->env).

Usage: ltab <GCtab *, TValue * or GCRef> [--depth N] [--limit N] [L=<lua_State *>]
Example:
  (gdb) ltab (GCtab *)0x7ffff7a09a40 --depth 2
  table: (GCtab *)0x7ffff7a09a40 asize=4 hmask=0x3 metatable=nil
  {
    [1] = 10,
    name = "alpha",
  }"""

    NAME = "ltab"
    SUMMARY = "dump a Lua table, array part then hash part"
    WORDS = ('--depth', '--limit')
    USAGE = "ltab <GCtab *, TValue * or GCRef> [--depth N] [--limit N] [L=<lua_State *>]"

    def run(self, arg, from_tty):
        doc = self.data(arg)
        return [doc["header"]] + table_lines(doc)

    def run_json(self, arg, from_tty):
        return self.data(arg)

    def data(self, arg):
        """ltab's document: the table, its header line, and its entries
        (format.table_data)."""
        flags, opts, L_expr, rest = split_args(arg, options=("depth", "limit"))
        if not rest:
            raise UsageError("missing table expression")
        depth = int_option(opts, "depth", 1, 1)
        if depth > MAX_DEPTH:
            raise UsageError("--depth must be at most %d" % MAX_DEPTH)
        limit = int_option(opts, "limit", param("max-entries"), 0)
        expr = " ".join(rest)
        v = operand(expr)
        tname, addr = v.pointee, v.value
        vm = get_vm(L_expr)
        if v.type_name == "GCRef" and v.ref is not None:
            # A GCRef (L->env, a metatable field): the object it holds.
            addr, tname = v.ref, None
        elif v.type_name == "TValue" and v.address is not None:
            addr, tname = v.address, "TValue"
        if addr is None:
            raise UsageError("'%s' is a %s, expected a GCtab *, a TValue * or a GCRef"
                             % (expr, v.type_name or "value"))
        if tname == "TValue":
            tv = decode_tv(vm, vm.t.u64(addr, "TValue"))
            if tv.kind != "table":
                raise UsageError("TValue at 0x%x holds a %s, not a table" % (addr, tv.type_name))
            addr = tv.addr
        elif tname not in ("GCtab", None, "GCobj", "void"):
            raise UsageError("'%s' is a pointer to %s, expected a GCtab * or TValue *" % (expr, tname))
        t = Tab(vm, addr)
        doc = {"table": hexa(addr), "header": table_header(vm, t), "asize": t.asize,
               "hmask": t.hmask, "metatable": hexa(t.metatable) if t.metatable else None}
        doc.update(table_data(vm, addr, depth, limit, param("max-string")))
        return doc
