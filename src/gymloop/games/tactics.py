"""Tactics: a squad of three units against four enemies on a small grid, turn by turn.

**Board.** 8×8 cells with 6 random walls in the middle columns. The squad starts in the two
leftmost columns, the enemies in the two rightmost. Distances are Manhattan distances.

**Observation.** Entities:

* ``Unit`` (the actors: every living unit, one order each): ``pos.x``, ``pos.y`` (a nested
  :class:`Pos`), ``hp`` (starts at 3), ``ammo`` (0 to 3), ``guarding`` (bool: guarded last turn);
* ``Enemy``: ``kind.is_GRUNT``, ``kind.is_HEAVY``, ``kind.is_SNIPER`` (one-hot), ``hp``,
  ``pos.0``, ``pos.1`` (a tuple);
* ``Wall``: ``x``, ``y``.

Global features (``Status``): ``turn``, ``turns_left``, ``enemies_left``, ``units_left``.

**Action.** Each unit gets two choices per turn:

* ``Order``, a composite action ``Order(move: Dir, stance: Stance)`` (15 choices, labels such as
  ``move=UP,stance=FIRE``). ``Dir``: ``STAY``, ``UP`` (y+1), ``DOWN`` (y-1), ``LEFT`` (x-1),
  ``RIGHT`` (x+1). ``Stance``: ``FIRE`` at the target, ``RELOAD`` (ammo back to 3), ``GUARD``
  (halves the chance of being hit this turn). Masks: moves off the board or into a wall, unit or
  enemy are illegal; ``FIRE`` needs ammo and an enemy within range 5; ``RELOAD`` needs a
  non-full magazine. ``STAY`` with ``GUARD`` is always legal.
* ``Target = SelectEntity("Target", among=Enemy)``: the enemy to fire at. Masked to the enemies
  within range 5 when there are any (otherwise every enemy is allowed and the choice is moot).

**Dynamics.** Units act in order: a ``FIRE`` spends one ammo and hits with probability
``1 - 0.1 * distance`` (a target killed earlier this turn wastes no ammo); then the unit moves
(it stays if the cell was taken this turn). Then each enemy shoots the nearest unit in its range,
or steps towards it. ``GRUNT``: 2 hp, range 3, hits 50%, 1 damage. ``HEAVY``: 4 hp, range 2,
hits 60%, 2 damage. ``SNIPER``: 1 hp, range 6, hits 40%, 1 damage.

**Reward.** The score is +1 per damage dealt, +2 per enemy killed and +5 for clearing the board;
the reward is its change. Focusing fire on the weakest, closest enemy pays.

**Termination.** The episode *terminates* when every enemy or every unit is dead, and is
*truncated* after 50 turns. Each episode reports the metrics ``enemies_killed``, ``units_alive``
and ``won`` (1 or 0).

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.tactics import tactics
    >>> result = gl.run(tactics, gl.RandomAgent(seed=0), seed=0, max_episodes=2)
    >>> [e.metrics["enemies_killed"] <= 4 for e in result.episodes]
    [True, True]
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from ..actions import SelectEntity
from ..obs import Obs
from ..spaces import game as declare_game
from .board import ENEMY, MARK, UNIT, WALL, GameView, fmt
from .grid import Cell
from .registry import register_game
from .rules import Rules

if TYPE_CHECKING:
    from ..render.draw import Canvas

__all__ = [
    "Pos", "Unit", "Enemy", "EnemyKind", "Wall", "Status", "Dir", "Stance", "Order", "Target",
    "TacticsGame", "tactics", "SIZE", "MAX_TURNS", "RANGE", "MAX_AMMO", "draw_tactics",
]

SIZE = 8
MAX_TURNS = 50
N_UNITS = 3
N_ENEMIES = 4
N_WALLS = 6
UNIT_HP = 3
MAX_AMMO = 3
RANGE = 5
HIT_SCORE = 1
KILL_SCORE = 2
WIN_SCORE = 5


@dataclass(slots=True)
class Pos(Cell):
    """A unit's position."""


@dataclass(slots=True)
class Unit:
    pos: Pos
    hp: int
    ammo: int
    guarding: bool


class EnemyKind(Enum):
    GRUNT = 0
    HEAVY = 1
    SNIPER = 2


@dataclass(slots=True)
class Enemy:
    kind: EnemyKind
    hp: int
    pos: tuple[int, int]


@dataclass(slots=True)
class Wall(Cell):
    """A wall cell: no unit can move into it."""


@dataclass(slots=True)
class Status:
    turn: int
    turns_left: int
    enemies_left: int
    units_left: int


class Dir(Enum):
    STAY = 0
    UP = 1
    DOWN = 2
    LEFT = 3
    RIGHT = 4


