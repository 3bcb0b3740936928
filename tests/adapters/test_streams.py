"""Per-copy streams of the global random / numpy.random generators (gymloop.adapters._streams)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gymloop.adapters import _streams
from gymloop.adapters._streams import Streams


def draw_all() -> tuple:
    """What a game might draw in one call: uniform and normal deviates from both generators."""
    return (random.random(), random.gauss(0, 1), random.randint(0, 9), float(np.random.random()), float(np.random.normal()),
            np.random.randint(0, 9, size=3).tolist())


def draw_uniform() -> tuple:
    return random.random(), float(np.random.random())


def reseed_and_draw_a_normal() -> tuple:
    """Reseed both generators, then leave a normal deviate cached in each (states that recur, with a cache)."""
    random.seed(5)
    np.random.seed(5)
    return random.gauss(0, 1), float(np.random.normal())


CALLS = {"all": draw_all, "uniform": draw_uniform, "none": lambda: None, "normals": lambda: (random.gauss(0, 1), float(np.random.normal())),
         "reseed": reseed_and_draw_a_normal}


@pytest.fixture(params=[True, False], ids=["swapped", "reseeded"])
def swap(request, monkeypatch):
    """Both ways of giving a copy its numpy stream: its own bit generator swapped in (numpy 1.25+), or numpy's generator
    seeded before each call (older numpy, without ``set_bit_generator``)."""
    monkeypatch.setattr(_streams, "_SWAP", request.param)
    return request.param


def test_this_numpy_swaps_bit_generators():
    """CI's numpy has ``np.random.set_bit_generator``: a copy's numpy stream is a bit generator of its own."""
    assert _streams._SWAP is True


def play(script: list[tuple[int, str, int | None]], copies: int) -> dict[int, list]:
    """Run ``(copy, call, seed)`` steps (a seed starts an episode) with the caller drawing in between; each copy's results."""
    streams = [Streams() for _ in range(copies)]
    out: dict[int, list] = {c: [] for c in range(copies)}
    for copy, call, seed in script:
        if copy < 0:  # the caller's own draws between calls
            CALLS[call]()
            continue
        out[copy].append(streams[copy].call(CALLS[call], seed=seed))
    return out


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_a_copys_draws_depend_only_on_its_own_calls_and_seeds(data):
    """Copy 0's results are the same alone and interleaved with other copies and the caller's draws, whatever they draw."""
    _streams._SWAP = data.draw(st.booleans(), "swap")
    n = data.draw(st.integers(2, 12), "calls of copy 0")
    mine = [(0, data.draw(st.sampled_from(sorted(CALLS))), data.draw(st.integers(0, 2**40)) if i == 0 or data.draw(st.booleans()) else None)
            for i in range(n)]
    others = data.draw(st.lists(st.tuples(st.sampled_from([-1, 1, 2]), st.sampled_from(sorted(CALLS)), st.one_of(st.none(), st.integers(0, 99))),
                                max_size=30), "other calls")
    script: list = []
    for step in mine:  # the other calls spread between copy 0's
        k = data.draw(st.integers(0, len(others)))
        script += others[:k] + [step]
        others = others[k:]
    script += others
    try:
        alone = play(mine, 3)[0]
        assert play(script, 3)[0] == alone
    finally:
        _streams._SWAP = True


def test_the_same_seed_gives_the_same_episode_in_another_copy(swap):
    a, b = Streams(), Streams()
    first = [a.call(draw_all, seed=42)] + [a.call(draw_all) for _ in range(3)]
    b.call(draw_all, seed=7)
    b.call(draw_all)
    assert [b.call(draw_all, seed=42)] + [b.call(draw_all) for _ in range(3)] == first
    assert a.call(draw_all, seed=43) != first[0]  # another seed, another stream


def test_the_callers_generators_are_left_as_they_were(swap):
    """The copies' states are taken out again: the caller's draws, normal deviates included (every second one comes
    from a cache), go on as if no copy had run."""
    random.seed(5)
    np.random.seed(5)
    expected = [draw_all() for _ in range(6)]
    random.seed(5)
    np.random.seed(5)
    s = Streams()
    got = []
    for i in range(6):
        s.call(draw_all, seed=i if i % 3 == 0 else None)
        got.append(draw_all())
    assert got == expected


