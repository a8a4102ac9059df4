"""The heap graph's memory bound (heap/budget.py): refused before the graph
from the object count, and stopped while it is built when the process grew
past the limit (its resident memory, /proc/self/statm)."""
import pytest

import ljgdb  # noqa: F401
from ljgdb.gdb_ext.heap import budget
from ljgdb.gdb_ext.heap.budget import Budget, HeapTooLarge


def hint(mb):
    return "set ljgdb heap-memory %d" % mb


def test_refused_before_the_graph_from_the_count():
    b = Budget("lgcstat --retained", 100, hint)
    per = budget.GRAPH_BYTES["lgcstat --retained"]
    b.expect((100 << 20) // per)                    # just fits
    with pytest.raises(HeapTooLarge) as e:
        b.expect(10 ** 6)
    text = str(e.value)
    need = -(-10 ** 6 * per // (1 << 20))
    assert text.startswith("the heap has 1000000 objects: the graph lgcstat --retained builds "
                           "would take about %d MB, more than the 100 MB it may use (the "
                           "heap-memory setting); " % need), text
    # (a quarter more than the need, in hundreds of MB)
    assert text.endswith("to allow more: set ljgdb heap-memory %d" % (-(-need * 5 // 4 // 100) * 100))


def test_stopped_while_built_when_the_process_grows():
    b = Budget("a command without an estimate", 16, hint)
    b.expect(10 ** 9)                               # (no estimate: not refused)
    b.check(0)
    grown = b"x" * (64 << 20)                       # 64 MB, every page touched
    with pytest.raises(HeapTooLarge) as e:
        b.check(65536)
    assert len(grown) == 64 << 20
    text = str(e.value)
    assert text.startswith("stopped after 65536 of the heap's 1000000000 objects: the graph a "
                           "command without an estimate builds had taken "), text
    assert "MB, past the 16 MB it may use (the heap-memory setting); " in text, text


def test_default_is_half_the_memory_available():
    before = budget.available_bytes()
    b = Budget("lgcpath", 0, hint)
    after = budget.available_bytes()
    # (MemAvailable moves with the machine's other work between the reads)
    assert min(before, after) // 2 - (64 << 20) <= b.limit <= max(before, after) // 2 + (64 << 20)
    assert "half the memory the machine has available" in b.source
