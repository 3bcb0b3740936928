"""Recording a game in pixel coordinates at a sane size (issue 31, item 3), and long GIFs in chunks.

:mod:`support.pixel_game` is a 640 x 480 shooter with no registered view: the generic view scales
its pixel positions to a frame of at most :data:`~gymloop.render.draw.MAX_SIDE` pixels.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
pygame = pytest.importorskip("pygame")
Image = pytest.importorskip("PIL.Image")

from support.pixel_game import Alien, Ship, Steer, Trigger, shooter  # noqa: E402

import gymloop as gl  # noqa: E402
from gymloop.cli import main  # noqa: E402
from gymloop.errors import ConfigError  # noqa: E402
from gymloop.render import Canvas, GameView, GifWriter, Viewer, Watch, draw_entities, record  # noqa: E402
from gymloop.render.draw import MAX_SIDE, fitting_cell, frame_size  # noqa: E402
from gymloop.render.video import gif_frames  # noqa: E402


@pytest.mark.slow
def test_record_a_pixel_game_at_most_1280_px_100_frames(tmp_path):
    out = tmp_path / "shooter.gif"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no DecompressionBombWarning (or any other)
        r = record(shooter, out, max_steps=100, max_episodes=None)
    assert r.run.steps == 100 and r.frames == 100 + len(r.run.episodes)
    assert max(r.size) <= MAX_SIDE and max(r.size) >= MAX_SIDE - 2  # scaled down to the limit, not to a dot
    with Image.open(out) as im:
        assert im.size == r.size and im.n_frames == r.frames


def test_a_pixel_game_is_scaled_and_entities_stay_visible():
    viewer = Viewer(shooter, window=False, capture=True)
    gl.run(shooter, Watch(gl.RandomAgent(0), viewer), seed=0, max_steps=3)
    canvas = viewer.canvas
    assert canvas is not None and canvas.cell < 8 and canvas.fits
    frame = viewer.frames[-1]
    assert max(frame.shape[:2]) <= MAX_SIDE
    ship_color = canvas.legend.color(Ship)
    px, py = canvas.center(320, 460)
    # the ship is a marker of several pixels in its colour, not a lost dot
    r = canvas.rect(320, 460, 2)
    assert r.w >= 6
    assert (frame == np.array(ship_color, np.uint8)).all(axis=-1).sum() >= 36
    assert canvas.legend.color(Alien) != ship_color and 0 <= px < frame.shape[1] and 0 <= py < frame.shape[0]


def test_the_board_zooms_out_when_positions_go_beyond_it():
    canvas = Canvas.offscreen(100, 100, 2.0)
    canvas.fits = True
    size = canvas.pixel_size
    draw_entities(gl.Obs().actor(Ship(10, 10)).entities([Alien(300, 50)]), canvas)
    assert canvas.width >= 301 and canvas.cell < 2.0 and canvas.pixel_size == size
    fixed = Canvas.offscreen(100, 100, 2.0)  # a view's own size does not change
    draw_entities(gl.Obs().actor(Ship(300, 10)), fixed)
    assert fixed.width == 100 and fixed.cell == 2.0


def test_a_view_with_a_fixed_huge_board_is_drawn_small():
    view = GameView(draw_entities, width=640, height=480, name="huge")
    viewer = Viewer(view, window=False, capture=True)
    viewer.show(gl.Obs().actor(Ship(1, 1)))
    assert max(viewer.frames[0].shape[:2]) <= MAX_SIDE and not viewer.canvas.fits
    assert fitting_cell(10, 10, 32) == 32 and frame_size(10, 10, 32) == (320, 352)  # small boards unchanged
    with pytest.raises(ConfigError, match="max_side must be an int of at least 64"):
        Viewer(view, window=False, max_side=10)


def test_cli_records_a_pixel_game(tmp_path, capsys):
    out = tmp_path / "cli.gif"
    assert main(["record", "support.pixel_game:shooter", "--out", str(out), "--max-steps", "20", "--episodes", "0"]) == 0
    assert "wrote" in capsys.readouterr().out
    with Image.open(out) as im:
        assert max(im.size) <= MAX_SIDE and im.n_frames == 20


def test_a_long_gif_is_written_in_chunks_that_decode_like_one_file(tmp_path):
    rng = np.random.default_rng(0)
    frames = []
    for i in range(23):
        f = np.zeros((40, 50, 3), np.uint8)
        f[:] = (i * 10, 50, 100)
        f[i:i + 5, 2 * i:2 * i + 5] = (255, 255, 0)
        if i % 7 == 3:  # more than 256 colours: quantized
            f = rng.integers(0, 255, (40, 50, 3), dtype=np.uint8)
        frames.append(f)
    chunked = GifWriter(tmp_path / "chunked.gif", fps=10, chunk_bytes=40 * 50 * 5)  # a chunk per 5 frames
    whole = GifWriter(tmp_path / "whole.gif", fps=10)
    for f in frames:
        chunked.add(f)
        whole.add(f)
        assert len(chunked._frames) < 5  # never more than a chunk held
    chunked.close()
    whole.close()

    def decoded(path):
        with Image.open(path) as im:
            assert im.info.get("loop") == 0
            out = []
            for k in range(im.n_frames):
                im.seek(k)
                out.append(np.asarray(im.convert("RGB")))
            return out

    a, b = decoded(tmp_path / "chunked.gif"), decoded(tmp_path / "whole.gif")
    assert len(a) == len(b) == 23 and all((x == y).all() for x, y in zip(a, b))
    flat = [k for k, f in enumerate(frames) if k % 7 != 3]
    assert all((a[k] == frames[k]).all() for k in flat)  # few colours: exact
    with pytest.raises(ConfigError, match="not a GIF file"):
        gif_frames(b"PNG....")


def test_a_failed_chunked_gif_leaves_nothing(tmp_path):
    w = GifWriter(tmp_path / "broken.gif", fps=10, chunk_bytes=1)
    w.add(np.zeros((8, 8, 3), np.uint8))
    assert any(p.name.startswith("broken.gif") for p in tmp_path.iterdir())  # the temporary file
    w.abort()
    assert list(tmp_path.iterdir()) == []


def test_steer_and_trigger_are_asked_together():
    seen = []

    class Spy(gl.RandomAgent):
        def act(self, obs, *types):
            seen.append(types)
            return super().act(obs, *types)

    gl.run(shooter, Spy(0), seed=0, max_steps=2)
    assert seen == [(Steer, Trigger)] * 2
