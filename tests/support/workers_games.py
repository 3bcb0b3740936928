"""Module-level games for the worker tests (worker processes import them by name), and the shared-memory
segments in use (those this process maps, those of the machine)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum

import gymloop as gl


@dataclass
class Unit:
    x: int
    hp: float


@dataclass
class Foe:
    x: int


class Act(Enum):
    A = 0
    B = 1
    C = 2


Pick = gl.SelectEntity("Pick", among=Foe)


@gl.game(entities=[Unit, Foe], actions=[Act, Pick])
def rich(agent, seed):
    """Several actors, masks, a select-entity action and a varying number of foes."""
    import random

    rng = random.Random(seed)
    score = 0.0
    t = 0
    while True:
        units = [Unit(rng.randrange(10), rng.random()) for _ in range(1 + rng.randrange(3))]
        foes = [Foe(rng.randrange(10)) for _ in range(1 + rng.randrange(4))]
        masks = {Act: [[True, rng.random() < 0.5, True] for _ in units], Pick: [foes[: 1 + rng.randrange(len(foes))] for _ in units]}
        acts, picks = agent.act(gl.Obs(score=score).entities(foes).actors(units, masks=masks), Act, Pick)
        score += sum(a.value for a in acts) + sum(p.x for p in picks) * 0.1
        t += 1
        if t % 7 == 0:
            agent.game_over(gl.Obs(score=score).metric("t", t), truncated=t % 14 == 0)
            score = 0.0


def crashy(agent, seed, crash_env_seed_mod=5):
    """Raises on its third decision when its seed is divisible by 5."""
    n = 0
    while True:
        agent.act(gl.Obs().actor(Foe(seed % 10)), Act)
        n += 1
        if n == 3 and seed % crash_env_seed_mod == 0:
            raise RuntimeError(f"boom at seed {seed}")


def with_finally(agent, seed, path):
    """Writes a marker file from its finally block when closed."""
    try:
        while True:
            agent.act(gl.Obs().actor(Foe(1)), Act)
    finally:
        with open(os.path.join(path, f"closed-{seed}"), "w") as f:
            f.write("ok")


def dies(agent, seed):
    """Kills its worker process on the second decision (never the main process)."""
    import multiprocessing

    agent.act(gl.Obs().actor(Foe(1)), Act)
    if multiprocessing.parent_process() is not None:
        os._exit(3)
    while True:
        agent.act(gl.Obs().actor(Foe(1)), Act)


@gl.game(entities=[Foe], actions=[Act])
def growing(agent, seed):
    """The observation grows by 3000 entities every decision (to outgrow shared memory)."""
    t = 1
    while True:
        agent.act(gl.Obs(score=t).entities([Foe(i % 10) for i in range(3000 * t)]).actor(Foe(seed % 10)), Act)
        t += 1


def many_actors(agent, seed):
    """200 actors per decision (to outgrow the action segment)."""
    s = 0
    while True:
        acts = agent.act(gl.Obs(score=s).actors([Foe(i % 10) for i in range(200)]), Act)
        s += sum(a.value for a in acts)


def segments_in_use() -> set[str]:
    """Names of the shared-memory segments (``/dev/shm``) this process maps now, from
    ``/proc/self/maps``. Tests compare these rather than all of ``/dev/shm``, which the tests of
    another pytest-xdist worker change at the same time."""
    names = set()
    with open("/proc/self/maps") as f:
        for line in f:
            i = line.find("/dev/shm/")
            if i >= 0:
                names.add(line[i + len("/dev/shm/"):].split(" (deleted)")[0].strip())
    return names


def shm_names() -> set[str]:
    """Names of all shared-memory segments (``/dev/shm``) on the machine now (empty where there is no ``/dev/shm``)."""
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
