"""Snake, with the rules of entity-gym-rs's bevy_snake, as an ordinary game loop.

**Board.** 10×10 cells. The snake starts as a head alone at a random cell, heading in a random
direction, with one food on the board.

**Observation.** Entities (all with features ``x``, ``y``, integers in ``[0, 10)``):

* ``Head`` (the actor, one per observation);
* ``Body``: the snake's segments behind the head, nearest first (0 or more);
* ``Food``: every food on the board (0 or more).

**Action.** ``Move``: ``UP`` (y+1), ``DOWN`` (y-1), ``LEFT`` (x-1), ``RIGHT`` (x+1). A move
opposite to the current heading is ignored while the snake has a body.

**Dynamics.** Eating a food grows the snake by one segment. A new food appears on a random free
cell every 8 ticks.

**Reward.** The score is the snake's length (head plus segments); the reward is its change.

**Termination.** Running into a wall or into its own body *terminates* the episode; reaching
``max_steps`` (500) decisions *truncates* it. Each episode reports the metric ``length``.

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.snake import snake
    >>> result = gl.run(snake, gl.RandomAgent(seed=0), seed=0, max_episodes=2)
    >>> all(e.score >= 1 for e in result.episodes)
    True
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..obs import Obs
from ..spaces import game as declare_game
from .board import BODY, FOOD, HEAD, GameView, fmt
from .grid import DELTA, MOVES, OPPOSITE, Board, Cell, Move, add_food, take_food
from .grid import room as grid_room
from .registry import register_game

if TYPE_CHECKING:
    from ..render.draw import Canvas

__all__ = ["Head", "Body", "Food", "Move", "SnakeGame", "snake", "GreedyAgent", "SIZE", "MAX_STEPS", "FOOD_EVERY", "draw_snake"]

SIZE = 10
MAX_STEPS = 500
FOOD_EVERY = 8


@dataclass(slots=True)
class Head(Cell):
    """The snake's head (its actor)."""


@dataclass(slots=True)
class Body(Cell):
    """One segment of the snake's body."""


@dataclass(slots=True)
class Food(Cell):
    """A food cell: eating it makes the snake longer."""


class SnakeGame(Board):
    """The rules, independent of who plays (used by the loop, the low-level and Gymnasium snakes)."""

    __slots__ = ("head", "body", "food", "heading", "occupied", "tick", "steps", "over")

    def __init__(self, seed: int, size: int = SIZE) -> None:
        super().__init__(seed, size)

    def reset(self) -> None:
        size = self.size
        rng = self.rng
        self.head = h = Head(rng.randrange(size), rng.randrange(size))
        self.body: list[Body] = []
        self.food: list[Food] = []
        self.heading = MOVES[rng.randrange(4)]
        self.occupied = bytearray(size * size)  # cells taken by body segments or food (2 = food)
        self.tick = 0
        self.steps = 0
        self.over = False
        add_food(rng, size, self.occupied, self.food, (h.x * size + h.y,), Food)

    @property
    def length(self) -> int:
        return 1 + len(self.body)

    def step(self, move: Move) -> None:
        """Advance one tick; sets ``over`` when the snake dies."""
        size = self.size
        if self.body and move is OPPOSITE[self.heading._value_]:
            move = self.heading
        self.heading = move
        dx, dy = DELTA[move._value_]
        h = self.head
        nx, ny = h.x + dx, h.y + dy
        self.steps += 1
        if nx < 0 or ny < 0 or nx >= size or ny >= size:
            self.over = True
            return
        occ = self.occupied
        c = nx * size + ny
        eat = occ[c] == 2
        body = self.body
        grow = eat or bool(body)  # a new segment where the head was (decided before the tail moves)
        if eat:
            take_food(self.food, occ, size, nx, ny)
        elif body:  # the tail leaves its cell
            tail = body.pop()
            occ[tail.x * size + tail.y] = 0
        if occ[c]:
            self.over = True
            return
        if grow:
            body.insert(0, Body(h.x, h.y))
            occ[h.x * size + h.y] = 1
        h.x = nx
        h.y = ny
        self.tick += 1
        if self.tick % FOOD_EVERY == 0:
            add_food(self.rng, size, occ, self.food, (c,), Food)  # (c: the head's cell)


