"""gl.Display: a game that draws itself, headless by default, in a window or recorded."""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
import pytest
from support.optioned import line

import gymloop as gl
from gymloop.display import takes_display, with_display

pygame = pytest.importorskip("pygame")


@pytest.fixture(autouse=True)
def _dummy_video(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    yield
    pygame.display.quit()


def test_headless_draws_nothing_and_never_waits() -> None:
    assert not gl.HEADLESS.rendered
    assert gl.HEADLESS.screen((100, 100)) is None
    t = time.perf_counter()
    r = gl.run(line, gl.RandomAgent(0), seed=0, max_steps=200)
    assert r.steps == 200 and time.perf_counter() - t < 5
    assert not pygame.display.get_init() or pygame.display.get_surface() is None


def test_a_recording_passes_every_frame_drawn_by_the_game() -> None:
    frames: list[np.ndarray] = []
    game = with_display(functools.partial(line, length=4, loop=False), gl.Display.recording(frames.append))

    class Right:
        def act(self, obs: gl.Obs, *types: Any) -> Any:
            return types[0].RIGHT

        def game_over(self, obs: gl.Obs, truncated: bool = False) -> None:
            pass

    gl.run(game, Right(), seed=0)
    assert len(frames) == 4  # one frame per step, four steps to the goal
    assert frames[0].shape == (10, 50, 3) and frames[0].dtype == np.uint8
    # the walker (yellow) moves one cell right each frame
    for i, f in enumerate(frames):
        assert tuple(f[5, 10 * (i + 1) + 5]) == (255, 255, 0)
        assert tuple(f[5, 10 * i + 5]) == (0, 0, 0)


def test_a_window_keeps_the_requested_frame_rate() -> None:
    d = gl.Display.window(fps=50)
    screen = d.screen((40, 30), "paced")
    assert screen.get_size() == (40, 30) and d.rendered
    d.tick()
    t = time.perf_counter()
    for _ in range(10):
        d.tick()
    assert time.perf_counter() - t >= 0.15  # 10 frames at 50 fps: 0.2 s (pygame's clock is a little early)
    d.close()


def test_closing_the_window_stops_the_game() -> None:
    d = gl.Display.window(fps=None)
    d.screen((20, 20))
    pygame.event.post(pygame.event.Event(pygame.QUIT))
    with pytest.raises(gl.DisplayClosed, match="window was closed"):
        d.tick()


def test_games_with_a_display_parameter_are_found() -> None:
    assert takes_display(line) and takes_display(functools.partial(line, length=3))
    assert not takes_display(functools.partial(line, display=gl.HEADLESS))
    from gymloop.games.snake import snake

    assert not takes_display(snake) and with_display(snake, gl.HEADLESS) is snake


@pytest.mark.parametrize("kwargs, match", [
    ({"mode": "tv"}, "Display mode must be"),
    ({"mode": "window", "fps": 0}, "fps must be a number in"),
    ({"mode": "window", "fps": True}, "fps must be a number in"),
    ({"mode": "recording"}, "needs frames="),
])
def test_bad_displays_are_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(gl.ConfigError, match=match):
        gl.Display(**kwargs)


def test_bad_screen_sizes_are_refused() -> None:
    with pytest.raises(gl.ConfigError, match="two positive ints"):
        gl.Display.window().screen((0, 10))


def test_no_display_to_open_says_how_to_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "no-such-driver")
    pygame.display.quit()
    with pytest.raises(gl.ConfigError, match="cannot open a 30x30 window.*gymloop record"):
        gl.Display.window().screen((30, 30))


class Go(Enum):
    ON = 0


@dataclass(slots=True)
class Dot:
    x: int


@gl.game(entities=[Dot], actions=[Go])
def draws_anyway(agent: Any, seed: int) -> None:
    pygame.display.init()
    pygame.display.set_mode((10, 10))  # a window whether or not anyone looks
    while True:
        agent.act(gl.Obs().actor(Dot(0)), Go)


def test_check_warns_about_a_window_opened_while_headless_naming_the_call_site() -> None:
    report = gl.check(draws_anyway, steps=40)
    w = [x for x in report.warnings if "opened a window while headless" in x]
    assert w and f"{os.path.basename(__file__)}:" in w[0] and "in draws_anyway" in w[0]
    assert pygame.display.set_mode.__module__ != "gymloop.display"  # the original is back


def test_check_of_a_game_that_draws_only_when_displayed_has_no_warning() -> None:
    report = gl.check(line, steps=60)
    assert not [x for x in report.warnings if "window" in x]
