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

from support.entities import Unit
from support.generic_game import make_game

import gymloop as gl
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


@pytest.fixture(scope="module")
def snake_ckpt(tmp_path_factory):
    """A random-weights snake agent checkpoint (needs torch)."""
    pytest.importorskip("torch")
    from gymloop.neural import random_checkpoint

    path = tmp_path_factory.mktemp("ckpt") / "snake.safetensors"
    random_checkpoint(path, snake, seed=0)
    return str(path)


def press(*keys: int) -> None:
    """Taps: each key goes down and up again before the next decision."""
    for k in keys:
        pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=k))
        pygame.event.post(pygame.event.Event(pygame.KEYUP, key=k))


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

    with pytest.raises(ConfigError, match=r"cannot play action type 'Order': it is a composite action.*plays Enum action types"):
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
    with pytest.raises(CheckpointError, match="not a complete enn-trainer checkpoint folder.*opens with gl.library"):
        play("snake", str(tmp_path))  # a folder without agent.safetensors


def test_play_watches_a_training_run_folder(display, snake_ckpt, tmp_path):
    import shutil

    run_dir = tmp_path / "runs" / "snake"
    run_dir.mkdir(parents=True)
    shutil.copy(snake_ckpt, run_dir / "agent.safetensors")
    assert play("snake", str(run_dir), fps=0, max_steps=3).steps == 3


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


# ---------------------------------------------------------------------- review: timing, resources, errors
def test_frame_clock_rejects_nan_and_bools_and_polls_while_it_waits():
    for bad in (float("nan"), True, "8"):
        with pytest.raises(ConfigError, match=r"fps must be a number >= 0 or None.*got"):
            FrameClock(fps=bad)
    assert FrameClock(fps=float("inf")).tick() == 0.0  # no limit
    calls = []
    clock = FrameClock(fps=20)
    clock.tick(lambda: calls.append(1))  # the first frame is due at once
    clock.tick(lambda: calls.append(1))  # then ~50 ms, with the window's events read meanwhile
    assert len(calls) >= 2


def test_fonts_survive_pygame_quit():
    canvas = Canvas.offscreen(10, 10)
    obs = gl.Obs(score=3).actor(Head(3, 4))
    draw_snake(obs, canvas)
    pygame.quit()  # a user's script may end its own pygame session between two plays
    canvas = Canvas.offscreen(10, 10)
    draw_snake(obs, canvas)  # raised "Invalid font (font module quit since font created)"
    assert surface_to_array(canvas.surface)[:32].std() > 0


def test_viewer_checks_cell_and_closes_as_a_context_manager(display):
    with pytest.raises(ConfigError, match="cell must be an int of at least 4 pixels.*got 0"):
        Viewer("snake", window=False, cell=0)
    with Viewer("snake", window=True) as v:
        gl.run(snake, Watch(gl.RandomAgent(0), v), seed=0, max_steps=1)
        assert pygame.display.get_surface() is not None
    assert not pygame.display.get_init()


def test_a_failed_window_leaves_no_display_initialized(monkeypatch):
    pygame.display.quit()
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")

    def no_window(*args, **kwargs):
        raise pygame.error("no mode")

    monkeypatch.setattr(pygame.display, "set_mode", no_window)
    with pytest.raises(ConfigError, match="cannot open a window to show snake: no mode"):
        play("snake", gl.RandomAgent(0), fps=0, max_steps=2)
    assert not pygame.display.get_init()


def test_window_caption_says_who_plays(display):
    v = Viewer("duel", window=True)
    kb = KeyboardAgent(wait=False)
    gl.run(duel, [Watch(kb, v, caption="you: green"), gl.RandomAgent(1)], seed=0, max_steps=2)
    assert pygame.display.get_caption()[0] == "gymloop: duel  (you: green)"
    takeover = TakeOver(Always(Move.UP), KeyboardAgent(wait=False))
    gl.run(snake, Watch(takeover, Viewer("snake", window=True)), seed=0, max_steps=1)
    assert "agent plays - SPACE or a direction key: take over" in pygame.display.get_caption()[0]
    press(pygame.K_SPACE)
    takeover.act(gl.Obs().actor(Head(1, 1)), Move)
    assert takeover.human and takeover.hint == "you play - SPACE or RETURN: hand back"


