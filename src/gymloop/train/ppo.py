"""Proximal Policy Optimization over ragged entity batches: the :class:`Trainer` and its loop.

Each update collects a rollout from the run's environment groups (:mod:`.rollout`: the policy
acting, GAE bootstrapping through truncations and not through terminations), then runs PPO's
epochs over it (:mod:`.update`: each actor's probability ratio clipped and weighted by its slot's
advantage). :mod:`.normalize` holds the reward and advantage normalizers, :mod:`.run_dir` the run's
folder (checkpoint, ``metrics.csv``, curve) and :mod:`.guards` what keeps the state safe whatever
ends the run (snapshot, stop signals, divergence).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .._gc import tuned_collector
from ..batch import Batch, stack
from ..checkpoint import read_agent
from ..errors import ConfigError, TrainingError
from ..evaluation import evaluate_episodes
from ..nn.torch_policy import Policy, policy_from_file
from ..vector import VecEnv
from .config import TrainConfig
from .device import resolve_device
from .guards import Diverged, Snapshot, StopSignals, torch_errors
from .league import League
from .normalize import AdvantageNormalizer, RewardScaler, StepSize
from .optim import make_adam
from .progress import Progress
from .rollout import Group, Players, Rollout, collect, gae, join, make_groups, overlap_seed
from .run_dir import AGENT_FILE, MetricsFile, RunDir, check_same_game, episode_metric_names, plot_curve, recorded_shape
from .tensorboard import EventWriter
from .threads import ThreadChooser
from .update import ppo_update

__all__ = ["AdvantageNormalizer", "RewardScaler", "Rollout", "TrainResult", "Trainer", "episode_metric_names", "evaluate",
           "overlap_seed", "plot_curve", "train"]

log = logging.getLogger("gymloop.train")


@dataclass
class TrainResult:
    """Outcome of a training run."""

    steps: int
    updates: int
    seconds: float
    interrupted: bool
    out_dir: str | None
    history: list[dict[str, float]] = field(default_factory=list)  # one row per update (the repr gives their number)
    first_step: int = 0  # the step this run started from (> 0 when resumed)
    stop_signal: int | None = None  # the signal that interrupted the run (SIGINT for Ctrl-C, SIGTERM), if one did

    def __repr__(self) -> str:
        return (f"TrainResult(steps={self.steps}, updates={self.updates}, seconds={self.seconds:.1f}, interrupted={self.interrupted}, "
                f"out_dir={self.out_dir!r}, history=[{len(self.history)} rows], first_step={self.first_step}, "
                f"stop_signal={self.stop_signal}, final_score={self.final_score:.4g})")

    @property
    def final_score(self) -> float:
        """Mean episode score (return) over the last few updates that finished episodes."""
        vals = [h["episode_return_mean"] for h in self.history if "episode_return_mean" in h]
        return float(np.mean(vals[-5:])) if vals else float("nan")


@dataclass
class _Loop:
    """The bookkeeping of one :meth:`Trainer.train` call: its budget, rows, progress line and files."""

    per_update: int  # slot-steps per update
    n_updates: int
    progress: Progress
    first_step: int
    lr: float  # the learning rate of the update under way (annealed)
    t_start: float = field(default_factory=time.time)
    history: list[dict[str, float]] = field(default_factory=list)
    snapshot: Snapshot = field(default_factory=Snapshot)
    metrics: MetricsFile | None = None
    interrupted: bool = False


class Trainer:
    """Trains one policy for a game.

    Args:
        game: a game loop function (or ``gl.Environment`` class).
        cfg: the configuration (checked at construction).
        out_dir: where ``agent.safetensors``, ``optimizer.safetensors``, ``metrics.csv``,
            ``curve.png`` and TensorBoard files go (``None``: nothing is written; see :mod:`.run_dir`).
        game_name: recorded in the checkpoint (``snake`` or ``module:function``).
        resume: continue from ``out_dir``'s checkpoint and optimizer state.
        progress: show a progress line on stderr.
        random_level: the random agent's level per metric, drawn on ``curve.png`` as a dashed line.

    The network, its forward passes and the update run on ``cfg.device`` (:mod:`.device`; resolved at
    construction, before any game starts, into :attr:`device`); the games and the files stay on the host.

    Whatever ends :meth:`train` (the budget, Ctrl-C, SIGTERM, a game's error, a worker's death, a
    timeout, a diverging update, any exception) it saves the state after the last completed update
    (the weights, the optimizer, the generators) with ``metrics.csv`` and ``curve.png`` first; see
    :meth:`train`.
    """

    def __init__(self, game: Callable[..., Any], cfg: TrainConfig, out_dir: str | None = None, game_name: str = "",
                 resume: bool = False, progress: bool = False, random_level: Mapping[str, float] | None = None) -> None:
        cfg.check()
        self.device = resolve_device(cfg.device)  # (before any game starts: a GPU PyTorch does not see is refused now)
        self.game = game
        if resume and out_dir:
            cfg = recorded_shape(cfg, os.path.join(out_dir, AGENT_FILE))
        self.cfg = cfg.resolved()  # automatic fields chosen from the budget; the checkpoint records these
        if resume:  # fields recorded by the resumed run must still fit the ones given now
            try:
                self.cfg.check()
            except ConfigError as e:
                raise ConfigError(f"{e} (with the rollout shape recorded by the run being resumed in {out_dir})") from None
        self.num_envs, self.epochs, self.minibatch_size = self.cfg.shape()
        if self.cfg.ppo.lr is None:  # resolved() chooses it
            raise ConfigError("ppo.lr was not resolved")
        self.lr: float = self.cfg.ppo.lr
        self.out_dir = out_dir
        self.run_dir = RunDir(out_dir) if out_dir else None
        self.game_name = game_name or getattr(game, "__name__", "game")
        self.resume = resume
        self.progress = progress
        self.random_level = random_level
        if resume and not out_dir:
            raise ConfigError("resume needs out_dir: the folder holding agent.safetensors")
        #: the environment groups: one, or with cfg.overlap the two halves of the game copies (closed at the end)
        self.groups: list[Group] = []
        self.tb: EventWriter | None = None
        self.league: League | None = None  # a self-play league (cfg.league), made in _setup

    # ------------------------------------------------------------------ set-up
    def _setup(self) -> None:
        """Start the games, build (or resume, or warm-start) the policy, the optimizer and the normalizers."""
        cfg = self.cfg
        self.threads = ThreadChooser(cfg.threads)
        torch.set_num_threads(self.threads.next())
        torch.manual_seed(cfg.seed)
        self.gen = torch.Generator(self.device).manual_seed(cfg.seed)  # (samples on the device)
        self.rng = np.random.default_rng(cfg.seed)
        self.step = 0
        self.update = 0
        log.info("training on %s", self.device)
        self.groups = make_groups(self.game, cfg, self.num_envs)
        try:
            self._setup_learner()
        except BaseException:
            for env in self.envs:
                env.close()  # a failed start (a bad checkpoint to resume, ...) leaves no worker behind
            raise

    def _setup_learner(self) -> None:
        cfg, env = self.cfg, self.env
        if cfg.init_from and not self.resume:
            from .warmstart import warm_start

            self.policy, self.warm_start_report = warm_start(read_agent(cfg.init_from), env.obs_space, env.action_space, self.batch,
                                                             self.device)
            cfg.net = self.policy.cfg
        else:  # (built on the CPU: the same initial weights on every device)
            self.policy = Policy(env.obs_space, env.action_space, cfg.net).to(self.device)
        self.optim = make_adam(self.policy.parameters(), self.lr)
        self.adv_norm = AdvantageNormalizer(cfg.ppo.adv_mode(), cfg.ppo.adv_decay)
        self.step_size = StepSize(cfg.ppo.target_kl, self.lr)
        resumed = self.run_dir.load(self) if self.resume and self.run_dir else None
        if not self.resume and not cfg.init_from:
            self.policy.update_norms(self.policy.pack(stack([g.batch for g in self.groups])))
        learner = np.ones(env.num_slots, dtype=bool)
        opponents: list[Policy] = []
        if cfg.opponents:
            learner[:] = False
            learner[0 :: cfg.agents_per_game] = True  # agent 0 of each game learns; the others are frozen opponents
            for path in cfg.opponents:
                opp = policy_from_file(read_agent(path)).to(self.device)
                check_same_game(self.policy, opp, path)
                opp.eval()
                opponents.append(opp)
        league = None
        if cfg.league.enabled:
            # the first live_fraction of the copies is plain self-play; in the others the learner plays seat 0 and the
            # league names the other seat's player each update
            games = env.num_slots // 2
            live = min(games - 1, round(cfg.league.live_fraction * games))
            learner[2 * live + 1 :: 2] = False
            pairs = np.stack([np.arange(2 * live, 2 * games, 2), np.arange(2 * live + 1, 2 * games, 2)], axis=1)
            league = League(cfg.league, self.policy, cfg.seed, self.out_dir, self.game_name, pairs)
            if self.resume:
                league.load()
            else:
                league.start_new()
        self.league = league
        self.players = Players(self.policy, opponents, learner, self.gen, league)
        for g in self.groups:
            g.reward_scaler = RewardScaler(self.players.learner_slots.size, cfg.ppo.gamma) if cfg.ppo.scale_rewards else None
        if resumed is not None:
            resumed.load_scalers(self.reward_scalers)
            if resumed.adv_norm is not None:
                self.adv_norm.load(resumed.adv_norm)
            if resumed.step_size is not None:
                self.step_size.load(resumed.step_size)
        if self.run_dir:
            self.tb = self.run_dir.tensorboard(self.step if self.resume else None)

    @property
    def envs(self) -> list[VecEnv]:
        """The VecEnv of each environment group."""
        return [g.env for g in self.groups]

    @property
    def env(self) -> VecEnv:
        """The first environment group's VecEnv (the only one without ``cfg.overlap``)."""
        return self.groups[0].env

    @property
    def batch(self) -> Batch:
        """The batch the first group's next step acts on."""
        return self.groups[0].batch

    @property
    def learner_slots(self) -> np.ndarray:
        """The slots of each group's VecEnv the learning policy plays (all, or with opponents agent 0's)."""
        return self.players.learner_slots

    @property
    def opponents(self) -> list[Policy]:
        """The frozen opponents (``cfg.opponents``)."""
        return self.players.opponents

    @property
    def reward_scalers(self) -> list[RewardScaler | None]:
        """The reward scaler of each environment group (``None`` without ``ppo.scale_rewards``)."""
        return [g.reward_scaler for g in self.groups]

    # ------------------------------------------------------------------ one update
    def _collect(self) -> Rollout:
        """Step every group ``cfg.rollout_steps`` times; the groups' rollouts with their advantages, joined."""
        rollouts = collect(self.groups, self.cfg.rollout_steps, self.players, self.update)
        return join([gae(r, self.cfg.ppo, g.reward_scaler) for r, g in zip(rollouts, self.groups)])

    @torch_errors("updating the network")
    def _update(self, r: Rollout, ent_coef: float) -> dict[str, float]:
        """PPO epochs over a rollout with its advantages; the mean losses (:func:`~.update.ppo_update`)."""
        return ppo_update(self.policy, self.optim, r, self.cfg.ppo, ent_coef=ent_coef, epochs=self.epochs,
                          minibatch_size=self.minibatch_size, rng=self.rng, adv_norm=self.adv_norm)

    def _one_update(self, loop: _Loop) -> dict[str, float]:
        """Collect a rollout and update on it; its row of ``metrics.csv``."""
        p = self.cfg.ppo
        frac = 1.0 - self.update / loop.n_updates
        loop.lr = (self.lr * frac if p.anneal_lr else self.lr) * self.step_size.scale
        for g in self.optim.param_groups:
            g["lr"] = loop.lr
        ent = p.ent_coef * frac if p.anneal_entropy else p.ent_coef
        threads = self.threads.next()
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)
        t0 = time.time()
        rollout = self._collect()
        t1 = time.time()
        update_stats = self._update(rollout, ent)
        self.step_size.observe(update_stats.get("loss/approx_kl"))
        t2 = time.time()
        self.threads.record(threads, (t2 - t0) / loop.per_update)
        self.update += 1
        self.step += loop.per_update
        loop.snapshot.take(self)  # the state a stop from now on saves
        info: dict[str, float] = {"step": self.step, "update": self.update, "lr": loop.lr, "ent_coef": ent}
        info["steps_per_second"] = loop.per_update / max(t2 - t0, 1e-9)
        info["time/rollout_s"] = t1 - t0
        info["time/update_s"] = t2 - t1
        info["time/total_s"] = time.time() - loop.t_start
        info["threads"] = threads
        info["reward_mean"] = float(rollout.rewards.mean())
        # faults survived since this run started (on_game_error="restart")
        info["game_errors"] = float(sum(env.num_game_errors for env in self.envs))
        info["worker_restarts"] = float(sum(env.num_worker_restarts for env in self.envs))
        for name, vals in rollout.episode_metrics.items():
            a = np.asarray(vals, dtype=np.float64)
            info[f"{name}_count"] = float(a.size)
            info[f"{name}_mean"] = float(a.mean())
            info[f"{name}_min"] = float(a.min())
            info[f"{name}_max"] = float(a.max())
        info.update(update_stats)
        if self.league is not None:
            self.league.after_update(self.update, self.step)
            info.update(self.league.metrics())
        return info

    def _record(self, loop: _Loop, info: dict[str, float]) -> None:
        """An update's row: into the history, the progress line, ``metrics.csv`` and TensorBoard; a periodic checkpoint."""
        cfg = self.cfg
        loop.history.append(info)
        loop.progress.update(self.step, info)
        if loop.metrics is not None:
            loop.metrics.write(info)
        if self.tb is not None:
            self.tb.scalars({k: v for k, v in info.items() if k not in ("step",)}, self.step)
        if (cfg.checkpoint_every and self.update % cfg.checkpoint_every == 0) or (
                cfg.checkpoint_minutes and time.monotonic() - self._last_save >= 60 * cfg.checkpoint_minutes):
            self.save()

    # ------------------------------------------------------------------ the run
    def train(self) -> TrainResult:
        """Run training to ``cfg.steps``; returns when done or interrupted.

        Whatever ends the run, the state after the last *completed* update (a partial rollout or
        update is discarded) is saved to ``out_dir`` with ``metrics.csv`` and ``curve.png`` before
        this returns or raises:

        - the budget reached: saved, returned;
        - Ctrl-C (SIGINT) or SIGTERM (while this runs in the main thread, SIGTERM is turned into
          the same clean stop): saved, returned with ``interrupted=True`` and ``stop_signal``;
        - a diverging update (a non-finite loss, gradient or weight, or PyTorch failing on them):
          the last finite state is saved and a :class:`TrainingError` naming the update raised;
        - anything else (a :class:`~gymloop.errors.GameError`, a
          :class:`~gymloop.errors.WorkerError`, a timeout, an exception in the trainer): saved,
          then the exception is raised again as it came.

        Checkpoints are also saved every ``cfg.checkpoint_minutes`` minutes and every
        ``cfg.checkpoint_every`` updates. While it runs, Python's garbage collector is tuned for
        it (``cfg.tune_gc``, :mod:`gymloop._gc`).
        """
        self._setup()
        per_update = self.num_envs * self.cfg.agents_per_game * self.cfg.rollout_steps
        n_updates = max(1, math.ceil(self.cfg.steps / per_update))
        # (whole rollouts: the progress line counts to the steps the run will make)
        loop = _Loop(per_update, n_updates, Progress(n_updates * per_update, self.progress), self.step, self.lr)
        self._last_save = time.monotonic()
        with StopSignals() as stops, tuned_collector(self.cfg.tune_gc), self._saved_on_any_end(loop, stops):
            if self.run_dir:
                loop.metrics = self.run_dir.metrics_file(self.step if self.resume else None)
            loop.snapshot.take(self)
            while self.update < loop.n_updates:
                self._record(loop, self._one_update(loop))
        return TrainResult(self.step, self.update, time.time() - loop.t_start, loop.interrupted, self.out_dir, loop.history,
                           loop.first_step, stop_signal=(stops.received or signal.SIGINT) if loop.interrupted else None)

    @contextlib.contextmanager
    def _saved_on_any_end(self, loop: _Loop, stops: StopSignals) -> Iterator[None]:
        """Around the loop: whatever ends it, close what the run opened and save the last completed update
        (see :meth:`train`); Ctrl-C and SIGTERM end it quietly, a divergence as a :class:`TrainingError`,
        any other exception as it came."""
        error: BaseException | None = None
        try:
            yield
        except KeyboardInterrupt:
            loop.interrupted = True
        except BaseException as e:  # saved below, then raised again
            error = e
        finally:
            stops.start_saving()
            self._close_quietly(loop)
        if loop.interrupted or error is not None:
            loop.snapshot.restore(self)  # a partial rollout or update is discarded
        if loop.interrupted:
            who = signal.Signals(stops.received).name if stops.received else "Ctrl-C"
            log.warning("interrupted by %s: saving the checkpoint of update %d (step %d)", who, self.update, self.step)
        try:
            path = self._save_all()
        except Exception as e:
            if error is None:
                raise
            log.error("could not save the checkpoint after %s either: %s: %s", type(error).__name__, type(e).__name__, e)
            path = None
        if error is not None:
            raise self._reported(error, path, loop.lr)

    def _reported(self, error: BaseException, path: str | None, lr: float) -> BaseException:
        """What :meth:`train` raises for ``error`` once the state is saved to ``path``: a divergence as a
        :class:`TrainingError` naming the update and the fix; anything else as it came (logged)."""
        if isinstance(error, Diverged):
            saved = (f"the last good checkpoint was saved to {path} (update {self.update}, step {self.step}, finite weights)" if path
                     else "nothing was saved (no out_dir)")
            e = TrainingError(f"training diverged at update {self.update + 1} (step {self.step}): {error}; {saved}; lower ppo.lr (it "
                              f"was {lr:.3g}), or check the game's rewards and features for huge values")
            e.__cause__ = error.__cause__
            return e
        saved = f"saved the checkpoint of update {self.update} (step {self.step}) to {path}" if path else "nothing saved (no out_dir)"
        log.warning("stopped by %s at update %d: %s, metrics.csv and curve.png%s", type(error).__name__, self.update + 1, saved,
                    "; continue with --resume" if path else "")
        return error

    def _close_quietly(self, loop: _Loop) -> None:
        """Close what the run opened; a failure here is logged, never lets the checkpoint go unsaved."""
        for what, close in (("the progress line", loop.progress.close), *(("the games", env.close) for env in self.envs),
                            ("metrics.csv", loop.metrics.close if loop.metrics is not None else None),
                            ("TensorBoard", self.tb.close if self.tb is not None else None)):
            if close is None:
                continue
            try:
                close()
            except Exception as e:
                log.warning("closing %s failed: %s: %s", what, type(e).__name__, e)

    def save(self, out_dir: str | None = None) -> str | None:
        """Write the agent and optimizer state as one unit (:meth:`RunDir.save`); returns the agent's path
        (``None`` without a folder)."""
        d = out_dir or self.out_dir
        if not d:
            return None
        path = RunDir(d).save(self, self.game_name, self.cfg)
        if self.league is not None and out_dir is None:
            self.league.save()
        self._last_save = time.monotonic()
        return path

    def _save_all(self) -> str | None:
        """Save the checkpoint and draw the curve (the end of every run); the agent's path."""
        if not self.run_dir:
            return None
        path = self.save()
        if self.league is not None:
            self.league.finish(self.step, self.update)
        self.run_dir.draw_curve(self.random_level)
        return path


