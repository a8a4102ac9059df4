"""How often record reads the BPF sampler's ring buffer
(BpfSampler.next_wait): as seldom as a quarter of the ring allows at the
pace the last read found, within the bounds, and soon while it learns."""
import ljgdb  # noqa: F401
from ljgdb.gdb_ext.backends.bpfsample import RING_BYTES, BpfSampler


def sampler(backlog, learning=False):
    s = object.__new__(BpfSampler)       # (no kernel: only the pacing state)
    s.backlog, s.learning = backlog, learning
    return s


def test_quarter_of_the_ring_at_the_pace_found():
    # 0.1 s wrote a sixteenth of the ring: a quarter takes 0.4 s.
    assert sampler(RING_BYTES // 16).next_wait(0.1, 0.01, 1.0) == 0.1 * 4
    # ... but no longer than `most`, nor shorter than `least`.
    assert sampler(RING_BYTES // 16).next_wait(0.1, 0.01, 0.25) == 0.25
    assert sampler(RING_BYTES).next_wait(0.1, 0.05, 0.25) == 0.05


def test_nothing_written_waits_longest():
    assert sampler(0).next_wait(0.05, 0.05, 0.25) == 0.25


def test_learning_reads_soon_once():
    s = sampler(0, learning=True)
    assert s.next_wait(0.05, 0.05, 0.25) == 0.05
    assert s.next_wait(0.05, 0.05, 0.25) == 0.25
