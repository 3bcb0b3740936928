"""The keyboard plays any game of Enum action types (issue 31, item 4): several types in one ``act``,
held keys, key maps derived from the labels and overridden by the user, shown under the board, and
take-over. Keys are posted events under SDL's dummy driver (``display`` fixture).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum

import pytest

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
pygame = pytest.importorskip("pygame")

from support.pixel_game import SPEED, Ship, Steer, Trigger, shooter  # noqa: E402

import gymloop as gl  # noqa: E402
from gymloop.cli import main  # noqa: E402
from gymloop.errors import ConfigError  # noqa: E402
from gymloop.render import KeyboardAgent, PlayerQuit, TakeOver, Viewer, Watch, play  # noqa: E402
from gymloop.render.keymap import build_keymap, parse_keys  # noqa: E402


def down(*keys: int) -> None:
    for k in keys:
        pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=k))


def up(*keys: int) -> None:
    for k in keys:
        pygame.event.post(pygame.event.Event(pygame.KEYUP, key=k))


def tap(*keys: int) -> None:
    for k in keys:
        down(k)
        up(k)


def ship_obs(x: float = 320) -> gl.Obs:
    return gl.Obs().actor(Ship(x, 460))


def with_keys(script: dict, log: list):
    """The shooter, posting ``script[n]`` (callables) before its ``n``-th decision and logging
    ``(ship x, steer, trigger)`` per decision."""

    def game(agent, seed):
        class Keys:
            n = 0

            def act(self, obs, *types):
                for post in script.get(self.n, ()):
                    post()
                self.n += 1
                steer, trigger = agent.act(obs, *types)
                log.append((obs.actor_list[0].x, steer, trigger))
                return steer, trigger

            def game_over(self, obs, truncated=False):
                agent.game_over(obs, truncated)

        shooter(Keys(), seed)

    return game


def test_play_a_move_and_fire_game_held_left_moves_space_fires(display):
    K = pygame
    script = {0: [lambda: down(K.K_LEFT)], 3: [lambda: tap(K.K_SPACE)], 5: [lambda: up(K.K_LEFT)],
              6: [lambda: down(K.K_SPACE)], 8: [lambda: up(K.K_SPACE)]}
    log: list = []
    r = play(with_keys(script, log), fps=0, max_steps=10, wait_for_key=False)
    assert r.steps == 10
    L, N, F = Steer.LEFT, Steer.NONE, Trigger.FIRE
    n = Trigger.NONE
    assert [(s, t) for _, s, t in log] == [(L, n), (L, n), (L, n), (L, F), (L, n), (N, n), (N, F), (N, F), (N, n), (N, n)]
    xs = [x for x, _, _ in log]
    assert xs[5] == xs[0] - 5 * SPEED and xs[9] == xs[5]  # held LEFT moved the ship five times


def test_the_keys_are_shown_under_the_board(display):
    viewer = Viewer(shooter, window=True, capture=True)
    kb = KeyboardAgent(wait=False)
    gl.run(shooter, Watch(kb, viewer), seed=0, max_steps=2)
    viewer.close()
    assert viewer.keys == ["Steer: left/a LEFT, right/d RIGHT; no key: NONE", "Trigger: space FIRE; no key: NONE"]
    canvas = viewer.canvas
    assert canvas.footer > 0 and canvas.footer_lines
    frame = viewer.frames[0]
    strip = frame[frame.shape[0] - canvas.footer:]
    assert len({tuple(p) for p in strip.reshape(-1, 3)}) > 2  # text is drawn there


def test_taking_over_a_move_and_fire_game(display):
    class Agent:
        calls = 0

        def act(self, obs, *types):
            self.calls += 1
            return Steer.RIGHT, Trigger.NONE

        def game_over(self, obs, truncated=False):
            pass

    inner = Agent()
    agent = TakeOver(inner, KeyboardAgent(wait=False))
    o = ship_obs()
    assert agent.act(o, Steer, Trigger) == (Steer.RIGHT, Trigger.NONE) and not agent.human
    assert agent.hint == "agent plays - SPACE or a game key: take over"
    down(pygame.K_LEFT)  # a game key takes over, and is the human's first input
    assert agent.act(o, Steer, Trigger) == (Steer.LEFT, Trigger.NONE) and agent.human
    tap(pygame.K_SPACE)  # SPACE is the game's fire key: it fires, it does not hand back
    assert agent.act(o, Steer, Trigger) == (Steer.LEFT, Trigger.FIRE) and agent.human
    assert agent.hint == "you play - RETURN: hand back"
    up(pygame.K_LEFT)
    assert agent.act(o, Steer, Trigger) == (Steer.NONE, Trigger.NONE)
    tap(pygame.K_RETURN)
    assert agent.act(o, Steer, Trigger) == (Steer.RIGHT, Trigger.NONE) and not agent.human
    assert inner.calls == 2
    assert agent.key_legend(Steer, Trigger)[-1] == "take over: SPACE or a game key; hand back: RETURN"


def test_play_watches_an_agent_and_a_human_takes_over(display):
    log: list = []
    script = {2: [lambda: down(pygame.K_RIGHT)], 4: [lambda: tap(pygame.K_SPACE)]}
    play(with_keys(script, log), "random", fps=0, max_steps=6, wait_for_key=False)
    assert [(s, t) for _, s, t in log[2:5]] == [(Steer.RIGHT, Trigger.NONE), (Steer.RIGHT, Trigger.NONE),
                                                (Steer.RIGHT, Trigger.FIRE)]


def test_a_select_entity_decision_stays_with_the_agent_when_taking_over(display, caplog):
    from gymloop.games.tactics import Target

    class Agent:
        def act(self, obs, *types):
            return "picked"

        def game_over(self, obs, truncated=False):
            pass

    agent = TakeOver(Agent(), KeyboardAgent(wait=False))
    with caplog.at_level("WARNING", logger="gymloop.render.keyboard"):
        assert agent.act(ship_obs(), Target) == "picked"
    assert "cannot play action type 'Target': it is a select-entity action" in caplog.text
    assert agent.hint == "agent plays - the keyboard cannot play this decision"


def test_unmappable_action_types_are_named(display):
    from gymloop.games.tactics import Target

    kb = KeyboardAgent(wait=False)
    with pytest.raises(ConfigError, match=r"cannot play action type 'Target': it is a select-entity action .*"
                                          r"plays Enum action types"):
        kb.act(ship_obs(), Steer, Target)


class Heading(Enum):
    NORTH = 0
    SOUTH = 1
    WEST = 2
    EAST = 3


class Look(Enum):
    UP = 0
    DOWN = 1
    LEFT = 2
    RIGHT = 3


class Tool(Enum):
    HAMMER = 0
    SAW = 1
    DRILL = 2


class Fire(Enum):
    NO = 0
    YES = 1


def test_key_maps_derived_from_labels(display):
    km = build_keymap((Heading, Look, Tool, Fire))
    assert km.legend() == [
        "Heading: up NORTH, down SOUTH, left WEST, right EAST",  # two direction types: arrows ...
        "Look: w UP, s DOWN, a LEFT, d RIGHT",  # ... and WASD
        "Tool: 1 HAMMER, 2 SAW, 3 DRILL",  # numbers otherwise
        "Fire: space YES; no key: NO",  # YES in a type named like firing
    ]
    assert not km.directions_only and build_keymap((Heading,)).directions_only
    assert build_keymap((Tool,), "arrows").legend() == ["Tool: [1] HAMMER, [2] SAW, [3] DRILL"]


def test_user_key_maps_override_and_their_errors(display):
    kb = KeyboardAgent({"FIRE": "f", "Steer.LEFT": ["K_j", "left"]}, wait=False)
    assert kb.key_legend(Steer, Trigger) == ["Steer: j/left LEFT, right/d RIGHT; no key: NONE", "Trigger: f FIRE; no key: NONE"]
    tap(pygame.K_SPACE)
    assert kb.act(ship_obs(), Steer, Trigger) == (Steer.NONE, Trigger.NONE)  # SPACE no longer fires
    tap(pygame.K_f, pygame.K_j)
    assert kb.act(ship_obs(), Steer, Trigger) == (Steer.LEFT, Trigger.FIRE)
    with pytest.raises(ConfigError, match=r"\['SHOOT'\] are not members of the game's action Steer, Trigger"):
        KeyboardAgent({"SHOOT": "f"}, wait=False).act(ship_obs(), Steer, Trigger)
    with pytest.raises(ConfigError, match="unknown pygame key name 'nope'"):
        KeyboardAgent({"FIRE": "nope"})
    with pytest.raises(ConfigError, match=r"'K_j' is mapped to both LEFT and RIGHT of action type Steer"):
        KeyboardAgent({"LEFT": "K_j", "RIGHT": "K_j"}, wait=False).act(ship_obs(), Steer, Trigger)
    with pytest.raises(ConfigError, match=r"label 'NONE' belongs to several action types \(Steer, Trigger\); "
                                          r"qualify it, e.g. 'Steer.NONE'"):
        KeyboardAgent({"NONE": "K_x"}, wait=False).act(ship_obs(), Steer, Trigger)
    with pytest.raises(ConfigError, match="must map to a pygame key name or a list of them"):
        KeyboardAgent({"FIRE": 3})
    with pytest.raises(ConfigError, match="must be one of"):
        KeyboardAgent(keys="numpad")
    with pytest.raises(ConfigError, match="maps the keys of one human"):
        play(shooter, ["human", "human"], keys={"FIRE": "f"})


def test_keys_held_across_an_episode_end_count_once_pressed_again(display):
    kb = KeyboardAgent(wait=False)
    down(pygame.K_LEFT)
    assert kb.act(ship_obs(), Steer, Trigger)[0] is Steer.LEFT
    kb.game_over(ship_obs())
    assert kb.act(ship_obs(), Steer, Trigger)[0] is Steer.NONE
    down(pygame.K_LEFT)
    assert kb.act(ship_obs(), Steer, Trigger)[0] is Steer.LEFT
    up(pygame.K_LEFT)


def test_the_keyboard_reads_only_key_events_from_a_games_own_window(display):
    pygame.display.set_mode((64, 64))  # the game's window, not a gymloop viewer's
    kb = KeyboardAgent(wait=False)
    pygame.event.post(pygame.event.Event(pygame.USEREVENT, code=7))
    down(pygame.K_RIGHT)
    assert kb.act(ship_obs(), Steer, Trigger)[0] is Steer.RIGHT
    assert [e.code for e in pygame.event.get(pygame.USEREVENT)] == [7]  # the game's own event is still queued
    up(pygame.K_RIGHT)
    pygame.event.post(pygame.event.Event(pygame.QUIT))
    with pytest.raises(PlayerQuit, match="window closed"):
        kb.act(ship_obs(), Steer, Trigger)
    assert pygame.event.peek(pygame.QUIT)  # left for the game too


@dataclass
class Dot:
    x: int
    y: int


def test_a_global_decision_gets_one_choice(display):
    @gl.global_decision
    class Mode(Enum):
        CALM = 0
        RUSH = 1

    kb = KeyboardAgent(wait=False)
    tap(pygame.K_2)
    two = gl.Obs().actors([Dot(0, 0), Dot(1, 1)])
    assert kb.act(two, Look, Mode) == ([Look.UP, Look.UP], Mode.RUSH)


def test_cli_play_keys_option(display, capsys):
    assert parse_keys(["FIRE=f", "Steer.LEFT=j,left"]) == {"FIRE": ["f"], "Steer.LEFT": ["j", "left"]}
    tap(pygame.K_f)  # the first key press starts the episode
    assert main(["play", "support.pixel_game:shooter", "--keys", "FIRE=f", "--fps", "0", "--max-steps", "3"]) == 0
    assert "3 decisions" in capsys.readouterr().out
    assert main(["play", "support.pixel_game:shooter", "--keys", "FIRE"]) == 2
    assert "--keys takes LABEL=KEY" in capsys.readouterr().err
