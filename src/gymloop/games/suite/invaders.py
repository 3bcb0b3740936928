"""Invaders: a real-time arcade game of dodging and shooting (after pygame's ``aliens`` example).

One decision per tick. The player's ship moves along the bottom row and fires upward; aliens
zigzag sideways as they descend and drop bombs.

**Field.** 15 columns (``x`` in ``[0, 15)``) by 16 rows (``y`` in ``[0, 16)``, ``y = 0`` the ship's
row, ``y`` grows upward). The ship starts in the middle column with 3 lives.

**Observation.** Entities:

* ``Ship`` (the actor): ``x``;
* ``Alien``: ``x``, ``y``, ``dx`` (its sideways heading, -1 or +1);
* ``Bomb``: ``x``, ``y`` (falling);
* ``Shot``: ``x``, ``y`` (the ship's, rising).

Global features (``Status``): ``lives``, ``shots_ready`` (shots it may still fire: at most 2 are
alive at once), ``ticks_left``.

**Action.** ``Control``: ``STAY``, ``LEFT``, ``RIGHT``, ``FIRE``, ``LEFT_FIRE``, ``RIGHT_FIRE``
(move and fire in the same tick; a move into the side walls stays). The three firing choices are
masked while two shots are alive.

**Dynamics.** Each tick: the ship moves, then fires (a shot appears above it); shots rise 2 rows,
destroying the first alien whose cell they cross; each alien moves one column sideways every other
tick, turning around after 2 to 4 columns or at a wall (so it stays near the column where it
appeared), and descends one row every 4 ticks; each alien drops a bomb with probability 0.04 per
tick (0.12 when the ship is within 1 column below it: aliens aim); bombs fall one row per tick.
A bomb reaching the ship's cell costs a life; so does an alien reaching the bottom row (it is
gone). A new alien appears on the top row with probability 0.1 per tick while fewer than 6 are
alive, at a random column.

**Reward.** +1 per alien destroyed (the score is the aliens destroyed).

**Termination.** Losing the last life *terminates* the episode; 500 ticks *truncate* it. Each
episode reports the metrics ``kills``, ``lives`` and ``at_wall`` (the share of its ticks the ship
spent in a side column: near 1 for a policy that parks at a wall).

Standing at one wall and firing only reaches the aliens that appear near that wall, and every
other alien lands: the scripted :class:`InvadersAgent` (dodge the bombs above, go under the lowest
alien, fire when under one) scores several times more.

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.suite.invaders import InvadersAgent, invaders
    >>> scripted = gl.run(invaders, InvadersAgent(seed=0), seed=0, max_episodes=3)
    >>> rand = gl.run(invaders, gl.RandomAgent(seed=0), seed=0, max_episodes=3)
    >>> sum(scripted.scores) > 2 * sum(rand.scores)
    True
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ...obs import Obs
from ...schema import entity
from ...spaces import game as declare_game
from ..registry import register_game
from ..rules import Rules

__all__ = ["Ship", "Alien", "Bomb", "Shot", "Status", "Control", "InvadersGame", "invaders", "InvadersAgent", "WIDTH", "HEIGHT",
           "MAX_TICKS"]

WIDTH = 15
HEIGHT = 16
MAX_TICKS = 500
LIVES = 3
MAX_SHOTS = 2
MAX_ALIENS = 6
SPAWN_P = 0.1
BOMB_P = 0.04
AIMED_BOMB_P = 0.12
SHOT_SPEED = 2
DESCEND_EVERY = 4


@dataclass(slots=True)
class Ship:
    """The player's ship (the actor) on the bottom row."""

    x: int


@entity(features=["x", "y", "dx"])
@dataclass(slots=True)
class Alien:
    """An alien: ``turn_in`` (columns left before it turns around) is not observed."""

    x: int
    y: int
    dx: int
    turn_in: int


@dataclass(slots=True)
class Bomb:
    x: int
    y: int


@dataclass(slots=True)
class Shot:
    x: int
    y: int


@dataclass(slots=True)
class Status:
    lives: int
    shots_ready: int
    ticks_left: int


class Control(Enum):
    STAY = 0
    LEFT = 1
    RIGHT = 2
    FIRE = 3
    LEFT_FIRE = 4
    RIGHT_FIRE = 5


_MOVE = (0, -1, 1, 0, -1, 1)  # each control's sideways step, by value
_FIRES = (False, False, False, True, True, True)
_NO_FIRE = [True, True, True, False, False, False]
_ANY = [True] * 6


