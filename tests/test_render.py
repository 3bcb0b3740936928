"""Rendering, human play and recording (issue 4): real frames offscreen, videos, keyboard agents.

Everything runs headless: pygame's display uses ``SDL_VIDEODRIVER=dummy`` (set before the display
is initialized), and offscreen viewers never touch the display at all.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
pygame = pytest.importorskip("pygame")
Image = pytest.importorskip("PIL.Image")
imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")

import gymloop as gl
from conftest import Unit, make_game
from gymloop.cli import main
from gymloop.errors import CheckpointError, ConfigError
from gymloop.games.duel import DuelStatus, OpponentBody, OpponentHead, duel
from gymloop.games.snake import Body, Food, Head, Move, snake
from gymloop.games.tactics import Enemy, EnemyKind, Pos, Status, Wall, tactics
from gymloop.games.tactics import Unit as TUnit
from gymloop.render import (
    BODY,
    ENEMY,
    FOOD,
    HEAD,
    OPPONENT_BODY,
    OPPONENT_HEAD,
    UNIT,
    WALL,
    Canvas,
    FrameClock,
    GameView,
    KeyboardAgent,
    TakeOver,
    Viewer,
    Watch,
    draw_duel,
    draw_entities,
    draw_snake,
    draw_tactics,
    play,
    record,
    register_view,
    surface_to_array,
    view_for,
)

SNAKE_FRAME = (352, 320, 3)  # (height, width, RGB): 10 x 10 cells of 32 px under a 32 px bar


@pytest.fixture
def display(monkeypatch):
    """An initialized pygame display on SDL's dummy driver, with an empty event queue."""
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    monkeypatch.setenv("SDL_AUDIODRIVER", "dummy")
    pygame.display.quit()
    pygame.display.init()
    pygame.event.clear()
    yield pygame
    pygame.display.quit()


@pytest.fixture(scope="module")
def snake_ckpt(tmp_path_factory):
    """A random-weights snake agent checkpoint (needs torch)."""
    pytest.importorskip("torch")
    from gymloop.neural import random_checkpoint

    path = tmp_path_factory.mktemp("ckpt") / "snake.safetensors"
    random_checkpoint(path, snake, seed=0)
    return str(path)


def press(*keys: int) -> None:
    for k in keys:
        pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=k))


def n_colors(frame: np.ndarray) -> int:
    packed = (frame[..., 0].astype(np.int32) << 16) | (frame[..., 1].astype(np.int32) << 8) | frame[..., 2]
    return len(np.unique(packed))


def pixel(frame: np.ndarray, canvas: Canvas, x: int, y: int) -> tuple[int, ...]:
    px, py = canvas.center(x, y)
    return tuple(int(v) for v in frame[py, px])


class Spy:
    """Records what its inner agent saw (snake head, body, food) and answered, plus episode ends."""

    def __init__(self, inner):
        self.inner = inner
        self.log = []

    def act(self, obs, *types):
        res = self.inner.act(obs, *types)
        heads = obs.entities_of(Head)
        self.log.append(("act", (heads[0].x, heads[0].y) if heads else None,
                         [(b.x, b.y) for b in obs.entities_of(Body)], [(f.x, f.y) for f in obs.entities_of(Food)], res))
        return res

    def game_over(self, obs, truncated=False):
        self.log.append(("end", None, [], [], None))
        self.inner.game_over(obs, truncated)


