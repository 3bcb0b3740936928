"""``benchmarks/cycles_blunders.py``: where a light-cycles rider loses (docs/training.md, "Self-play: cycles")."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

import gymloop as gl
from gymloop.games.suite.cycles import CyclesAgent

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def blunders(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.delitem(sys.modules, "cycles_blunders", raising=False)
    import cycles_blunders

    return cycles_blunders


def test_the_scripted_rider_never_blunders_and_a_random_one_does(blunders: ModuleType) -> None:
    scripted = blunders.play(lambda ep: CyclesAgent(seed=100 + ep), episodes=6, room=4, seed=0)
    assert sum(scripted["blunders"].values()) == 0 and sum(scripted["decisions"].values()) > 0
    rand = blunders.play(lambda ep: gl.RandomAgent(seed=ep), episodes=20, room=4, seed=0)
    assert rand["score"] < -0.5 and sum(rand["blunders"].values()) > 0
    assert sum(rand["causes"].values()) >= 15 and set(rand["causes"]) <= {
        f"{kind}{tag}" for kind in ("edge", "own", "opponent") for tag in ("", " (blunder)")}, rand["causes"]
