"""Trivial games for learning tests (each has an obvious optimal policy), and a tiny training config."""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

import numpy as np

import gymloop as gl
from gymloop.train import NetConfig, PPOConfig, TrainConfig


class Arm(Enum):
    A = 0
    B = 1
    C = 2
    D = 3


@dataclass
class Player:
    bias: float


def bandit(agent, seed):
    """One decision per episode; arm C pays 1, the others 0."""
    while True:
        arm = agent.act(gl.Obs(score=0).actor(Player(1.0)), Arm)
        agent.game_over(gl.Obs(score=1.0 if arm is Arm.C else 0.0))


#: :func:`bandit_crashes` raises when it is asked for this decision (in every copy).
CRASH_AT_DECISION = 21


def bandit_crashes(agent, seed):
    """:func:`bandit` whose every copy raises when asked for its 21st decision: with :func:`tiny`'s
    8 steps per copy and update, during the third rollout (two updates completed)."""
    decisions = 0
    while True:
        decisions += 1
        if decisions == CRASH_AT_DECISION:
            raise RuntimeError(f"bandit_crashes: the planned crash at decision {decisions}")
        arm = agent.act(gl.Obs(score=0).actor(Player(1.0)), Arm)
        agent.game_over(gl.Obs(score=1.0 if arm is Arm.C else 0.0))


@dataclass
class Cue:
    target: int


def masked(agent, seed):
    """The cue names the paying arm; a random half of the other arms are masked out."""
    rng = random.Random(seed)
    while True:
        target = rng.randrange(4)
        allowed = [a for a in Arm if a.value == target or rng.random() < 0.5]
        arm = agent.act(gl.Obs(score=0).actor(Cue(target), masks={Arm: allowed}), Arm)
        if arm not in allowed:
            raise AssertionError("the trainer chose a masked arm")
        agent.game_over(gl.Obs(score=1.0 if arm.value == target else 0.0))


@dataclass
class Picker:
    pass


@dataclass
class Item:
    value: float


Pick = gl.SelectEntity("Pick", among=Item)


@gl.game(entities=[Picker, Item], actions=[Pick])
def select(agent, seed):
    """Pick the item of highest value among 3 to 6."""
    rng = random.Random(seed)
    while True:
        items = [Item(rng.random()) for _ in range(rng.randrange(3, 7))]
        chosen = agent.act(gl.Obs(score=0).entities(items).actor(Picker()), Pick)
        best = max(items, key=lambda i: i.value)
        agent.game_over(gl.Obs(score=1.0 if chosen is best else 0.0))


class Fire(Enum):
    HOLD = 0
    SHOOT = 1


@dataclass
class Signal:
    move: int
    shoot: bool


def two_types(agent, seed):
    """Two action types in one decision: half a point for each right one."""
    rng = random.Random(seed)
    while True:
        sig = Signal(rng.randrange(4), rng.random() < 0.5)
        arm, fire = agent.act(gl.Obs(score=0).actor(sig), Arm, Fire)
        score = 0.5 * (arm.value == sig.move) + 0.5 * ((fire is Fire.SHOOT) == sig.shoot)
        agent.game_over(gl.Obs(score=score))


@gl.global_decision
class Guess(Enum):
    ZERO = 0
    ONE = 1
    TWO = 2


@dataclass
class Light:
    index: int
    on: bool


def global_only(agent, seed):
    """Only a global decision is asked: the lit one of three lights (no actor entity) pays 1."""
    rng = random.Random(seed)
    while True:
        lit = rng.randrange(3)
        lights = [Light(i, i == lit) for i in range(3)]
        guess = agent.act(gl.Obs(score=0).entities(lights), Guess)
        agent.game_over(gl.Obs(score=1.0 if guess.value == lit else 0.0))