class Stance(Enum):
    FIRE = 0
    RELOAD = 1
    GUARD = 2


@dataclass(frozen=True, slots=True)
class Order:
    move: Dir
    stance: Stance


Target = SelectEntity("Target", among=Enemy)

_DELTA = {Dir.STAY: (0, 0), Dir.UP: (0, 1), Dir.DOWN: (0, -1), Dir.LEFT: (-1, 0), Dir.RIGHT: (1, 0)}
_DIRS = list(Dir)
_STANCES = list(Stance)
# (hp, range, hit probability, damage) per enemy kind
_KIND = {
    EnemyKind.GRUNT: (2, 3, 0.5, 1),
    EnemyKind.HEAVY: (4, 2, 0.6, 2),
    EnemyKind.SNIPER: (1, 6, 0.4, 1),
}
_KINDS = list(EnemyKind)


def _dist(ax: int, ay: int, bx: int, by: int) -> int:
    return abs(ax - bx) + abs(ay - by)


def hit_chance(distance: int) -> float:
    """Probability that a unit's shot at ``distance`` (1 to ``RANGE``) hits."""
    return 1.0 - 0.1 * distance


class TacticsGame(Rules):
    """The rules, independent of who plays."""

    __slots__ = ("units", "enemies", "walls", "wall_cells", "turn", "score", "killed", "over")

    def reset(self) -> None:
        rng = self.rng
        cells = rng.sample(range(SIZE), N_UNITS)
        self.units = [Unit(Pos(rng.randrange(2), y), UNIT_HP, MAX_AMMO, False) for y in cells]
        self.enemies: list[Enemy] = []
        for y in rng.sample(range(SIZE), N_ENEMIES):
            kind = _KINDS[rng.randrange(len(_KINDS))]
            self.enemies.append(Enemy(kind, _KIND[kind][0], (SIZE - 1 - rng.randrange(2), y)))
        wall_cells = rng.sample([(x, y) for x in range(2, SIZE - 2) for y in range(SIZE)], N_WALLS)
        self.wall_cells = set(wall_cells)
        self.walls = [Wall(x, y) for x, y in wall_cells]
        self.turn = 0
        self.score = 0
        self.killed = 0
        self.over = False

    # ------------------------------------------------------------------ queries
    def taken(self) -> set[tuple[int, int]]:
        """Cells a unit cannot move into: walls, units, enemies."""
        cells = set(self.wall_cells)
        for u in self.units:
            cells.add((u.pos.x, u.pos.y))
        for e in self.enemies:
            cells.add(e.pos)
        return cells

    def in_range(self, u: Unit) -> list[Enemy]:
        """The enemies a unit can fire at."""
        x, y = u.pos.x, u.pos.y
        return [e for e in self.enemies if _dist(x, y, e.pos[0], e.pos[1]) <= RANGE]

    def observe(self) -> Obs:
        """The observation for the squad's next decision (every living unit is an actor)."""
        taken = self.taken()
        order_masks = []
        target_masks: list[Any] = []
        for u in self.units:
            x, y = u.pos.x, u.pos.y
            moves = []
            for d in _DIRS:
                dx, dy = _DELTA[d]
                nx, ny = x + dx, y + dy
                moves.append(d is Dir.STAY or (0 <= nx < SIZE and 0 <= ny < SIZE and (nx, ny) not in taken))
            reach = self.in_range(u)
            stances = (u.ammo > 0 and bool(reach), u.ammo < MAX_AMMO, True)
            order_masks.append([m and s for m in moves for s in stances])
            target_masks.append(reach or None)
        return (
            Obs(score=self.score)
            .entities(self.walls)
            .entities(self.enemies)
            .actors(self.units, masks={Order: order_masks, Target: target_masks})
            .globals(Status(self.turn, MAX_TURNS - self.turn, len(self.enemies), len(self.units)))
        )

    # ------------------------------------------------------------------ rules
    def step(self, orders: list[Order], targets: list[Enemy]) -> None:
        """Play one turn: the squad's orders (one per living unit, in order), then the enemies."""
        rng = self.rng
        taken = self.taken()
        for u, order, target in zip(self.units, orders, targets):
            stance = order.stance
            u.guarding = stance is Stance.GUARD
            if stance is Stance.FIRE:
                if target.hp > 0 and u.ammo > 0:
                    d = _dist(u.pos.x, u.pos.y, target.pos[0], target.pos[1])
                    if d <= RANGE:
                        u.ammo -= 1
                        if rng.random() < hit_chance(d):
                            target.hp -= 1
                            self.score += HIT_SCORE
                            if target.hp == 0:
                                self.score += KILL_SCORE
                                self.killed += 1
                                taken.discard(target.pos)
            elif stance is Stance.RELOAD:
                u.ammo = MAX_AMMO
            if order.move is not Dir.STAY:
                dx, dy = _DELTA[order.move]
                nx, ny = u.pos.x + dx, u.pos.y + dy
                if 0 <= nx < SIZE and 0 <= ny < SIZE and (nx, ny) not in taken:
                    taken.discard((u.pos.x, u.pos.y))
                    taken.add((nx, ny))
                    u.pos.x, u.pos.y = nx, ny
        self.enemies = [e for e in self.enemies if e.hp > 0]
        if not self.enemies:
            self.score += WIN_SCORE
            self.over = True
            self.turn += 1
            return
        self._enemies_act(taken)
        self.units = [u for u in self.units if u.hp > 0]
        self.turn += 1
        if not self.units:
            self.over = True

    def _enemies_act(self, taken: set[tuple[int, int]]) -> None:
        rng = self.rng
        for e in self.enemies:
            ex, ey = e.pos
            best = None
            best_d = 1 << 30
            for u in self.units:
                if u.hp > 0:
                    d = _dist(ex, ey, u.pos.x, u.pos.y)
                    if d < best_d:
                        best, best_d = u, d
            if best is None:
                return
            _, reach, p, dmg = _KIND[e.kind]
            if best_d <= reach:
                if rng.random() < (p * 0.5 if best.guarding else p):
                    best.hp = max(0, best.hp - dmg)
                    if best.hp == 0:
                        taken.discard((best.pos.x, best.pos.y))
                continue
            dx = best.pos.x - ex
            dy = best.pos.y - ey
            steps = []
            if dx:
                steps.append((ex + (1 if dx > 0 else -1), ey))
            if dy:
                steps.append((ex, ey + (1 if dy > 0 else -1)))
            if abs(dy) > abs(dx):
                steps.reverse()
            for c in steps:
                if c not in taken:
                    taken.discard(e.pos)
                    taken.add(c)
                    e.pos = c
                    break


