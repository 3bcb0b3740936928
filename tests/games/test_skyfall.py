"""Skyfall: the bundled game that draws itself (headless for training, pygame when displayed)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import gymloop as gl
from gymloop.display import with_display
from gymloop.games.skyfall import BASKET_Y, HEIGHT, WIDTH, Basket, Catcher, Fruit, Rock, Slide, Status, _Sky, skyfall


def test_headless_training_never_imports_pygame() -> None:
    code = ("import sys, gymloop as gl\nfrom gymloop.games.skyfall import skyfall\n"
            "env = gl.VecEnv(skyfall, 8, seed=0)\nb = env.reset()\nfor _ in range(300): b = env.step(env.sample_actions())\n"
            "env.close()\nprint('pygame' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_scripted_catcher_is_far_better_than_random() -> None:
    scripted = gl.run(skyfall, Catcher(), seed=3, max_episodes=3).episodes
    rand = gl.run(skyfall, gl.RandomAgent(3), seed=3, max_episodes=3).episodes
    assert min(e.score for e in scripted) > 3 * max(1.0, max(e.score for e in rand))


def test_a_fruit_crossing_the_rim_over_the_basket_is_caught_and_a_rock_costs_a_life() -> None:
    import random

    sky = _Sky(random.Random(0))
    sky.fruit = [Fruit(sky.basket.x, BASKET_Y - 8, 4)]
    sky.rocks = [Rock(sky.basket.x + 200, BASKET_Y - 10, 4)]
    sky.step(Slide.STAY)
    assert sky.caught == 1 and not sky.fruit
    sky.rocks = [Rock(sky.basket.x, BASKET_Y - 10, 4)]
    sky.step(Slide.STAY)
    assert sky.lives == 2


def test_the_basket_stays_on_the_field() -> None:
    import random

    sky = _Sky(random.Random(0))
    for _ in range(100):
        sky.step(Slide.LEFT)
    assert sky.basket.x == 20
    obs = sky.observe()
    assert obs.actor_list == [Basket(20)] and isinstance(obs.global_features, Status)


def test_check_passes() -> None:
    report = gl.check(skyfall, steps=300)
    assert not report.warnings


def test_lives_is_a_game_option() -> None:
    from gymloop.game_args import bind_game_args

    game = bind_game_args(skyfall, ["lives=1"])
    r = gl.run(game, gl.RandomAgent(0), seed=0, max_episodes=2)
    assert all(not e.truncated for e in r.episodes)


@pytest.mark.parametrize("lives", ["0", "-2"])
def test_lives_below_one_is_refused_not_an_endless_loop_of_empty_episodes(lives: str) -> None:
    from gymloop.game_args import bind_game_args

    game = bind_game_args(skyfall, [f"lives={lives}"])
    with pytest.raises(gl.ConfigError, match=r"lives must be a whole number >= 1.*--game-arg lives=3"):
        gl.run(game, gl.RandomAgent(0), seed=0, max_steps=10)
    with pytest.raises(gl.GameError, match=r"lives must be a whole number >= 1"):
        gl.VecEnv(game, num_envs=2, seed=0).reset()


pygame = pytest.importorskip("pygame")


def test_a_recorded_frame_shows_the_basket_fruit_and_rocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    frames: list[np.ndarray] = []
    seen: list[gl.Obs] = []

    class Watch(Catcher):
        def act(self, obs: gl.Obs, *types: Any) -> Slide:
            seen.append(obs)
            return super().act(obs, *types)

    try:
        gl.run(with_display(skyfall, gl.Display.recording(frames.append)), Watch(), seed=0, max_steps=120)
    finally:
        pygame.display.quit()
    assert len(frames) == 120 and frames[0].shape == (HEIGHT, WIDTH, 3)
    f = frames[-1]
    # the last frame was drawn after the last decision's step: the basket is where that step left it
    bx = seen[-1].actor_list[0].x + {Slide.LEFT: -6, Slide.STAY: 0, Slide.RIGHT: 6}[Catcher().act(seen[-1], Slide)]
    bx = min(WIDTH - 20, max(20, bx))
    assert tuple(f[BASKET_Y + 5, bx]) == (160, 110, 50)  # the basket's wood
    assert tuple(f[BASKET_Y + 14, 5]) == (40, 90, 40)  # the grass
    assert tuple(f[120, 5]) == (24, 32, 64) or f[120, 5].sum() > 0  # the sky (or something in it)
    reds = (f[..., 0] == 230) & (f[..., 1] == 60) & (f[..., 2] == 50)
    greys = (f[..., 0] == 150) & (f[..., 1] == 150) & (f[..., 2] == 160)
    assert reds.any() or greys.any()  # a fruit or a rock in the air after 120 frames