# ---------------------------------------------------------------------- imports
def test_gymloop_and_games_do_not_import_pygame():
    code = ("import sys, gymloop, gymloop.games.snake, gymloop.games.duel, gymloop.games.tactics, "
            "gymloop.render, gymloop.cli; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pygame', 'PIL', 'imageio_ffmpeg')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------- frames
def test_surface_to_array_is_rows_by_columns_rgb():
    s = pygame.Surface((3, 2))
    s.fill((0, 0, 0))
    s.set_at((2, 1), (255, 10, 20))
    a = surface_to_array(s)
    assert a.shape == (2, 3, 3) and a.dtype == np.uint8
    assert tuple(a[1, 2]) == (255, 10, 20)


def test_snake_drawn_cell_by_cell():
    canvas = Canvas.offscreen(10, 10)
    obs = gl.Obs(score=3).entities([Food(7, 7)]).entities([Body(3, 3), Body(2, 3)]).actor(Head(3, 4))
    draw_snake(obs, canvas)
    f = surface_to_array(canvas.surface)
    assert f.shape == SNAKE_FRAME
    assert pixel(f, canvas, 3, 4) == HEAD
    assert pixel(f, canvas, 3, 3) == BODY and pixel(f, canvas, 2, 3) == BODY
    assert pixel(f, canvas, 7, 7) == FOOD
    assert pixel(f, canvas, 0, 0) not in (HEAD, BODY, FOOD)
    # y grows upward: cell (3, 4) is above cell (3, 3) on screen
    assert canvas.center(3, 4)[1] < canvas.center(3, 3)[1]
    assert f[:32].std() > 0  # the bar has text


def test_snake_frames_follow_the_game():
    viewer = Viewer("snake", window=False, capture=True)
    spy = Spy(gl.RandomAgent(seed=1))
    result = gl.run(snake, Watch(spy, viewer), seed=0, max_steps=40)
    assert result.steps == 40
    frames = viewer.frames
    assert len(frames) == len(spy.log) == 40 + len(result.episodes)  # a banner frame per episode end
    canvas = viewer.canvas
    for frame, (kind, head, body, food, _) in zip(frames, spy.log):
        assert frame.shape == SNAKE_FRAME
        assert n_colors(frame) > 4  # not blank
        if kind == "act":
            assert pixel(frame, canvas, *head) == HEAD
            for b in body:
                assert pixel(frame, canvas, *b) == BODY
            for fd in food:
                assert pixel(frame, canvas, *fd) == FOOD
    for a, b in itertools.pairwise(frames):
        assert np.any(a != b)


def test_duel_drawn_from_the_first_player():
    canvas = Canvas.offscreen(10, 10)
    obs = (gl.Obs(score=2).entities([Food(5, 5)]).entities([Body(1, 0)]).entities(OpponentHead(8, 8))
           .entities([OpponentBody(8, 7)]).actor(Head(1, 1)).globals(DuelStatus(2, 2, 100)))
    draw_duel(obs, canvas)
    f = surface_to_array(canvas.surface)
    assert pixel(f, canvas, 1, 1) == HEAD and pixel(f, canvas, 1, 0) == BODY
    assert pixel(f, canvas, 8, 8) == OPPONENT_HEAD and pixel(f, canvas, 8, 7) == OPPONENT_BODY
    assert pixel(f, canvas, 5, 5) == FOOD


def test_tactics_drawn():
    view = view_for("tactics")
    canvas = Canvas.offscreen(view.width, view.height, cell=view.cell)
    u = TUnit(Pos(0, 2), 3, 2, True)
    obs = (gl.Obs(score=1).entities([Wall(4, 4)]).entities([Enemy(EnemyKind.HEAVY, 4, (7, 6))])
           .actors([u]).globals(Status(3, 47, 1, 1)))
    draw_tactics(obs, canvas)
    f = surface_to_array(canvas.surface)
    assert f.shape == (8 * 40 + 32, 8 * 40, 3)
    assert pixel(f, canvas, 4, 4) == WALL
    r = canvas.rect(7, 6, 3)  # the enemy's letter sits in the middle; its corner is plain red
    assert tuple(f[r.top + 1, r.left + 1]) == ENEMY
    r = canvas.rect(0, 2, 3)
    assert tuple(f[r.top + 1, r.right - 2]) == UNIT


def test_any_game_gets_a_generic_view():
    game = make_game(build_obs=lambda st: gl.Obs(score=st.t).actor(Unit(st.t % 7, 2)))
    view = view_for(game)
    assert view.draw is draw_entities and view.width is None
    viewer = Viewer(game, window=False, capture=True)
    gl.run(game, Watch(gl.RandomAgent(0), viewer), seed=0, max_steps=3)
    assert (viewer.canvas.width, viewer.canvas.height) == (5, 5)
    frames = viewer.frames
    assert pixel(frames[1], viewer.canvas, 1, 2) != pixel(frames[0], viewer.canvas, 1, 2)
    register_view(game, GameView(draw_entities, 9, 3, name="mine"))
    assert view_for(game).name == "mine"


def test_frame_clock_limits_the_rate():
    import time

    clock = FrameClock(fps=50)
    t0 = time.perf_counter()
    for _ in range(6):
        clock.tick()
    assert time.perf_counter() - t0 >= 5 / 50 * 0.9
    with pytest.raises(ConfigError, match="fps must be"):
        FrameClock(fps=-1)


# ---------------------------------------------------------------------- video
def test_record_gif_frame_count_and_size(tmp_path):
    out = tmp_path / "sub" / "run.gif"
    r = record("snake", out, seed=0, max_steps=25, fps=20)
    assert r.frames == r.run.steps + len(r.run.episodes) and r.frames >= 2
    assert r.size == (320, 352)
    with Image.open(out) as im:
        assert im.format == "GIF"
        assert im.size == (320, 352)
        assert im.n_frames == r.frames
        assert im.info["duration"] == 50
        im.seek(0)
        first = np.asarray(im.convert("RGB"))
    assert n_colors(first) > 4


def test_record_mp4_is_a_real_video(tmp_path):
    out = tmp_path / "run.mp4"
    r = record("duel", out, seed=0, max_steps=20, max_episodes=None, fps=10)
    assert r.frames == 10 + len(r.run.episodes)
    data = out.read_bytes()
    assert len(data) > 1000 and data[4:8] == b"ftyp"
    # decode it back with the bundled ffmpeg: as many frames of the recorded size, not blank
    w, h = r.size
    raw = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(out), "-f", "rawvideo",
                          "-pix_fmt", "rgb24", "-"], capture_output=True, check=True).stdout
    frames = np.frombuffer(raw, np.uint8).reshape(-1, h, w, 3)
    assert len(frames) == r.frames
    assert frames[0].std() > 10 and np.any(frames[0] != frames[-1])


