"""lstr: LuaJIT's string interning table (gdb_ext.vm.strtab)."""
from ..gdb_ext.vm.strtab import LJ_STR_MAXCOLL, string_table
from .base import LjCommand, UsageError, get_vm, int_option, param, split_args
from .format import hexa, quote


class LStr(LjCommand):
    """LuaJIT's string table: every string is interned in one hash table of
2^n slots, each a chain of the strings whose hash lands there.  Shows the
slots, the strings (the table's own count, and what its chains hold), a
histogram of chain lengths, the longest chains with their first strings,
and how strings are hashed: the seed, and the slots whose chains passed
32 collisions so that new strings there take the dense secondary hash
(upstream 2.1 and its forks since 2020; OpenResty's CRC32 hash function
where it uses one).  Many strings in few chains is what hash flooding
looks like: the primary hash reads only 16 bytes of a long string.
  --top N   the N longest chains (default 5)

Usage: lstr [--top N] [L=<lua_State *>]
Example:
  (gdb) lstr --top 1
  string table (GCRef *)0x7ffff7cc3e80: 1024 slots, 765 strings (g->str.num), load 0.75
  hash: id 2521087242; idreseed 86; second 1; seed 0xc4c91346f1f9dce8; function hash_sparse_def
  secondary hash: 1 slot past 32 collisions (slot 276), 301 strings hashed with it
  ..."""

    NAME = "lstr"
    SUMMARY = "the string table: chains, their lengths, the longest ones, the hash"
    WORDS = ("--top",)
    USAGE = "lstr [--top N] [L=<lua_State *>]"

    def run(self, arg, from_tty):
        d = self.data(arg)
        out = ["string table (GCRef *)%s: %d slots, %d strings (%s), load %.2f"
               % (d["address"], d["slots"], d["count"], d["count_field"],
                  d["count"] / float(d["slots"]))]
        if d["walked"] != d["count"]:
            out.append("note: the chains hold %d strings, the count says %d (a string being "
                       "made or freed at this moment?)" % (d["walked"], d["count"]))
        st = d["hash"]
        fields = ["%s %s" % (k, hexa(v) if k == "seed" else v) for k, v in st.items()
                  if k not in ("secondary_slots", "secondary_list", "dense_strings", "function")]
        if st.get("function"):
            fields.append("function %s" % st["function"])
        if fields:
            out.append("hash: " + "; ".join(fields))
        if "secondary_slots" in st:
            n, marked = st["secondary_slots"], st["secondary_list"]
            out.append("secondary hash: %d slot%s past %d collisions%s, %d strings hashed "
                       "with it" % (n, "" if n == 1 else "s", LJ_STR_MAXCOLL,
                                    " (slot%s %s%s)" % ("" if n == 1 else "s",
                                                        " ".join(map(str, marked)),
                                                        " ..." if n > len(marked) else "")
                                    if n else "", st["dense_strings"]))
        out.append("chain length  slots  strings")
        for label, slots, strings in d["histogram"]:
            out.append("%12s %6d %8d" % (label, slots, strings))
        if d["longest"]:
            out.append("longest chains:")
        for c in d["longest"]:
            out.append("  slot %d: %d strings%s" % (c["slot"], c["length"],
                                                    " (secondary hash)" if c["secondary"] else ""))
            for s in c["strings"]:
                out.append("    (GCstr *)%s %s" % (s["address"], s["text"]))
            if c["length"] > len(c["strings"]):
                out.append("    ... %d more" % (c["length"] - len(c["strings"])))
        return out

    def run_json(self, arg, from_tty):
        return self.data(arg)

    def data(self, arg):
        flags, opts, state, rest = split_args(arg, options=("top",))
        top = int_option(opts, "top", 5, minimum=0)
        if rest:
            raise UsageError("unexpected argument '%s'" % " ".join(rest))
        vm = get_vm(state)
        limit = param("max-string")
        st = string_table(vm, top=top, limit=limit)
        lay = vm.lay
        hashinfo = dict(st.state)
        if "second" in hashinfo:
            hashinfo["secondary_slots"] = st.secondary_slots
            hashinfo["secondary_list"] = st.marked
            hashinfo["dense_strings"] = st.dense
        if st.hash_function:
            hashinfo["function"] = st.hash_function
        return {
            "address": hexa(st.address), "slots": st.slots, "count": st.count,
            "count_field": "g->str.num" if lay.strtab_kind == "str" else "g->strnum",
            "walked": st.walked, "hash": hashinfo,
            "histogram": [list(h) for h in st.histogram],
            "longest": [{"slot": slot, "length": length, "secondary": sec,
                         "strings": [{"address": hexa(s.addr),
                                      "text": quote(s.data, s.truncated, s.len)}
                                     for s in strs]}
                        for slot, length, sec, strs in st.longest]}
