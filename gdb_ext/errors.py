"""The engine's error types.  Commands turn each into one line of text."""

from typing import Optional


class LjError(Exception):
    """Base class of every error the engine raises on purpose."""


class FaultError(LjError):
    """Memory at `address` could not be read (unmapped, not in the core,
    or the read was refused).  `what` says what we were reading."""

    def __init__(self, message: str, address: Optional[int], what: Optional[str] = None) -> None:
        super().__init__(message)
        self.address = address
        self.what = what

    def __str__(self) -> str:
        base = super().__str__()
        if self.what:
            base = "%s while reading %s" % (base, self.what)
        return base


class NotLuaJITError(LjError):
    """The target does not look like LuaJIT state: a type, symbol or object
    is missing or has the wrong shape.  The message says what was expected."""


class CorruptError(LjError):
    """LuaJIT state was found but a value in it is impossible (a bad type tag,
    a length past any sane bound, a cycle).  `address` is where it was seen."""

    def __init__(self, message: str, address: Optional[int] = None) -> None:
        super().__init__(message)
        self.address = address