def test_record_with_a_trained_agent(tmp_path, snake_ckpt):
    r = record("snake", tmp_path / "agent.gif", snake_ckpt, seed=3, max_steps=12)
    assert r.frames == r.run.steps + len(r.run.episodes)
    assert (tmp_path / "agent.gif").stat().st_size > 0


def test_record_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"must end in \.gif or \.mp4, got '\.avi'"):
        record("snake", tmp_path / "run.avi")
    with pytest.raises(ConfigError, match="unknown game 'pong'"):
        record("pong", tmp_path / "run.gif")
    with pytest.raises(CheckpointError, match="nope.safetensors' does not exist"):
        record("snake", tmp_path / "run.gif", str(tmp_path / "nope.safetensors"))
    with pytest.raises(ConfigError, match="frame rate above 0"):
        record("snake", tmp_path / "run.mp4", fps=0)
    with pytest.raises(ConfigError, match="needs max_steps or max_episodes"):
        record("snake", tmp_path / "run.gif", max_steps=None, max_episodes=None)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------- keyboard
def test_keyboard_agent_reads_posted_keys(display):
    kb = KeyboardAgent(wait=False)

    def obs():
        return gl.Obs().actor(Head(5, 5))

    press(pygame.K_LEFT, pygame.K_UP)
    assert kb.act(obs(), Move) is Move.LEFT  # one queued key per decision
    assert kb.act(obs(), Move) is Move.UP
    assert kb.act(obs(), Move) is Move.UP  # no key: the previous move again
    press(pygame.K_d)
    assert kb.act(obs(), Move) is Move.RIGHT  # WASD too
    press(pygame.K_x)
    assert kb.act(obs(), Move) is Move.RIGHT  # other keys are ignored
    masked = gl.Obs().actor(Head(0, 0), masks={Move: [Move.DOWN]})
    assert kb.act(masked, Move) is Move.DOWN  # a masked-out move gives way to a legal one
    kb.game_over(gl.Obs())
    assert kb.act(obs(), Move) is Move.UP  # a new episode without a key: the default (first direction)


