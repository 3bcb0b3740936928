"""Module-level games that fault on purpose, for the reliability tests (worker processes import them).

Each game plays normally, and on its ``at``-th decision misbehaves in the way ``how`` names when its
seed is one of ``bad_seeds`` (``None``: every seed). Tests pick the copies that misbehave by their
first seeds (``derive_seed(root, env, 0, 0)``), so a copy restarted with a fresh seed behaves.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from dataclasses import dataclass
from enum import Enum

import gymloop as gl
from gymloop.runtime.seeding import derive_seed


@dataclass
class Unit:
    x: int


class Move(Enum):
    A = 0
    B = 1


class Oops(BaseException):
    """Neither an Exception nor SystemExit: a game may still raise it."""


def first_seed(env: int, root: int = 0) -> int:
    """The seed copy ``env`` of a VecEnv with ``seed=root`` starts with at its first reset."""
    return derive_seed(root, env, 0, 0)


def misbehave(how: str) -> None:
    if how == "loop":
        while True:
            pass
    if how == "sleep":
        time.sleep(1e6)
    if how == "exit":
        sys.exit(3)
    if how == "oops":
        raise Oops("not an Exception")
    if how == "interrupt":
        raise KeyboardInterrupt
    if how == "raise":
        raise RuntimeError("boom")
    if how == "die":  # only ever in a worker process (a copy in the main process behaves)
        if multiprocessing.parent_process() is not None:
            os._exit(7)
        return
    raise ValueError(how)


def faulty(agent, seed, how="raise", bad_seeds=None, at=3, episode=5):
    """Plays episodes of ``episode`` decisions (score +1 each); misbehaves after decision ``at`` if picked
    (``at=0``: before its first)."""
    picked = bad_seeds is None or seed in bad_seeds
    if at == 0 and picked:
        misbehave(how)
    n = 0
    while True:
        agent.act(gl.Obs(score=n).actor(Unit(seed % 7)), Move)
        n += 1
        if n == at and picked:
            misbehave(how)
        if n % episode == 0:
            agent.game_over(gl.Obs(score=n))


def hangs_in_finally(agent, seed):
    """Its finally block never ends (closing it must still be bounded)."""
    try:
        while True:
            agent.act(gl.Obs().actor(Unit(1)), Move)
    finally:
        while True:
            time.sleep(0.01)


class FaultyEnv(gl.Environment):
    """A low-level environment that misbehaves in ``act`` like :func:`faulty` (for picked seeds)."""

    def __init__(self, how="raise", bad_seeds=(), at=3):
        self.how, self.bad_seeds, self.at = how, bad_seeds, at
        self.seed = self.n = 0

    def obs_space(self):
        return gl.ObsSpace(entities={"Unit": ("x",)})

    def action_space(self):
        return {"Move": gl.ActionDesc("Move", "categorical", ("A", "B"))}

    def reset(self, seed):
        self.seed, self.n = seed, 0
        return self._obs()

    def act(self, actions):
        self.n += 1
        if self.n == self.at and (self.bad_seeds is None or self.seed in self.bad_seeds):
            misbehave(self.how)
        return self._obs(reward=1.0)

    def _obs(self, reward=0.0):
        return gl.EnvObservation(entities={"Unit": [[float(self.seed % 7)]]}, actors={"Move": [0]}, reward=reward)
