"""Files written before the architecture refactor still load, compute the same and replay bit-exactly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import gymloop as gl
from gymloop.games.duel import duel
from gymloop.games.snake import snake
from gymloop.games.tactics import tactics

LEGACY = Path(__file__).parent / "fixtures" / "legacy"
GAMES = {"snake": (snake, 1), "tactics": (tactics, 1), "duel": (duel, 2)}
EXPECTED = json.loads((LEGACY / "expected.json").read_text())


@pytest.mark.parametrize("name", sorted(GAMES))
def test_old_checkpoint_gives_the_old_outputs(name):
    agent = gl.load(LEGACY / f"{name}.safetensors")
    trace = gl.load_trace(LEGACY / f"{name}.trace.safetensors")
    out = agent.policy.forward(agent.policy.pack(trace.batch))
    want = np.load(LEGACY / f"{name}.outputs.npz")
    np.testing.assert_allclose(out.value, want["value"], rtol=0, atol=1e-6)
    for k, v in out.logp.items():
        got, ref = v, want[f"logp/{k}"]
        assert got.shape == ref.shape, k
        assert np.array_equal(np.isneginf(got), np.isneginf(ref)), k
        fin = np.isfinite(ref)
        np.testing.assert_allclose(got[fin], ref[fin], rtol=0, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("name", sorted(GAMES))
def test_old_trace_replays_bit_exactly_and_is_recorded_again_identically(name):
    path = LEGACY / f"{name}.trace.safetensors"
    trace = gl.load_trace(path)
    assert trace.num_decisions == EXPECTED[name]["decisions"]
    assert len(trace.episodes) == EXPECTED[name]["episodes"]
    result = gl.replay(path)  # every recorded choice is checked against the live masks
    assert [e.score for e in result.episodes] == [e.score for e in trace.episodes]
    # the same agents on the same seed record the same trace, array for array
    game, seats = GAMES[name]
    agents = [gl.load(LEGACY / f"{name}.safetensors", seed=i + 1) for i in range(seats)]
    again = gl.record_trace(game, agents if seats > 1 else agents[0], seed=7, max_steps=trace.num_decisions)
    for field in ("entities", "counts", "actor_slot", "actor_index", "masks", "num_candidates"):
        a, b = getattr(again.batch, field), getattr(trace.batch, field)
        assert a.keys() == b.keys(), field
        for k in a:
            assert np.array_equal(a[k], b[k]), (field, k)
    for k in trace.actions:
        assert np.array_equal(again.actions[k], trace.actions[k]), k
