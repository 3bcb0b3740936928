"""Key and door: a long-horizon sparse reward. Fetch the key, open the door, reach the exit.

**Board.** 11 columns by 7 rows of cells (``x`` in ``[0, 11)``, ``y`` in ``[0, 7)``). A wall fills
column 5 but for one door, at a random row; 4 more wall cells stand at random in each room. The
agent and the key start at random free cells of the left room, the exit at one of the right room.

**Observation.** Entities:

* ``Agent`` (the actor): ``x``, ``y``, ``has_key`` (bool);
* ``Key``: ``x``, ``y`` (gone once picked up);
* ``Door``: ``x``, ``y``, ``open`` (bool);
* ``Exit``: ``x``, ``y``;
* ``Wall``: ``x``, ``y`` (every wall cell).

Global features (``Clock``): ``steps_left``.

**Action.** ``Move`` (from :mod:`gymloop.games.grid`): ``UP`` (y+1), ``DOWN`` (y-1), ``LEFT``
(x-1), ``RIGHT`` (x+1). A move into a wall, off the board, or into the closed door without the
key, leaves the agent where it is.

**Dynamics.** Stepping onto the key picks it up; stepping into the closed door with the key
opens it (and moves the agent into the doorway).

**Reward.** 1 when the agent reaches the exit, 0 otherwise (the score is 1 or 0).

**Termination.** Reaching the exit *terminates* the episode; 200 moves *truncate* it. Each episode
reports the metrics ``success``, ``has_key`` and ``door_open`` (1 or 0). The shortest solution
takes about 15 to 30 moves; a random walk rarely finds it.

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.suite.keydoor import KeyDoorAgent, keydoor
    >>> gl.run(keydoor, KeyDoorAgent(seed=0), seed=0, max_episodes=5).scores
    [1.0, 1.0, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ...obs import Obs
from ...spaces import game as declare_game
from ..grid import DELTA, MOVES, Cell, Move
from ..registry import register_game
from ..rules import Rules

__all__ = ["Agent", "Key", "Door", "Exit", "Wall", "Clock", "Move", "KeyDoorGame", "keydoor", "KeyDoorAgent", "WIDTH", "HEIGHT",
           "MAX_STEPS", "shortest_path"]

WIDTH = 11
HEIGHT = 7
WALL_X = 5
ROOM_WALLS = 4
MAX_STEPS = 200


@dataclass(slots=True)
class Agent:
    """The agent (the actor)."""

    x: int
    y: int
    has_key: bool


@dataclass(slots=True)
class Key(Cell):
    """The key that opens the door."""


@dataclass(slots=True)
class Door:
    x: int
    y: int
    open: bool


@dataclass(slots=True)
class Exit(Cell):
    """The goal."""


@dataclass(slots=True)
class Wall(Cell):
    """A wall cell."""


@dataclass(slots=True)
class Clock:
    steps_left: int


class KeyDoorGame(Rules):
    """The rules, independent of who plays."""

    __slots__ = ("agent", "key", "door", "exit", "walls", "blocked", "steps", "over")

    def reset(self) -> None:
        rng = self.rng
        door_y = rng.randrange(HEIGHT)
        self.door = Door(WALL_X, door_y, False)
        walls = {(WALL_X, y) for y in range(HEIGHT) if y != door_y}
        left = [(x, y) for x in range(WALL_X) for y in range(HEIGHT)]
        right = [(x, y) for x in range(WALL_X + 1, WIDTH) for y in range(HEIGHT)]
        while True:  # room walls that leave every cell of a room reachable from the door
            extra = set(rng.sample(left, ROOM_WALLS)) | set(rng.sample(right, ROOM_WALLS))
            extra -= {(WALL_X - 1, door_y), (WALL_X + 1, door_y)}
            blocked = walls | extra
            free = [c for c in left + right if c not in blocked]
            if len(shortest_path((WALL_X, door_y), set(free), blocked, everything=True)) == len(free):
                break
        self.blocked = blocked
        self.walls = [Wall(x, y) for x, y in sorted(blocked)]
        free_left = [c for c in left if c not in blocked]
        free_right = [c for c in right if c not in blocked]
        (ax, ay), (kx, ky) = rng.sample(free_left, 2)
        ex, ey = free_right[rng.randrange(len(free_right))]
        self.agent = Agent(ax, ay, False)
        self.key: Key | None = Key(kx, ky)
        self.exit = Exit(ex, ey)
        self.steps = 0
        self.over = False

    def observe(self) -> Obs:
        return (
            Obs(score=0)
            .entities(self.walls)
            .entities(self.key or ())
            .entities(self.door)
            .entities(self.exit)
            .actor(self.agent)
            .globals(Clock(MAX_STEPS - self.steps))
        )

    def step(self, move: Move) -> None:
        """One move; sets ``over`` when the agent reaches the exit."""
        a = self.agent
        dx, dy = DELTA[move._value_]
        nx, ny = a.x + dx, a.y + dy
        self.steps += 1
        if not (0 <= nx < WIDTH and 0 <= ny < HEIGHT) or (nx, ny) in self.blocked:
            return
        door = self.door
        if (nx, ny) == (door.x, door.y) and not door.open:
            if not a.has_key:
                return
            door.open = True
        a.x, a.y = nx, ny
        key = self.key
        if key is not None and (nx, ny) == (key.x, key.y):
            a.has_key = True
            self.key = None
        if (nx, ny) == (self.exit.x, self.exit.y):
            self.over = True

    def final(self) -> Obs:
        won = 1 if self.over else 0
        return (
            Obs(score=won)
            .metric("success", won)
            .metric("has_key", int(self.agent.has_key))
            .metric("door_open", int(self.door.open))
        )


@declare_game(entities=[Agent, Key, Door, Exit, Wall], actions=[Move], globals=Clock)
def keydoor(agent: Any, seed: int) -> None:
    """The key-and-door game loop; runs forever (episodes restart in place) until closed."""
    game = KeyDoorGame(seed)
    while True:
        game.step(agent.act(game.observe(), Move))
        if game.over:
            agent.game_over(game.final())
            game.reset()
        elif game.steps >= MAX_STEPS:
            final = game.final().entities(game.walls).entities(game.key or ()).entities(game.door).entities(game.exit)
            agent.game_over(final.entities(game.agent), truncated=True)
            game.reset()


def shortest_path(start: tuple[int, int], goals: set[tuple[int, int]], blocked: Iterable[tuple[int, int]],
                  everything: bool = False) -> list[tuple[int, int]]:
    """The cells of a shortest 4-connected path from ``start`` to the nearest of ``goals`` (``start``
    excluded; empty when none is reachable), avoiding ``blocked`` cells and the board's edges.

    With ``everything``, the cells reachable from ``start`` instead (in breadth-first order).
    """
    blocked = set(blocked)
    prev: dict[tuple[int, int], tuple[int, int] | None] = {start: None}
    queue = deque([start])
    while queue:
        c = queue.popleft()
        if c in goals and not everything:
            path = []
            while c != start:
                path.append(c)
                c = prev[c]  # type: ignore[assignment]  # every cell but start has a previous one
            return path[::-1]
        for dx, dy in DELTA:
            n = (c[0] + dx, c[1] + dy)
            if n not in prev and 0 <= n[0] < WIDTH and 0 <= n[1] < HEIGHT and n not in blocked:
                prev[n] = c
                queue.append(n)
    return [c for c in prev if c != start and c in goals] if everything else []


class KeyDoorAgent:
    """The scripted key-and-door player: the shortest path to the key, then to the door, then to the exit.

    It reads only the observation (walls, key, door, exit) and never fails. ``seed`` is unused
    (the policy is deterministic); it is there for ``--agent scripted``.
    """

    def __init__(self, seed: int | None = 0) -> None:
        self.seed = seed

    def act(self, obs: Obs, *action_types: Any) -> Move:
        a = obs.actor_list[0]
        blocked = {(w.x, w.y) for w in obs.entities_of(Wall)}
        door = obs.entities_of(Door)[0]
        if not door.open and not a.has_key:
            blocked.add((door.x, door.y))
            k = obs.entities_of(Key)[0]
            goal = (k.x, k.y)
        else:
            e = obs.entities_of(Exit)[0]
            goal = (e.x, e.y)
        path = shortest_path((a.x, a.y), {goal}, blocked)
        if not path:
            return Move.UP
        nx, ny = path[0]
        return MOVES[DELTA.index((nx - a.x, ny - a.y))]

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        pass


register_game("keydoor", keydoor, "fetch the key, open the door, reach the exit: a reward only at the end", scripted=KeyDoorAgent)
