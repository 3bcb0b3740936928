"""Copies of a game must not change one another: gl.check runs them alone and among others."""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

import pytest

import gymloop as gl
from gymloop.copies import AGAIN, compare_copies


class Fire(Enum):
    WAIT = 0
    SHOOT = 1


@dataclass(slots=True)
class Gun:
    x: int


@dataclass
class Shot:
    x: int
    y: int
    live: ClassVar[list[Shot]] = []  # the class-level container: every copy adds to the same list


def _shooter(shots_of: Any) -> Any:
    """A game: the gun shoots (at most two shots in the air), shots rise and vanish at y = 5."""

    @gl.game(entities=[Gun, Shot], actions=[Fire])
    def shooter(agent: gl.Agent, seed: int) -> None:
        rng = random.Random(seed)
        shots = shots_of()
        score = 0
        while True:
            gun = Gun(rng.randrange(10))
            for _ in range(30):
                obs = gl.Obs(score=score).entities(list(shots)).actor(gun)
                if agent.act(obs, Fire) is Fire.SHOOT and len(shots) < 2:
                    shots.append(Shot(gun.x, 0))
                for s in list(shots):
                    s.y += 1
                    if s.y >= 5:
                        shots.remove(s)
                        score += 1
            agent.game_over(gl.Obs(score=score))
            shots.clear()

    return shooter


shared_shooter = _shooter(lambda: Shot.live)
own_shooter = _shooter(list)


def _tidy_shooter() -> Any:
    """The shared-container game that empties the container when it is closed: each run alone
    repeats itself, so only copies running together differ."""
    inner = _shooter(lambda: Shot.live)

    @gl.game(entities=[Gun, Shot], actions=[Fire])
    def tidy(agent: gl.Agent, seed: int) -> None:
        try:
            inner(agent, seed)
        finally:
            Shot.live.clear()

    return tidy


def test_copies_sharing_a_class_level_container_fail_the_check_naming_copy_call_and_cause() -> None:
    Shot.live.clear()
    with pytest.raises(gl.CheckError, match=r"copy \d+ \(seed \d+\) does not observe the same .* at its call \d+, "
                       r"entity type 'Shot'.*class-level container"):
        gl.check(shared_shooter, steps=200)


def test_copies_sharing_a_container_that_is_emptied_at_close_differ_among_copies() -> None:
    Shot.live.clear()
    diff = compare_copies(_tidy_shooter(), seed=0, num_copies=4, steps=60)
    assert diff is not None
    assert diff.arrangement == "among 4 copies"
    with pytest.raises(gl.CheckError, match=r"observes something else among 4 copies than alone: at its call \d+, "
                       r"(entity type 'Shot': \d object\(s\)|the score is \d+) alone and \d+ here"):
        gl.check(_tidy_shooter(), steps=200)


def test_the_same_game_with_its_own_container_passes() -> None:
    report = gl.check(own_shooter, steps=200)
    assert any("copies independent" in c for c in report.checks)


def test_a_module_global_counter_is_found_among_copies() -> None:
    ticks = [0]

    @dataclass(slots=True)
    class Clock:
        t: int

    @gl.game(entities=[Clock], actions=[Fire])
    def clocked(agent: gl.Agent, seed: int) -> None:
        while True:
            ticks[0] += 1  # module-level state: it counts every copy's steps
            agent.act(gl.Obs().actor(Clock(ticks[0] % 1000)), Fire)

    diff = compare_copies(clocked, seed=0, num_copies=3, steps=20)
    assert diff is not None
    assert "feature 't'" in diff.what
    # the first arrangement after "alone" already differs: a second run alone continues the count
    assert diff.arrangement == AGAIN
    assert "the first time and" in diff.what
    assert diff.message(7).startswith("copy 0 (seed 7) does not observe the same in a second run alone")


def test_an_unseeded_generator_is_found() -> None:
    @gl.game(entities=[Gun], actions=[Fire])
    def unseeded(agent: gl.Agent, seed: int) -> None:
        while True:
            agent.act(gl.Obs().actor(Gun(random.randrange(1000))), Fire)  # not from the seed

    diff = compare_copies(unseeded, seed=3, num_copies=2, steps=10)
    assert diff is not None and diff.copy == 0 and diff.call == 0
    assert "random generator not made from the game's seed" in diff.message(0)


def test_a_score_difference_and_a_count_difference_are_named() -> None:
    Shot.live.clear()
    diff = compare_copies(shared_shooter, seed=1, num_copies=4, steps=60)
    assert diff is not None
    assert diff.arrangement.startswith(("among 4 copies", AGAIN, "beside one other copy"))
    assert ("object(s) alone" in diff.what) or ("score is" in diff.what) or ("feature" in diff.what)


def test_two_player_games_compare_each_seat() -> None:
    from gymloop.games.duel import duel

    assert compare_copies(duel, seed=0, num_copies=3, steps=60, agents_per_game=2) is None


def test_a_game_that_raises_closes_the_other_copies() -> None:
    closed: list[int] = []

    @gl.game(entities=[Gun], actions=[Fire])
    def fragile(agent: gl.Agent, seed: int) -> None:
        try:
            for i in range(100):
                if seed % 2 and i == 5:
                    raise RuntimeError("boom")
                agent.act(gl.Obs().actor(Gun(i)), Fire)
        finally:
            closed.append(seed)

    with pytest.raises(RuntimeError, match="boom"):
        compare_copies(fragile, seed=0, num_copies=6, steps=50)


pygame = pytest.importorskip("pygame")


class PgShot(pygame.sprite.Sprite):
    """A pygame sprite as an entity; ``containers`` is set per game below, as pygame's examples do."""

    containers: ClassVar[Any] = ()

    def __init__(self, x: int) -> None:
        super().__init__(self.containers)
        self.rect = pygame.Rect(x, 0, 2, 2)

    @property
    def x(self) -> int:
        return int(self.rect.x)

    @property
    def y(self) -> int:
        return int(self.rect.y)


gl.entity(features={"x": int, "y": int})(PgShot)


def _pygame_shooter(per_copy: bool) -> Any:
    module_group = pygame.sprite.Group()

    @gl.game(entities=[Gun, PgShot], actions=[Fire])
    def aliens_like(agent: gl.Agent, seed: int) -> None:
        rng = random.Random(seed)
        shots = pygame.sprite.Group() if per_copy else module_group
        score = 0
        while True:
            gun = Gun(rng.randrange(100))
            if agent.act(gl.Obs(score=score).entities(shots.sprites()).actor(gun), Fire) is Fire.SHOOT and len(shots) < 2:
                if per_copy:
                    shots.add(PgShot(gun.x))
                else:
                    PgShot.containers = module_group  # pygame's idiom: the class adds itself to its groups
                    PgShot(gun.x)
            for s in shots.sprites():
                s.rect.y += 10
                if s.rect.y > 40:
                    s.kill()
                    score += 1

    return aliens_like


def test_pygame_sprite_groups_shared_through_containers_fail_the_check() -> None:
    with pytest.raises(gl.CheckError, match="entity type 'PgShot'.*Sprite.containers"):
        gl.check(_pygame_shooter(per_copy=False), steps=200)


def test_pygame_sprite_groups_made_per_copy_pass() -> None:
    PgShot.containers = ()
    gl.check(_pygame_shooter(per_copy=True), steps=200)
