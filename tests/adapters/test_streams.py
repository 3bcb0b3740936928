"""Per-copy streams of the global random / numpy.random generators (gymloop.adapters._streams)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gymloop.adapters import _streams
from gymloop.adapters._streams import Streams, fast_path


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


@pytest.fixture(params=[True, False], ids=["fast", "seeded"])
def fast(request):
    if request.param and not fast_path():
        pytest.skip("no fast path on this interpreter")
    return request.param


def test_this_interpreter_has_the_fast_path():
    """CI runs CPython with numpy's MT19937 global generator: the states move in and out, nothing is reseeded per call."""
    assert fast_path() is True
    assert Streams().fast and not Streams(fast=False).fast


def play(fast: bool, script: list[tuple[int, str, int | None]], copies: int) -> dict[int, list]:
    """Run ``(copy, call, seed)`` steps (a seed starts an episode) with the caller drawing in between; each copy's results."""
    streams = [Streams(fast=fast) for _ in range(copies)]
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
    fast_ = data.draw(st.booleans(), "fast") and fast_path()
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
    alone = play(fast_, mine, 3)[0]
    assert play(fast_, script, 3)[0] == alone


def test_the_same_seed_gives_the_same_episode_in_another_copy(fast):
    a, b = Streams(fast=fast), Streams(fast=fast)
    first = [a.call(draw_all, seed=42)] + [a.call(draw_all) for _ in range(3)]
    b.call(draw_all, seed=7)
    b.call(draw_all)
    assert [b.call(draw_all, seed=42)] + [b.call(draw_all) for _ in range(3)] == first
    assert a.call(draw_all, seed=43) != first[0]  # another seed, another stream


def test_the_callers_generators_are_left_as_they_were():
    """The fast path takes the copies' states out again: the caller's draws, normal deviates included (every second one
    comes from a cache), go on as if no copy had run."""
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


def test_replaced_global_generators_turn_to_seeding_per_call():
    """After ``np.random.set_bit_generator`` the viewed memory is not the global generator's: seeded per call instead."""
    if not fast_path():
        pytest.skip("no fast path on this interpreter")
    original = np.random.mtrand._rand._bit_generator
    a, s = Streams(), Streams(fast=False)
    a.call(draw_all, seed=3)
    s.call(draw_all, seed=3)
    try:
        np.random.set_bit_generator(np.random.MT19937(123))
        assert a.fast and a.call(draw_all) == s.call(draw_all)  # (the slow path's numbers for the second call)
    finally:
        np.random.set_bit_generator(original)
    assert a.call(draw_all) != s.call(draw_all)  # back on the fast path: its own stream


def test_the_step_alarm_waits_while_states_move():
    """A signal in :meth:`Streams.call`'s own frame (moving states) must not raise; in the copy's call it may."""
    import sys

    from gymloop.adapters._streams import in_bookkeeping

    seen = {}

    def game():
        seen["game"] = in_bookkeeping(sys._getframe(0))
        seen["call"] = in_bookkeeping(sys._getframe(1))

    Streams().call(game, seed=1)
    assert seen == {"game": False, "call": True}


def test_a_normal_deviate_cached_by_the_caller_does_not_reach_a_copy(fast):
    """numpy's legacy generator caches every second normal deviate outside its state: a copy never starts a call with it."""
    s = Streams(fast=fast)
    s.call(draw_all, seed=3)
    clean = s.call(CALLS["normals"])
    s2 = Streams(fast=fast)
    s2.call(draw_all, seed=3)
    np.random.normal(), random.gauss(0, 1)  # the caller leaves a cached deviate in each generator
    assert s2.call(CALLS["normals"]) == clean


def test_a_call_that_raises_keeps_its_draws_and_restores_the_caller():
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


def test_before_its_first_episode_a_copy_draws_from_the_generators_as_they_are(fast):
    random.seed(11)
    np.random.seed(11)
    expected = draw_uniform()
    random.seed(11)
    np.random.seed(11)
    assert Streams(fast=fast).call(draw_uniform) == expected


def test_without_the_memory_layout_the_copies_are_seeded_per_call(monkeypatch):
    """An interpreter whose ``random`` state is not laid out as CPython's: no fast path, the same isolation by seeding."""
    monkeypatch.setattr(_streams, "_FAST", [])
    monkeypatch.setattr(_streams, "_py_layout_ok", lambda: False)
    assert fast_path() is False
    s = Streams()
    assert not s.fast
    first = s.call(draw_all, seed=4)
    assert Streams().call(draw_all, seed=4) == first
    monkeypatch.setattr(_streams, "_FAST", [])
    monkeypatch.setattr(_streams, "_py_layout_ok", lambda: True)
    monkeypatch.setattr(_streams, "_np_view", lambda rs: None)  # numpy's global generator not an MT19937
    assert fast_path() is False


