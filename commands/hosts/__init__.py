"""The hosts: where ljgdb's commands run and what they answer from.  gdb
(gdbhost, with its frame filter gdbframes and its pretty-printers
printers), lldb (lldbhost), the core reader (corehost, python3 -m ljgdb
CORE ...) and a running process (livehost, --pid).  Each installs a Host
(commands.host) that the commands ask; the commands know no host."""