@declare_game(entities=[Head, Body, Food], actions=[Move])
def snake(agent: Any, seed: int) -> None:
    """The snake game loop; runs forever (episodes restart in place) until closed."""
    game = SnakeGame(seed)
    while True:
        obs = Obs(score=1 + len(game.body)).entities(game.food).entities(game.body).actor(game.head)
        game.step(agent.act(obs, Move))
        if game.over:
            agent.game_over(Obs(score=game.length).metric("length", game.length))
            game.reset()
        elif game.steps >= MAX_STEPS:  # time limit: the full observation lets a trainer bootstrap
            final = Obs(score=game.length).entities(game.food).entities(game.body).entities(game.head)
            agent.game_over(final.metric("length", game.length), truncated=True)
            game.reset()


class GreedyAgent:
    """A scripted snake player (for demonstrations): heads for the nearest food and stays safe.

    A move is *safe* when it stays on the board and does not run into the body (the tail's cell
    is free unless the snake eats). Among safe moves it prefers those after which the head can
    still reach at least as many free cells as the snake is long (a flood fill, to avoid dead
    ends), then the one nearest to a food, then the one with the most room; its own seeded
    generator breaks ties. It reads only the observation (the heading is where the neck is not),
    so it plays any snake observation. Its episodes end at about length 19 on average (seeds 0 to
    19, one episode each), a random agent's at about 1.1.

    Args:
        seed: seed of the tie-breaking generator.
        size: the board's size.

    Example:
        >>> import gymloop as gl
        >>> from gymloop.games.snake import GreedyAgent, snake
        >>> greedy = gl.run(snake, GreedyAgent(seed=0), seed=0, max_episodes=5)
        >>> rand = gl.run(snake, gl.RandomAgent(seed=0), seed=0, max_episodes=5)
        >>> sum(greedy.scores) > 3 * sum(rand.scores)
        True
    """

    def __init__(self, seed: int | None = 0, size: int = SIZE) -> None:
        self.rng = random.Random(seed)
        self.size = size

    def act(self, obs: Obs, *action_types: Any) -> Move:
        size = self.size
        head = obs.actor_list[0]
        body = [(b.x, b.y) for b in obs.entities_of(Body)]
        foods = {(f.x, f.y) for f in obs.entities_of(Food)}
        hx, hy = head.x, head.y
        back = (body[0][0] - hx, body[0][1] - hy) if body else None
        options = []
        for m in MOVES:
            d = DELTA[m._value_]
            if d == back:  # reversing is ignored by the game: the snake would go on straight
                continue
            nx, ny = hx + d[0], hy + d[1]
            if not (0 <= nx < size and 0 <= ny < size):
                continue
            eat = (nx, ny) in foods
            rest = body if eat else body[:-1]  # the tail leaves its cell unless the snake eats
            if (nx, ny) in rest:
                continue
            after = [(hx, hy)] + rest if (rest or eat) else []  # the body as SnakeGame.step leaves it
            room = grid_room(nx, ny, set(after), size)
            dist = min((abs(nx - fx) + abs(ny - fy) for fx, fy in foods), default=0)
            length = 1 + len(after)
            options.append(((room >= length, -dist, room, self.rng.random()), m))
        if not options:
            return Move.UP  # every move loses
        return max(options, key=lambda o: o[0])[1]

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        pass


# ---------------------------------------------------------------------- view and registration
def draw_snake(obs: Obs, canvas: Canvas) -> None:
    """Snake: food as red discs, the body green, the head yellow; the length in the bar."""
    canvas.clear()
    for f in obs.entities_of(Food):
        canvas.disc(f.x, f.y, FOOD)
    for b in obs.entities_of(Body):
        canvas.fill(b.x, b.y, BODY)
    for h in obs.entities_of(Head):
        canvas.fill(h.x, h.y, HEAD, inset=1)
    canvas.bar_text(f"length {fmt(obs.score)}")


def _snake_end(obs: Obs, truncated: bool) -> str:
    return f"{'time up' if truncated else 'game over'}: length {fmt(obs.score)}"


register_game(
    "snake", snake, "the classic snake: eat food, grow, hit neither a wall nor yourself", scripted=GreedyAgent,
    view=GameView(draw_snake, SIZE, SIZE, end_text=_snake_end),
)
