"""The PyTorch threads of a run whose ``TrainConfig.threads`` is automatic: measured while it trains.

Two threads make a PPO update on 2 idle cores about 1.4-2x faster than one; on cores that other
processes keep busy they make it 2-10x slower (an OpenMP thread that loses its core stalls every
operation the other shares with it), and an update's speed alone cannot tell which machine it is on.
So :class:`ThreadChooser` times whole update cycles (rollout and update) at one thread and at every
core the process may use, keeps the faster, tries the other again from time to time (less often
each time it loses) and drops back to one thread at once when a cycle stalls. It tries several
threads only while the machine's load average leaves a core free beside this process (a try on a
busy machine costs up to ten cycles). The number of threads
changes the rounding of some operations, so an automatic run is not bit-reproducible; a fixed
``threads`` is.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable

__all__ = ["ThreadChooser", "available_cores"]

#: the most threads the automatic choice tries (beyond, a small network's operations gain nothing).
MAX_AUTO_THREADS = 4
#: cycles of the first comparison, after one warm-up cycle: the two settings in turn.
TRIAL = 4
#: cycles between two tries of the setting not in use, at first; doubled each time it loses ...
PROBE_EVERY = 16
#: ... up to this.
PROBE_MAX = 256
#: a try of the other setting wins when it is this much faster than the recent cycles.
MARGIN = 0.9
#: a cycle with several threads this many times slower than their recent median is a stall.
STALL = 2.0


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system has one, else ``os.cpu_count()``)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (no affinity on macOS and Windows)
        return os.cpu_count() or 1


class ThreadChooser:
    """The threads of each update cycle: ``threads`` when given, else measured (see the module).

    Call :meth:`next` before a cycle and :meth:`record` with its seconds per slot-step after it.

    Example:
        >>> c = ThreadChooser(None, cores=2, load=lambda: 1.0)  # (a load average of 1: this process alone)
        >>> for seconds in (9.0, 1.0, 2.0, 1.0, 2.0):  # warm-up, then 2 threads twice as fast as 1
        ...     c.record(c.next(), seconds)
        >>> c.next()
        2
    """

    def __init__(self, threads: int | None, cores: int | None = None, load: Callable[[], float] | None = None) -> None:
        self.cores = cores or available_cores()
        self.load = load or _load_average
        most = min(self.cores, MAX_AUTO_THREADS)
        self.choices = [threads] if threads else sorted({1, most})
        self.current = self.choices[0]
        self.times: dict[int, list[float]] = {c: [] for c in self.choices}
        self.cycles = 0
        self.interval = PROBE_EVERY
        self.trial_end = 1 + TRIAL  # (0: no first comparison, the machine was busy)
        self.probe_at = 1 + TRIAL + PROBE_EVERY

    @property
    def fixed(self) -> bool:
        """Whether there is nothing to choose (threads given, or one core)."""
        return len(self.choices) == 1

    def _other(self) -> int:
        return self.choices[1] if self.current == self.choices[0] else self.choices[0]

    def busy(self) -> bool:
        """Whether other processes keep the cores busy: the load average (this process's one thread
        included) leaves less than half a core free."""
        return self.load() > self.cores - 0.5

    def next(self) -> int:
        """The threads of the next cycle."""
        if self.fixed or self.cycles == 0:
            return self.current
        if self.cycles == 1 and self.busy():
            self.trial_end, self.probe_at = 0, 1 + PROBE_EVERY
        if self.cycles < self.trial_end:  # the first comparison: the most threads, then one, in turn
            return self.choices[self.cycles % 2]
        if self.cycles == self.probe_at:
            if self._other() > 1 and self.busy():  # (no try now; later)
                self.probe_at += self.interval
                return self.current
            return self._other()
        return self.current

    def record(self, threads: int, seconds: float) -> None:
        """A cycle at ``threads`` took ``seconds`` (per slot-step, or any unit that stays the same)."""
        self.cycles += 1
        if self.fixed or self.cycles == 1:  # (the first cycle warms up whatever the setting)
            return
        recent = self.times[self.current][-5:]
        self.times[threads].append(seconds)
        if self.cycles <= self.trial_end:
            if self.cycles == self.trial_end:
                self.current = min(self.choices, key=lambda c: statistics.median(self.times[c]))
        elif threads != self.current:  # a try of the other setting
            if not recent or seconds < MARGIN * statistics.median(recent):
                self.current, self.interval = threads, PROBE_EVERY
            else:
                self.interval = min(2 * self.interval, PROBE_MAX)
            self.probe_at = self.cycles + self.interval
        elif threads > 1 and recent and seconds > STALL * statistics.median(recent):  # other work took the cores
            self.current, self.interval = 1, PROBE_EVERY
            self.probe_at = self.cycles + self.interval


def _load_average() -> float:
    """The system's load average over the last minute (0 where the system has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # (Windows)
        return 0.0