def test_a_cached_deviate_does_not_travel_with_a_state_that_recurs():
    """The caller puts back a saved numpy state with a normal deviate cached (as around an evaluation), or a game reseeds
    and leaves one cached: neither reaches another copy, nor the caller."""
    alone = Streams()
    alone.call(draw_all, seed=3)
    clean = alone.call(CALLS["normals"])
    np.random.normal()
    saved = np.random.get_state()  # (with a cached deviate)
    a, b = Streams(), Streams()
    b.call(draw_all, seed=3)
    a.call(draw_all, seed=9)
    np.random.set_state(saved)
    assert b.call(CALLS["normals"]) == clean
    game = Streams()
    game.call(reseed_and_draw_a_normal, seed=1)
    game.call(reseed_and_draw_a_normal)  # ends in the state it started from, a deviate cached
    np.random.set_state(saved)
    caller_next = float(np.random.normal())
    np.random.set_state(saved)
    game.call(reseed_and_draw_a_normal)
    assert float(np.random.normal()) == caller_next
    c = Streams()
    c.call(draw_all, seed=3)
    assert c.call(CALLS["normals"]) == clean


@pytest.mark.parametrize("kind", [np.random.MT19937, np.random.PCG64])
def test_a_global_generator_the_caller_replaced_is_the_callers(kind):
    """After ``np.random.set_bit_generator`` (an MT19937 or another kind) the new bit generator is the caller's: put back
    after each call, its stream untouched; the copies go on with their own streams."""
    original = np.random.get_bit_generator()
    a, s = Streams(), Streams()
    a.call(draw_all, seed=3)
    s.call(draw_all, seed=3)
    try:
        np.random.set_bit_generator(kind(123))
        expected = [float(np.random.random()) for _ in range(3)]
        np.random.set_bit_generator(kind(123))
        mine = np.random.get_bit_generator()
        got = []
        for _ in range(3):
            assert a.call(draw_all) != a.call(draw_all)  # (the copy's own stream goes on)
            assert np.random.get_bit_generator() is mine
            got.append(float(np.random.random()))
        assert got == expected
    finally:
        np.random.set_bit_generator(original)
    for _ in range(6):
        s.call(draw_all)
    assert a.call(draw_all) == s.call(draw_all)  # as the copy that never saw the replacement


@pytest.mark.parametrize("inside_held", [False, True], ids=["call", "as_caller in held"])
def test_the_step_alarm_waits_while_states_move(monkeypatch, inside_held):
    """A deadline that passes while the caller's states are taken out or put back raises nothing there (an alarm-deferred
    section): the game's own loop is interrupted, and the caller gets its states back."""
    import time

    from gymloop.adapters._streams import as_caller, held
    from gymloop.runtime.alarm import StepAlarm, StepTimeout

    class Owner:  # as an executor: raise in the game's own code only (elsewhere the handler looks again 5 ms later)
        def alarm_may_raise(self, frame):
            return frame.f_code.co_name == "game"

    slow = {"on": False}
    real_getstate, real_setstate = random.getstate, random.setstate

    def getstate():
        if slow["on"]:
            time.sleep(0.03)  # (the alarm fires in here: the sleep goes on after the handler returns)
        return real_getstate()

    def setstate(state):
        if slow["on"]:
            time.sleep(0.03)
        real_setstate(state)

    monkeypatch.setattr(random, "getstate", getstate)
    monkeypatch.setattr(random, "setstate", setstate)
    random.seed(8)
    np.random.seed(8)
    expected = draw_all()
    random.seed(8)
    np.random.seed(8)
    copy, games = Streams(), []

    def game():
        games.append(1)
        while True:
            pass

    alarm = StepAlarm(Owner(), 0.01)
    try:
        if inside_held:
            with held():
                copy.call(draw_all, seed=1)  # (takes the caller's states out)
                slow["on"] = True
                token = alarm.arm()
                try:
                    with pytest.raises(StepTimeout):
                        as_caller(game)  # puts them back, slowly, then loops
                finally:
                    alarm.disarm(token)
        else:
            slow["on"] = True
            token = alarm.arm()
            try:
                with pytest.raises(StepTimeout):
                    copy.call(game, seed=1)  # takes them out and puts them back, slowly, around the loop
            finally:
                alarm.disarm(token)
    finally:
        slow["on"] = False
        alarm.release()
    assert games == [1]  # the game ran, and its loop was interrupted
    assert draw_all() == expected


