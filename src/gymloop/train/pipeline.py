"""The training pipeline behind ``gymloop train``: behaviour cloning from demonstrations when given,
then PPO from the cloned weights, the random agent's level measured before and the trained agent's
after, the learning curve with the random level on it, and the summary.

Example:
    >>> from gymloop.games.snake import snake
    >>> from gymloop.train import TrainConfig, pipeline
    >>> lines = []
    >>> done = pipeline.run(snake, TrainConfig(steps=512, num_envs=16, rollout_steps=16), None, eval_episodes=0, say=lines.append)
    >>> done.train.steps, done.exit_code
    (512, 0)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..evaluation import RETURN, Estimate, evaluate_episodes
from ..nn.torch_policy import Policy
from .bc import BCResult, train_bc
from .config import BCConfig, TrainConfig
from .ppo import Trainer, TrainResult, policy_chooser
from .run_dir import AGENT_FILE, BC_FILE, CURVE_FILE, METRICS_FILE, OPTIM_FILE, RANDOM_LEVEL_FILE, TB_DIR, RunDir

__all__ = ["PipelineResult", "bc_config", "run"]

log = logging.getLogger("gymloop.train")


@dataclass
class PipelineResult:
    """What :func:`run` did."""

    policy: Policy | None = None
    """The policy trained last: PPO's, or without PPO steps the cloned one."""
    train: TrainResult | None = None
    """PPO's result (``None`` when only behaviour cloning ran)."""
    bc: BCResult | None = None
    """Behaviour cloning's result (``None`` without demonstrations)."""
    random_level: dict[str, float] | None = None
    """The random agent's mean metrics (measured before the run, or kept by the run resumed)."""
    trained_level: dict[str, float] | None = None
    """The trained agent's mean metrics (``None`` without an evaluation, or when the run was interrupted)."""
    files: list[str] = field(default_factory=list)
    """The files the run's folder holds."""

    @property
    def exit_code(self) -> int:
        """The shell's convention: 0, or for a run stopped by a signal 128 + the signal (130 for Ctrl-C, 143 for SIGTERM)."""
        if self.train is not None and self.train.interrupted:
            return 128 + int(self.train.stop_signal or 2)
        return 0


def bc_config(cfg: TrainConfig) -> BCConfig:
    """The behaviour cloning configuration that hands over to PPO with ``cfg``: its seed, network, threads
    and device, and the value head fitted to returns discounted as PPO will discount them."""
    return BCConfig(seed=cfg.seed, net=cfg.net, gamma=cfg.ppo.gamma, threads=cfg.threads or 1, device=cfg.device)


def run(game: Callable[..., Any], cfg: TrainConfig, out_dir: str | None, *, game_name: str = "", demos: str | None = None,
        bc_cfg: BCConfig | None = None, resume: bool = False, eval_episodes: int = 200, progress: bool = False,
        say: Callable[[str], None] = log.info) -> PipelineResult:
    """Train an agent for ``game`` into ``out_dir``, as ``gymloop train`` does; ``say`` receives the summary's lines.

    With ``demos`` (a folder of trace files) behaviour cloning (``bc_cfg``, by default
    :func:`bc_config` of ``cfg``) runs first; with ``cfg.steps == 0`` it is all that runs (its agent is
    the run's ``agent.safetensors``), else PPO goes on from the cloned weights (``bc.safetensors``).
    With ``eval_episodes``, the random agent is scored before PPO (kept in ``random_agent.json`` for
    ``resume``, drawn on the curve) and the trained agent after, on the same seeds (``cfg.seed + 1``).

    Raises:
        ConfigError, CheckpointError, TrainingError, GameError, WorkerError: as :class:`Trainer` and
            :func:`~gymloop.train.bc.train_bc` raise them.
        OutputPathError: ``out_dir`` exists and is not a folder, or cannot be created.
    """
    folder = RunDir(out_dir) if out_dir else None
    if folder is not None:
        folder.make()  # (before any work: a path that is not a folder is refused now)
    scores = _Scores(game, eval_episodes, cfg.agents_per_game, cfg.seed + 1)
    done = PipelineResult()
    if demos:
        done.bc = _clone(demos, bc_cfg or bc_config(cfg), folder, BC_FILE if cfg.steps else AGENT_FILE, game_name, say)
        if not cfg.steps:
            done.policy = done.bc.policy
            if eval_episodes:
                done.random_level, done.trained_level = scores(None), scores(done.bc.policy)
                _say_scores(say, done.random_level, done.trained_level, "cloned agent")
            done.files = [AGENT_FILE]
            say(f"files in {os.path.abspath(out_dir or '.')}: {', '.join(done.files)}")
            return done
        cfg.init_from = folder.file(BC_FILE) if folder else None  # PPO goes on from the cloned weights
    trainer = Trainer(game, cfg, out_dir=out_dir, game_name=game_name, resume=resume, progress=progress)
    done.random_level = trainer.random_level = _random_level(folder, resume, scores)
    done.train = result = trainer.train()
    done.policy = trainer.policy
    if eval_episodes and not result.interrupted:  # an interrupted run stops now: it was asked to end
        done.trained_level = scores(trainer.policy)
    run_s = f" (from step {result.first_step:,}: {result.steps - result.first_step:,} in this run)" if result.first_step else ""
    rate = (result.steps - result.first_step) / max(result.seconds, 1e-9)
    say(f"trained {game_name or getattr(game, '__name__', 'game')}: {result.steps:,} steps{run_s} in {result.seconds:.0f} s "
        f"({rate:,.0f} steps/s on {trainer.device})" + (" (interrupted)" if result.interrupted else ""))
    _say_frame(say, trainer.policy)
    if done.trained_level is not None:
        _say_scores(say, done.random_level, done.trained_level, "trained agent")
        warn = scores.not_clearly_better()
        if warn:
            say(warn)
    done.files = [AGENT_FILE, *([f"{BC_FILE} (the cloned agent)"] if demos else []), OPTIM_FILE, METRICS_FILE, CURVE_FILE,
                  *([RANDOM_LEVEL_FILE] if folder and os.path.exists(folder.file(RANDOM_LEVEL_FILE)) else []), f"{TB_DIR}/"]
    say(f"files in {os.path.abspath(out_dir or '.')}: {', '.join(done.files)}")
    return done