def test_keyboard_mask_falls_back_to_the_previous_move(display):
    kb = KeyboardAgent(wait=False)
    press(pygame.K_RIGHT)
    assert kb.act(gl.Obs().actor(Head(1, 1)), Move) is Move.RIGHT
    no_reverse = gl.Obs().actor(Head(2, 1), masks={Move: [Move.UP, Move.DOWN, Move.RIGHT]})
    press(pygame.K_LEFT)
    assert kb.act(no_reverse, Move) is Move.RIGHT  # not UP (the first legal): a masked press keeps the heading
    assert kb.act(gl.Obs().actor(Head(3, 1)), Move) is Move.RIGHT  # the masked press does not stick
    only_left = gl.Obs().actor(Head(4, 1), masks={Move: [Move.DOWN, Move.LEFT]})
    assert kb.act(only_left, Move) is Move.DOWN  # the previous move masked too: the first legal one
    two = gl.Obs().actors([Head(0, 0), Head(5, 5)], masks={Move: [[Move.RIGHT], None]})
    press(pygame.K_DOWN)
    assert kb.act(two, Move) == [Move.RIGHT, Move.DOWN]  # each actor's own mask


def test_keyboard_custom_keys_and_their_errors(display):
    from enum import Enum

    class Step(Enum):
        NOOP = 0
        UP = 1
        DOWN = 2

    kb = KeyboardAgent(keys={"K_i": "UP", "K_k": "DOWN", "K_SPACE": "NOOP"}, wait=False, default="NOOP")
    o = gl.Obs().actor(Head(0, 0))
    assert kb.act(o, Step) is Step.NOOP  # the default
    press(pygame.K_k, pygame.K_SPACE)
    assert kb.act(o, Step) is Step.DOWN
    assert kb.act(o, Step) is Step.NOOP  # a non-direction member from a custom mapping
    typo = KeyboardAgent(keys={"K_i": "UP", "K_k": "DWON"}, wait=False)
    with pytest.raises(ConfigError, match=r"\['DWON'\] are not members of the game's action Step"):
        typo.act(o, Step)
    with pytest.raises(ConfigError, match=r"default must be one of the names its keys produce.*got 'JUMP'"):
        KeyboardAgent(default="JUMP")
    with pytest.raises(ConfigError, match=r"\['RIGHT'\] are not members"):
        KeyboardAgent(default="RIGHT", wait=False).act(o, Step)
    with pytest.raises(ConfigError, match=r"queue must be an int of at least 1 \(key presses remembered\), got 0"):
        KeyboardAgent(queue=0)
    with pytest.raises(ConfigError, match="must map to a member name.*got 3"):
        KeyboardAgent(keys={"K_i": 3})
    with pytest.raises(ConfigError, match="non-empty mapping"):
        KeyboardAgent(keys={})


def test_unread_keys_are_bounded():
    kb = KeyboardAgent(wait=False)
    kb._raw.extend(range(1000))  # an idle keyboard agent while someone else plays for a long time
    assert len(kb._raw) == 64


def test_hand_back_while_the_keyboard_waits_for_a_first_key(display, monkeypatch):
    from gymloop.render import keyboard as kbmod

    inner = Always(Move.RIGHT)
    agent = TakeOver(inner, KeyboardAgent(wait=True))
    agent.human = True  # the human kept control into a new episode: the keyboard waits for a key
    real_sleep = kbmod.time.sleep

    class Clock:
        @staticmethod
        def sleep(s):
            press(pygame.K_RETURN)  # ... and the human hands back instead
            real_sleep(0)

    monkeypatch.setattr(kbmod, "time", Clock)
    assert agent.act(gl.Obs().actor(Head(2, 2)), Move) is Move.RIGHT
    assert not agent.human and inner.calls == 1