def global_and_actor(agent, seed):
    """A global decision (masked to the lit light and one other) together with an actor-bound one."""
    rng = random.Random(seed)
    while True:
        lit = rng.randrange(3)
        other = rng.choice([g for g in Guess if g.value != lit])
        allowed = [Guess(lit), other]
        obs = gl.Obs(score=0).entities([Light(i, i == lit) for i in range(3)]).actor(Player(1.0)).mask(Guess, allowed)
        guess, arm = agent.act(obs, Guess, Arm)
        if guess not in allowed:
            raise AssertionError("the trainer chose a masked global choice")
        agent.game_over(gl.Obs(score=(1.0 if guess.value == lit else 0.0) + (1.0 if arm is Arm.C else 0.0)))


# ---------------------------------------------------------------------- a tiny config for learning tests
def tiny(steps: int, **kw) -> TrainConfig:
    cfg = TrainConfig(steps=steps, num_envs=32, rollout_steps=8, threads=1, seed=kw.pop("seed", 0))
    cfg.ppo = PPOConfig(lr=kw.pop("lr", 1e-2), minibatch_size=128, epochs=2, ent_coef=0.01)
    cfg.net = NetConfig(d_model=16, n_head=2, **kw)
    return cfg


def final_return(result, last: int = 1) -> float:
    """Mean episode return over the last ``last`` updates (each is one rollout of noisy episodes)."""
    return float(np.mean([h["episode_return_mean"] for h in result.history[-last:]]))


@dataclass
class Rover:
    x_pos: float
    y_pos: float
    heading: float


@dataclass
class Rock:
    x_pos: float
    y_pos: float


class Drive(Enum):
    LEFT = 0
    AHEAD = 1
    RIGHT = 2


@gl.game(entities=[Rover, Rock], actions=[Drive])
def rovers(agent, seed):
    """A vehicle with a heading among rocks: net.frame="auto" puts the rocks in the rover's frame."""
    rng = random.Random(seed)
    while True:
        rover = Rover(rng.uniform(-50, 50), rng.uniform(-50, 50), rng.uniform(0, 6.28))
        rocks = [Rock(rng.uniform(-50, 50), rng.uniform(-50, 50)) for _ in range(rng.randint(0, 4))]
        agent.act(gl.Obs().entities(rocks).actors([rover]), Drive)


# ---------------------------------------------------------------------- a global select-entity
@dataclass
class Patient:
    pain: float
    awake: bool


#: the doctor, who is not an entity, chooses one patient per observation
Treat = gl.global_decision(gl.SelectEntity("Treat", among=Patient))


@gl.game(entities=[Patient], actions=[Treat])
def triage(agent, seed):
    """A doctor (no actor entity) treats one of 3 to 6 patients: the one in most pain pays 1."""
    rng = random.Random(seed)
    while True:
        patients = [Patient(rng.random(), True) for _ in range(rng.randrange(3, 7))]
        chosen = agent.act(gl.Obs(score=0).entities(patients), Treat)
        best = max(patients, key=lambda p: p.pain)
        agent.game_over(gl.Obs(score=1.0 if chosen is best else 0.0))


@gl.game(entities=[Patient, Player], actions=[Treat, Arm])
def triage_masked(agent, seed):
    """:func:`triage` where only the awake patients may be treated (a mask), together with an
    actor-bound decision of a nurse (arm C pays 1 more)."""
    rng = random.Random(seed)
    while True:
        patients = [Patient(rng.random(), rng.random() < 0.6) for _ in range(rng.randrange(3, 7))]
        patients[rng.randrange(len(patients))].awake = True
        awake = [p for p in patients if p.awake]
        obs = gl.Obs(score=0).entities(patients).actor(Player(1.0)).mask(Treat, awake)
        chosen, arm = agent.act(obs, Treat, Arm)
        if not chosen.awake:
            raise AssertionError("the trainer chose a masked patient")
        best = max(awake, key=lambda p: p.pain)
        agent.game_over(gl.Obs(score=(1.0 if chosen is best else 0.0) + (1.0 if arm is Arm.C else 0.0)))