def test_a_normal_deviate_cached_by_the_caller_does_not_reach_a_copy(swap):
    """numpy's legacy generator caches every second normal deviate outside its state: a copy never starts a call with it."""
    s = Streams()
    s.call(draw_all, seed=3)
    clean = s.call(CALLS["normals"])
    s2 = Streams()
    s2.call(draw_all, seed=3)
    np.random.normal(), random.gauss(0, 1)  # the caller leaves a cached deviate in each generator
    assert s2.call(CALLS["normals"]) == clean


def test_a_call_that_raises_keeps_its_draws_and_restores_the_caller(swap):
    def boom():
        random.random()
        np.random.random()
        raise KeyError("boom")

    random.seed(9)
    np.random.seed(9)
    expected = draw_uniform()
    random.seed(9)
    np.random.seed(9)
    a, b = Streams(), Streams()
    a.call(draw_all, seed=1)
    with pytest.raises(KeyError, match="boom"):
        a.call(boom)
    assert draw_uniform() == expected
    b.call(draw_all, seed=1)
    b.call(draw_uniform)  # what boom drew before raising
    assert a.call(draw_all) == b.call(draw_all)


def test_before_its_first_episode_a_copy_draws_from_the_generators_as_they_are(swap):
    random.seed(11)
    np.random.seed(11)
    expected = draw_uniform()
    random.seed(11)
    np.random.seed(11)
    assert Streams().call(draw_uniform) == expected


def test_without_set_bit_generator_numpy_is_seeded_per_call(monkeypatch):
    """numpy older than 1.25: a copy's numpy stream is numpy's generator seeded before each call, the same isolation."""
    monkeypatch.setattr(_streams, "_SWAP", False)
    s = Streams()
    first = s.call(draw_all, seed=4)
    assert Streams().call(draw_all, seed=4) == first
    second = s.call(draw_all)
    x = _streams._mix(4, 2)
    np.random.seed(x & 0xFFFFFFFF)
    assert second[3] == float(np.random.random())  # (the second call's seed)


def test_a_pickled_copy_goes_on_with_its_streams(swap):
    import pickle

    a = Streams()
    a.call(draw_all, seed=8)
    b = pickle.loads(pickle.dumps(a))
    assert [b.call(draw_all) for _ in range(3)] == [a.call(draw_all) for _ in range(3)]


def test_unpickled_a_copy_goes_on_seeding_by_call_number(swap):
    import pickle

    a, s = Streams(), Streams()
    for copy in (a, s):
        copy.call(draw_all, seed=8)
        copy.call(draw_all)
    b = pickle.loads(pickle.dumps(a))
    assert b.call(draw_all) == s.call(draw_all)  # the third call's seeding, not the first's again


def test_an_episodes_first_call_draws_the_same_numbers_on_both_paths(monkeypatch):
    """An episode's first call starts the generators as ``random.seed(x)`` and ``np.random.seed(x & 0xFFFFFFFF)`` do (x
    mixed from the seed), with either numpy path: a game drawing only then plays the same episodes."""
    for seed in (0, 1, 2**40 + 7):
        x = _streams._mix(seed, 1)
        random.seed(x)
        np.random.seed(x & 0xFFFFFFFF)
        expected = draw_all()
        monkeypatch.setattr(_streams, "_SWAP", True)
        assert Streams().call(draw_all, seed=seed) == expected
        monkeypatch.setattr(_streams, "_SWAP", False)
        assert Streams().call(draw_all, seed=seed) == expected


