"""The automatic choice of PyTorch threads (``TrainConfig.threads=None``): timed update cycles decide."""

from __future__ import annotations

from gymloop.train import threads as T
from gymloop.train.threads import ThreadChooser, available_cores


def _run(c: ThreadChooser, seconds, cycles: int) -> list[int]:
    """``cycles`` cycles, each taking ``seconds(threads, cycle)``; the threads of each."""
    used = []
    for i in range(cycles):
        n = c.next()
        used.append(n)
        c.record(n, seconds(n, i))
    return used


def test_given_threads_are_used_always():
    assert set(_run(ThreadChooser(3, cores=8), lambda n, i: 1.0, 50)) == {3}
    assert set(_run(ThreadChooser(None, cores=1, load=lambda: 0.0), lambda n, i: 1.0, 50)) == {1}


def test_the_faster_setting_is_kept_and_the_other_tried_less_often_as_it_loses():
    c = ThreadChooser(None, cores=2, load=lambda: 0.9)
    used = _run(c, lambda n, i: 1.0 if n == 2 else 1.6, 300)
    assert used[: 1 + T.TRIAL] == [1, 2, 1, 2, 1]  # warm-up, then the two in turn
    tries = [i for i, n in enumerate(used) if n == 1 and i > T.TRIAL]
    gaps = [b - a for a, b in zip(tries, tries[1:])]
    assert tries and gaps == sorted(gaps) and gaps[0] > T.PROBE_EVERY  # tried 16, 32, 64, ... cycles apart
    c = ThreadChooser(None, cores=2, load=lambda: 0.9)
    used = _run(c, lambda n, i: 1.0 if n == 1 else 3.0, 60)  # a loaded machine: one thread wins
    assert used[-30:].count(1) >= 29  # (one try of 2 threads at most)


def test_a_stall_drops_to_one_thread_at_once_and_a_quiet_machine_wins_it_back():
    c = ThreadChooser(None, cores=4, load=lambda: 1.0)
    loaded = range(40, 60)  # other processes take the cores for a while
    used = _run(c, lambda n, i: (5.0 if i in loaded else 0.5) if n == 4 else 1.0, 200)
    assert used[30] == 4
    assert used[42] == 1  # the first stalled cycle is the last with 4 threads
    assert used[-1] == 4  # a later try finds the cores free again


def test_available_cores_counts_this_process_cores():
    assert 1 <= available_cores()


def test_a_busy_machine_is_not_tried_with_more_threads():
    load = [3.0]
    c = ThreadChooser(None, cores=2, load=lambda: load[0])
    assert set(_run(c, lambda n, i: 1.0, 100)) == {1}
    load[0] = 1.0  # the others are done: the next try finds two threads faster
    used = _run(c, lambda n, i: 0.5 if n == 2 else 1.0, 40)
    assert used[-1] == 2
