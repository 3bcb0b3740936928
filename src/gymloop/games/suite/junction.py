"""Junction: a traffic light's controller chooses the green phase each tick (a global decision).

Four roads (north, south, east, west) meet at a junction. Cars queue on each approach; the
controller decides which axis has green. No entity acts: the decision belongs to the junction.

**Observation.** Entities: ``Car``, one per queued car: ``road.is_NORTH`` .. ``road.is_WEST``
(one-hot), ``place`` (0 = at the stop line), ``wait`` (ticks it has queued). Global features
(``Signal``): ``north_south`` (bool: the north-south axis has green, or will after the amber),
``amber`` (amber ticks left, 0 to 2), ``since_switch`` (ticks), ``ticks_left``.

**Action.** ``Phase``, a global decision: ``NORTH_SOUTH`` or ``EAST_WEST``. Asking for the other
axis than the current one starts a 2-tick amber during which no car crosses; during an amber only
the phase already chosen is allowed (masked).

**Dynamics.** Each tick, outside an amber, the first car of each green road crosses. Each road
then gets a new car with its own probability, drawn again every 60 ticks between 0.05 and 0.4
(the busy roads change during an episode). A road holds at most 12 queued cars: a car that finds
it full turns away.

**Reward.** +1 per car that crosses, -1 per car that turns away (the score is their difference).

**Termination.** The episode *terminates* after 200 ticks (the ticks left are in the
observation: the end is part of the game). Each episode reports the metrics ``crossed``,
``turned_away`` and ``switches``.

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.suite.junction import JunctionAgent, junction
    >>> scripted = gl.run(junction, JunctionAgent(seed=0), seed=0, max_episodes=3)
    >>> rand = gl.run(junction, gl.RandomAgent(seed=0), seed=0, max_episodes=3)
    >>> sum(scripted.scores) > sum(rand.scores) + 60
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from ...actions import global_decision
from ...obs import Obs
from ...spaces import game as declare_game
from ..registry import register_game
from ..rules import Rules

__all__ = ["Road", "Car", "Signal", "Phase", "JunctionGame", "junction", "JunctionAgent", "MAX_TICKS", "MAX_QUEUE", "AMBER"]

MAX_TICKS = 200
MAX_QUEUE = 12
AMBER = 2
REGIME = 60
RATE = (0.05, 0.4)


class Road(Enum):
    NORTH = 0
    SOUTH = 1
    EAST = 2
    WEST = 3


@dataclass(slots=True)
class Car:
    road: Road
    place: int
    wait: int


@dataclass(slots=True)
class Signal:
    north_south: bool
    amber: int
    since_switch: int
    ticks_left: int


@global_decision
class Phase(Enum):
    NORTH_SOUTH = 0
    EAST_WEST = 1


_ROADS = list(Road)
_GREEN = {Phase.NORTH_SOUTH: (0, 1), Phase.EAST_WEST: (2, 3)}  # each phase's roads, by value


class JunctionGame(Rules):
    """The rules, independent of who plays."""

    __slots__ = ("queues", "rates", "phase", "amber", "since_switch", "tick", "crossed", "turned_away", "switches")

    def reset(self) -> None:
        rng = self.rng
        self.queues: list[list[Car]] = [[] for _ in _ROADS]
        self.rates = [0.0] * 4
        self.phase = Phase.NORTH_SOUTH if rng.random() < 0.5 else Phase.EAST_WEST
        self.amber = 0
        self.since_switch = 0
        self.tick = 0
        self.crossed = 0
        self.turned_away = 0
        self.switches = 0

    @property
    def score(self) -> int:
        return self.crossed - self.turned_away

    def cars(self) -> list[Car]:
        return [c for q in self.queues for c in q]

    def observe(self) -> Obs:
        obs = (
            Obs(score=self.score)
            .entities(self.cars())
            .globals(Signal(self.phase is Phase.NORTH_SOUTH, self.amber, self.since_switch, MAX_TICKS - self.tick))
        )
        return obs.mask(Phase, [self.phase]) if self.amber else obs

    def step(self, phase: Phase) -> None:
        """One tick under ``phase``."""
        rng = self.rng
        if phase is not self.phase:
            self.phase = phase
            self.amber = AMBER
            self.since_switch = 0
            self.switches += 1
        if self.amber:
            self.amber -= 1
        else:
            for r in _GREEN[self.phase]:
                q = self.queues[r]
                if q:
                    q.pop(0)
                    self.crossed += 1
                    for i, c in enumerate(q):
                        c.place = i
        self.since_switch += 1
        if self.tick % REGIME == 0:
            self.rates = [rng.uniform(*RATE) for _ in _ROADS]
        for r, road in enumerate(_ROADS):
            q = self.queues[r]
            for c in q:
                c.wait += 1
            if rng.random() < self.rates[r]:
                if len(q) < MAX_QUEUE:
                    q.append(Car(road, len(q), 0))
                else:
                    self.turned_away += 1
        self.tick += 1

    def final(self) -> Obs:
        return (
            Obs(score=self.score).entities(self.cars())
            .metric("crossed", self.crossed).metric("turned_away", self.turned_away).metric("switches", self.switches)
        )


@declare_game(entities=[Car], actions=[Phase], globals=Signal)
def junction(agent: Any, seed: int) -> None:
    """The junction game loop; runs forever (episodes restart in place) until closed."""
    game = JunctionGame(seed)
    while True:
        game.step(agent.act(game.observe(), Phase))
        if game.tick >= MAX_TICKS:
            agent.game_over(game.final())
            game.reset()


class JunctionAgent:
    """The scripted controller: green for the axis with more queued cars, with hysteresis.

    It keeps the current phase unless the other axis holds at least 3 more cars (or the current
    one is empty and the other is not), and never switches within 4 ticks of the last switch.
    ``seed`` is unused (the policy is deterministic).
    """

    def __init__(self, seed: int | None = 0) -> None:
        self.seed = seed

    def act(self, obs: Obs, *action_types: Any) -> Phase:
        g = obs.global_features
        current = Phase.NORTH_SOUTH if g.north_south else Phase.EAST_WEST
        if g.amber or g.since_switch < 4:
            return current
        count = [0, 0, 0, 0]
        for c in obs.entities_of(Car):
            count[c.road.value] += 1
        ns, ew = count[0] + count[1], count[2] + count[3]
        mine, other = (ns, ew) if current is Phase.NORTH_SOUTH else (ew, ns)
        if other >= mine + 3 or (mine == 0 and other > 0):
            return Phase.EAST_WEST if current is Phase.NORTH_SOUTH else Phase.NORTH_SOUTH
        return current

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        pass


register_game("junction", junction, "a traffic light: choose which road has green each tick (a global decision)",
              scripted=JunctionAgent)