def train(game: Callable[..., Any], cfg: TrainConfig | None = None, out_dir: str | None = None, **kw: Any) -> TrainResult:
    """Train a policy for ``game``; see :class:`Trainer`.

    Example:
        >>> import gymloop as gl
        >>> from gymloop.train import TrainConfig, train
        >>> from gymloop.games.snake import snake
        >>> cfg = TrainConfig(steps=512, num_envs=16, rollout_steps=16)
        >>> cfg.ppo.minibatch_size = 128
        >>> train(snake, cfg).steps
        512
    """
    return Trainer(game, cfg or TrainConfig(), out_dir, **kw).train()


def evaluate(game: Callable[..., Any], policy: Policy | None = None, episodes: int = 100, num_envs: int = 64, seed: int = 10_000,
             greedy: bool = False, agents_per_game: int = 1, max_steps: int = 1_000_000) -> dict[str, float]:
    """Mean end-of-episode metrics of a policy (``None``: uniformly random legal actions).

    The episodes are those of :func:`gymloop.evaluation.evaluate_episodes`: exactly ``episodes``,
    each slot's quota fixed before playing (counting the first ``episodes`` to *end* would favour
    short episodes). Returns the mean of every metric reported at those episodes' ends
    (``episode_return``, ``episode_length`` and the game's own).

    Raises:
        ConfigError: ``episodes`` or ``num_envs`` is below 1.
    """
    choose = None if policy is None else policy_chooser(policy, seed, greedy)
    per_episode = evaluate_episodes(game, choose, episodes=episodes, num_envs=num_envs, seed=seed, agents_per_game=agents_per_game,
                                    max_steps=max_steps)
    return {k: float(np.mean(v)) for k, v in per_episode.items()}


def policy_chooser(policy: Policy, seed: int, greedy: bool = False) -> Callable[[Batch], dict[str, np.ndarray]]:
    """The actions ``policy`` chooses for a batch, sampled with its own generator seeded by ``seed`` (on the
    policy's device, where the forward passes run)."""
    gen = torch.Generator(policy.device).manual_seed(seed)

    def choose(b: Batch) -> dict[str, np.ndarray]:
        with torch.inference_mode():
            out = policy(policy.pack(b), generator=gen, greedy=greedy)
        return {k: v.cpu().numpy() for k, v in out.actions.items()}

    return choose
