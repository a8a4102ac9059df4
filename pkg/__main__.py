"""python3 -m ljgdb CORE [BINARY] COMMAND [ARGS...]: the core reader
(commands.corehost), ljgdb's commands on a core file without gdb."""
import sys

from ljgdb.commands.corehost import main

sys.exit(main())
