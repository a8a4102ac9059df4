"""ljgdb: a GDB extension for LuaJIT.  ljgdb.gdb_ext is the engine (no gdb
commands in it), ljgdb.commands the gdb commands (needs gdb's Python)."""