def play_held(script: list[tuple[int, str, int | None]], copies: int, blocks: list[tuple[int, int]]) -> tuple[dict[int, list], list]:
    """:func:`play` with the steps from ``start`` to ``end`` of each block inside :func:`held` (the caller's draws there
    through :func:`as_caller`); each copy's results and the caller's."""
    from gymloop.adapters._streams import as_caller, held

    streams = [Streams() for _ in range(copies)]
    out: dict[int, list] = {c: [] for c in range(copies)}
    caller: list = []
    inside = {i for start, end in blocks for i in range(start, end)}
    i = 0
    while i < len(script):
        if i in inside:
            j = i
            with held():
                while j in inside and j < len(script):
                    copy, call, seed = script[j]
                    if copy < 0:
                        caller.append(as_caller(CALLS[call]))
                    else:
                        out[copy].append(streams[copy].call(CALLS[call], seed=seed))
                    j += 1
            i = j
            continue
        copy, call, seed = script[i]
        if copy < 0:
            caller.append(CALLS[call]())
        else:
            out[copy].append(streams[copy].call(CALLS[call], seed=seed))
        i += 1
    return out, caller


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_inside_held_the_copies_and_the_caller_draw_what_they_drew_outside(data):
    """Any calls (copies with and without episodes yet, the caller's own draws through as_caller) in any blocks of
    held(): every copy's results and the caller's draws are those of the same script without held()."""
    _streams._SWAP = data.draw(st.booleans(), "swap")
    script = data.draw(st.lists(st.tuples(st.sampled_from([-1, 0, 1, 2]), st.sampled_from(sorted(CALLS)),
                                          st.one_of(st.none(), st.integers(0, 2**40))), min_size=1, max_size=30), "script")
    bounds = sorted(data.draw(st.lists(st.integers(0, len(script)), max_size=6), "block bounds"))
    blocks = list(zip(bounds[::2], bounds[1::2]))
    try:
        random.seed(17)
        np.random.seed(17)
        expected = play_held(script, 3, [])
        after = draw_all()
        random.seed(17)
        np.random.seed(17)
        got = play_held(script, 3, blocks)
        assert got[0] == expected[0]
        assert got[1] == expected[1]
        assert draw_all() == after  # the caller's generators as they were without held()
    finally:
        _streams._SWAP = True


def test_held_puts_the_callers_states_back_however_it_ends_and_only_when_the_outermost_ends(swap):
    from gymloop.adapters._streams import held

    random.seed(21)
    np.random.seed(21)
    np.random.normal()  # (the caller leaves a cached deviate in numpy's generator)
    expected = draw_all()
    random.seed(21)
    np.random.seed(21)
    np.random.normal()
    a, b = Streams(), Streams()
    with pytest.raises(KeyError, match="inner"):
        with held():
            a.call(draw_all, seed=1)
            with held():
                b.call(draw_all, seed=2)
            assert random.getstate() == _state_after(b), "the inner held() ended: the caller's states stay out"
            a.call(draw_all)
            raise KeyError("inner")
    assert draw_all() == expected


def _state_after(s: Streams) -> object:
    """``random``'s state right after copy ``s``'s last call (one ``draw_all``) inside held()."""
    r = random.Random(_streams._mix(s._seed, s._calls))
    r.random(), r.gauss(0, 1), r.randint(0, 9)
    return r.getstate()


def test_as_caller_draws_from_and_advances_the_callers_streams_inside_held():
    from gymloop.adapters._streams import as_caller, held

    random.seed(4)
    np.random.seed(4)
    first, second = draw_all(), draw_all()
    random.seed(4)
    np.random.seed(4)
    c = Streams()
    with held():
        c.call(draw_all, seed=5)
        assert as_caller(draw_all) == first
        c.call(draw_all)
    assert draw_all() == second


def test_the_executors_batch_scope_is_held():
    """The runtime enters :func:`held` around each batch through its registered batch scope (it names no adapter)."""
    from gymloop.adapters._streams import held
    from gymloop.runtime.scopes import batch_scope

    assert batch_scope() is held()
