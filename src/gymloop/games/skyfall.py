"""Skyfall: catch the falling fruit in a basket, dodge the falling rocks. A game that draws itself.

The example of a game with its own graphics (pygame), written as a game developer writes one: the
rules are plain Python on a 320 x 240 pixel field, and the drawing runs only when the game is
given a display (``gymloop play skyfall``, ``gymloop record skyfall``); training runs it headless
through the same loop, never importing pygame.

**Observation.** The actor ``Basket`` (``x``, pixels from the left); every ``Fruit`` and ``Rock``
in the air (``x``, ``y`` in pixels, ``y`` growing downward as on screen, and ``dy``, its fall in
pixels per frame); the globals ``Status`` (``lives``, ``frames_left``).

**Action.** ``Slide``: ``LEFT``, ``STAY`` or ``RIGHT``, every frame (6 pixels a frame).

**Reward.** The score is the number of fruit caught: +1 per fruit.

**Termination.** A rock in the basket costs a life; the third *terminates* the episode. After
``MAX_FRAMES`` (1,500) frames the episode is *truncated*.

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.skyfall import skyfall, Catcher
    >>> r = gl.run(skyfall, Catcher(seed=0), seed=0, max_episodes=1)
    >>> r.episodes[0].score > 10
    True
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..display import HEADLESS, Display
from ..errors import ConfigError
from ..obs import Obs
from ..spaces import game as declare_game
from .registry import register_game

__all__ = ["Basket", "Fruit", "Rock", "Status", "Slide", "skyfall", "Catcher", "WIDTH", "HEIGHT", "MAX_FRAMES", "LIVES"]

WIDTH, HEIGHT = 320, 240
MAX_FRAMES = 1500
LIVES = 3
BASKET_Y = 222  # the basket's rim
BASKET_HALF = 20  # half its width
SPEED = 6  # pixels a frame
FRUIT_RADIUS, ROCK_RADIUS = 6, 8
FRUIT_CHANCE, ROCK_CHANCE = 0.05, 0.035  # a new one each frame with this chance


@dataclass(slots=True)
class Basket:
    """The player's basket (the actor), on the bottom line."""

    x: int


@dataclass(slots=True)
class Fruit:
    """A fruit falling: catch it."""

    x: int
    y: int
    dy: int


@dataclass(slots=True)
class Rock:
    """A rock falling: keep the basket away."""

    x: int
    y: int
    dy: int


@dataclass(slots=True)
class Status:
    lives: int
    frames_left: int


class Slide(Enum):
    """Where the basket goes this frame."""

    LEFT = 0
    STAY = 1
    RIGHT = 2


_DX = (-SPEED, 0, SPEED)  # by Slide value


