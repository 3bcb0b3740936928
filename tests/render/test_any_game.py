"""Play and record work for any game, not only the bundled ones (issue 11, item 5).

A user's own game (:mod:`support.farm`: five entity types, globals it never declares, two agents) is
trained for a few hundred steps, loaded, played headless seat by seat and recorded to a GIF.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, make_dataclass

import numpy as np
import pytest

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
pygame = pytest.importorskip("pygame")
Image = pytest.importorskip("PIL.Image")

from support import farm as farm_mod  # noqa: E402
from support.farm import Crop, CropKind, Crow, Farmer, Move, Rival, Rock, ShortSeason, farm  # noqa: E402

import gymloop as gl  # noqa: E402
from gymloop.cli import main  # noqa: E402
from gymloop.errors import CheckpointError, ConfigError, InvalidObservationError, SchemaError  # noqa: E402
from gymloop.render import (  # noqa: E402
    Canvas,
    Viewer,
    draw_entities,
    load_agent,
    play,
    record,
    seat_specs,
    surface_to_array,
    view_for,
)
from gymloop.render.draw import BACKGROUND, GRID, INK, TYPE_PALETTE, Legend  # noqa: E402


@pytest.fixture
def captions(monkeypatch):
    """The window titles play sets (the window is closed when play returns)."""
    seen = []
    real = Viewer.set_caption

    def spy(self, text):
        seen.append(text)
        real(self, text)

    monkeypatch.setattr(Viewer, "set_caption", spy)
    return seen


@pytest.fixture(scope="module")
def farm_ckpt(tmp_path_factory):
    """The farm trained with the trainer for 256 steps (a tiny config; about 2 s)."""
    pytest.importorskip("torch")
    from support.train_games import tiny

    from gymloop.train.ppo import Trainer

    out = tmp_path_factory.mktemp("farm")
    cfg = tiny(256)
    cfg.agents_per_game, cfg.num_envs = 2, 8
    Trainer(farm, cfg, out_dir=str(out), game_name="farm", progress=False).train()
    return str(out / "agent.safetensors")


def corner(frame: np.ndarray, canvas: Canvas, x: int, y: int) -> tuple[int, ...]:
    """The colour inside cell (x, y) away from its centre (where a kind's label is drawn)."""
    r = canvas.rect(x, y, 3)
    return tuple(int(v) for v in frame[r.top + 1, r.left + 1])


# ---------------------------------------------------------------------- 1. its own checkpoint loads
def test_a_games_own_checkpoint_loads_without_declaring_globals(farm_ckpt):
    assert gl.declared_types(farm) == ([], None, [])  # @gl.game(agents=2) only: no globals= declared
    agent = gl.load(farm_ckpt, seed=0, game=farm)  # refused before: "the game declares no globals"
    r = gl.run(farm, [agent, agent.fork(seed=1)], seed=0, max_episodes=2)
    assert len(r.episodes) == 2 and r.steps == 2 * farm_mod.STEPS
    # a real mismatch is still a CheckpointError, at load time
    with pytest.raises(CheckpointError, match=r"the globals 'Season' lack the features \['theirs'\]"):
        gl.load(farm_ckpt, game=functools.partial(farm, season=ShortSeason))
    with pytest.raises(CheckpointError, match=r"neither declares globals .* nor gives them in its first observation"):
        gl.load(farm_ckpt, game=functools.partial(farm, season=None))


# ---------------------------------------------------------------------- 2. seats for any number of agents
def test_seats_of_a_two_agent_game():
    assert seat_specs(farm) == [None, None]  # record: random agents
    assert seat_specs(farm, human_default=True) == ["human", None]  # play: you take the first seat
    assert seat_specs(farm, "x.safetensors") == ["x.safetensors"] * 2  # one spec: every seat
    assert seat_specs(farm, ["scripted"]) == ["scripted", None]  # a list: seat by seat, the rest random
    assert seat_specs(farm, human_vs_agent=True) == ["human", None]
    assert seat_specs("duel", human_default=True) == ["human", None]  # the bundled duel: the same general path
    with pytest.raises(ConfigError, match=r"farm takes 2 agent\(s\), got 3 seat specs"):
        seat_specs(farm, ["random"] * 3)
    with pytest.raises(ConfigError, match="--human-vs-agent needs a two-player game such as duel; snake has 1"):
        seat_specs("snake", human_vs_agent=True)
    assert load_agent("support.farm:GoRight", farm, seed=3).seed == 3  # module:Class, given its seat's seed
    with pytest.raises(ConfigError, match=r"the module 'support\.farm' has no 'Nope'; name an agent class"):
        load_agent("support.farm:Nope", farm)
    with pytest.raises(ConfigError, match=r"cannot import the module 'no_such_module'"):
        load_agent("no_such_module:Agent", farm)
    with pytest.raises(ConfigError, match=r"agent 'support\.farm:Move': cannot make an agent by calling Move\(\)"):
        load_agent("support.farm:Move", farm)
    with pytest.raises(ConfigError, match=r"agent 'support\.farm:STEPS' is 12, not an Agent"):
        load_agent("support.farm:STEPS", farm)


def test_record_a_two_agent_game_seat_by_seat(tmp_path, farm_ckpt):
    out = tmp_path / "farm.gif"
    r = record(farm, out, [farm_ckpt, "support.farm:GoRight"], seed=1, max_steps=24, max_episodes=None)  # "got 1" before
    assert r.run.steps == 24 and r.frames == 12 + len([e for e in r.run.episodes if e.agent == 0])
    with Image.open(out) as im:
        assert im.n_frames == r.frames and im.size == r.size
        assert im.size[0] > 6 * 32  # the board and a legend beside it
    with pytest.raises(ConfigError, match=r"record draws offscreen without a keyboard: seat\(s\) \[0\] cannot be 'human'"):
        record(farm, tmp_path / "h.gif", ["human"])
    assert not (tmp_path / "h.gif").exists()


def test_play_a_two_agent_game_human_against_its_checkpoint(display, tmp_path, farm_ckpt, captions):
    trace = tmp_path / "human.trace.safetensors"
    pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_UP))
    r = play(farm, ["human", farm_ckpt], fps=0, max_steps=4, wait_for_key=False, trace=trace)
    assert r.steps == 4 and r.stopped == "max_steps"
    assert captions[-1] == "P1: you (arrows or WASD) vs P2: agent.safetensors"
    tr = gl.load_trace(trace)
    assert int(tr.choices(0)["Move"][0]) == Move.UP.value  # seat 0's first decision: the key pressed
    # the default: you take the first seat, the other is random
    pygame.display.init()
    r = play(farm, fps=0, max_steps=2, wait_for_key=False)
    assert r.steps == 2 and captions[-1] == "P1: you (arrows or WASD) vs P2: random"


