"""Are a game's copies independent? Run copies alone and among others and compare what they observe.

A vectorized environment runs many copies of a game in one process. A copy that keeps part of its
state outside its own objects (a class-level container such as pygame's ``Sprite.containers``, a
module-level list, a generator not made from the game's seed) changes the others' games unseen.
:func:`compare_copies` drives copies of a game loop step by step in several arrangements (each copy
alone, twice; all together in order and in reverse; the first two together), each copy with its own
seeded random agent, records every observation each copy's agents are shown, and reports the first
one that differs from the copy's run alone. :func:`gymloop.check` calls it.

Example:
    >>> from gymloop.copies import compare_copies
    >>> from gymloop.games.snake import snake
    >>> compare_copies(snake, seed=0, num_copies=3, steps=40) is None
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import greenlet
import numpy as np

from .agent import RandomAgent, run
from .obs import Obs
from .runtime.seeding import derive_seed
from .schema import schema_of

__all__ = ["CopyDifference", "compare_copies", "SHARED_STATE_CAUSES", "AGAIN"]

#: :attr:`CopyDifference.arrangement` of a copy that did not repeat its own first run alone.
AGAIN = "in a second run alone"

#: What usually makes copies of a game change one another.
SHARED_STATE_CAUSES = (
    "The game keeps state outside its copy: keep all of a copy's state in objects the game function makes. Likely causes: a "
    "class-level container (pygame's Sprite.containers, a sprite Group made at module level), a module-level "
    "global, or a random generator not made from the game's seed (random.random(), np.random.*); "
    "see 'Copies that share nothing' in docs/games.md"
)


@dataclass(frozen=True)
class _Seen:
    """What one agent of a copy was shown at one call: ``act`` or ``game_over``."""

    seat: int
    call: str  # "act" or "game_over"
    score: float
    entities: tuple[tuple[str, tuple[str, ...], np.ndarray], ...]  # (type, feature names, features), by type name
    globals: tuple[tuple[str, ...], np.ndarray] | None


def _seen(seat: int, call: str, obs: Obs) -> _Seen:
    groups: dict[type, list[Any]] = {}
    for o in obs.entity_list():
        groups.setdefault(type(o), []).append(o)
    ents = []
    for cls, objs in groups.items():
        sc = schema_of(cls)
        ents.append((sc.name, tuple(sc.features), sc.featurize(objs)))
    ents.sort(key=lambda e: e[0])
    g = obs.global_features
    glob = None
    if g is not None:
        gs = schema_of(type(g))
        glob = (tuple(gs.features), gs.featurize([g]))
    return _Seen(seat, call, float(obs.score), tuple(ents), glob)


def _first_difference(a: _Seen, b: _Seen, then: str, now: str) -> str | None:
    """How ``b`` differs from ``a`` (``None`` when they are the same), for a message; ``then`` and
    ``now`` say when each was seen (``"alone"``, ``"here"``)."""
    if a.call != b.call or a.seat != b.seat:
        return f"{then}, agent {a.seat}'s {a.call}() came and {now}, agent {b.seat}'s {b.call}()"
    if a.score != b.score:
        return f"the score is {a.score:g} {then} and {b.score:g} {now}"
    ta, tb = [e[0] for e in a.entities], [e[0] for e in b.entities]
    if ta != tb:
        return f"the entity types observed are {ta} {then} and {tb} {now}"
    for (name, feats, xa), (_, _, xb) in zip(a.entities, b.entities):
        if xa.shape[0] != xb.shape[0]:
            return f"entity type {name!r}: {xa.shape[0]} object(s) {then} and {xb.shape[0]} {now}"
        diff = np.argwhere(~((xa == xb) | (np.isnan(xa) & np.isnan(xb))))
        if diff.size:
            i, j = (int(v) for v in diff[0])
            return f"entity type {name!r}, object {i}, feature {feats[j]!r}: {xa[i, j]:g} {then} and {xb[i, j]:g} {now}"
    if (a.globals is None) != (b.globals is None):
        return f"the globals are given {then} but not {now}, or the other way round"
    if a.globals is not None and b.globals is not None:
        gdiff = np.flatnonzero(a.globals[1][0] != b.globals[1][0])
        if gdiff.size:
            j = int(gdiff[0])
            return f"global feature {a.globals[0][j]!r}: {a.globals[1][0, j]:g} {then} and {b.globals[1][0, j]:g} {now}"
    return None


@dataclass(frozen=True)
class CopyDifference:
    """A copy that observed something else among other copies than alone.

    Attributes:
        copy: the copy's index.
        arrangement: how the copies ran, e.g. ``"among 4 copies, in reverse order"``, or ``"in a
            second run alone"`` (the copy did not repeat its own first run).
        call: the index of the first differing agent call (``act`` or ``game_over``) of that copy.
        what: what differed (a feature, a count, a score).
    """

    copy: int
    arrangement: str
    call: int
    what: str

    def message(self, seed: int) -> str:
        """The whole explanation, for an error (``seed``: the copy's seed)."""
        if self.arrangement == AGAIN:
            head = f"copy {self.copy} (seed {seed}) does not observe the same in a second run alone as in its first"
        else:
            head = f"copy {self.copy} (seed {seed}) observes something else {self.arrangement} than alone"
        return f"{head}: at its call {self.call}, {self.what}. {SHARED_STATE_CAUSES}"


class _Copy:
    """One copy of the game, run by :func:`run` inside its own greenlet, giving control back at every call."""

    def __init__(self, game: Callable[..., Any], index: int, seed: int, agents: int, steps: int, driver: greenlet.greenlet) -> None:
        self.index = index
        self.log: list[_Seen] = []
        self.driver = driver
        seats = [_Seat(self, i, RandomAgent(derive_seed(seed, index, 0, generation=1) + i)) for i in range(agents)]
        game_seed = derive_seed(seed, index, 0)
        self.task = greenlet.greenlet(
            lambda: run(game, seats[0] if agents == 1 else seats, seed=game_seed, max_steps=steps), parent=driver
        )
        self.resume: greenlet.greenlet = self.task  # where the copy continues: its run, then its game at an agent call
        self.done = False

    def step(self) -> None:
        """Let the copy run to its next agent call (or to its end)."""
        self.resume.switch()
        if self.task.dead:
            self.done = True

    def pause(self) -> None:
        """Called in the copy's game: hand control to the driver until :meth:`step`."""
        self.resume = greenlet.getcurrent()
        self.driver.switch()


class _Seat:
    """The agent of one seat of a copy: records what it is shown, pauses, then asks its random agent."""

    def __init__(self, copy: _Copy, seat: int, inner: RandomAgent) -> None:
        self.copy = copy
        self.seat = seat
        self.inner = inner

    def act(self, obs: Obs, *action_types: Any) -> Any:
        self.copy.log.append(_seen(self.seat, "act", obs))
        self.copy.pause()
        return self.inner.act(obs, *action_types)

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        self.copy.log.append(_seen(self.seat, "game_over", obs))
        self.copy.pause()


def _play(game: Callable[..., Any], seed: int, indices: Sequence[int], agents: int, steps: int, together: bool) -> dict[int, list[_Seen]]:
    """Run the copies ``indices`` (each its own seed and agents), one call at a time in the order
    given when ``together``, else each to its end before the next; returns each copy's log."""
    driver = greenlet.getcurrent()
    copies = [_Copy(game, k, seed, agents, steps, driver) for k in indices]
    try:
        if together:
            while not all(c.done for c in copies):
                for c in copies:
                    if not c.done:
                        c.step()
        else:
            for c in copies:
                while not c.done:
                    c.step()
    finally:
        for c in copies:  # (a failure elsewhere: close the others' games, their finally blocks run)
            if not c.task.dead and not c.resume.dead:
                c.resume.throw(greenlet.GreenletExit)
    return {c.index: c.log for c in copies}


def compare_copies(game: Callable[..., Any], seed: int = 0, num_copies: int = 4, steps: int = 100,
                   agents_per_game: int = 1) -> CopyDifference | None:
    """Run copies of ``game`` alone and among others and return the first difference, or ``None``.

    Each copy ``k`` plays with its own seed and its own seeded random agents, ``steps`` decisions.
    It runs alone (twice: a copy must not depend on an earlier run either), then among all the
    copies resumed one decision at a time in order and in reverse order, and copies 1 and 0 side by
    side (the second first). Every observation must be the same as alone.

    Args:
        game: the game loop.
        seed: the root seed (copy ``k`` gets the seed a :class:`~gymloop.VecEnv` gives its copy ``k``).
        num_copies: copies (at least 2).
        steps: decisions per copy (all its agents together).
        agents_per_game: agents the game takes.

    Returns:
        The first :class:`CopyDifference` found, or ``None``.
    """
    n = max(2, num_copies)
    alone: dict[int, list[_Seen]] = {}
    for k in range(n):
        alone.update(_play(game, seed, [k], agents_per_game, steps, together=False))
    order = list(range(n))
    arrangements = [
        (AGAIN, [0], False),
        (f"among {n} copies", order, True),
        (f"among {n} copies, in reverse order", order[::-1], True),
        ("beside one other copy", [1, 0], True),
    ]
    for label, indices, together in arrangements:
        logs = _play(game, seed, indices, agents_per_game, steps, together)
        for k in sorted(logs):
            a, b = alone[k], logs[k]
            then, now = ("the first time", "the second") if label == AGAIN else ("alone", "here")
            for i, (x, y) in enumerate(zip(a, b)):
                what = _first_difference(x, y, then, now)
                if what is not None:
                    return CopyDifference(k, label, i, what)
            if len(a) != len(b):
                return CopyDifference(k, label, min(len(a), len(b)),
                                      f"it made {len(a)} agent call(s) {then} and {len(b)} {now}")
    return None