def test_take_over_continues_a_several_actor_move(display):
    class Both(Always):
        def act(self, obs, *types):
            self.calls += 1
            return [Move.LEFT, Move.LEFT]

    agent = TakeOver(Both(None), KeyboardAgent(wait=True))
    o = gl.Obs().actors([Head(1, 1), Head(2, 2)])
    assert agent.act(o, Move) == [Move.LEFT, Move.LEFT]
    press(pygame.K_SPACE)
    assert agent.act(o, Move) == [Move.LEFT, Move.LEFT] and agent.human  # no wait: the agent's move goes on
    with pytest.raises(ConfigError, match="TakeOver needs an Agent"):
        TakeOver(object())
    with pytest.raises(ConfigError, match="hand_back_keys is empty"):
        TakeOver(Always(Move.UP), hand_back_keys=())


class QuitAfter(Always):
    """Presses Escape during its ``n``-th decision."""

    def __init__(self, move, n):
        super().__init__(move)
        self.n = n

    def act(self, obs, *types):
        if self.calls + 1 == self.n:
            press(pygame.K_ESCAPE)
        return super().act(obs, *types)


def test_a_quit_counts_every_players_decisions(display):
    agent = QuitAfter(Move.UP, 5)
    r = play("duel", agent, fps=0, wait_for_key=False)
    assert r.stopped == "quit"
    assert r.steps == agent.calls == 6  # both seats' decisions (the first player's alone: 3)


def test_play_with_a_bad_limit_fails_before_the_window(display):
    with pytest.raises(ConfigError, match=r"play max_steps must be an int >= 0 or None \(no limit\), got -1"):
        play("snake", gl.RandomAgent(0), max_steps=-1)
    assert pygame.display.get_surface() is None


def test_play_with_a_trace_path_that_is_a_folder_fails_before_the_window(display, tmp_path):
    with pytest.raises(gl.OutputPathError, match=r"cannot write .*: it is a folder, not a file"):
        play("snake", gl.RandomAgent(0), trace=tmp_path)
    assert pygame.display.get_surface() is None


def test_play_trace_is_kept_when_the_game_fails_and_skipped_when_empty(display, tmp_path, caplog):
    class Breaks(Always):
        def act(self, obs, *types):
            if self.calls == 4:
                raise RuntimeError("agent broke")
            return super().act(obs, *types)

    path = tmp_path / "broken.trace.safetensors"
    with pytest.raises(RuntimeError, match="agent broke"):  # the game's own error, not a trace error
        play("snake", Breaks(Move.UP), fps=0, max_steps=10, trace=path)
    assert gl.load_trace(path).num_decisions == 4
    pygame.display.init()  # play closed its window
    press(pygame.K_ESCAPE)
    empty = tmp_path / "empty.trace.safetensors"
    with caplog.at_level("WARNING", logger="gymloop.render.session"):
        r = play("snake", gl.RandomAgent(0), fps=0, trace=empty)
    assert r.stopped == "quit" and not empty.exists()
    assert "no trace written" in caplog.text


def test_video_path_errors_come_before_the_game(tmp_path):
    (tmp_path / "dir.gif").mkdir()
    (tmp_path / "file").write_text("")
    ran = Always(Move.UP)
    with pytest.raises(ConfigError, match="dir.gif': it is a folder; expected a file name"):
        record("snake", tmp_path / "dir.gif", ran)
    with pytest.raises(ConfigError, match="file' is a file, not a folder"):
        record("snake", tmp_path / "file" / "sub" / "run.mp4", ran)
    assert ran.calls == 0


