"""The one-decision path (:mod:`gymloop.nn.single`) against the batched numpy pass, option by option.

``gl.load``'s agents decide through :func:`~gymloop.nn.single.logits_one`, whose common case (one
actor, a readout block) runs on tables folded at load time (:class:`~gymloop.nn.single.OneActorTables`).
Every network option must give the logits (within 1e-4, as ``tests/test_neural.py`` asks) and the
probabilities (within 1e-5) of :meth:`NumpyPolicy.forward` on the same observations:
relative positions with each value gate or none, full blocks before the readout, no readout,
masks, select-entity and global decisions, several actors, and the general path when the tables
are absent. (The torch parity of both paths is tested in ``tests/test_neural.py``.)
"""

from __future__ import annotations

import functools
import os
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")

from support.policies import game_policy, write_policy  # noqa: E402
from support.train_games import global_and_actor, masked, rovers, select, triage_masked  # noqa: E402

import gymloop as gl  # noqa: E402
from gymloop.games.snake import Body, Food, Head, Move, snake  # noqa: E402
from gymloop.games.tactics import tactics  # noqa: E402
from gymloop.neural import load  # noqa: E402
from gymloop.nn.config import NetConfig, RelposConfig  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py

CASES = [
    ("snake", snake, NetConfig()),
    ("snake-gelu", snake, NetConfig(relpos=RelposConfig(value_gate="gelu"))),
    ("snake-sigmoid", snake, NetConfig(relpos=RelposConfig(value_gate="sigmoid"))),
    ("snake-ungated", snake, NetConfig(relpos=RelposConfig(value_gate=None))),
    ("snake-no-relpos", snake, NetConfig(relpos=None)),
    ("snake-3-layers", snake, NetConfig(n_layer=3)),
    ("snake-no-readout", snake, NetConfig(readout=False, n_layer=2)),
    ("snake-3-heads", snake, NetConfig(d_model=24, n_head=3)),
    ("tactics", tactics, NetConfig()),
    ("masked", masked, NetConfig()),
    ("select", select, NetConfig()),
    ("global-and-actor", global_and_actor, NetConfig()),
    ("triage-masked", triage_masked, NetConfig()),
    ("rovers-frame", rovers, NetConfig()),
]


def _decisions(game, steps: int = 5, num_envs: int = 3):
    """(batch, [(obs, action types) per slot]) of a VecEnv playing randomly."""
    with gl.VecEnv(game, num_envs=num_envs, seed=3) as env:
        b = env.reset()
        for _ in range(steps):
            ex = env._state.backend.ex
            yield b, [(ex.pobs[s], ex.ptypes[s]) for s in range(env.num_slots)]
            b = env.step(env.sample_actions())


