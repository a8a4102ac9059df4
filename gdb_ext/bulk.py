"""Python's own settings for work over millions of objects."""
import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic collector off for the block (and back on after, if
    it was on).  A heap walk or a thread scan makes millions of tuples and
    no cycles: the collector would only traverse what is kept, again and
    again (a second of 4 for lthreads over 10^6 coroutines)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