def test_two_keyboard_players_share_the_keyboard(display):
    wasd, arrows = KeyboardAgent("wasd", wait=False), KeyboardAgent("arrows", wait=False)
    press(pygame.K_a, pygame.K_RIGHT, pygame.K_s)
    o = gl.Obs().actor(Head(1, 1))
    assert arrows.act(o, Move) is Move.RIGHT
    assert wasd.act(o, Move) is Move.LEFT
    assert wasd.act(o, Move) is Move.DOWN


def test_keyboard_agent_errors(display):
    kb = KeyboardAgent(wait=False)
    obs = gl.Obs().actors([TUnit(Pos(0, 0), 3, 3, False)])
    from gymloop.games.tactics import Order, Target

    with pytest.raises(ConfigError, match=r"one Enum with members \['DOWN', 'LEFT', 'RIGHT', 'UP'\].*Order, Target"):
        kb.act(obs, Order, Target)
    with pytest.raises(ConfigError, match="keys must be one of"):
        KeyboardAgent(keys="joystick")
    with pytest.raises(ConfigError, match="unknown pygame key name 'K_NOPE'"):
        KeyboardAgent(keys={"K_NOPE": "UP"})
    pygame.display.quit()
    with pytest.raises(ConfigError, match="needs a pygame window"):
        KeyboardAgent(wait=True).act(gl.Obs().actor(Head(0, 0)), Move)


class Always:
    """A scripted agent: always the same move; counts its calls."""

    def __init__(self, move):
        self.move, self.calls = move, 0

    def act(self, obs, *types):
        self.calls += 1
        return self.move

    def game_over(self, obs, truncated=False):
        pass


def test_take_over_and_hand_back_mid_episode(display):
    # the "human" presses keys between decisions, while the game runs (no episode ends)
    script = {2: [pygame.K_SPACE, pygame.K_LEFT], 4: [pygame.K_DOWN], 6: [pygame.K_SPACE], 8: [pygame.K_RIGHT]}
    game = make_game(build_obs=lambda st: gl.Obs().actor(Unit(st.t, 0)), action_types=(Move,),
                     on_step=lambda st, a: press(*script.get(st.total, [])))
    inner = Always(Move.UP)
    agent = TakeOver(inner, KeyboardAgent(wait=False))
    moves = []

    class Log:
        def act(self, obs, *types):
            moves.append(agent.act(obs, *types))
            return moves[-1]

        def game_over(self, obs, truncated=False):
            agent.game_over(obs, truncated)

    gl.run(game, Log(), seed=0, max_steps=10)
    U, L, D, R = Move.UP, Move.LEFT, Move.DOWN, Move.RIGHT
    # agent, agent | human: LEFT, LEFT (repeat), DOWN, DOWN | agent, agent | a direction key takes over again
    assert moves == [U, U, L, L, D, D, U, U, R, R]
    assert inner.calls == 4
    assert agent.human


def test_take_over_with_space_continues_the_agents_move(display):
    inner = Always(Move.LEFT)
    agent = TakeOver(inner, KeyboardAgent(wait=False))
    o = gl.Obs().actor(Head(4, 4))
    assert agent.act(o, Move) is Move.LEFT and not agent.human
    press(pygame.K_SPACE)
    assert agent.act(o, Move) is Move.LEFT and agent.human and inner.calls == 1
    press(pygame.K_RETURN)
    assert agent.act(o, Move) is Move.LEFT and not agent.human and inner.calls == 2