class InvadersGame(Rules):
    """The rules, independent of who plays."""

    __slots__ = ("ship", "aliens", "bombs", "shots", "lives", "kills", "tick", "at_wall", "over")

    def reset(self) -> None:
        self.ship = Ship(WIDTH // 2)
        self.aliens: list[Alien] = []
        self.bombs: list[Bomb] = []
        self.shots: list[Shot] = []
        self.lives = LIVES
        self.kills = 0
        self.tick = 0
        self.at_wall = 0  # ticks ended in a side column
        self.over = False
        self.spawn()

    def spawn(self) -> None:
        rng = self.rng
        self.aliens.append(Alien(rng.randrange(WIDTH), HEIGHT - 1, rng.choice((-1, 1)), 2 + rng.randrange(3)))

    def observe(self) -> Obs:
        ready = MAX_SHOTS - len(self.shots)
        return (
            Obs(score=self.kills)
            .entities(self.aliens)
            .entities(self.bombs)
            .entities(self.shots)
            .actor(self.ship, masks={Control: _ANY if ready > 0 else _NO_FIRE})
            .globals(Status(self.lives, ready, MAX_TICKS - self.tick))
        )

    def step(self, control: Control) -> None:
        """Play one tick; sets ``over`` when the last life is lost."""
        rng = self.rng
        v = control._value_
        ship = self.ship
        ship.x = min(max(ship.x + _MOVE[v], 0), WIDTH - 1)
        self.at_wall += ship.x == 0 or ship.x == WIDTH - 1
        if _FIRES[v] and len(self.shots) < MAX_SHOTS:
            self.shots.append(Shot(ship.x, 0))
        self.tick += 1
        aliens = self.aliens
        # shots rise, each destroying the first alien whose cell it crosses
        kept = []
        for s in self.shots:
            top = s.y + SHOT_SPEED
            hit = None
            for a in aliens:
                if a.x == s.x and s.y < a.y <= top and (hit is None or a.y < hit.y):
                    hit = a
            if hit is not None:
                aliens.remove(hit)
                self.kills += 1
            elif top < HEIGHT:
                s.y = top
                kept.append(s)
        self.shots = kept
        # aliens zigzag near their column and descend; they aim their bombs
        descend = self.tick % DESCEND_EVERY == 0
        sideways = self.tick % 2 == 0
        landed = 0
        for a in list(aliens):
            if sideways:
                nx = a.x + a.dx
                if a.turn_in <= 0 or not 0 <= nx < WIDTH:
                    a.dx = -a.dx
                    a.turn_in = 2 + rng.randrange(3)
                    nx = a.x + a.dx
                a.x = nx
                a.turn_in -= 1
            if descend:
                a.y -= 1
                if a.y <= 0:
                    aliens.remove(a)
                    landed += 1
                    continue
            if rng.random() < (AIMED_BOMB_P if abs(a.x - ship.x) <= 1 else BOMB_P):
                self.bombs.append(Bomb(a.x, a.y - 1))
        # bombs fall
        kept_bombs = []
        hits = 0
        for b in self.bombs:
            b.y -= 1
            if b.y <= 0:
                hits += b.x == ship.x
            else:
                kept_bombs.append(b)
        self.bombs = kept_bombs
        self.lives -= landed + hits
        if self.lives <= 0:
            self.lives = 0
            self.over = True
            return
        if len(aliens) < MAX_ALIENS and rng.random() < SPAWN_P:
            self.spawn()

    def final(self) -> Obs:
        wall = self.at_wall / max(self.tick, 1)
        return Obs(score=self.kills).metric("kills", self.kills).metric("lives", self.lives).metric("at_wall", wall)


@declare_game(entities=[Ship, Alien, Bomb, Shot], actions=[Control], globals=Status)
def invaders(agent: Any, seed: int) -> None:
    """The invaders game loop; runs forever (episodes restart in place) until closed."""
    game = InvadersGame(seed)
    while True:
        game.step(agent.act(game.observe(), Control))
        if game.over:
            agent.game_over(game.final())
            game.reset()
        elif game.tick >= MAX_TICKS:
            agent.game_over(game.final().entities(game.aliens).entities(game.bombs).entities(game.ship), truncated=True)
            game.reset()


class InvadersAgent:
    """The scripted invaders player: dodges the bombs about to land, goes under the lowest alien, fires under one.

    A move is *safe* when no bomb will reach the ship's new column in the next two ticks. Among
    safe moves it takes the one nearest to the column of the lowest alien (the next to land);
    it fires whenever an alien is in its column and a shot is ready. Seeded ties only.

    Args:
        seed: seed of the tie-breaking generator.

    Example:
        >>> import gymloop as gl
        >>> from gymloop.games.suite.invaders import InvadersAgent, invaders
        >>> gl.run(invaders, InvadersAgent(seed=0), seed=1, max_episodes=1).scores[0] > 10
        True
    """

    def __init__(self, seed: int | None = 0) -> None:
        self.rng = random.Random(seed)

    def act(self, obs: Obs, *action_types: Any) -> Control:
        x = obs.actor_list[0].x
        aliens = obs.entities_of(Alien)
        danger = {b.x for b in obs.entities_of(Bomb) if b.y <= 2}
        target = min(aliens, key=lambda a: (a.y, abs(a.x - x))).x if aliens else WIDTH // 2
        g = obs.global_features
        can_fire = g is None or g.shots_ready > 0
        options = []
        for move in (0, -1, 1):
            nx = min(max(x + move, 0), WIDTH - 1)
            safe = nx not in danger
            options.append(((safe, -abs(nx - target), self.rng.random()), move, nx))
        _, move, nx = max(options, key=lambda o: o[0])
        fire = can_fire and any(a.x == nx for a in aliens)
        return _CONTROL[(move, fire)]

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        pass


_CONTROL = {(_MOVE[c.value], _FIRES[c.value]): c for c in Control}

register_game("invaders", invaders, "an arcade game: move along the bottom, fire at zigzagging aliens, dodge their bombs",
              scripted=InvadersAgent)