def _probs(lg: np.ndarray) -> np.ndarray:
    e = np.exp(lg - lg.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _check(agent, game) -> int:
    """Compare every slot's single-decision logits with the batched pass; the decisions compared."""
    npol = agent.policy
    n = 0
    for b, reqs in _decisions(game):
        out = npol.forward(npol.pack(b))
        pos = dict.fromkeys(npol.action_space, 0)
        for obs, types in reqs:
            logits = agent.logits(obs, *types)
            n_act = len(obs.actor_list)
            for t, lg in zip(types, logits):
                spec = gl.action_spec(t)
                o = pos[spec.name]
                rows = n_act if spec.kind.actor_bound else 1
                if spec.kind.selects_entities:
                    nc = lg.shape[1]
                    ref = out.logits[spec.name][o : o + rows * nc].reshape(rows, nc)
                    pos[spec.name] += rows * nc
                else:
                    ref = out.logits[spec.name][o : o + rows]
                    pos[spec.name] += rows
                assert lg.shape == ref.shape
                assert np.array_equal(np.isneginf(lg), np.isneginf(ref))
                fin = np.isfinite(ref)
                np.testing.assert_allclose(lg[fin], ref[fin], atol=1e-4, rtol=0, err_msg=spec.name)
                np.testing.assert_allclose(_probs(lg), _probs(ref), atol=1e-5, rtol=0, err_msg=spec.name)
                n += 1
    return n


@pytest.mark.parametrize("name, game, cfg", CASES, ids=[c[0] for c in CASES])
def test_one_decision_equals_the_batched_pass(tmp_path, name, game, cfg):
    path = tmp_path / f"{name}.safetensors"
    write_policy(path, game_policy(game, cfg))
    agent = load(path, seed=0)
    assert (agent.policy.one_actor is not None) == cfg.readout
    assert _check(agent, game) > 0


def test_without_the_folded_tables_the_general_path_gives_the_same(tmp_path):
    path = tmp_path / "snake.safetensors"
    write_policy(path, game_policy(snake))
    agent = load(path, seed=0)
    (obs, types), *_ = next(iter(_decisions(snake)))[1]
    fast = agent.logits(obs, *types)
    agent.policy.one_actor = None  # as when folding the weights overflows float32
    np.testing.assert_allclose(agent.logits(obs, *types)[0], fast[0], atol=1e-5, rtol=0)
    assert _check(agent, snake) > 0


def test_the_row_layouts_are_cached_and_read_only(tmp_path):
    path = tmp_path / "snake.safetensors"
    write_policy(path, game_policy(snake))
    agent = load(path, seed=0)
    for _, reqs in _decisions(snake, steps=3):
        for obs, types in reqs:
            agent.act(obs, *types)
    one = agent.policy.one_tables
    assert one.layouts
    for lay in one.layouts.values():
        arrays = [a for a in lay if isinstance(a, np.ndarray)]
        assert len(arrays) == 6 and not any(a.flags.writeable for a in arrays)


def test_the_means_stay_subtracted_when_they_are_too_far_to_fold(tmp_path, monkeypatch):
    """Features whose normalization mean lies far from 0 (in standard deviations) keep the
    subtraction: folded into the biases, the products in raw units would lose float32 digits."""
    from gymloop.nn import single

    pol = game_policy(snake)
    write_policy(tmp_path / "folded.safetensors", pol)
    assert load(tmp_path / "folded.safetensors", seed=0).policy.one_tables.fold_mean  # (snake's positions: a few sd)
    monkeypatch.setattr(single, "_MEAN_FOLD", 0.0)
    write_policy(tmp_path / "kept.safetensors", pol)
    agent = load(tmp_path / "kept.safetensors", seed=0)
    assert not agent.policy.one_tables.fold_mean
    assert _check(agent, snake) > 0


@functools.cache
def _snake_agent(gate: str | None = "relu"):
    path = os.path.join(tempfile.mkdtemp(), "snake.safetensors")
    write_policy(path, game_policy(snake, NetConfig(relpos=RelposConfig(value_gate=gate))))
    return load(path, seed=0)


def _batched(agent, obs):
    return agent._batched_logits([(agent, obs, Move)])[0][0][1]


_cell = st.one_of(st.integers(-15, 25), st.integers(-30, 50).map(lambda v: v / 2))  # beyond the extent; halves


@given(st.lists(st.tuples(_cell, _cell), max_size=80), st.lists(st.tuples(_cell, _cell), max_size=3),
       st.tuples(_cell, _cell), st.sampled_from(["relu", "gelu", None]))
@settings(max_examples=60, deadline=None)
def test_one_decision_of_any_shape_equals_the_batched_pass(body, food, head, gate):
    """Observations of 1 to 84 rows, positions within and beyond the relative positions' extent
    (clamped) and on half cells (rounded): the single decision gives the batched pass's logits,
    and the same logits, to the bit, every time it is asked."""
    agent = _snake_agent(gate)
    obs = gl.Obs().entities([Body(*c) for c in body]).entities([Food(*c) for c in food]).actor(Head(*head))
    ref = _batched(agent, obs)
    (computed,) = agent.logits(obs, Move)
    np.testing.assert_allclose(computed, ref, atol=1e-5, rtol=0)
    np.testing.assert_allclose(_probs(computed), _probs(ref), atol=1e-5, rtol=0)
    np.testing.assert_array_equal(agent.logits(obs, Move)[0], computed)