def test_the_layout_checks_pass_and_read_the_states():
    assert _streams._py_layout_ok() and _streams._np_layout_ok()
    r = random.Random(3)
    view = _streams._py_view(r)
    assert view is not None and int.from_bytes(view[:4], "little") == r.getstate()[1][624]
    assert _streams._py_view(object()) is None  # type: ignore[arg-type]  # (not a random.Random)


def test_a_pickled_copy_goes_on_with_its_streams(fast):
    import pickle

    a = Streams(fast=fast)
    a.call(draw_all, seed=8)
    b = pickle.loads(pickle.dumps(a))
    assert b.fast == a.fast
    assert [b.call(draw_all) for _ in range(3)] == [a.call(draw_all) for _ in range(3)]


def test_unpickled_without_the_fast_path_a_copy_goes_on_seeding_by_call_number(monkeypatch):
    import pickle

    a, s = Streams(), Streams(fast=False)
    for copy in (a, s):
        copy.call(draw_all, seed=8)
        copy.call(draw_all)
    blob = pickle.dumps(a)
    monkeypatch.setattr(_streams, "_FAST", [None])
    b = pickle.loads(blob)
    assert not b.fast and b.call(draw_all) == s.call(draw_all)  # the third call's seeding, not the first's again


def test_an_episodes_first_call_draws_the_same_numbers_on_both_paths():
    """Both paths seed an episode's first call alike: a game drawing only then plays the same episodes on either."""
    for seed in (0, 1, 2**40 + 7):
        assert Streams(fast=True).call(draw_all, seed=seed) == Streams(fast=False).call(draw_all, seed=seed)


def test_without_seeding_equal_to_the_public_one_there_is_no_fast_path(monkeypatch):
    """The fast path seeds through C methods without their Python wrappers; where they would leave other states than
    ``random.seed``/``np.random.seed`` (another interpreter's internals), it is not taken."""
    monkeypatch.setattr(_streams, "_FAST", [])
    monkeypatch.setattr(_streams, "_c_seed", lambda: lambda r, x: random.Random.seed(r, x + 1))
    assert not _streams.fast_path() and not Streams().fast


def play_held(fast: bool, script: list[tuple[int, str, int | None]], copies: int, blocks: list[tuple[int, int]]) -> tuple[dict[int, list], list]:
    """:func:`play` with the steps from ``start`` to ``end`` of each block inside :func:`held` (the caller's draws there
    through :func:`as_caller`); each copy's results and the caller's."""
    from gymloop.adapters._streams import as_caller, held

    streams = [Streams(fast=fast) for _ in range(copies)]
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
    held(): every copy's results and (on the fast path) the caller's draws are those of the same script without held()."""
    fast_ = data.draw(st.booleans(), "fast") and fast_path()
    script = data.draw(st.lists(st.tuples(st.sampled_from([-1, 0, 1, 2]), st.sampled_from(sorted(CALLS)),
                                          st.one_of(st.none(), st.integers(0, 2**40))), min_size=1, max_size=30), "script")
    if not fast_:  # (seeded per call, a copy without an episode yet draws from whatever the last seeding left)
        started: set[int] = set()
        kept = []
        for copy, call, seed in script:
            if copy >= 0 and seed is None and copy not in started:
                continue
            if copy >= 0:
                started.add(copy)
            kept.append((copy, call, seed))
        script = kept or [(-1, "all", None)]
    bounds = sorted(data.draw(st.lists(st.integers(0, len(script)), max_size=6), "block bounds"))
    blocks = list(zip(bounds[::2], bounds[1::2]))
    random.seed(17)
    np.random.seed(17)
    expected = play_held(fast_, script, 3, [])
    after = draw_all()
    random.seed(17)
    np.random.seed(17)
    got = play_held(fast_, script, 3, blocks)
    assert got[0] == expected[0]
    if fast_:  # (seeded per call, the caller's generators are left seeded by a copy's call outside held(), put back inside)
        assert got[1] == expected[1]
        assert draw_all() == after  # the caller's generators as they were without held()


def test_held_puts_the_callers_states_back_however_it_ends_and_only_when_the_outermost_ends():
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
    """``random``'s state with copy ``s``'s states loaded (what the generators hold right after its call inside held())."""
    r = random.Random()
    view = _streams._py_view(r)
    assert view is not None
    view[:] = s._py
    return r.getstate()[:2] + (s._gauss,)


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


def test_the_step_alarm_waits_while_held_moves_states():
    import sys

    from gymloop.adapters._streams import _Views, as_caller, held, in_bookkeeping

    seen = []
    real = _Views.take_out

    def take_out(self):
        seen.append(in_bookkeeping(sys._getframe(1)))  # the frame that moves the states (held's, as_caller's)
        return real(self)

    _Views.take_out = take_out  # type: ignore[method-assign]
    try:
        with held():
            as_caller(lambda: seen.append(in_bookkeeping(sys._getframe(0))))  # the caller's own code: may raise
    finally:
        _Views.take_out = real  # type: ignore[method-assign]
    assert seen == [True, False, True]
