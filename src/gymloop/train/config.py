"""Typed training configuration; relationships are checked at start-up."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from typing import Any

from .._ranges import Range, check_fields, describe
from ..errors import ConfigError
from ..nn.config import NetConfig
from .budget import BASE_LR, MAX_ENVS, auto_shape, divisor_near
from .device import ACCEPTED as DEVICES
from .device import check_device

__all__ = ["BCConfig", "LeagueConfig", "PPOConfig", "TrainConfig"]

#: the largest rollout (``num_envs * agents_per_game * rollout_steps`` slot-steps) a configuration may ask for:
#: far beyond any machine's memory, it keeps start-up checks of absurd values instant.
MAX_ROLLOUT = 2**30
#: the largest seed (PyTorch's generators take at most 64 bits; the trainer derives seeds from it).
MAX_SEED = 2**63 - 1
#: the most PyTorch threads a configuration may ask for.
MAX_THREADS = 1024
#: the bounds of the factor ``PPOConfig.target_kl`` applies to the learning rate.
LR_SCALE_RANGE = (0.1, 10.0)
#: ``PPOConfig.target_kl`` never raises the learning rate above this (the one-pass rate).
MAX_ADAPTED_LR = BASE_LR
#: the values of ``PPOConfig.adv_norm``.
ADV_NORMS = ("minibatch", "rollout", "running", "max", "none")


@dataclass
class PPOConfig:
    """PPO hyperparameters.

    Attributes:
        lr: Adam learning rate; ``None``: chosen from the run's shape (see :meth:`TrainConfig.resolved`).
        anneal_lr: decay the learning rate linearly to 0 over training.
        gamma: discount factor.
        gae_lambda: GAE lambda.
        clip_coef: policy ratio clipping.
        clip_vloss: clip the value loss around the old values.
        vf_coef: value loss weight.
        ent_coef: entropy bonus weight.
        anneal_entropy: decay the entropy bonus linearly to 0 over training.
        max_grad_norm: gradient norm clipping.
        adv_norm: how advantages are normalized before the policy loss. Each minibatch's
            advantages are centred on its mean and divided by: the larger of the minibatch's
            standard deviation and a running one, an exponential average (``adv_decay``) of the
            rollouts' advantage variances (``"max"``, the default: a minibatch of small
            advantages, e.g. no success in a sparse-reward game, is not stretched to unit scale);
            the minibatch's own (``"minibatch"``, the usual PPO choice); the running one alone
            (``"running"``). ``"rollout"`` centres and divides by the whole rollout's mean and
            standard deviation instead, and ``"none"`` leaves them as they are. docs/training.md
            says why ``"max"`` (entity-gym's Minefield).
        adv_decay: with ``adv_norm`` ``"running"`` or ``"max"``: the weight of the past in the
            running variance, per rollout (bias-corrected, so the first rollout counts fully).
        norm_adv: the older switch: ``None`` (default) leaves it to ``adv_norm``; ``False`` is
            ``adv_norm="none"``; ``True`` normalizes as ``adv_norm`` says (an error with
            ``adv_norm="none"``).
        epochs: passes over each rollout; ``None``: chosen from the budget (see
            :meth:`TrainConfig.resolved`).
        minibatch_size: slot-steps per minibatch (must divide the rollout, ``num_envs *
            agents_per_game * rollout_steps``); ``None``: chosen from the rollout (see
            :meth:`TrainConfig.resolved`).
        scale_rewards: divide rewards by a running estimate of the standard deviation of the
            discounted return before computing values and advantages (the reported returns stay
            the game's own), so the value function learns in the same units whatever the game
            pays (docs/training.md); ``False`` trains on the game's own rewards.
        chunk_size: a minibatch is run through the network in chunks of at most this many
            slot-steps, grouped by entity count to keep padding small.
        target_kl: the learning rate adapts to keep each update's mean ``approx_kl`` (how far
            the policy moved) near this: after an update whose KL was below half of it, the
            rate of the next ones is multiplied by 1.5, after one above twice it divided by 1.5,
            within :data:`LR_SCALE_RANGE` times the (annealed) ``lr`` and at most
            :data:`MAX_ADAPTED_LR` (3e-3) unless ``lr`` is larger. A fixed rate that suits one
            game moves another's policy too little to learn in its budget (docs/training.md:
            ``approx_kl`` at 0.001-0.002 on the suite's arcade and fire games), and a self-play
            game's updates move it further than one-player games' do (0.01-0.02 on the suite's
            ``cycles``: a target of 0.008 held its rate down); ``None``: the annealed ``lr`` as
            it is.
    """

    lr: float | None = None
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_coef: float = 0.2
    clip_vloss: bool = True
    vf_coef: float = 0.5
    ent_coef: float = 0.01
    anneal_entropy: bool = True
    max_grad_norm: float = 2.0
    adv_norm: str = "max"
    adv_decay: float = 0.9
    norm_adv: bool | None = None
    epochs: int | None = None
    minibatch_size: int | None = None
    chunk_size: int = 512
    scale_rewards: bool = True
    target_kl: float | None = 0.02

    def check(self) -> None:
        """Raise :class:`ConfigError` naming the field, its value, its range and the fix for a field
        out of its range (:data:`SPECS`); :meth:`TrainConfig.check` checks how they fit the rollout."""
        check_fields(self, SPECS["PPOConfig"], "ppo.")
        self.adv_mode()

    def adv_mode(self) -> str:
        """The advantage normalization in effect: ``adv_norm``, with the older ``norm_adv`` switch
        folded in; :class:`ConfigError` when the two disagree."""
        default = PPOConfig.adv_norm
        if self.norm_adv is False and self.adv_norm not in ("none", default):
            raise ConfigError(
                f"ppo.norm_adv=False turns advantage normalization off, but ppo.adv_norm={self.adv_norm!r} asks for it; "
                f"set only ppo.adv_norm ('none' to turn it off), and leave ppo.norm_adv out"
            )
        if self.norm_adv is True and self.adv_norm == "none":
            raise ConfigError(
                "ppo.norm_adv=True asks for normalized advantages, but ppo.adv_norm='none' turns it off; "
                "set only ppo.adv_norm, and leave ppo.norm_adv out"
            )
        return "none" if self.norm_adv is False else self.adv_norm


@dataclass
class LeagueConfig:
    """A self-play league for a two-player game (``gymloop train GAME --league``; :mod:`gymloop.train.league`).

    Attributes:
        enabled: train against a league: in some game copies the learner plays itself, in the
            others seat 0 against a snapshot of itself the league draws each update.
        snapshot_every: a frozen copy of the learner joins the pool (and the run folder's
            ``league/`` library) every this many updates.
        max_snapshots: opponents are drawn among the newest this many snapshots.
        live_fraction: the share of game copies that are plain self-play (the learner in both
            seats, both learning); the others play against the league (at least one does).
        priority_power: a snapshot is drawn with weight ``(1 - w) ** priority_power``, ``w`` the
            learner's score against it: the opponents it still loses to are played most (0: all alike).
    """

    enabled: bool = False
    snapshot_every: int = 20
    max_snapshots: int = 16
    live_fraction: float = 0.5
    priority_power: float = 2.0

    def check(self) -> None:
        """Raise :class:`ConfigError` for a value out of its range (:data:`SPECS`)."""
        check_fields(self, SPECS["LeagueConfig"], "league.")


@dataclass
class TrainConfig:
    """Everything a training run needs.

    Attributes:
        steps: total environment steps (decisions of all slots).
        num_envs: game copies; ``None``: chosen from the budget (see :meth:`resolved`).
        rollout_steps: steps per game copy between updates.
        workers: worker processes for the games (0: in the trainer's process).
        seed: root seed (environments, network init, sampling).
        threads: PyTorch threads; ``None`` (the default): measured while the run trains, one
            or every core the process may use (at most 4), whichever makes the update cycles
            faster, tried again from time to time and back to one at once when a cycle stalls
            (other processes taking the cores; :mod:`gymloop.train.threads`). The number of
            threads changes the rounding of some operations: set it for a bit-reproducible run.
        ppo: PPO hyperparameters.
        net: network hyperparameters.
        agents_per_game: agents per game copy (2 for self-play).
        opponents: checkpoint paths of frozen opponents for self-play (empty: the learning policy
            plays every side).
        checkpoint_every: also save a checkpoint every this many updates (0: only time-based ones
            and at the end).
        checkpoint_minutes: also save a checkpoint when this many minutes have passed since the last
            one (0: none time-based). Whatever ends a run saves one too (see ``docs/training.md``).
        init_from: warm-start from this older agent checkpoint (the network's sizes come from it;
            features the game added since start with zero weights, so the agent behaves exactly as
            before at step 0; see :mod:`gymloop.train.warmstart`).
        step_timeout: seconds a step of the games may take before the run stops with an error
            naming the copies (and worker) that did not answer (``VecEnv(step_timeout=...)``);
            ``None``: no limit.
        on_game_error: ``"raise"``: a game that raises (or times out) stops the run, after saving
            the last completed update. ``"restart"``: that copy restarts with a fresh seed (and a
            worker process that died is started again), the fault is counted in the metrics
            (``game_errors``, ``worker_restarts``) and training goes on.
        backend: what steps the games (``VecEnv(backend=...)``): ``"local"``, ``"process"`` or
            ``"ray"`` (``workers`` Ray actors, on this machine or a cluster; see ``docs/ray.md``);
            ``None``: ``"local"`` for ``workers <= 1``, else ``"process"``.
        address: with ``backend="ray"``, the Ray cluster to run the games on: ``"auto"`` (the
            one ``ray start`` runs on this machine), ``"HOST:PORT"`` of its head node, or ``None``
            (the Ray instance this process runs, else a local one started for the run).
        backend_options: with ``backend="ray"``, the Ray backend's other options by name
            (``num_cpus``, ``connect_timeout``, ``startup_timeout``, ``runtime_env``; see
            :mod:`gymloop.runtime.ray_backend`); ``gymloop train --backend-option KEY=VALUE``.
        overlap: step the games while the learner computes the policy (``gymloop train --overlap``):
            the copies are split into two halves, each its own VecEnv (``workers / 2`` workers each;
            the second half's seed derived from ``seed``), and while one half steps the policy acts
            on the other's batch. It pays off with ``backend="ray"`` when a step of the games and the
            policy's forward pass take comparable time (``docs/ray.md``); the local and process
            backends step within ``step_wait`` so they gain nothing. Needs an even ``num_envs``
            and ``workers`` 0 or even. Off: one VecEnv, stepped then acted on in turn.
        league: a self-play league (two-player games): see :class:`LeagueConfig`.
        tune_gc: while the run trains, Python's garbage collector leaves the objects alive at its
            start out of its scans (``gc.freeze()``) and collects its youngest generation every
            10,000 net allocations instead of 700 (4-9% of a run's CPU time on entity-gym's
            examples; see :mod:`gymloop._gc`); both are put back when the run ends. ``False``: the
            collector as the process set it.
        device: where the network, its forward passes and the PPO update run: ``"auto"`` (a CUDA GPU
            when PyTorch sees one, else the CPU), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``; a GPU PyTorch
            does not see is an error, never a CPU run (:mod:`gymloop.train.device`). The games, the
            batches and the files stay on the host; the device the run resolved is recorded in the
            checkpoint (``device``), and a run resumes on whatever device it is given.
    """

    steps: int = 1_000_000
    num_envs: int | None = None
    rollout_steps: int = 16
    workers: int = 0
    seed: int = 0
    threads: int | None = None
    ppo: PPOConfig = field(default_factory=PPOConfig)
    net: NetConfig = field(default_factory=NetConfig)
    agents_per_game: int = 1
    opponents: list[str] = field(default_factory=list)
    checkpoint_every: int = 0
    checkpoint_minutes: float = 10.0
    init_from: str | None = None
    step_timeout: float | None = 60.0
    on_game_error: str = "raise"
    backend: str | None = None
    address: str | None = None
    backend_options: dict[str, Any] = field(default_factory=dict)
    overlap: bool = False
    league: LeagueConfig = field(default_factory=LeagueConfig)
    tune_gc: bool = True
    device: str = "auto"

    @property
    def batch_size(self) -> int:
        """Slot-steps per rollout (of the :meth:`resolved` configuration)."""
        return self.shape()[0] * self.agents_per_game * self.rollout_steps

    def resolved(self) -> TrainConfig:
        """A copy with every automatic (``None``) field chosen from the budget
        (:func:`gymloop.train.budget.auto_shape` gives the rules).

        Example:
            >>> from gymloop.train import TrainConfig
            >>> r = TrainConfig(steps=49_152).resolved()
            >>> r.num_envs, r.ppo.minibatch_size, r.ppo.epochs
            (128, 512, 3)
            >>> r = TrainConfig(steps=3_000_000).resolved()
            >>> r.num_envs, r.ppo.minibatch_size, r.ppo.epochs
            (512, 2048, 1)
        """
        r = copy.deepcopy(self)
        steps = self.steps if isinstance(self.steps, int) and self.steps > 0 else 1
        per_env = max(1, self.rollout_steps) * max(1, self.agents_per_game)
        r.num_envs, r.ppo.minibatch_size, r.ppo.epochs, r.ppo.lr = auto_shape(
            steps, per_env, r.num_envs, r.ppo.minibatch_size, r.ppo.epochs, r.ppo.lr)
        return r

    def shape(self) -> tuple[int, int, int]:
        """``(num_envs, ppo.epochs, ppo.minibatch_size)`` of the :meth:`resolved` configuration."""
        r = self.resolved()
        if r.num_envs is None or r.ppo.epochs is None or r.ppo.minibatch_size is None:  # resolved() fills all three
            raise ConfigError(f"the automatic fields were not resolved: {r}")
        return r.num_envs, r.ppo.epochs, r.ppo.minibatch_size

    def check(self) -> None:
        """Raise :class:`ConfigError` with the fix if the configuration cannot work.

        Every field is checked against its range (:data:`SPECS`, the ranges ``docs/config.md``
        shows: type, NaN, infinity, negatives, zeros where meaningless), then the fields against
        each other (the minibatch against the rollout, ...), automatic fields as they resolve.
        """
        check_fields(self, SPECS["TrainConfig"])
        check_device(self.device, "device")
        for name, cls in (("ppo", PPOConfig), ("net", NetConfig), ("league", LeagueConfig)):
            if not isinstance(getattr(self, name), cls):
                raise ConfigError(f"{name} must be a {cls.__name__}, got {getattr(self, name)!r}")
        self.ppo.check()
        self.net.check()
        self.league.check()
        if self.league.enabled and self.agents_per_game != 2:
            raise ConfigError(f"league.enabled trains a two-player game against its own snapshots, but agents_per_game="
                              f"{self.agents_per_game}; use it with a game of two agents (gymloop train duel --league)")
        if self.league.enabled and self.opponents:
            raise ConfigError("league.enabled draws the opponents from the league; leave opponents (--opponent) empty")
        per_env = self.rollout_steps * self.agents_per_game
        if (self.num_envs or MAX_ENVS) * per_env > MAX_ROLLOUT:
            raise ConfigError(
                f"the rollout of num_envs={self.num_envs or MAX_ENVS} * agents_per_game={self.agents_per_game} * rollout_steps="
                f"{self.rollout_steps} slot-steps is more than {MAX_ROLLOUT:,}, which no machine holds; lower them"
            )
        if self.address is not None and self.backend != "ray":
            raise ConfigError(
                f"address={self.address!r} is the Ray cluster to run the games on, but backend={self.backend!r}; "
                "set backend='ray' (gymloop train --backend ray), or leave the address out"
            )
        if not isinstance(self.backend_options, dict) or not all(isinstance(k, str) for k in self.backend_options):
            raise ConfigError(f"backend_options must be a dict of option name -> value, got {self.backend_options!r}")
        if self.backend_options:
            if self.backend != "ray":
                raise ConfigError(
                    f"backend_options={self.backend_options!r} are the Ray backend's options, but backend={self.backend!r}; "
                    "set backend='ray' (gymloop train --backend ray), or leave them out"
                )
            from ..runtime.ray_backend import OPTION_DEFAULTS, _options

            unknown = sorted(set(self.backend_options) - (set(OPTION_DEFAULTS) - {"address"}))
            if unknown:
                raise ConfigError(
                    f"backend_options {', '.join(map(repr, unknown))}: the Ray backend takes "
                    f"{', '.join(repr(k) for k in OPTION_DEFAULTS if k != 'address')} here (the cluster is the address field, "
                    "--address)"
                )
            _options(self.backend_options)
        if self.backend == "ray" and self.workers < 1:
            raise ConfigError("backend='ray' runs the games in `workers` Ray actors, but workers=0; set workers >= 1 (--workers N)")
        if self.overlap and self.num_envs is not None and self.num_envs % 2:
            raise ConfigError(
                f"overlap=True splits the game copies into two halves that take turns stepping, but num_envs={self.num_envs} is "
                f"odd; use an even num_envs (e.g. --num-envs {self.num_envs + 1}), or turn overlap off"
            )
        if self.overlap and self.workers % 2:
            raise ConfigError(
                f"overlap=True gives each half of the game copies workers / 2 workers, but workers={self.workers} is odd; use an "
                f"even number (e.g. --workers {self.workers + 1}) or 0, or turn overlap off"
            )
        if self.opponents and self.agents_per_game < 2:
            raise ConfigError("opponents need a multi-agent game: set agents_per_game >= 2")
        if self.num_envs is None or self.ppo.minibatch_size is None or self.ppo.epochs is None or self.ppo.lr is None:
            r = self.resolved()
            try:
                r.check()
            except ConfigError as e:
                auto = [f"{k}={v}" for k, v, mine in (
                    ("num_envs", r.num_envs, self.num_envs), ("ppo.minibatch_size", r.ppo.minibatch_size, self.ppo.minibatch_size),
                    ("ppo.epochs", r.ppo.epochs, self.ppo.epochs), ("ppo.lr", r.ppo.lr, self.ppo.lr)) if mine is None]
                raise ConfigError(f"{e} (chosen automatically for steps={self.steps}: {', '.join(auto)})") from None
            return
        if self.workers > self.num_envs:
            raise ConfigError(f"workers={self.workers} is more than num_envs={self.num_envs}; use at most one worker per game copy")
        p = self.ppo
        _, _, mb = self.shape()
        if mb > self.batch_size:
            raise ConfigError(
                f"ppo.minibatch_size={p.minibatch_size} is larger than the rollout (num_envs * agents_per_game * "
                f"rollout_steps = {self.batch_size}); lower minibatch_size or raise num_envs/rollout_steps"
            )
        if self.batch_size % mb:
            raise ConfigError(
                f"ppo.minibatch_size={p.minibatch_size} must divide the rollout size {self.batch_size} "
                f"(num_envs * agents_per_game * rollout_steps); e.g. minibatch_size={divisor_near(self.batch_size, mb)}"
            )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["net"] = self.net.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        d = dict(d)
        d["ppo"] = PPOConfig(**d.get("ppo", {}))
        d["league"] = LeagueConfig(**d.get("league", {}))
        d["net"] = NetConfig.from_dict(d.get("net", {}))
        return cls(**d)


@dataclass
class BCConfig:
    """Behaviour cloning hyperparameters.

    Attributes:
        epochs: passes over all recorded decisions.
        lr: Adam learning rate (decayed linearly to 10% over training).
        minibatch_size: decisions per gradient step.
        max_grad_norm: gradient norm clipping.
        fit_value: fit the value head to the demonstrations' discounted returns at the end.
        gamma: discount of those returns: PPO's ``ppo.gamma`` when PPO goes on from the clone
            (``gymloop train --demos`` passes it).
        seed: seed of the network initialization and the minibatch order.
        threads: PyTorch threads.
        net: network hyperparameters (as for PPO).
        device: where the network trains, as ``TrainConfig.device`` (``gymloop train --demos`` passes it).
    """

    epochs: int = 20
    lr: float = 3e-3
    minibatch_size: int = 256
    max_grad_norm: float = 2.0
    fit_value: bool = True
    gamma: float = 0.99
    seed: int = 0
    threads: int = 1
    net: NetConfig = field(default_factory=NetConfig)
    device: str = "auto"

    def check(self) -> None:
        """Raise :class:`ConfigError` with the fix if the configuration cannot work."""
        check_device(self.device, "bc.device")
        for name in ("epochs", "minibatch_size", "threads"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ConfigError(f"bc.{name} must be a positive int, got {v!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ConfigError(f"bc.seed must be an int, got {self.seed!r}")
        if not isinstance(self.fit_value, bool):
            raise ConfigError(f"bc.fit_value must be True or False, got {self.fit_value!r}")
        if not self.lr > 0 or not self.max_grad_norm > 0:
            raise ConfigError(f"bc.lr and bc.max_grad_norm must be positive, got {self.lr}, {self.max_grad_norm}")
        if not 0 < self.gamma <= 1:
            raise ConfigError(f"bc.gamma must be in (0, 1], got {self.gamma}")
        check_fields(self, SPECS["BCConfig"], "bc.")  # the rest of the ranges (NaN, infinity, upper bounds)
        if not isinstance(self.net, NetConfig):
            raise ConfigError(f"bc.net must be a NetConfig, got {self.net!r}")
        self.net.check()


#: The range of each field: what ``check()`` enforces (:func:`gymloop._ranges.check_fields`) and, as
#: :data:`RANGES`, what ``docs/config.md`` shows.
SPECS: dict[str, dict[str, Range]] = {
    "TrainConfig": {
        "steps": Range("int", lo=1, hi=MAX_SEED, note=" (rounded up to whole rollouts)"),
        "num_envs": Range("int", lo=1, none="automatic"),
        "rollout_steps": Range("int", lo=1),
        "workers": Range("int", lo=0, note=", at most num_envs"),
        "seed": Range("int", lo=0, hi=MAX_SEED),
        "threads": Range("int", lo=1, hi=MAX_THREADS, none="measured while training"),
        "ppo": Range("any", text="the `ppo.` fields below"),
        "net": Range("any", text="the `net.` fields below"),
        "agents_per_game": Range("int", lo=1, note=", the game's number of agents; >= 2 with opponents"),
        "opponents": Range("str_list", text="agent checkpoint paths of this game; non-empty needs agents_per_game >= 2"),
        "checkpoint_every": Range("int", lo=0, note=" (0: none by update count)"),
        "checkpoint_minutes": Range("float", lo=0, note=" (0: none time-based)"),
        "init_from": Range("str", none="no warm start", text="an agent checkpoint path of this game, or None"),
        "step_timeout": Range("float", lo=0, lo_open=True, none="no limit", text="> 0 seconds, finite, or None (no limit)"),
        "on_game_error": Range("choice", choices=("raise", "restart")),
        "backend": Range("choice", choices=("local", "process", "ray"), none="'local' for workers <= 1, else 'process'"),
        "address": Range("str", none="this process's Ray instance, else a local one",
                         text="'auto', 'HOST:PORT' or 'ray://HOST:PORT' (backend='ray' only), or None (this process's Ray "
                              "instance, else a local one)"),
        "backend_options": Range("any", text="a dict of the Ray backend's options (backend='ray' only): num_cpus, "
                                 "connect_timeout, startup_timeout (> 0) and runtime_env (a dict); {} by default"),
        "overlap": Range("bool", note="; True needs an even num_envs and workers 0 or even"),
        "league": Range("any", text="the `league.` fields below"),
        "tune_gc": Range("bool"),
        "device": Range("str", text=f"{DEVICES}; 'auto': a CUDA GPU when PyTorch sees one, else the CPU"),
    },
    "PPOConfig": {
        "lr": Range("float", lo=0, lo_open=True, none="automatic"),
        "anneal_lr": Range("bool"),
        "gamma": Range("float", lo=0, hi=1, lo_open=True),
        "gae_lambda": Range("float", lo=0, hi=1),
        "clip_coef": Range("float", lo=0, lo_open=True, note=" (0.1 to 0.3 is usual)"),
        "clip_vloss": Range("bool"),
        "vf_coef": Range("float", lo=0),
        "ent_coef": Range("float", lo=0),
        "anneal_entropy": Range("bool"),
        "max_grad_norm": Range("float", lo=0, lo_open=True),
        "adv_norm": Range("choice", choices=ADV_NORMS),
        "adv_decay": Range("float", lo=0, hi=1, hi_open=True, note=" (0.9: about the last 10 rollouts)"),
        "norm_adv": Range("bool", none="as adv_norm says"),
        "epochs": Range("int", lo=1, none="automatic"),
        "minibatch_size": Range("int", lo=1, none="automatic",
                                note="; a divisor of the rollout (num_envs * agents_per_game * rollout_steps)"),
        "chunk_size": Range("int", lo=1),
        "scale_rewards": Range("bool"),
        "target_kl": Range("float", lo=0, lo_open=True, none="a fixed learning rate"),
    },
    "LeagueConfig": {
        "enabled": Range("bool", note="; True needs agents_per_game = 2 and no opponents"),
        "snapshot_every": Range("int", lo=1, note=" updates"),
        "max_snapshots": Range("int", lo=1),
        "live_fraction": Range("float", lo=0, hi=1),
        "priority_power": Range("float", lo=0),
    },
    "BCConfig": {
        "epochs": Range("int", lo=1),
        "lr": Range("float", lo=0, lo_open=True),
        "minibatch_size": Range("int", lo=1),
        "max_grad_norm": Range("float", lo=0, lo_open=True),
        "fit_value": Range("bool"),
        "gamma": Range("float", lo=0, hi=1, lo_open=True),
        "seed": Range("int", lo=0, hi=MAX_SEED),
        "threads": Range("int", lo=1, hi=MAX_THREADS),
        "net": Range("any", text="the `net.` fields"),
        "device": Range("str", text=f"{DEVICES}, as device"),
    },
}

#: The meaningful values of each field, as :mod:`gymloop.train.reference` shows them in ``docs/config.md``
#: (``{class name: {field: range}}``), made from :data:`SPECS`. Every field needs one: the reference
#: refuses to generate without it.
RANGES: dict[str, dict[str, str]] = {name: describe(specs) for name, specs in SPECS.items()}
