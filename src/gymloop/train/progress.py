"""The progress line of a training run: a one-line display on a terminal, periodic log lines elsewhere."""

from __future__ import annotations

import collections
import math
import sys
import time
from collections.abc import Mapping

from .run_dir import episode_metric_names

__all__ = ["PROGRESS_EPISODES", "Progress"]

#: the progress line's means are over about this many of the latest episodes that ended
PROGRESS_EPISODES = 100


class Progress:
    """A one-line progress display on a terminal; periodic log lines elsewhere.

    It shows, over the latest :data:`PROGRESS_EPISODES` episodes that ended (however many updates
    ago: a game whose copies all end their episodes together has none in most rollouts), the mean
    ``return`` (the sum of rewards, not the game's score), the mean episode length ``ep.len`` in
    decisions, and after ``game:`` the means of up to three metrics the game reports itself
    (snake: ``length=``); ``-`` until the first episode ends.
    """

    def __init__(self, total: int, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()
        self.last = 0.0
        self.width = 0  # of the longest line so far: a shorter one is padded to overwrite it
        self.recent: dict[str, collections.deque[tuple[float, float]]] = {}  # per metric: (mean, episodes) of recent updates

    def _note(self, info: Mapping[str, float]) -> None:
        """Keep each metric's ``(mean, episodes)`` of this update, and drop what is older than the
        latest :data:`PROGRESS_EPISODES` episodes."""
        for n in episode_metric_names(info):
            mean, count = info.get(n + "_mean"), info.get(n + "_count")
            if mean is None or count is None or not count > 0 or not math.isfinite(mean):
                continue
            q = self.recent.setdefault(n, collections.deque())
            q.append((float(mean), float(count)))
            while len(q) > 1 and sum(c for _, c in q) - q[0][1] >= PROGRESS_EPISODES:
                q.popleft()

    def mean(self, name: str) -> float | None:
        """The mean of metric ``name`` over its latest episodes (``None`` before the first)."""
        q = self.recent.get(name)
        if not q:
            return None
        return sum(m * c for m, c in q) / sum(c for _, c in q)

    def update(self, steps: int, info: dict[str, float]) -> None:
        """Show an update's row (``info``) at ``steps``."""
        if not self.enabled:
            return
        self._note(info)
        now = time.time()
        frac = min(1.0, steps / self.total)
        bar = "#" * int(frac * 24)

        def show(name: str, fmt: str) -> str:
            v = self.mean(name)
            return format(v, fmt) if v is not None else "-".rjust(len(format(0.0, fmt)))

        own = [n for n in self.recent if n not in ("episode_return", "episode_length")][:3]
        line = (
            f"[{bar:<24}] {steps:>9}/{self.total} steps  {info.get('steps_per_second', 0):7.0f} steps/s  "
            f"return {show('episode_return', '6.2f')}  ep.len {show('episode_length', '6.1f')}"
        )
        if own:
            line += "  game: " + " ".join(f"{n}={show(n, '.2f')}" for n in own)
        if self.tty:
            self.width = max(self.width, len(line))
            sys.stderr.write("\r" + line.ljust(self.width))
            sys.stderr.flush()
        elif now - self.last > 10 or steps >= self.total:
            sys.stderr.write(line + "\n")
            self.last = now

    def close(self) -> None:
        """End the line (on a terminal)."""
        if self.tty:
            sys.stderr.write("\n")