class _Sky:
    """One episode's state: everything a copy knows lives here (nothing at module or class level)."""

    def __init__(self, rng: random.Random, lives: int = LIVES) -> None:
        self.rng = rng
        self.basket = Basket(WIDTH // 2)
        self.fruit: list[Fruit] = []
        self.rocks: list[Rock] = []
        self.lives = lives
        self.caught = 0
        self.frame = 0

    def observe(self) -> Obs:
        return (Obs(score=self.caught).entities(self.fruit).entities(self.rocks)
                .globals(Status(self.lives, MAX_FRAMES - self.frame)).actor(self.basket))

    def step(self, slide: Slide) -> None:
        """One frame: the basket slides, everything falls, the basket catches, new things appear."""
        b = self.basket
        b.x = min(WIDTH - BASKET_HALF, max(BASKET_HALF, b.x + _DX[slide.value]))
        self.fruit = [f for f in self.fruit if not self._lands(f, FRUIT_RADIUS)]
        self.rocks = [r for r in self.rocks if not self._lands(r, ROCK_RADIUS)]
        rng = self.rng
        if rng.random() < FRUIT_CHANCE:
            self.fruit.append(Fruit(rng.randrange(10, WIDTH - 10), 0, rng.randrange(2, 5)))
        if rng.random() < ROCK_CHANCE:
            self.rocks.append(Rock(rng.randrange(10, WIDTH - 10), 0, rng.randrange(3, 6)))
        self.frame += 1

    def _lands(self, o: Fruit | Rock, radius: int) -> bool:
        """Move ``o`` down; True when it leaves the air (caught in the basket or on the ground)."""
        o.y += o.dy
        bottom = o.y + radius
        if bottom < BASKET_Y:
            return False
        if bottom - o.dy < BASKET_Y and abs(o.x - self.basket.x) <= BASKET_HALF + radius // 2:  # crossed the rim
            if type(o) is Fruit:
                self.caught += 1
            else:
                self.lives -= 1
            return True
        return o.y - radius > HEIGHT

    @property
    def over(self) -> bool:
        return self.lives <= 0


def _draw(screen: Any, sky: _Sky, font: Any) -> None:
    """Paint one frame (pygame is imported only when there is a screen)."""
    import pygame

    screen.fill((24, 32, 64))
    pygame.draw.rect(screen, (40, 90, 40), (0, BASKET_Y + 10, WIDTH, HEIGHT - BASKET_Y - 10))
    for f in sky.fruit:
        pygame.draw.circle(screen, (230, 60, 50), (f.x, f.y), FRUIT_RADIUS)
        pygame.draw.line(screen, (60, 160, 60), (f.x, f.y - FRUIT_RADIUS), (f.x + 3, f.y - FRUIT_RADIUS - 4), 2)
    for r in sky.rocks:
        pygame.draw.circle(screen, (150, 150, 160), (r.x, r.y), ROCK_RADIUS)
        pygame.draw.circle(screen, (100, 100, 110), (r.x - 2, r.y - 2), ROCK_RADIUS // 3)
    bx = sky.basket.x
    pygame.draw.rect(screen, (160, 110, 50), (bx - BASKET_HALF, BASKET_Y, 2 * BASKET_HALF, 10), border_radius=3)
    pygame.draw.line(screen, (200, 150, 80), (bx - BASKET_HALF, BASKET_Y), (bx + BASKET_HALF, BASKET_Y), 2)
    text = font.render(f"fruit {sky.caught}   lives {sky.lives}   {MAX_FRAMES - sky.frame}", True, (240, 240, 240))
    screen.blit(text, (6, 4))


@declare_game(entities=[Basket, Fruit, Rock], actions=[Slide], globals=Status)
def skyfall(agent: Any, seed: int, display: Display = HEADLESS, lives: int = LIVES) -> None:
    """The Skyfall game loop; runs forever (episodes restart in place) until closed.

    Args:
        agent: the agent that slides the basket.
        seed: the seed of every random draw.
        display: where to draw (headless by default: nothing is drawn, nothing waits).
        lives: rocks the basket may take in an episode (at least 1).

    Raises:
        ConfigError: ``lives`` is not a whole number of at least 1.
    """
    if isinstance(lives, bool) or not isinstance(lives, int) or lives < 1:
        raise ConfigError(f"skyfall: lives must be a whole number >= 1 (rocks the basket may take), got {lives!r}; "
                          "e.g. --game-arg lives=3")
    rng = random.Random(seed)
    screen = display.screen((WIDTH, HEIGHT), "Skyfall")
    font = None
    if screen is not None:
        import pygame

        font = pygame.font.Font(None, 20)
    while True:
        sky = _Sky(rng, lives)
        while not sky.over and sky.frame < MAX_FRAMES:
            sky.step(agent.act(sky.observe(), Slide))
            if screen is not None:
                _draw(screen, sky, font)
            display.tick()
        agent.game_over(sky.observe(), truncated=not sky.over)


class Catcher:
    """The scripted player: it keeps out from under rocks about to land, else goes for the fruit
    that lands first among those it can still reach.

    Args:
        seed: unused (the policy is deterministic); accepted as every scripted agent's is.
    """

    def __init__(self, seed: int | None = 0) -> None:
        self.seed = seed

    def act(self, obs: Obs, *action_types: Any) -> Slide:
        bx = obs.actor_list[0].x
        danger = [r.x for r in obs.entities_of(Rock)
                  if r.y > BASKET_Y - 12 * r.dy and abs(r.x - bx) < BASKET_HALF + ROCK_RADIUS + SPEED]
        if danger:
            away = bx - sum(danger) / len(danger)
            if away == 0:
                away = 1 if bx < WIDTH // 2 else -1
            return Slide.RIGHT if away > 0 else Slide.LEFT
        best = None
        for f in obs.entities_of(Fruit):
            frames = (BASKET_Y - f.y) / f.dy
            if frames >= 0 and abs(f.x - bx) <= BASKET_HALF + SPEED * frames and (best is None or frames < best[0]):
                best = (frames, f.x)
        if best is None or abs(best[1] - bx) < SPEED // 2 + 1:
            return Slide.STAY
        return Slide.RIGHT if best[1] > bx else Slide.LEFT

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        pass


register_game("skyfall", skyfall, "catch falling fruit, dodge rocks (a game that draws itself with pygame)",
              scripted=Catcher)