@declare_game(entities=[Unit, Enemy, Wall], actions=[Order, Target], globals=Status)
def tactics(agent: Any, seed: int) -> None:
    """The tactics game loop; runs forever (episodes restart in place) until closed."""
    game = TacticsGame(seed)
    while True:
        orders, targets = agent.act(game.observe(), Order, Target)
        game.step(orders, targets)
        if game.over or game.turn >= MAX_TURNS:
            final = (  # the last state (its entities and globals: a trainer values a truncated episode's end from it)
                Obs(score=game.score)
                .entities(game.walls)
                .entities(game.enemies)
                .entities(game.units)
                .globals(Status(game.turn, MAX_TURNS - game.turn, len(game.enemies), len(game.units)))
                .metric("enemies_killed", game.killed)
                .metric("units_alive", len(game.units))
                .metric("won", 1.0 if not game.enemies else 0.0)
            )
            agent.game_over(final, truncated=not game.over)
            game.reset()


# ---------------------------------------------------------------------- view and registration
_KIND_LETTER = {"GRUNT": "G", "HEAVY": "H", "SNIPER": "S"}


def draw_tactics(obs: Obs, canvas: Canvas) -> None:
    """Tactics: walls grey; units blue (hp, and ammo in the corner; a ring when guarding);
    enemies red with their kind's letter and hp; turn and score in the bar."""
    canvas.clear()
    for w in obs.entities_of(Wall):
        canvas.fill(w.x, w.y, WALL, inset=0)
    for e in obs.entities_of(Enemy):
        x, y = e.pos
        canvas.fill(x, y, ENEMY)
        canvas.label(x, y, f"{_KIND_LETTER.get(e.kind.name, '?')}{e.hp}")
    for u in obs.entities_of(Unit):
        x, y = u.pos.x, u.pos.y
        canvas.fill(x, y, UNIT)
        canvas.label(x, y, str(u.hp))
        canvas.pips(x, y, u.ammo, MARK)
        if u.guarding:
            canvas.ring(x, y, MARK)
    g = obs.global_features
    if g is not None:
        canvas.bar_text(f"turn {g.turn + 1}/{MAX_TURNS}   score {fmt(obs.score)}",
                        f"enemies {g.enemies_left}  units {g.units_left}")
    else:
        canvas.bar_text(f"score {fmt(obs.score)}")


def _tactics_end(obs: Obs, truncated: bool) -> str:
    m = obs.metrics
    if truncated:
        return f"time up: score {fmt(obs.score)}"
    return f"{'won' if m.get('won') else 'lost'}: score {fmt(obs.score)}"


register_game(
    "tactics", tactics, "a squad against enemies on a walled board: moves, stances, targeted shots",
    view=GameView(draw_tactics, SIZE, SIZE, end_text=_tactics_end, keyboard=False, cell=40),
)