def test_mp4_writer_reports_ffmpeg_failures_and_cleans_up(tmp_path, monkeypatch, caplog):
    from gymloop.render import Mp4Writer, write_video

    frames = [np.zeros((8, 8, 3), np.uint8)] * 2

    def broken_pipe(path, *a, **k):  # ffmpeg exits at once (cannot open the file, ...)
        open(path, "wb").close()
        yield
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(imageio_ffmpeg, "write_frames", broken_pipe)
    out = tmp_path / "a.mp4"
    with pytest.raises(ConfigError, match=r"cannot write video .*a.mp4': \[Errno 32\] Broken pipe; choose a writable"):
        write_video(out, frames)
    assert not out.exists()  # the partial file is removed

    def writes_nothing(path, *a, **k):  # ffmpeg fails while finishing: imageio-ffmpeg does not say
        while True:
            yield

    monkeypatch.setattr(imageio_ffmpeg, "write_frames", writes_nothing)
    with pytest.raises(ConfigError, match="ffmpeg wrote no video to .*b.mp4"):
        write_video(tmp_path / "b.mp4", frames)

    def close_fails(path, *a, **k):
        try:
            while True:
                yield
        except GeneratorExit:
            raise OSError("ffmpeg hung") from None

    monkeypatch.setattr(imageio_ffmpeg, "write_frames", close_fails)
    w = Mp4Writer(tmp_path / "c.mp4", 10)
    w.add(frames[0])
    with caplog.at_level("WARNING", logger="gymloop.render.video"):
        w.abort()  # an abort on an error path logs its own failure rather than masking that error
    assert "stopping ffmpeg" in caplog.text


def test_record_aborts_the_video_when_the_agent_fails(tmp_path):
    class Breaks(Always):
        def act(self, obs, *types):
            if self.calls == 3:
                raise RuntimeError("agent broke")
            return super().act(obs, *types)

    for name in ("run.mp4", "run.gif"):
        with pytest.raises(RuntimeError, match="agent broke"):
            record("snake", tmp_path / name, Breaks(Move.UP), max_steps=10)
    assert list(tmp_path.iterdir()) == []


def test_gif_warns_about_frame_rates_viewers_ignore(tmp_path, caplog):
    from gymloop.render import write_video

    with caplog.at_level("WARNING", logger="gymloop.render.video"):
        write_video(tmp_path / "fast.gif", [np.zeros((8, 8, 3), np.uint8)], fps=60)
    assert "under 20 ms" in caplog.text
    with pytest.raises(ConfigError, match=r"no frames to write to .*none was added"):
        write_video(tmp_path / "none.gif", [])


def test_waiting_for_the_first_key_says_so_in_the_title(display):
    pygame.display.set_mode((64, 64))
    pygame.display.set_caption("gymloop: snake")
    kb = KeyboardAgent(wait=True)
    seen = []

    def pump():
        seen.append(pygame.display.get_caption()[0])
        press(pygame.K_LEFT)
        return kb._pump()

    assert kb._wait_for_move(kb.keymap(Move), pump)
    assert kb.act(gl.Obs().actor(Head(1, 1)), Move) is Move.LEFT
    assert seen and "press a direction key to start" in seen[0]
    assert pygame.display.get_caption()[0] == "gymloop: snake"  # restored


def test_a_view_in_screen_coordinates_draws_y_downward(display):
    game = make_game(build_obs=lambda st: gl.Obs(score=st.t).actor(Unit(1, 0)))
    frames = {}
    for y_up in (True, False):
        register_view(game, GameView(draw_entities, 4, 4, name="screen", y_up=y_up))
        viewer = Viewer(game, window=False, capture=True)
        gl.run(game, Watch(gl.RandomAgent(0), viewer), seed=0, max_steps=1)
        assert viewer.canvas.y_up is y_up
        frames[y_up] = (viewer.frames[0], viewer.canvas)
    up, c_up = frames[True]
    down, c_down = frames[False]
    # the unit at y=0: on the bottom row with y growing upward, on the top row in screen coordinates
    assert c_up.center(1, 0)[1] > c_up.center(1, 3)[1]
    assert c_down.center(1, 0)[1] < c_down.center(1, 3)[1]
    assert c_down.center(1, 0) == c_up.center(1, 3)
    assert pixel(up, c_up, 1, 0) == pixel(down, c_down, 1, 0)  # the same unit, drawn where each view puts it
    assert pixel(down, c_down, 1, 0) != pixel(down, c_down, 1, 3)
