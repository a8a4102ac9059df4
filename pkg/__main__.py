"""python3 -m ljgdb CORE [BINARY] COMMAND [ARGS...]: the core reader
(commands.hosts.corehost), ljgdb's commands on a core file without gdb; python3 -m
ljgdb --pid PID COMMAND [ARGS...]: the same on a running process
(commands.hosts.livehost)."""
import sys

from ljgdb.commands.cli import main

sys.exit(main())
