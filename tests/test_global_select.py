"""The global select-entity kind (issue 34 item 6): one observed entity chosen per observation with no actor
entity (a doctor, who is not an entity, choosing a patient), through the declaration, batches, workers,
``gl.run`` and the random agent, ``gl.check``, the neural agent (one observation and batched), traces,
behaviour cloning, the padded adapters and learning. The numpy/torch parity fuzz
(``tests/nn/test_numpy_policy.py``) and the ONNX parity cases (``tests/test_onnx_export.py``) cover it too.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import train_games as tg
from support.train_games import Patient, Treat, final_return, tiny

import gymloop as gl
from gymloop.kinds import GLOBAL_SELECT, KINDS, SELECT_ENTITY, kind_named


@dataclass
class Bed:
    ward: int


@dataclass
class Nurse:
    skill: float


# ---------------------------------------------------------------------- the declaration
def test_both_spellings_declare_the_kind_and_it_round_trips():
    assert KINDS["global_select_entity"] is GLOBAL_SELECT is kind_named("global_select_entity")
    assert GLOBAL_SELECT.selects_entities and not GLOBAL_SELECT.actor_bound
    spec = gl.action_spec(Treat)
    assert spec.kind is GLOBAL_SELECT and spec.among == (Patient,) and spec.desc.among == ("Patient",)
    same = gl.SelectEntity("Treat", among=Patient, global_decision=True)
    assert same == Treat and hash(same) == hash(Treat) and repr(same) == "SelectEntity('Treat', among=('Patient',), global_decision=True)"
    plain = gl.SelectEntity("Treat", among=Patient)
    assert plain != Treat and gl.action_spec(plain).kind is SELECT_ENTITY
    import pickle

    assert pickle.loads(pickle.dumps(Treat)) == Treat
    d = gl.ActionDesc("Treat", "global_select_entity", (), ("Patient",))
    assert d.describe() == "global select-entity among ['Patient']"
    assert gl.ActionDesc("Treat", **{k: v for k, v in d.to_json().items()}) == d
    with pytest.raises(gl.SchemaError, match=r"'Treat' is global_select_entity: it needs at least one candidate entity type"):
        gl.ActionDesc("Treat", "global_select_entity")
    with gl.VecEnv(tg.triage, num_envs=1) as env:
        env.reset()
        sp = env.spaces
    assert gl.Spaces.from_json(*sp.to_json()) == sp


def test_global_decision_on_a_select_entity_used_before_is_refused():
    late = gl.SelectEntity("Late", among=Bed)
    gl.action_spec(late)
    with pytest.raises(gl.SchemaError, match=r"apply it where the SelectEntity is made, before any use"):
        gl.global_decision(late)
    with pytest.raises(gl.SchemaError, match=r"applies to an Enum, a dataclass of Enums or a gl.SelectEntity"):
        gl.global_decision(Bed(1))


# ---------------------------------------------------------------------- batches
def test_batch_rows_candidates_and_masks():
    with gl.VecEnv(tg.triage_masked, num_envs=3, seed=0) as env:
        b = env.reset()
        assert env.action_space["Treat"].kind == "global_select_entity"
        assert b.actor_slot["Treat"].tolist() == [0, 1, 2] and b.actor_index["Treat"].tolist() == [-1, -1, -1]
        assert b.num_candidates["Treat"].tolist() == b.counts["Patient"].tolist()
        assert b.masks["Treat"].shape == (int(b.counts["Patient"].sum()),)
        awake = b.entities["Patient"][:, list(env.obs_space.entities["Patient"]).index("awake")] > 0.5
        assert np.array_equal(b.masks["Treat"], awake)  # the mask: the awake patients
        assert np.array_equal(b.candidate_index("Treat"), np.concatenate([np.arange(c) for c in b.counts["Patient"]]))
        bad = np.flatnonzero(~b.masks["Treat"][: b.counts["Patient"][0]])
        if bad.size:
            acts = env.sample_actions()
            acts["Treat"][0] = bad[0]
            with pytest.raises(gl.InvalidActionError, match=r"action type 'Treat', actor 0 \(env 0, slot 0\): .* masked out"):
                env.step(acts)
        for _ in range(20):
            b = env.step(env.sample_actions())  # the game asserts that the chosen patient is awake


def test_workers_give_the_same_batches():
    def run(workers):
        with gl.VecEnv(tg.triage_masked, num_envs=4, seed=5, workers=workers) as env:
            out = [env.reset()]
            for _ in range(6):
                out.append(env.step(env.sample_actions()))
            return out

    for a, b in zip(run(0), run(2)):
        assert a.equal(b)


def test_random_agent_run_and_check():
    r = gl.run(tg.triage_masked, gl.RandomAgent(seed=1), seed=0, max_steps=60)
    assert r.steps == 60 and all(0.0 <= e.score <= 2.0 for e in r.episodes)
    assert gl.RandomAgent(seed=0).act(gl.Obs().entities([Patient(0.1, True), b := Patient(0.2, True)]).mask(Treat, [b]), Treat) is b
    report = gl.check(tg.triage)
    assert report.action_types == ["Treat"] and not report.warnings

    def nobody_awake(agent, seed):
        while True:
            agent.act(gl.Obs().entities([Patient(0.5, False)]).mask(Treat, []), Treat)

    with pytest.raises(gl.CheckError, match=r"action type 'Treat': .* mask that leaves no legal choice"):
        gl.check(nobody_awake, steps=10)

    def no_patient(agent, seed):
        while True:
            agent.act(gl.Obs().entities([Bed(1)]), Treat)

    with pytest.raises(gl.CheckError, match=r"select-entity action 'Treat': .* has no candidate"):
        gl.check(no_patient, steps=10)


def test_gymloop_check_on_the_command_line(capsys):
    from gymloop.cli import main

    assert main(["check", "support.train_games:triage_masked", "--steps", "50"]) == 0
    assert "Treat" in capsys.readouterr().out


def test_low_level_environment_with_a_global_select_entity():
    class Ward(gl.Environment):
        def obs_space(self):
            return gl.ObsSpace(entities={"Patient": ("pain",)})

        def action_space(self):
            return {"Treat": gl.ActionDesc("Treat", "global_select_entity", (), ("Patient",))}

        def _ward(self, treated=None):  # the most painful patient (candidate 2) pays 1; three treatments a day
            self.day = 0 if treated is None else self.day + 1
            return gl.EnvObservation(entities={"Patient": [[0.1], [0.5], [0.9]]}, actors={"Treat": ()},
                                     masks={"Treat": [[False, True, True]]}, reward=float(treated == 2), terminated=self.day == 3)

        def reset(self, seed):
            return self._ward()

        def act(self, actions):
            assert actions["Treat"].shape == (1,)  # one choice for the observation
            return self._ward(int(actions["Treat"][0]))

    with gl.VecEnv(Ward, num_envs=2, seed=0) as env:
        b = env.reset()
        assert b.actor_index["Treat"].tolist() == [-1, -1] and b.num_candidates["Treat"].tolist() == [3, 3]
        assert b.masks["Treat"].tolist() == [False, True, True] * 2
        b = env.step({"Treat": np.array([2, 1])})
        assert b.reward.tolist() == [1.0, 0.0]
        for _ in range(5):
            acts = env.sample_actions()
            assert (acts["Treat"] >= 1).all()
            env.step(acts)


def test_masks_and_errors_say_what_works():
    p = [Patient(0.1, True), Patient(0.2, True)]
    assert gl.Obs().entities(p).mask(Treat, [p[1]]).legal(None, Treat) == [p[1]]
    assert gl.Obs().entities(p).mask(Treat, [True, False]).mask_of(None, Treat).tolist() == [True, False]
    with pytest.raises(gl.InvalidObservationError, match=r"action type 'Treat' is a global decision .*obs.mask\(Treat, allowed\)"):
        gl.Obs().actor(Nurse(1.0), masks={Treat: [p]})
    with pytest.raises(gl.InvalidObservationError, match=r"global decision 'Treat' must be one-dimensional \(one per candidate\)"):
        gl.Obs().entities(p).mask(Treat, np.ones((1, 2), bool))
    with pytest.raises(gl.InvalidObservationError, match=r"mask for select-entity action 'Treat' allows .* not among its 2 candidates"):
        gl.RandomAgent(0).act(gl.Obs().entities(p).mask(Treat, [Patient(0.3, True)]), Treat)
    # an actor-bound select-entity asked without actors: the advice is the spelling that works
    Cure = gl.SelectEntity("Cure", among=(Patient, Bed))
    with pytest.raises(gl.InvalidObservationError, match=r"\['Cure'\] take one choice per actor.*"
                       r"Cure = gl.global_decision\(gl.SelectEntity\('Cure', among=\(Patient, Bed\)\)\)") as e:
        gl.RandomAgent(0).act(gl.Obs().entities(p), Cure)
    fix = str(e.value).rsplit(": ", 1)[1]
    Cure = eval(fix.split(" = ", 1)[1], {"gl": gl, "Patient": Patient, "Bed": Bed})  # the advice, as given, works
    assert gl.RandomAgent(0).act(gl.Obs().entities(p), Cure) in p


# ---------------------------------------------------------------------- the neural agent
@pytest.mark.parametrize("readout", [True, False])
def test_neural_agent_one_by_one_and_batched_agree(tmp_path, readout):
    pytest.importorskip("torch")
    path = tmp_path / "triage.safetensors"
    gl.neural.random_checkpoint(path, tg.triage_masked, seed=0, readout=readout)
    agent = gl.load(path, seed=0)
    assert gl.run(tg.triage_masked, agent, seed=0, max_steps=30).steps == 30  # gl.run checks every answer
    ps = [Patient(0.1, True), Patient(0.9, False), Patient(0.5, True)]
    obs = gl.Obs().entities(ps).actor(tg.Player(1.0)).mask(Treat, [ps[0], ps[2]])
    treat, arm = agent.logits(obs, Treat, tg.Arm)
    assert treat.shape == (1, 3) and np.isneginf(treat[0, 1]) and np.isfinite(treat[0, [0, 2]]).all() and arm.shape == (1, 4)
    for _ in range(5):
        chosen, _ = agent.act(obs, Treat, tg.Arm)
        assert chosen is not ps[1]
    a, b = agent.fork(seed=1), agent.fork(seed=2)
    res = gl.act_all([(a, obs, Treat, tg.Arm), (b, gl.Obs().entities(ps[:2]), Treat)])
    assert res[0][0] in (ps[0], ps[2]) and res[1] in ps[:2]
    p, _ = agent.encoder.packed([(a, obs, Treat, tg.Arm), (b, gl.Obs().entities(ps[:2]), Treat)])
    lg, _ = agent.policy.logits(p)
    fin = np.isfinite(treat[0])
    np.testing.assert_allclose(lg["Treat"][:3][fin], treat[0][fin], atol=1e-5)
    one = agent.logits(gl.Obs().entities(ps[:2]), Treat)[0]
    np.testing.assert_allclose(lg["Treat"][3:], one[0], atol=1e-5)


def test_gymloop_eval_plays_a_checkpoint(tmp_path, capsys):
    pytest.importorskip("torch")
    import json

    from gymloop.cli import main

    path = tmp_path / "triage.safetensors"
    gl.neural.random_checkpoint(path, tg.triage_masked, seed=0)
    assert main(["eval", "support.train_games:triage_masked", "--agent", str(path), "--episodes", "6", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["agents"]["agent"]["episode_return"]["n"] == 6


def test_a_checkpoint_of_the_other_select_kind_is_refused(tmp_path):
    pytest.importorskip("torch")
    path = tmp_path / "triage.safetensors"
    gl.neural.random_checkpoint(path, tg.triage, seed=0)
    agent = gl.load(path)
    plain = gl.SelectEntity("Treat", among=Patient)
    with pytest.raises(gl.CheckpointError, match=r"'Treat' is select_entity in the game but global_select_entity in the checkpoint"):
        agent.act(gl.Obs().entities([Patient(0.1, True)]).actor(Nurse(1.0)), plain)


# ---------------------------------------------------------------------- traces and behaviour cloning
class Oracle:
    """Treats the awake patient in most pain and plays arm C: the best play of ``tg.triage_masked``."""

    def act(self, obs, *types):
        awake = [p for p in obs.entities_of(Patient) if p.awake]
        return max(awake, key=lambda p: p.pain), tg.Arm.C

    def game_over(self, obs, truncated=False):
        pass


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**16), steps=st.integers(1, 30))
def test_traces_record_save_load_and_replay(tmp_path_factory, seed, steps):
    pytest.importorskip("torch")
    path = tmp_path_factory.mktemp("trace") / "triage.trace.safetensors"
    trace = gl.record_trace(tg.triage_masked, gl.RandomAgent(seed=seed), seed=seed, max_steps=steps, path=path)
    assert trace.action_space["Treat"].kind is GLOBAL_SELECT
    assert trace.batch.actor_index["Treat"].tolist() == [-1] * steps
    loaded = gl.load_trace(path)
    assert loaded.spaces == trace.spaces and loaded.batch.equal(trace.batch)
    for k in range(loaded.num_decisions):
        (i,) = loaded.choices(k)["Treat"]
        assert loaded.decision(k).masks["Treat"][i]  # the recorded choice is a legal candidate
    assert len(gl.replay(path, tg.triage_masked).episodes) == len(trace.episodes)


@pytest.mark.slow
def test_behaviour_cloning_learns_a_global_select_entity(tmp_path):
    pytest.importorskip("torch")
    from gymloop.train.bc import BCConfig, train_bc

    traces = [gl.record_trace(tg.triage_masked, Oracle(), seed=s, max_steps=200) for s in range(3)]
    res = train_bc(traces, BCConfig(epochs=60, minibatch_size=64, net=gl.train.NetConfig(d_model=16, n_head=2)),
                   out_path=tmp_path / "bc.safetensors")
    assert res.agreement >= 0.95, res.history
    agent = gl.load(tmp_path / "bc.safetensors", greedy=True)
    r = gl.run(tg.triage_masked, agent, seed=99, max_episodes=50)
    assert np.mean([e.score for e in r.episodes]) >= 1.9  # random play: about 0.7


# ---------------------------------------------------------------------- learning
@pytest.mark.slow
@pytest.mark.parametrize("readout", [True, False])
def test_a_doctor_learns_to_treat_the_patient_in_most_pain(readout):
    # random: 1/3 to 1/6 (3 to 6 patients); the tiny config reaches 1.0 within about 2K steps
    result = gl.train.train(tg.triage, tiny(8192, readout=readout))
    assert final_return(result, last=4) >= 0.9, [h.get("episode_return_mean") for h in result.history]


@pytest.mark.slow
def test_a_masked_global_select_entity_beside_an_actor_bound_type_learns():
    result = gl.train.train(tg.triage_masked, tiny(8192))
    assert final_return(result, last=4) >= 1.8, [h.get("episode_return_mean") for h in result.history]  # random: about 0.7


# ---------------------------------------------------------------------- the padded adapters
def test_gymnasium_adapter_has_one_component_over_the_padded_candidates():
    pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    from gymloop.adapters.gymnasium import GymloopEnv

    sizes = {"max_entities": {"Patient": 6, "Player": 1}}
    check_env(GymloopEnv(tg.triage_masked, **sizes), skip_render_check=True)
    env = GymloopEnv(tg.triage_masked, illegal_actions="raise", **sizes)
    assert [(c.action, c.n) for c in env.components] == [("Arm", 4), ("Treat", 6)]
    assert env.observation_space["actors"].shape == (1,)  # only the actor-bound Arm has an actor column
    obs, _ = env.reset(seed=0)
    pain, awake = (list(env.spaces.obs.entities["Patient"]).index(f) for f in ("pain", "awake"))
    total = 0.0
    for _ in range(50):
        m = env.action_masks()[4:]
        n = int(obs["counts"][0])
        assert m.tolist() == [bool(obs["Patient"][k, awake]) if k < n else False for k in range(6)]
        legal = np.flatnonzero(m)
        obs, r, term, trunc, _ = env.step(np.array([2, legal[np.argmax(obs["Patient"][legal, pain])]]))
        total += r
        if term or trunc:
            obs, _ = env.reset()
    assert total == 100.0  # the best patient and arm C each time
    env.close()


def test_sb3_maskable_ppo_plays_only_legal_patients():
    pytest.importorskip("sb3_contrib")
    from sb3_contrib import MaskablePPO

    from gymloop.adapters.sb3 import GymloopSB3VecEnv

    env = GymloopSB3VecEnv(tg.triage_masked, 4, illegal_actions="raise", max_entities={"Patient": 6, "Player": 1})
    model = MaskablePPO("MultiInputPolicy", env, n_steps=16, batch_size=32, n_epochs=1, seed=0, device="cpu", policy_kwargs={"net_arch": [8]})
    model.learn(64)  # a masked-out patient would raise InvalidActionError
    assert model.num_timesteps == 64
    env.close()


@gl.game(agents=2, entities=[Patient], actions=[Treat])
def two_doctors(agents, seed):
    """Two doctors take turns treating one of the ward's patients (the one in most pain pays 1)."""
    rng = random.Random(seed)
    while True:
        for turn in range(4):
            ps = [Patient(rng.random(), True) for _ in range(rng.randrange(2, 5))]
            chosen = agents[turn % 2].act(gl.Obs(score=0).entities(ps), Treat)
            agents[turn % 2].game_over(gl.Obs(score=float(chosen is max(ps, key=lambda p: p.pain))))


def test_pettingzoo_parallel_api_test_passes():
    pytest.importorskip("pettingzoo")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from pettingzoo.test import parallel_api_test

    from gymloop.adapters.pettingzoo import GymloopParallelEnv

    env = GymloopParallelEnv(two_doctors, max_entities=4)
    parallel_api_test(env, num_cycles=100)
    env.close()
