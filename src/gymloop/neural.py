"""Trained agents back in the game: ``load(path)`` (``gl.load``) gives an agent that plays with numpy alone.

A :class:`NeuralAgent` answers ``act(obs, *action_types)`` like any other agent. It turns the one
observation into the network's inputs directly, without a ``VecEnv``, in exactly the order a batch
would hold it (entity types in the checkpoint's order; within a type actors first, then entities in
observation order; candidates of a select-entity action in ``obs.entities_of(among)`` order), checked
as a ``VecEnv`` checks it (the single-observation builder, :class:`~gymloop.featurize.OneObsBuilder`:
features are finite numbers within float32, nothing is coerced; masks leave a legal choice), runs
the numpy forward pass (:class:`~gymloop.nn.numpy_policy.NumpyPolicy`) and returns game values:
Enum members, composite instances, or the chosen candidate objects.

**Matching by name.** The checkpoint records entity types, feature names, global features and action
labels. A game that has since *added* features, entity types or labels still loads an older agent:
the checkpoint's features are selected by name, unknown entity types are not fed to the network, and
labels are mapped by name (choices the checkpoint does not know are never chosen). Something the
checkpoint needs and the game lacks raises :class:`~gymloop.errors.CheckpointError` naming it.

**Several agents, one forward pass.** Agents loaded from the same file share one policy (and
:meth:`NeuralAgent.fork` makes more); ``gl.act_all`` asks all of them with a single batched forward
pass. Each agent samples with its own generator, drawing exactly what ``act`` would draw, so a
seeded agent chooses the same either way.

Importing this module, loading a checkpoint and playing never import torch.

Example:
    >>> import os, tempfile
    >>> import gymloop as gl
    >>> from gymloop.games.snake import snake
    >>> from gymloop.neural import load, random_checkpoint
    >>> path = os.path.join(tempfile.mkdtemp(), "snake.safetensors")
    >>> random_checkpoint(path, snake, seed=0)
    >>> agent = load(path, seed=0)
    >>> gl.run(snake, agent, seed=0, max_steps=20).steps
    20
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from .actions import action_spec
from .agent import pack_result
from .errors import CheckpointError, ConfigError, InvalidObservationError
from .featurize import MISSING, ActionBinding, EntityBinding, OneObsBuilder
from .formats import format_of
from .nn.inputs import ObsInputs, Packed, pack_observations
from .nn.numpy_policy import NumpyPolicy
from .nn.single import OBS_SUMMARY, SummaryCandidates
from .obs import Obs
from .schema import EntitySchema, schema_of
from .spaces import DeclaredTypes, declared_types

__all__ = ["NeuralAgent", "load"]

_F32 = np.float32
_loaded: weakref.WeakValueDictionary[tuple, NumpyPolicy] = weakref.WeakValueDictionary()
_encoders: weakref.WeakKeyDictionary[NumpyPolicy, ObsEncoder] = weakref.WeakKeyDictionary()
_runners: weakref.WeakKeyDictionary[NumpyPolicy, Any] = weakref.WeakKeyDictionary()
#: the runtimes beside numpy, by name: a factory of an object with the policy's ``logits_one``
#: (:func:`register_runtime`; importing gymloop registers ``"onnx"``: :mod:`gymloop.export.runtime`)
_RUNTIMES: dict[str, Callable[[NumpyPolicy], Any]] = {}


def register_runtime(name: str, factory: Callable[[NumpyPolicy], Any]) -> None:
    """Make ``gl.load(path, runtime=name)`` compute decisions with ``factory(policy).logits_one``
    (same arguments and results as :meth:`NumpyPolicy.logits_one <gymloop.nn.numpy_policy.NumpyPolicy.logits_one>`)."""
    _RUNTIMES[name] = factory


def _runtime_names() -> list[str]:
    return ["numpy", *_RUNTIMES]


def load(path: str | os.PathLike, seed: int | None = None, greedy: bool = False, game: Any = None,
         runtime: str = "numpy") -> NeuralAgent:
    """Load a trained agent from a checkpoint (numpy only; torch is never imported).

    Loading the same unchanged file twice shares one policy, so ``gl.act_all`` batches the agents.

    Args:
        path: a ``.safetensors`` agent checkpoint (written by the trainer or
            :func:`gymloop.checkpoint.write_agent`; a training run's output folder stands for its
            ``agent.safetensors``), or an enn-trainer / rogue-net checkpoint: its
            folder (``config.ron``, ``state.ron``, ``state.agent.msgpack``) or a ``.roguenet``
            archive of it (see :mod:`gymloop.enn`; needs ``pip install 'gymloop[enn]'``).
        seed: seed of the agent's sampling generator (``None``: fresh entropy).
        greedy: always take the most probable choice instead of sampling.
        game: optionally, a game loop declared with ``@gl.game(...)``: its declared types are
            checked against the checkpoint now (see :meth:`NeuralAgent.check`).
        runtime: what computes the decisions: ``"numpy"`` (the default; needs nothing else) or
            ``"onnx"`` (the same network as an ONNX model in onnxruntime, one thread: the same
            choices, logits equal within float32 rounding; needs ``pip install 'gymloop[onnx]'``;
            see :mod:`gymloop.export.runtime`).

    Raises:
        CheckpointError: the file is missing, truncated, corrupt (its checksum does not match:
            files written before gymloop wrote checksums load unchecked), not a gymloop agent, of
            an unknown format version, its metadata is forged (sizes beyond sane limits or
            disagreeing with its weights), or (with ``game``) the game lacks something the
            checkpoint needs.
        ConfigError: an unknown ``runtime``, or ``"onnx"`` without onnx and onnxruntime installed.

    Example:
        >>> import tempfile
        >>> import gymloop as gl
        >>> from gymloop.games.snake import snake
        >>> from gymloop.neural import random_checkpoint
        >>> path = tempfile.mkdtemp() + "/agent.safetensors"
        >>> random_checkpoint(path, snake)                  # (gymloop train writes real ones)
        >>> greedy = gl.load(path, greedy=True)              # the most probable choice, every time
        >>> a, b = gl.load(path, seed=1), gl.load(path, seed=1)
        >>> gl.run(snake, a, seed=3, max_steps=30).steps == gl.run(snake, b, seed=3, max_steps=30).steps == 30
        True
        >>> a.policy is b.policy                           # one network for agents of one file
        True
    """
    if runtime not in _runtime_names():
        raise ConfigError(f"load runtime must be one of {_runtime_names()}, got {runtime!r}")
    p = os.fspath(path)
    trained = os.path.join(p, "agent.safetensors")
    if os.path.isdir(p) and os.path.isfile(trained) and not os.path.exists(os.path.join(p, "config.ron")):
        p = trained  # a training run's output folder (gymloop train --out DIR)
    fmt = format_of(p)  # an importer's format (enn-trainer: gymloop.enn), registered in gymloop.formats
    if fmt is not None:
        policy = fmt.open_policy(p, game)
    else:
        try:
            st = os.stat(p)
            key = (os.path.realpath(p), st.st_mtime_ns, st.st_size)
        except OSError as e:
            raise CheckpointError(f"cannot read checkpoint {p}: {e}") from None
        cached = _loaded.get(key)
        if cached is None:
            cached = NumpyPolicy.from_file(p)
            _loaded[key] = cached
        policy = cached
    agent = NeuralAgent(policy, seed=seed, greedy=greedy, runtime=runtime)
    if game is not None:
        agent.check(game)
    return agent


# ---------------------------------------------------------------------- the policy's binding
class ObsEncoder(OneObsBuilder):
    """Turns a game's observations into one policy's inputs (shared by the agents of that policy).

    It is the single-observation builder (:class:`~gymloop.featurize.OneObsBuilder`: the checks of a
    batch) bound to the checkpoint by name, once per class (entity types and their feature columns,
    global features, action labels and candidate types), and lays out one observation
    (:meth:`prepare_one`, for :meth:`NumpyPolicy.logits_one`) or several (:meth:`packed`, for
    :meth:`NumpyPolicy.logits`) the way a batch holds them.
    """

    def __init__(self, policy: NumpyPolicy) -> None:
        super().__init__(policy.entity_names, "", "the observation")
        self.policy = policy
        self.tindex = {n: i for i, n in enumerate(self.names)}
        self.globals = policy.global_features
        self.ng = len(self.globals)
        self.takes_globals = self.ng > 0
        self.globs: dict[type, np.ndarray | None] = {}
        self.checked: weakref.WeakSet[Any] = weakref.WeakSet()  # games NeuralAgent.check passed
        game = policy.info.get("game")
        self.where = f"{policy.path} (trained on {game!r})" if isinstance(game, str) and game else policy.path

    # ------------------------------------------------------------------ binding
    def bind_entity(self, cls: type) -> EntityBinding | None:
        b = self.ents.get(cls, MISSING)
        if b is not MISSING:
            return b
        sc = schema_of(cls)
        t = self.tindex.get(sc.name)
        if t is None:
            self.ents[cls] = None  # an entity type the checkpoint does not know: not fed
            return None
        want = self.policy.entity_features[sc.name]
        cols = self._columns(sc.features, want, f"entity type {sc.name!r} (class {cls.__qualname__}) lacks", "features")
        b = EntityBinding(t, sc.name, sc, cols, not want and not self.ng)
        self.ents[cls] = b
        return b

    def _columns(self, have: Sequence[str], want: Sequence[str], who: str, what: str) -> np.ndarray | None:
        """The game's columns of the checkpoint's features ``want`` (``None``: all, in order);
        ``who`` names the game's class and its verb (``"the globals 'Clock' lack"``)."""
        index = {f: i for i, f in enumerate(have)}
        missing = [f for f in want if f not in index]
        if missing:
            raise CheckpointError(
                f"{self.where}: {who} the features {missing} that the checkpoint was trained with (the game's "
                f"{what}: {list(have)})"
            )
        cols = [index[f] for f in want]
        return None if cols == list(range(len(have))) else np.array(cols, dtype=np.intp)

    def bind_action(self, key: Any) -> ActionBinding:
        b = self.acts.get(key)
        if b is not None:
            return b
        spec = action_spec(key)
        ck = self.policy.action_space.get(spec.name)
        if ck is None:
            raise CheckpointError(
                f"{self.where}: the checkpoint has no action type {spec.name!r}; it was trained for "
                f"{sorted(self.policy.action_space)}"
            )
        if ck.kind != spec.kind:
            raise CheckpointError(
                f"{self.where}: action type {spec.name!r} is {spec.kind} in the game but {ck.kind} in the checkpoint"
            )
        b = ActionBinding(spec.name, spec.kind, key, spec)
        if not spec.kind.selects_entities:
            game_idx = {lab: i for i, lab in enumerate(spec.labels)}
            missing = [lab for lab in ck.labels if lab not in game_idx]
            if missing:
                raise CheckpointError(
                    f"{self.where}: action type {spec.name!r} lacks the labels {missing} that the checkpoint was trained "
                    f"with (the game's labels: {list(spec.labels)})"
                )
            perm = [game_idx[lab] for lab in ck.labels]
            b.perm = np.array(perm, dtype=np.intp)
            b.identity = perm == list(range(spec.n))
            b.values = [spec.values[i] for i in perm]
        else:
            game_names = [schema_of(c).name for c in spec.among]
            # a checkpoint that does not record its candidate types (enn-trainer's) takes the game's
            missing = [] if ck.among_any else [n for n in ck.among if n not in game_names]
            if missing:
                raise CheckpointError(
                    f"{self.where}: select-entity action {spec.name!r} chooses among {game_names} in the game, which "
                    f"lacks the entity types {missing} of the checkpoint (trained among {list(ck.among)})"
                )
            for c, n in zip(spec.among, game_names):
                if ck.among_any or n in ck.among:
                    eb = self.bind_entity(c)
                    if eb is None:  # (among_any) an entity type the checkpoint does not know: never a candidate
                        b.partial = True
                        continue
                    b.among_t.append(eb.t)
                    b.among_cls.append(c)
                else:
                    b.partial = True
        self.acts[key] = b
        return b

    def globals_binding(self, g: Any) -> tuple[EntitySchema, np.ndarray | None] | None:
        """The schema of the globals ``g`` and its columns of the checkpoint's global features
        (``None``: all, in order), or ``None`` when the checkpoint has none."""
        if not self.ng:
            return None
        if g is None:
            raise CheckpointError(
                f"{self.where}: the checkpoint needs the global features {list(self.globals)}, but the observation has "
                "none; give them with obs.globals(...)"
            )
        cls = type(g)
        sc = schema_of(cls)
        cols = self.globs.get(cls, MISSING)
        if cols is MISSING:
            cols = self.globs[cls] = self._columns(sc.features, self.globals, f"the globals {sc.name!r} lack", "global features")
        return sc, cols

    # ------------------------------------------------------------------ one observation
    def unknown_actor(self, cls: type) -> NoReturn:
        raise CheckpointError(
            f"{self.where}: an actor is of entity type {schema_of(cls).name!r}, which the checkpoint does not know "
            f"(it knows {self.names})"
        )

    def candidates(self, ab: ActionBinding, per: list, starts: list[int]) -> tuple[np.ndarray, list[Any]]:
        rows: list[int] = []
        objs: list[Any] = []
        for t in ab.among_t:
            lst = per[t]
            if lst:
                rows.extend(range(starts[t], starts[t] + len(lst)))
                objs.extend(lst)
        return np.array(rows, dtype=np.intp), objs

    def inputs_mask(self, obs: Obs, ab: ActionBinding, m: np.ndarray) -> np.ndarray:
        """The game's validated mask ``m`` in the checkpoint's label order (categorical) or without the
        candidates of types the checkpoint does not know (select-entity)."""
        if ab.kind.selects_entities:
            if not ab.partial:
                return m
            keep = np.concatenate([np.full(len(obs.entities_of(c)), c in ab.among_cls, dtype=bool) for c in ab.spec.among])
            net = m[:, keep]
            bad = ~net.any(axis=1)
            if bad.any():
                raise InvalidObservationError(
                    f"actor {int(np.flatnonzero(bad)[0])} has no legal candidate for select-entity action {ab.name!r} among "
                    "the entity types the checkpoint knows; a mask must leave at least one candidate"
                )
            return net
        if ab.identity:
            return m
        net = m[:, ab.perm]
        bad = ~net.any(axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            legal = [lab for lab, ok in zip(ab.spec.labels, m[i]) if ok]
            raise CheckpointError(
                f"{self.where}: actor {i} may only choose {legal} for action type {ab.name!r}, labels the checkpoint "
                "does not know"
            )
        return net

    def prepare_one(self, obs: Obs, action_types: tuple) -> tuple:
        """Everything the network needs for one observation, and what decoding needs.

        Returns ``(parts, globals, actor_rows, requests, decode)`` (see
        :meth:`NumpyPolicy.logits_one`); ``decode`` holds per action type the value of each choice.
        """
        if type(obs) is not Obs:
            raise InvalidObservationError(f"act expects a gl.Obs, got {obs!r} of type {type(obs).__name__}")
        if not action_types:
            raise ConfigError("act needs at least one action type, e.g. agent.act(obs, Move)")
        per, parts, g, starts, rows, asked, masks = self.one(obs, action_types)
        requests: list[tuple[str, np.ndarray | None, str | np.ndarray | SummaryCandidates | None]] = []
        decode = []
        for ab, m in zip(asked, masks):
            # a kind not tied to an actor is one decision for the observation, from its summary
            if ab.kind.selects_entities:
                cand, objs = self.candidates(ab, per, starts)
                requests.append((ab.name, m, cand if ab.kind.actor_bound else SummaryCandidates(cand)))
                decode.append(objs)
            else:
                requests.append((ab.name, m, None if ab.kind.actor_bound else OBS_SUMMARY))
                decode.append(ab.values)
        return parts, g, rows, requests, decode

    def packed(self, reqs: Sequence[tuple]) -> tuple[Packed, list[list[tuple]]]:
        """Network inputs for several observations (slot ``s`` = request ``s``), laid out exactly as
        :func:`~gymloop.nn.inputs.pack` lays out a VecEnv batch of them, and per request and asked
        action type ``(name, position of its first actor (categorical) or first candidate
        (select-entity), n_actors, choice values)``."""
        policy = self.policy
        inputs: list[ObsInputs] = []
        pos = dict.fromkeys(policy.action_space, 0)
        decode = []
        for r in reqs:
            parts, g, rows, requests, dec = self.prepare_one(r[1], tuple(r[2:]))
            n_act = rows.shape[0]
            asked = {}
            d = []
            for (name, mask, cr), vals in zip(requests, dec):
                if cr is OBS_SUMMARY or isinstance(cr, SummaryCandidates):  # one decision, from the observation summary
                    asked[name] = (None, mask, cr.rows if isinstance(cr, SummaryCandidates) else None)
                    n_rows = 1
                else:
                    asked[name] = (rows, mask, cr)
                    n_rows = n_act
                d.append((name, pos[name], n_rows, vals))
                pos[name] += n_rows if cr is None or cr is OBS_SUMMARY else n_rows * len(vals)
            inputs.append((parts, g, asked))
            decode.append(d)
        widths = [len(policy.entity_features[name]) for name in self.names]
        p = pack_observations(inputs, self.names, widths, self.ng, policy.action_space, policy.position_idx, policy.frame)
        return p, decode


def _with_candidates(classes: Sequence[type], actions: Sequence[Any]) -> set[type]:
    """Entity classes plus the candidate classes of the select-entity action types in ``actions``."""
    out = set(classes)
    for a in actions:
        spec = action_spec(a)
        if spec.kind.selects_entities:
            out.update(spec.among)
    return out


def _first_observation_types(game: Any, agents_per_game: int | None) -> DeclaredTypes | None:
    """The entity classes, globals class and action types a game loop uses up to its first decision
    (its declared types included), as a :class:`~gymloop.VecEnv` fixes its spaces; ``None`` for a
    ``gl.Environment`` class (it has its own spaces)."""
    from .spaces import declared_agents
    from .vector import VecEnv, _is_environment

    if _is_environment(game):
        return None
    n = agents_per_game or declared_agents(game) or 1
    with VecEnv(game, num_envs=1, agents_per_game=n, seed=0) as env:
        env.reset()
        sp = env.spaces
    ents = [s.cls for s in sp.entity_schemas]
    glob = sp.globals_schema.cls if sp.globals_schema is not None else None
    return DeclaredTypes(ents, glob, [s.key for s in sp.action_specs])


def _choose(logits: np.ndarray, rng: np.random.Generator, greedy: bool) -> list[int]:
    """One choice per row: the argmax (greedy) or a sample (Gumbel-max, the agent's generator)."""
    if greedy:
        return logits.argmax(-1).tolist()
    g = rng.gumbel(size=logits.shape)
    g += logits
    return g.argmax(-1).tolist()


def _runner_of(policy: NumpyPolicy, runtime: str) -> Any:
    """The policy's shared runner of ``runtime`` (made on first use)."""
    per = _runners.get(policy)
    if per is None:
        per = _runners[policy] = {}
    runner = per.get(runtime)
    if runner is None:
        runner = per[runtime] = _RUNTIMES[runtime](policy)
    return runner


def _encoder_of(policy: NumpyPolicy) -> ObsEncoder:
    enc = _encoders.get(policy)
    if enc is None:
        enc = _encoders[policy] = ObsEncoder(policy)
    return enc


class NeuralAgent:
    """An agent that plays with a trained policy (numpy inference; see the module docstring).

    Args:
        policy: the network (``NumpyPolicy.from_file(path)``); usually made by :func:`load`.
        seed: seed of the sampling generator (``None``: fresh entropy).
        greedy: take the most probable choice instead of sampling.

    Example:
        >>> import os, tempfile
        >>> import gymloop as gl
        >>> from gymloop.games.duel import duel
        >>> from gymloop.neural import random_checkpoint
        >>> path = os.path.join(tempfile.mkdtemp(), "duel.safetensors")
        >>> random_checkpoint(path, duel, agents_per_game=2)
        >>> red = gl.load(path, seed=0)
        >>> blue = red.fork(seed=1)                          # same network, own generator
        >>> len(gl.run(duel, [red, blue], seed=0, max_episodes=2).episodes)
        2

    Attributes:
        policy: the shared :class:`~gymloop.nn.numpy_policy.NumpyPolicy`.
        greedy: whether the agent samples or takes the argmax.
        info: the checkpoint's metadata (training step, library version, spaces, ...).
        encoder: the policy's shared :class:`ObsEncoder` (observations to network inputs).
    """

    def __init__(self, policy: NumpyPolicy, seed: int | None = None, greedy: bool = False, runtime: str = "numpy") -> None:
        if runtime not in _runtime_names():
            raise ConfigError(f"NeuralAgent runtime must be one of {_runtime_names()}, got {runtime!r}")
        self.policy = policy
        self.greedy = bool(greedy)
        self.rng = np.random.default_rng(seed)
        self.encoder = _encoder_of(policy)
        self.runtime = runtime
        self._logits_one = policy.logits_one if runtime == "numpy" else _runner_of(policy, runtime).logits_one

    @property
    def info(self) -> dict[str, Any]:
        return self.policy.info

    def fork(self, seed: int | None = None, greedy: bool | None = None) -> NeuralAgent:
        """Another agent sharing this one's policy (its own generator), e.g. for self-play."""
        return NeuralAgent(self.policy, seed=seed, greedy=self.greedy if greedy is None else greedy, runtime=self.runtime)

    def check(self, game: Any, agents_per_game: int | None = None) -> None:
        """Check a game against the checkpoint before playing: its entity types, features, global
        features, action types, kinds and labels, matched by name.

        What the game declares with ``@gl.game(...)`` counts, and so does what it actually builds:
        when the declaration does not cover the checkpoint (no declaration at all, or no
        ``globals=`` for a checkpoint with global features, or entity types that only the first
        observation shows), the game is run up to its first decision (one copy, seed 0, as a
        :class:`~gymloop.VecEnv` fixes its spaces) and the types of that observation count too, as
        they did when the checkpoint was trained. (What is missing in a class met only later is
        found at the first ``act`` that meets it.)

        Args:
            game: a game loop (``@gl.game`` or not).
            agents_per_game: agents the game takes, for that run (default: what the game
                declares with ``gl.game(agents=N)``, else 1).

        Raises:
            CheckpointError: the game lacks an entity type, feature, global feature, action type
                kind or label that the checkpoint needs.
            GameError: the game raised before its first decision while being run for the check.
        """
        rt = self.encoder
        try:
            if game in rt.checked:
                return
        except TypeError:  # an unhashable game object: checked every time
            pass
        decl = declared_types(game)
        ents, glob, acts = decl if decl is not None else ([], None, [])
        classes, acts = _with_candidates(ents, acts), list(acts)
        names = {schema_of(c).name for c in classes}
        seen = ""
        if any(n not in names for n in rt.names) or (rt.ng and glob is None):
            observed = _first_observation_types(game, agents_per_game)
            if observed is not None:
                o_ents, o_glob, o_acts = observed
                classes |= _with_candidates(o_ents, o_acts)
                glob = glob if glob is not None else o_glob
                acts += [a for a in o_acts if a not in acts]
                names = {schema_of(c).name for c in classes}
                seen = " and its first observation"
        missing = [n for n in rt.names if n not in names]
        if missing:
            raise CheckpointError(
                f"{rt.where}: the game lacks the entity types {missing} that the checkpoint was trained with (the game's "
                f"declaration{seen} have {sorted(names)}); declare types that appear later with @gl.game(entities=[...])"
            )
        for c in classes:
            rt.bind_entity(c)
        if rt.ng:
            if glob is None:
                raise CheckpointError(
                    f"{rt.where}: the checkpoint needs the global features {list(rt.globals)}, but the game neither "
                    f"declares globals (@gl.game(globals=...)) nor gives them in its first observation (obs.globals(...))"
                )
            sc = schema_of(glob)
            lacking = [f for f in rt.globals if f not in sc.features]
            if lacking:
                raise CheckpointError(
                    f"{rt.where}: the globals {sc.name!r} lack the features {lacking} that the checkpoint was trained "
                    f"with (the game's global features: {list(sc.features)})"
                )
        for a in acts:
            rt.bind_action(a)
        try:
            rt.checked.add(game)
        except TypeError:
            pass

    # ------------------------------------------------------------------ the Agent protocol
    def act(self, obs: Obs, *action_types: Any) -> Any:
        """Choose for every actor of ``obs`` and every action type (see :class:`gymloop.Agent`)."""
        parts, g, rows, requests, decode = self.encoder.prepare_one(obs, action_types)
        if not parts:  # nothing observed (globals at most): a one-slot batch, which pads a row to attend to
            return self.act_batch([(self, obs, *action_types)])[0]
        logits = self._logits_one(parts, g, rows, requests)
        rng = self.rng
        greedy = self.greedy
        if len(logits) == 1 and obs.is_single_actor:  # (what pack_result gives for one actor and one type)
            return decode[0][_choose(logits[0], rng, greedy)[0]]
        per_type = []
        for lg, vals in zip(logits, decode):
            per_type.append([vals[i] for i in _choose(lg, rng, greedy)])
        return pack_result(obs, per_type, action_types)

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        """Nothing to do: the policy keeps no state between decisions."""

    def logits(self, obs: Obs, *action_types: Any) -> list[np.ndarray]:
        """The masked logits the agent chooses from: per action type ``(n_actors, n)``, in the
        checkpoint's label order (categorical) or ``obs.entities_of(among)`` order (select-entity)."""
        parts, g, rows, requests, _ = self.encoder.prepare_one(obs, action_types)
        if not parts:  # (as in act)
            return [lg for _, lg in self._batched_logits([(self, obs, *action_types)])[0]]
        return self._logits_one(parts, g, rows, requests)

    # ------------------------------------------------------------------ several agents at once
    @property
    def _act_group(self) -> NumpyPolicy:
        """Agents sharing a policy are asked together in one forward pass (see ``gl.act_all``)."""
        return self.policy

    def _act_all(self, requests: Sequence[tuple]) -> list[Any]:
        if self.runtime != "numpy":  # the ONNX model takes one observation a call
            return [r[0].act(r[1], *r[2:]) for r in requests]
        return self.act_batch(requests)

    def act_batch(self, requests: Sequence[tuple]) -> list[Any]:
        """Answer several ``(agent, obs, *action_types)`` requests with one forward pass.

        Every agent must share this agent's policy; each samples with its own generator (the same
        draws as its ``act``). Returns one ``act`` result per request.
        """
        reqs = list(requests)
        if not reqs:
            return []
        for r in reqs:
            if not isinstance(r[0], NeuralAgent) or r[0].policy is not self.policy:
                raise ConfigError("act_batch needs (agent, gl.Obs, action_type, ...) requests of agents sharing one policy")
        results = []
        for (agent, obs, *types), per_request in zip(reqs, self._batched_logits(reqs)):
            per_type = [[vals[i] for i in _choose(lg, agent.rng, agent.greedy)] for vals, lg in per_request]
            results.append(pack_result(obs, per_type, types))
        return results

    def _batched_logits(self, reqs: list[tuple]) -> list[list[tuple[Sequence[Any], np.ndarray]]]:
        """One forward pass over the requests: per request, per action type, the values to choose
        among and their ``(n_actors, n)`` logits."""
        p, decode = self.encoder.packed(reqs)
        logits, _ = self.policy.logits(p)
        out = []
        for dec in decode:
            per_request = []
            for name, lo, n_act, vals in dec:
                lg = logits[name]
                if lg.ndim == 2:
                    lg = lg[lo : lo + n_act]
                else:
                    nc = len(vals)
                    lg = lg[lo : lo + n_act * nc].reshape(n_act, nc)
                per_request.append((vals, lg))
            out.append(per_request)
        return out

    def __repr__(self) -> str:
        rt = "" if self.runtime == "numpy" else f", runtime={self.runtime!r}"
        return f"NeuralAgent({self.policy.path!r}, greedy={self.greedy}{rt})"


def random_checkpoint(path: str | os.PathLike, game: Any, seed: int = 0, agents_per_game: int = 1, **net: Any) -> None:
    """Write an untrained (randomly initialized) agent checkpoint for ``game`` (needs torch).

    Its normalization statistics come from a few steps of random play. Handy for tests, demos and
    benchmarks. ``net`` overrides :class:`~gymloop.nn.NetConfig` fields.
    """
    import torch

    from .checkpoint import write_agent
    from .games.registry import game_name
    from .nn.config import NetConfig
    from .nn.torch_policy import Policy, policy_info, policy_tensors
    from .vector import VecEnv

    torch.manual_seed(seed)
    with VecEnv(game, num_envs=4, seed=seed, agents_per_game=agents_per_game) as env:
        b = env.reset()
        pol = Policy(env.obs_space, env.action_space, NetConfig(**net))
        p = pol.pack(b)
        pol.update_norms(p)
        for _ in range(8):
            b = env.step(env.sample_actions())
            pol.update_norms(pol.pack(b))
    write_agent(path, policy_tensors(pol), policy_info(pol, step=0, game=game_name(game)))