def test_two_humans_share_the_keyboard_and_at_most_two(display, captions):
    pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_ESCAPE))
    r = play("duel", ["human", "human"], fps=0, wait_for_key=False)
    assert r.stopped == "quit"
    assert captions[-1] == "P1: you (WASD) vs P2: you (arrows)"
    three = gl.game(agents=3)(lambda agents, seed: None)
    with pytest.raises(ConfigError, match=r"at most two humans can share the keyboard .* got 3 'human' seats"):
        play(three, "human")


def test_cli_play_and_record_seats(display, tmp_path, farm_ckpt, capsys, monkeypatch):
    monkeypatch.chdir(os.path.dirname(os.path.dirname(farm_mod.__file__)))  # support.farm:farm and support.farm:GoRight import from here
    assert main(["play", "support.farm:farm", "--agent", farm_ckpt, "--fps", "0", "--max-steps", "6"]) == 0
    assert "support.farm:farm: 6 decisions" in capsys.readouterr().out
    out = tmp_path / "cli.gif"
    assert main(["record", "support.farm:farm", "--agent", "random", "--agent", farm_ckpt, "--out", str(out),
                 "--max-steps", "24", "--seat", "1"]) == 0
    assert f"(support.farm:farm with random vs {farm_ckpt}, 24 decisions" in capsys.readouterr().out
    assert main(["record", "support.farm:farm", "--agent", "human", "--out", str(tmp_path / "x.gif")]) == 2
    assert "cannot be 'human'" in capsys.readouterr().err
    assert main(["play", "support.farm:farm", "--agent", "a", "--agent", "b", "--agent", "c"]) == 2
    assert "farm takes 2 agent(s), got 3 seat specs" in capsys.readouterr().err


