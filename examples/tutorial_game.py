"""Gem collector: the game of the tutorial "Make your game trainable" (docs/tutorial.md).

A robot walks a 6×6 grid for at most 30 steps, picking up gems (silver 1 point, gold 3) and
avoiding traps (−5 points, and the episode ends). The episode also ends when every gem is taken.
"""

import random
from dataclasses import dataclass
from enum import Enum

import gymloop as gl

SIZE = 6        # the board is SIZE × SIZE cells
MAX_STEPS = 30  # the time limit of an episode, in moves
N_GEMS = 4
N_TRAPS = 3
TRAP_PENALTY = 5


class GemKind(Enum):  # an Enum field becomes one-hot features: kind.is_SILVER, kind.is_GOLD
    SILVER = 1
    GOLD = 3


@dataclass
class Robot:  # the actor: it takes the decisions
    x: int
    y: int
    carried: int  # gems picked up so far


@dataclass
class Gem:
    x: int
    y: int
    kind: GemKind


@dataclass
class Trap:
    x: int
    y: int


@dataclass
class Clock:  # global features: one set per observation, not tied to an entity
    steps_left: int


class Move(Enum):  # the action: four choices, named UP, DOWN, LEFT, RIGHT so that a keyboard can play
    UP = 0
    DOWN = 1
    LEFT = 2
    RIGHT = 3


DELTA = {Move.UP: (0, 1), Move.DOWN: (0, -1), Move.LEFT: (-1, 0), Move.RIGHT: (1, 0)}


class GemGame:
    """The state and rules of one game; a new episode starts with :meth:`reset`."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.reset()

    def reset(self) -> None:
        cells = self.rng.sample([(x, y) for x in range(SIZE) for y in range(SIZE)], 1 + N_GEMS + N_TRAPS)
        x, y = cells[0]
        self.robot = Robot(x, y, carried=0)
        self.gems = [Gem(gx, gy, self.rng.choice(list(GemKind))) for gx, gy in cells[1:1 + N_GEMS]]
        self.traps = [Trap(tx, ty) for tx, ty in cells[1 + N_GEMS:]]
        self.score = 0
        self.steps = 0
        self.over = False  # trapped, or every gem taken

    def legal_moves(self) -> list[Move]:
        """The moves that stay on the board."""
        r = self.robot
        return [m for m, (dx, dy) in DELTA.items() if 0 <= r.x + dx < SIZE and 0 <= r.y + dy < SIZE]

    def step(self, move: Move) -> None:
        dx, dy = DELTA[move]
        r = self.robot
        r.x, r.y = r.x + dx, r.y + dy
        self.steps += 1
        for gem in self.gems:
            if (gem.x, gem.y) == (r.x, r.y):
                self.gems.remove(gem)
                self.score += gem.kind.value
                r.carried += 1
                break
        if any((t.x, t.y) == (r.x, r.y) for t in self.traps):
            self.score -= TRAP_PENALTY
            self.over = True
        elif not self.gems:
            self.over = True


def observe(game: GemGame) -> gl.Obs:
    """What the robot sees before a move: every entity, its legal moves and the time left."""
    return (
        gl.Obs(score=game.score)
        .entities(game.gems)
        .entities(game.traps)
        .actor(game.robot, masks={Move: game.legal_moves()})
        .globals(Clock(MAX_STEPS - game.steps))
    )


@gl.game(entities=[Robot, Gem, Trap], actions=[Move], globals=Clock)
def gem_collector(agent, seed):
    """The game loop: one decision per move; episodes restart in place, forever."""
    game = GemGame(seed)
    while True:
        move = agent.act(observe(game), Move)
        game.step(move)
        if game.over or game.steps >= MAX_STEPS:
            final = gl.Obs(score=game.score).metric("gems", game.robot.carried)
            if not game.over:  # the time ran out: give the last state, so training can value it
                final = final.entities(game.gems).entities(game.traps).entities(game.robot).globals(Clock(0))
            agent.game_over(final, truncated=not game.over)
            game.reset()


class GreedyAgent:
    """Walks to the nearest gem, never onto a trap."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def act(self, obs: gl.Obs, move_type: type[Move]) -> Move:
        robot = obs.actor_list[0]
        traps = {(t.x, t.y) for t in obs.entities_of(Trap)}
        gems = obs.entities_of(Gem)
        safe = [m for m in obs.legal(robot, Move) if (robot.x + DELTA[m][0], robot.y + DELTA[m][1]) not in traps]
        if not safe:
            return self.rng.choice(obs.legal(robot, Move))

        def distance(m: Move) -> int:
            x, y = robot.x + DELTA[m][0], robot.y + DELTA[m][1]
            return min((abs(g.x - x) + abs(g.y - y) for g in gems), default=0)

        return min(safe, key=lambda m: (distance(m), self.rng.random()))

    def game_over(self, obs: gl.Obs, truncated: bool = False) -> None:
        pass
