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
    for size in ((0, 10), (640,), (float("nan"), 480), "big"):
        with pytest.raises(gl.ConfigError, match=r"must be \(width, height\), two positive ints"):
            gl.Display.window().screen(size)  # type: ignore[arg-type]


def test_events_nobody_reads_cannot_fill_the_queue_and_lose_the_window_s_close() -> None:
    from gymloop.display import EVENT_BACKLOG

    d = gl.Display.window(fps=None)
    d.screen((20, 20))
    for _ in range(EVENT_BACKLOG + 100):  # a mouse moving over a game that reads no events
        pygame.event.post(pygame.event.Event(pygame.MOUSEMOTION, pos=(1, 1), rel=(1, 0), buttons=(0, 0, 0)))
    pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_LEFT, mod=0, unicode="", scancode=0))
    for _ in range(64):
        d.tick()
    left = pygame.event.get()
    assert [e.type for e in left] == [pygame.KEYDOWN]  # the motion went, the key stayed for whoever reads keys
    for _ in range(10):  # a game that reads its events keeps them all: a short queue is left as it is
        pygame.event.post(pygame.event.Event(pygame.MOUSEMOTION, pos=(1, 1), rel=(1, 0), buttons=(0, 0, 0)))
    for _ in range(64):
        d.tick()
    assert len(pygame.event.get(pygame.MOUSEMOTION)) == 10
    pygame.event.post(pygame.event.Event(pygame.QUIT))
    with pytest.raises(gl.DisplayClosed):
        d.tick()


def test_a_recording_leaves_the_video_driver_as_it_found_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SDL_VIDEODRIVER")
    d = gl.Display.recording(lambda frame: None)
    d.screen((20, 10))
    assert "SDL_VIDEODRIVER" not in os.environ and pygame.display.get_driver() == "dummy"
    d.close()


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


def test_gymloop_record_takes_a_self_drawing_game_s_own_frames(tmp_path: Any) -> None:
    from PIL import Image

    from gymloop.cli import main

    out = tmp_path / "sky.gif"
    assert main(["record", "skyfall", "--agent", "scripted", "--out", str(out), "--max-steps", "40"]) == 0
    with Image.open(out) as im:
        assert im.size == (320, 240) and im.n_frames == 40  # the game's 320x240 surface, a frame per tick
        im.seek(39)
        rgb = im.convert("RGB")
        assert rgb.getpixel((5, 236)) == (40, 90, 40)  # skyfall's grass, drawn by the game itself


def test_gymloop_play_runs_a_self_drawing_game_in_its_own_window(monkeypatch: pytest.MonkeyPatch) -> None:
    from gymloop.render import play

    r = play("skyfall", "scripted", fps=0, max_steps=30)
    assert r.steps == 30
    surface = pygame.display.get_surface()
    assert surface is None or surface.get_size() == (320, 240)


def test_a_human_plays_a_self_drawing_game_with_held_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    from gymloop.games.skyfall import Slide
    from gymloop.render import play

    slides: list[Slide] = []

    class Spy:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def act(self, obs: gl.Obs, *types: Any) -> Any:
            if len(slides) == 2:
                pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_LEFT, mod=0, unicode="", scancode=0))
            a = self.inner.act(obs, *types)
            slides.append(a)
            return a

        def game_over(self, obs: gl.Obs, truncated: bool = False) -> None:
            self.inner.game_over(obs, truncated)

    from gymloop.render import KeyboardAgent

    kb = KeyboardAgent(wait=False)
    r = play("skyfall", Spy(kb), fps=0, max_steps=8)
    assert r.steps == 8
    assert slides[:2] == [Slide.STAY, Slide.STAY] and Slide.LEFT in slides[2:]


def test_game_args_reach_play_and_record(tmp_path: Any) -> None:
    from gymloop.cli import main

    out = tmp_path / "sky1.gif"
    assert main(["record", "skyfall", "--game-arg", "lives=1", "--out", str(out), "--episodes", "1",
                 "--max-steps", "5000"]) == 0
    assert main(["play", "skyfall", "--game-arg", "colour=red", "--agent", "random"]) == 2


def test_taking_over_from_a_watched_agent_in_a_self_drawing_game() -> None:
    from gymloop.games.skyfall import Catcher, Slide
    from gymloop.render import play

    asked: list[int] = []
    xs: list[int] = []

    class Stayer(Catcher):
        """Always stays; a LEFT key pressed at its third decision hands the game to the human."""

        def act(self, obs: gl.Obs, *types: Any) -> Slide:
            asked.append(1)
            xs.append(obs.actor_list[0].x)
            if len(asked) == 3:
                pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_LEFT, mod=0, unicode="", scancode=0))
            return Slide.STAY

    r = play("skyfall", Stayer(), fps=0, max_steps=10)  # play() wraps the watched agent in TakeOver
    assert r.steps == 10
    assert len(asked) == 3  # from the key on, the human plays (LEFT held): the agent is not asked again
    assert xs == [160, 160, 160]  # it stayed while it played