# ---------------------------------------------------------------------- 3. colours, legend, kinds
def test_generic_view_colours_are_distinct_with_a_legend(tmp_path):
    classes = [make_dataclass(f"T{i:02d}", [("x", int), ("y", int)]) for i in range(12)]
    obs = gl.Obs().actor(classes[0](0, 0)).entities([c(i % 6, i // 6 + 1) for i, c in enumerate(classes[1:], 1)])
    viewer = Viewer(GameViewOf(), window=False, capture=True)
    viewer.show(obs)
    f, canvas = viewer.frames[0], viewer.canvas
    colours = [corner(f, canvas, i % 6, i // 6 + (i > 0)) for i in range(12)]
    assert len(set(colours)) == 12  # every type its own colour (a hash of the name gave three the same)
    assert colours == list(TYPE_PALETTE)  # in the order of the spaces' types (sorted names): deterministic
    for a in range(12):
        assert sum(abs(int(p) - int(q)) for p, q in zip(colours[a], BACKGROUND)) > 120
        for b in range(a):
            assert np.linalg.norm(np.subtract(colours[a], colours[b])) > 50, (a, b)
    # the legend, right of the board: a swatch of each type's colour on its row, with its name
    panel = f[canvas.bar:, canvas.panel_left:]
    assert canvas.panel[0] > 0 and panel.shape[1] == canvas.panel[0]
    for i, c in enumerate(TYPE_PALETTE):
        row = panel[6 + 18 * i + 4: 6 + 18 * i + 14, 8:22]
        assert (row == c).all(axis=-1).mean() > 0.9, i
        text = panel[6 + 18 * i: 6 + 18 * (i + 1), 30:]
        assert (text != BACKGROUND).any(axis=-1).sum() > 20  # the type's name is written
    assert Legend(classes).entries == [(f"T{i:02d}", TYPE_PALETTE[i]) for i in range(12)]


def GameViewOf():
    from gymloop.render import GameView

    return GameView(draw_entities, width=6, height=3, name="twelve")


def test_farm_types_kinds_and_legend_drawn(tmp_path):
    view = view_for(farm)
    assert view.players == 2 and view.shows_legend
    obs = (gl.Obs().actor(Farmer(0, 0)).entities(Rival(5, 5)).entities([Crop(1, 1, CropKind.WHEAT), Crop(2, 1, CropKind.BERRY)])
           .entities([Rock(3, 3)]).entities(Crow(4, 4)))
    viewer = Viewer(farm, window=False, capture=True)
    viewer.show(obs)
    f, c = viewer.frames[0], viewer.canvas
    legend = c.legend
    names = [n for n, _ in legend.entries]
    assert names == ["Crop", "Crow", "Farmer", "Rival", "Rock"]
    cells = {"Farmer": (0, 0), "Rival": (5, 5), "Crop": (1, 1), "Rock": (3, 3), "Crow": (4, 4)}
    seen = {n: corner(f, c, *xy) for n, xy in cells.items()}
    assert len(set(seen.values())) == 5 and seen == dict(legend.entries)
    # the kind: a short label on the crop's cell, spelled out in the legend
    for x in (1, 2):
        r = c.rect(x, 1, 3)
        assert (f[r.top:r.bottom, r.left:r.right] == INK).all(axis=-1).sum() > 5
    assert ("W = WHEAT", None, 2) in legend.lines() and ("B = BERRY", None, 2) in legend.lines()
    assert legend.label(Crop(0, 0, CropKind.CORN)) == "C"
    panel = f[c.bar:, c.panel_left:]
    assert (panel != BACKGROUND).any(axis=-1).sum() > 500 and not (panel == GRID).all()


def test_colours_stay_put_when_a_type_appears_later():
    @dataclass
    class Apple:
        x: int
        y: int

    canvas = Canvas.offscreen(6, 6)
    draw_entities(gl.Obs().actor(Farmer(0, 0)).entities(Rock(1, 1)), canvas)
    before = dict(canvas.legend.entries)
    draw_entities(gl.Obs().actor(Farmer(0, 0)).entities(Rock(1, 1)).entities(Apple(2, 2)), canvas)
    f = surface_to_array(canvas.surface)
    assert dict(canvas.legend.entries)["Farmer"] == before["Farmer"]  # Apple sorts first but comes last
    assert corner(f, canvas, 2, 2) == TYPE_PALETTE[2]


# ---------------------------------------------------------------------- 4. name clash, 5. masks as labels
def test_a_name_clash_names_the_modules():
    Head = make_dataclass("Head", [("x", int), ("y", int)])
    Other = make_dataclass("Head", [("x", int), ("y", int)])
    Head.__module__, Other.__module__ = "mygame", "othergame"

    def game(agent, seed):
        while True:
            agent.act(gl.Obs().actor(Head(0, 0)).entities(Other(1, 1)), Move)

    with pytest.raises(SchemaError, match=r"entity classes mygame\.Head and othergame\.Head are both named 'Head'; "
                                          r"rename one with @gl\.entity\(name=\.\.\.\), e\.g\. @gl\.entity\(name='othergame_Head'\)"):
        gl.VecEnv(game, num_envs=1).reset()


def test_a_mask_of_labels_says_to_use_the_enums_members():
    obs = gl.Obs().actor(Farmer(0, 0), masks={Move: ["UP", "RIGHT"]})
    with pytest.raises(InvalidObservationError, match=r"allows the string 'UP', but masks take the values of Move, "
                                                      r"e\.g\. \[Move\.UP, Move\.DOWN\], not their labels as strings: "
                                                      r"write Move\.UP instead of 'UP'"):
        obs.legal(0, Move)
    assert gl.Obs().actor(Farmer(0, 0), masks={Move: [Move.UP]}).legal(0, Move) == [Move.UP]