# ---------------------------------------------------------------------- play
def test_human_vs_agent_duel(display):
    viewer = Viewer("duel", window=True, capture=True)
    human = Spy(KeyboardAgent(wait=False))
    press(pygame.K_DOWN)
    result = gl.run(duel, [Watch(human, viewer), gl.RandomAgent(1)], seed=0, max_steps=6)
    viewer.close()
    assert result.steps == 6 and len(viewer.frames) == 3 + len(result.episodes)
    first_episode = []
    for kind, *_, move in human.log:
        if kind == "end":
            break
        first_episode.append(move)
    assert first_episode and all(m is Move.DOWN for m in first_episode)
    # through play(): the human is the first player, a random agent the second
    r = play("duel", human_vs_agent=True, fps=0, max_steps=10, wait_for_key=False)
    assert r.steps == 10 and r.stopped == "max_steps"


def test_play_ends_when_the_player_quits(display):
    press(pygame.K_ESCAPE)
    r = play("snake", gl.RandomAgent(seed=0), fps=0)
    assert r.stopped == "quit" and r.steps == 0  # Escape at the first frame: no decision taken


def test_play_errors(display, tmp_path):
    with pytest.raises(ConfigError, match="--human-vs-agent needs a two-player game such as duel; snake"):
        play("snake", human_vs_agent=True)
    with pytest.raises(ConfigError, match="tactics cannot be played from the keyboard"):
        play("tactics")
    with pytest.raises(CheckpointError, match="does not exist"):
        play("snake", str(tmp_path / "missing.safetensors"))
    with pytest.raises(CheckpointError, match="is a folder; expected a .safetensors file"):
        play("snake", str(tmp_path))


def test_play_without_a_display_says_what_to_do(monkeypatch):
    pygame.display.quit()
    monkeypatch.setenv("SDL_VIDEODRIVER", "no-such-driver")
    with pytest.raises(ConfigError, match="cannot open a window to show snake.*gymloop record"):
        play("snake", gl.RandomAgent(0), fps=0, max_steps=2)
    pygame.display.quit()


# ---------------------------------------------------------------------- CLI
def test_cli_play_watches_an_agent_offscreen(display, snake_ckpt, capsys):
    assert main(["play", "snake", "--agent", snake_ckpt, "--max-steps", "15", "--fps", "0"]) == 0
    assert "snake: 15 decisions" in capsys.readouterr().out


def test_play_watches_tactics(display):
    r = play(tactics, gl.RandomAgent(0), fps=0, max_steps=4)  # no keyboard for tactics: no take-over
    assert r.steps == 4


def test_cli_record(tmp_path, snake_ckpt, capsys):
    out = tmp_path / "run.gif"
    assert main(["record", "snake", "--agent", snake_ckpt, "--out", str(out), "--max-steps", "10"]) == 0
    assert out.stat().st_size > 0
    assert "frames, 320x352 px" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["record", "pong", "--out", "x.gif"], "unknown game 'pong'"),
        (["record", "snake", "--out", "x.avi"], "must end in .gif or .mp4"),
        (["record", "snake", "--agent", "missing.safetensors", "--out", "x.gif"], "does not exist"),
        (["play", "snake", "--human-vs-agent"], "needs a two-player game"),
    ],
)
def test_cli_errors(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_human_play_is_recorded_as_a_trace_that_replays(display, tmp_path):
    path = tmp_path / "human.trace.safetensors"
    press(pygame.K_UP, pygame.K_LEFT, pygame.K_DOWN)
    r = play("snake", seed=4, fps=0, max_steps=6, wait_for_key=False, trace=path)
    assert r.steps == 6
    trace = gl.load_trace(path)
    assert trace.num_decisions == 6
    moves = [int(trace.choices(i)["Move"][0]) for i in range(3)]
    assert moves == [0, 2, 1]  # UP, LEFT, DOWN, as pressed
    gl.replay(path, snake)  # bit-exact: the keyboard's choices drive the same game again


def test_cli_play_trace_option(display, snake_ckpt, tmp_path, capsys):
    path = tmp_path / "watched.trace.safetensors"
    assert main(["play", "snake", "--agent", snake_ckpt, "--max-steps", "8", "--fps", "0", "--trace", str(path)]) == 0
    assert gl.load_trace(path).num_decisions == 8
