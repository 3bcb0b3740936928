"""Dispatch: one courier, 20 to 60 waiting orders; choose which to serve next (select-entity among many).

**Map.** A 20×20 city (``x``, ``y`` in ``[0, 20)``). Orders appear in a few neighbourhoods (4
centres drawn per episode, orders scattered around them), so serving one order next to others
pays twice. The courier starts at a random cell.

**Observation.** Entities:

* ``Courier`` (the actor): ``x``, ``y``;
* ``Order`` (the candidates): ``x``, ``y``, ``value`` (1, 2 or 3), ``time_left`` (time units
  before the customer gives up).

Global features (``Clock``): ``time_left`` (of the working day), ``waiting`` (orders).

**Action.** ``Serve = SelectEntity("Serve", among=Order)``: the order to serve next. Each decision
is one delivery: the courier drives there, taking its Manhattan distance plus one time unit. An
order that would expire before the courier arrives is masked (when every order would, all are
allowed: the trip is then wasted).

**Dynamics.** During a trip the clock runs: each time unit a new order appears with probability
0.6 (while fewer than 60 wait) and each order's ``time_left`` falls by one; orders at zero are
lost. The day starts with 30 orders and is topped up to 20 whenever fewer wait.

**Reward.** The value of each order served in time (the score is the value delivered).

**Termination.** The day ends after 200 time units: the episode *terminates* (the working day is
the game, and its clock is in the observation: nothing is earned after it; it takes 10 to 100
decisions). Each episode reports the metrics ``served`` and ``lost``.

The best order is neither the most valuable nor the nearest alone: its worth depends on where it
is from the courier (the scripted :class:`DispatchAgent` takes the most value per time unit).

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.suite.dispatch import DispatchAgent, dispatch
    >>> scripted = gl.run(dispatch, DispatchAgent(seed=0), seed=0, max_episodes=3)
    >>> rand = gl.run(dispatch, gl.RandomAgent(seed=0), seed=0, max_episodes=3)
    >>> sum(scripted.scores) > 2 * sum(rand.scores)
    True
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ...actions import SelectEntity
from ...obs import Obs
from ...spaces import game as declare_game
from ..registry import register_game
from ..rules import Rules

__all__ = ["Courier", "Order", "Clock", "Serve", "DispatchGame", "dispatch", "DispatchAgent", "SIZE", "DAY", "MIN_ORDERS", "MAX_ORDERS"]

SIZE = 20
DAY = 200
START_ORDERS = 30
MIN_ORDERS = 20
MAX_ORDERS = 60
ARRIVAL_P = 0.6
CENTRES = 4
SPREAD = 3
PATIENCE = (30, 90)


@dataclass(slots=True)
class Courier:
    """The courier (the actor)."""

    x: int
    y: int


@dataclass(slots=True)
class Order:
    x: int
    y: int
    value: int
    time_left: int


@dataclass(slots=True)
class Clock:
    time_left: int
    waiting: int


Serve = SelectEntity("Serve", among=Order)


def trip(ax: int, ay: int, o: Order) -> int:
    """Time units of a trip from ``(ax, ay)`` to order ``o``."""
    return abs(ax - o.x) + abs(ay - o.y) + 1


class DispatchGame(Rules):
    """The rules, independent of who plays."""

    __slots__ = ("courier", "orders", "centres", "time", "score", "served", "lost")

    def reset(self) -> None:
        rng = self.rng
        self.centres = [(rng.randrange(SIZE), rng.randrange(SIZE)) for _ in range(CENTRES)]
        self.courier = Courier(rng.randrange(SIZE), rng.randrange(SIZE))
        self.orders: list[Order] = []
        self.time = 0
        self.score = 0
        self.served = 0
        self.lost = 0
        for _ in range(START_ORDERS):
            self.new_order()

    def new_order(self) -> None:
        rng = self.rng
        cx, cy = self.centres[rng.randrange(CENTRES)]
        x = min(max(cx + rng.randint(-SPREAD, SPREAD), 0), SIZE - 1)
        y = min(max(cy + rng.randint(-SPREAD, SPREAD), 0), SIZE - 1)
        self.orders.append(Order(x, y, 1 + rng.randrange(3), rng.randint(*PATIENCE)))

    @property
    def over(self) -> bool:
        return self.time >= DAY

    def observe(self) -> Obs:
        c = self.courier
        reachable = [trip(c.x, c.y, o) <= o.time_left for o in self.orders]
        return (
            Obs(score=self.score)
            .entities(self.orders)
            .actor(c, masks={Serve: reachable if any(reachable) else None})
            .globals(Clock(DAY - self.time, len(self.orders)))
        )

    def step(self, order: Order) -> None:
        """Drive to ``order`` and serve it if it is still waiting when the courier arrives."""
        rng = self.rng
        c = self.courier
        duration = trip(c.x, c.y, order)
        self.orders.remove(order)
        for _ in range(duration):
            self.time += 1
            kept = []
            for o in self.orders:
                o.time_left -= 1
                if o.time_left > 0:
                    kept.append(o)
                else:
                    self.lost += 1
            self.orders = kept
            if len(self.orders) < MAX_ORDERS and rng.random() < ARRIVAL_P:
                self.new_order()
            order.time_left -= 1
            if self.time >= DAY:
                break
        c.x, c.y = order.x, order.y
        if order.time_left >= 0 and self.time <= DAY:
            self.score += order.value
            self.served += 1
        else:
            self.lost += 1
        while len(self.orders) < MIN_ORDERS:
            self.new_order()

    def final(self) -> Obs:
        return (
            Obs(score=self.score).entities(self.orders).entities(self.courier)
            .metric("served", self.served).metric("lost", self.lost)
        )


@declare_game(entities=[Courier, Order], actions=[Serve], globals=Clock)
def dispatch(agent: Any, seed: int) -> None:
    """The dispatch game loop; runs forever (episodes restart in place) until closed."""
    game = DispatchGame(seed)
    while True:
        game.step(agent.act(game.observe(), Serve))
        if game.over:
            agent.game_over(game.final())
            game.reset()


class DispatchAgent:
    """The scripted dispatcher: the reachable order of most value per time unit of its trip.

    Args:
        seed: seed of the tie-breaking generator.
    """

    def __init__(self, seed: int | None = 0) -> None:
        self.rng = random.Random(seed)

    def act(self, obs: Obs, *action_types: Any) -> Order:
        c = obs.actor_list[0]
        orders = obs.entities_of(Order)
        live = [o for o in orders if trip(c.x, c.y, o) <= o.time_left] or orders
        rng = self.rng
        return max(live, key=lambda o: (o.value / trip(c.x, c.y, o), rng.random()))

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        pass


register_game("dispatch", dispatch, "a courier's dispatcher: choose which of 20-60 waiting orders to serve next",
              scripted=DispatchAgent)
