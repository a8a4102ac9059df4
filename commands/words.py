"""A command line's words and the error for a bad one: below both base.py
(every command's parsing) and host.py (the hosts without gdb's own
splitter), which would otherwise import each other."""
import shlex


class UsageError(Exception):
    pass


def shell_words(arg):
    """The words of a command line, as a shell splits them (the hosts
    without gdb's own splitter); UsageError for an unclosed quote."""
    try:
        return shlex.split(arg or "")
    except ValueError as e:
        raise UsageError(str(e))
