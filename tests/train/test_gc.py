"""The garbage collector while a run trains: frozen and collected less often inside the run, as before after it."""

from __future__ import annotations

import gc

import pytest
from support import train_games as tg
from support.train_games import tiny

import gymloop as gl
from gymloop._gc import YOUNG_THRESHOLD, tuned_collector
from gymloop.train import Trainer


@pytest.fixture
def clean_collector():
    """The collector as CPython starts it (and as it was, after the test)."""
    was = gc.get_threshold(), gc.isenabled(), gc.get_freeze_count()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    gc.enable()
    yield
    gc.set_threshold(*was[0])
    (gc.enable if was[1] else gc.disable)()
    if was[2]:
        gc.freeze()


def state():
    return gc.get_threshold(), gc.get_freeze_count() > 0


def test_inside_the_objects_are_frozen_and_the_young_collected_less_often_then_put_back(clean_collector):
    with tuned_collector():
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10) and gc.get_freeze_count() > 0
        with tuned_collector():  # (nested: nothing more, and the inner end puts nothing back)
            pass
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10) and gc.get_freeze_count() > 0
    assert state() == ((700, 10, 10), False)


def test_an_exception_puts_the_collector_back(clean_collector):
    with pytest.raises(RuntimeError, match="boom"), tuned_collector():
        raise RuntimeError("boom")
    assert state() == ((700, 10, 10), False)


def test_off_disabled_or_already_higher_it_changes_nothing_it_should_not(clean_collector):
    with tuned_collector(enabled=False):
        assert state() == ((700, 10, 10), False)
    gc.disable()
    with tuned_collector():
        assert state() == ((700, 10, 10), False)
    gc.enable()
    gc.set_threshold(50_000, 5, 5)
    with tuned_collector():
        assert gc.get_threshold() == (50_000, 5, 5)  # (a caller's higher threshold is kept)
    assert gc.get_threshold() == (50_000, 5, 5)


def test_objects_the_caller_froze_stay_frozen(clean_collector):
    gc.freeze()
    frozen = gc.get_freeze_count()
    with tuned_collector():
        assert gc.get_freeze_count() > frozen // 2
    # (frozen objects that die meanwhile leave the count, a few at most; an unfreeze would empty it)
    assert gc.get_freeze_count() > frozen // 2 > 0


def test_cycles_made_inside_are_still_collected(clean_collector):
    import weakref

    class Node:
        pass

    with tuned_collector():
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
        for _ in range(3 * YOUNG_THRESHOLD):  # (enough allocations of cycles to start a collection)
            x = Node()
            x.me = x
        del x
        assert alive() is None


def seen_by_the_game(thresholds: set, frozen: list):
    """A game that records the collector's thresholds, and once whether objects are frozen (a count walks them all),
    after each decision: while the run steps it."""
    def game(agent, seed):
        while True:
            agent.act(gl.Obs(score=0).actor(tg.Player(1.0)), tg.Arm)
            thresholds.add(gc.get_threshold())
            if not frozen:
                frozen.append(gc.get_freeze_count() > 0)
    return game


@pytest.mark.parametrize("tune", [True, False])
def test_a_run_trains_with_the_collector_tuned_unless_told_not_to(clean_collector, tune):
    thresholds: set = set()
    frozen: list = []
    cfg = tiny(512)
    cfg.tune_gc = tune
    Trainer(seen_by_the_game(thresholds, frozen), cfg).train()
    assert (thresholds, frozen) == (({(YOUNG_THRESHOLD, 10, 10)}, [True]) if tune else ({(700, 10, 10)}, [False]))
    assert state() == ((700, 10, 10), False)