@dataclass
class _Scores:
    """The mean metrics of an agent (``None``: the random one) over the run's evaluation episodes."""

    game: Callable[..., Any]
    episodes: int
    agents_per_game: int
    seed: int

    #: the returns of the last evaluation of each agent (``"random"``, ``"trained"``), per episode
    returns: dict[str, list[float]] = field(default_factory=dict)

    def __call__(self, policy: Policy | None) -> dict[str, float]:
        choose = None if policy is None else policy_chooser(policy, self.seed)
        per = evaluate_episodes(self.game, choose, episodes=self.episodes, agents_per_game=self.agents_per_game, seed=self.seed)
        self.returns["random" if policy is None else "trained"] = list(per.get(RETURN, []))
        return {k: float(np.mean(v)) for k, v in per.items()}

    def not_clearly_better(self) -> str | None:
        """A line saying that the trained agent's return is not clearly above the random agent's (their
        95% intervals overlap), or ``None`` (clearly better, or not both measured in this run)."""
        if "random" not in self.returns or "trained" not in self.returns:
            return None
        r, t = Estimate.of(self.returns["random"]), Estimate.of(self.returns["trained"])
        if r.mean is None or t.mean is None or r.ci95 is None or t.ci95 is None or t.mean - t.ci95 > r.mean + r.ci95:
            return None
        return (f"the trained agent is not clearly better than the random one: mean return {t} against {r} ({t.n} episodes "
                f"each, 95% intervals overlap); see 'When a game does not learn' in docs/training.md for the diagnostics "
                f"in metrics.csv and what to change")


def _clone(demos: str, bc_cfg: BCConfig, folder: RunDir | None, name: str, game_name: str, say: Callable[[str], None]) -> BCResult:
    bc = train_bc(demos, bc_cfg, out_path=folder.file(name) if folder else None, game_name=game_name)
    say(f"behaviour cloning: {bc.decisions:,} decisions of {bc.traces} traces, {bc_cfg.epochs} epochs in {bc.seconds:.0f} s; "
        f"the agent's most probable choice is the recorded one {100 * bc.agreement:.1f}% of the time")
    return bc


def _random_level(folder: RunDir | None, resume: bool, scores: _Scores) -> dict[str, float] | None:
    """The random agent's level for the curve and the summary: a new run measures it (and keeps it in
    the folder), a resumed one reads the one its first run kept; ``None`` without either."""
    if resume:
        return folder.read_random_level() if folder else None
    if not scores.episodes:
        if folder:
            folder.remove_random_level()  # an earlier run's, not this one's
        return None
    level = scores(None)
    if folder:
        folder.write_random_level(level)
    return level


def _say_scores(say: Callable[[str], None], before: Mapping[str, float] | None, after: Mapping[str, float], who: str) -> None:
    keys = [k for k in after if k.endswith("return") or k not in ("episode_return", "episode_length")]
    for k in ["episode_return", "episode_length"] + [k for k in keys if k not in ("episode_return", "episode_length")]:
        if k in after:
            b = f"{before[k]:8.2f}" if before and k in before else "       -"
            say(f"  {k:<20} random agent {b}   {who} {after[k]:8.2f}")


def _say_frame(say: Callable[[str], None], pol: Policy) -> None:
    """A change of the inputs chosen by feature names (``net.frame="auto"``): said, never silent."""
    fr = pol.cfg.resolve_frame({k: tuple(v) for k, v in pol.obs_space.entities.items()}) if pol.cfg.frame == "auto" else None
    if fr is not None:
        heading = f", turned by its {fr.heading_feature!r}" if fr.heading_feature else ""
        say(f"the network saw the other entities' positions from entity type {fr.reference}'s frame ({'/'.join(fr.position_features)}"
            f"{heading}; net.frame=auto, --set net.frame=none to turn it off)")
