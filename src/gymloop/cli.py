"""The ``gymloop`` command: ``bench``, ``check GAME``, ``train GAME``, ``eval GAME --agent PATH``,
``library list|pack PATH``, ``run GAME``, ``play GAME``, ``record GAME --out FILE``.

Each subcommand calls the same public functions the tests call.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["main"]


def _cmd_bench(args: argparse.Namespace) -> int:
    from .bench import cpu_parallelism, format_table, run_benchmarks

    par = None if args.quick else cpu_parallelism()
    rows = run_benchmarks(seconds=args.seconds, repeats=args.repeats, num_envs=args.num_envs, quick=args.quick)
    print(format_table(rows, parallelism=par))
    return 0


def _game(args: argparse.Namespace) -> Callable[..., Any]:
    """The game ``args.game`` names, with its ``--game-arg`` options bound."""
    from .game_args import bind_game_args
    from .games import get_game

    return bind_game_args(get_game(args.game), getattr(args, "game_arg", None))


def _game_loop(args: argparse.Namespace) -> Callable[..., Any]:
    """:func:`_game`, refusing a ``gl.Environment`` (e.g. an entity-gym class) with the fix."""
    from .errors import ConfigError
    from .vector import _is_environment

    game = _game(args)
    if _is_environment(game):
        name = args.game
        raise ConfigError(f"{name!r} is an environment class, not a game loop: gymloop check, run, play and record take "
                          f"game loops; train and eval take either (e.g. gymloop train {name} --steps 400000)")
    return game


def _cmd_check(args: argparse.Namespace) -> int:
    from .checker import check

    game = _game_loop(args)
    report = check(game, seed=args.seed, steps=args.steps, agents_per_game=args.agents)
    print(f"{args.game}: OK ({report.decisions} decisions, {report.episodes} episodes)")
    if report.episodes == 0:
        print(f"  note: no episode ended in {report.decisions} decisions. A game with episodes calls agent.game_over(...) at "
              "each end (training and evaluation count episodes by it); raise --steps if yours are longer")
    print(f"  entity types: {', '.join(report.entity_types)}")
    print(f"  action types: {', '.join(report.action_types)}")
    for c in report.checks:
        print(f"  - {c}")
    for w in report.warnings:
        print(f"  warning: {w}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from .agent import run
    from .agent_specs import load_agent

    game = _game_loop(args)
    who = f"a {args.agent or 'random'} agent" if args.agent in (None, "random", "scripted") else args.agent

    def agents(seed: int) -> object:
        """The agent of every seat (``--agent``: see :func:`gymloop.agent_specs.load_agent`), seat ``i`` seeded ``seed + i``."""
        seats = [load_agent(args.agent, game, seed + i, agents_per_game=args.agents) for i in range(args.agents)]
        return seats[0] if args.agents == 1 else seats

    if args.trace_dir:  # one run (its own seed) and one trace file per episode
        from .files import make_folder
        from .trace import TRACE_SUFFIX, record_trace

        make_folder(args.trace_dir, "the trace folder (--trace-dir)")

        scores, steps = [], 0
        stem = args.game.replace(":", "_").replace("/", "_").replace(".", "_")
        for i in range(args.episodes):
            seed = args.seed + i
            path = os.path.join(args.trace_dir, f"{stem}-{seed}{TRACE_SUFFIX}")
            # max_episodes counts game_over calls of all seats: one episode of an N-agent game ends N times
            tr = record_trace(game, agents(seed), seed=seed, max_episodes=args.agents, path=path)
            scores += [e.score for e in tr.episodes]
            steps += tr.num_decisions
        where = f"; traces in {args.trace_dir}"
    else:
        result = run(game, agents(args.seed), seed=args.seed, max_episodes=args.episodes)
        scores, steps, where = result.scores, result.steps, ""
    mean = sum(scores) / len(scores) if scores else float("nan")
    print(f"{args.game} with {who}: {args.episodes} episodes, {steps} decisions, mean final score {mean:.2f}{where}")
    return 0


def _config_keys(obj: object, prefix: str = "") -> list[str]:
    keys = []
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]  # obj: a config dataclass (TrainConfig or one of its sections)
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            keys += _config_keys(v, f"{prefix}{f.name}.")
        else:
            keys.append(f"{prefix}{f.name}")
    return keys


#: what other RL libraries (Stable-Baselines3, CleanRL, enn-trainer, RLlib) call a setting, and its name here
_SYNONYMS = {
    "learning_rate": "ppo.lr", "lr": "ppo.lr", "n_epochs": "ppo.epochs", "update_epochs": "ppo.epochs",
    "num_epochs": "ppo.epochs", "num_sgd_iter": "ppo.epochs", "optim_epochs": "ppo.epochs", "batch_size": "ppo.minibatch_size",
    "minibatch": "ppo.minibatch_size", "sgd_minibatch_size": "ppo.minibatch_size", "n_steps": "rollout_steps",
    "num_steps": "rollout_steps", "steps_per_env": "rollout_steps", "n_envs": "num_envs", "total_timesteps": "steps",
    "timesteps": "steps", "clip_range": "ppo.clip_coef", "clip_param": "ppo.clip_coef", "entropy_coeff": "ppo.ent_coef",
    "vf_loss_coeff": "ppo.vf_coef", "lambda": "ppo.gae_lambda", "grad_clip": "ppo.max_grad_norm", "num_layers": "net.n_layer",
    "n_layers": "net.n_layer", "d_model": "net.d_model", "hidden_size": "net.d_model", "num_heads": "net.n_head",
}


def _suggest_field(cfg: object, key: str) -> str:
    import difflib

    keys = _config_keys(cfg)
    close = difflib.get_close_matches(key, keys, n=3) or [k for k in keys if k.rsplit(".", 1)[-1] == key.rsplit(".", 1)[-1]]
    synonym = _SYNONYMS.get(key.rsplit(".", 1)[-1])
    if synonym in keys and synonym != key:
        close = [synonym, *(k for k in close if k != synonym)]
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def _parse_overrides(cfg: object, items: Sequence[str]) -> None:
    """Apply ``section.field=value`` overrides (e.g. ``ppo.lr=1e-3``, ``net.d_model=64``)."""
    from .errors import ConfigError

    for item in items:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects KEY=VALUE (e.g. ppo.lr=1e-3), got {item!r}")
        obj = cfg
        parts = key.split(".")
        for p in parts[:-1]:
            if p not in _field_names(obj) or not dataclasses.is_dataclass(getattr(obj, p)):
                raise ConfigError(f"unknown config section {p!r} in {item!r}{_suggest_field(cfg, key)}; see docs/config.md")
            obj = getattr(obj, p)
        field = parts[-1]
        if field not in _field_names(obj):  # only fields: not properties, methods or dunder attributes
            raise ConfigError(f"unknown config field {key!r}{_suggest_field(cfg, key)}; see gymloop.train.TrainConfig")
        old = getattr(obj, field)
        automatic = _automatic(obj, field)
        if automatic and raw.lower() in ("none", "auto"):  # back to the automatic (or unset) value
            setattr(obj, field, None)
            continue
        if old is None:  # an automatic or unset field: parse as its declared type
            old = _declared_example(obj, field)
        try:
            if isinstance(old, bool):
                if raw.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(raw)
                val: object = raw.lower() in ("true", "1")
            elif isinstance(old, int):
                val = int(raw)
            elif isinstance(old, float):
                val = float(raw)
            elif old is None or isinstance(old, str):
                val = None if raw.lower() == "none" else raw
            else:
                raise ConfigError(f"config field {key!r} cannot be set from the command line")
        except ValueError:
            kind = {"bool": "true or false", "int": "an int", "float": "a number"}.get(type(old).__name__, type(old).__name__)
            raise ConfigError(f"config field {key!r} expects {kind}, got {raw!r}; see docs/config.md for its range") from None
        setattr(obj, field, val)


def _field_names(obj: object) -> set[str]:
    """The dataclass fields of ``obj`` (none for anything else)."""
    return {f.name for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else set()


def _automatic(obj: object, name: str) -> bool:
    """Whether a dataclass field's declared type admits ``None`` and not ``str`` (``None`` = automatic or unset).

    ``net.relpos`` (``RelposConfig | str | None``) is not: there ``auto`` is a value of its own.
    """
    import typing

    args = typing.get_args(typing.get_type_hints(type(obj)).get(name))
    return type(None) in args and str not in args


def _declared_example(obj: object, name: str) -> object:
    """A value of the type a dataclass field declares besides ``None`` (``0`` for ``int | None``)."""
    import typing

    hint = typing.get_type_hints(type(obj)).get(name)
    for t in (bool, int, float, str):
        if hint is t or t in typing.get_args(hint):
            return t()
    return None


def _backend_options(items: list[str]) -> dict[str, Any]:
    """``--backend-option KEY=VALUE`` (repeatable): values parsed as JSON (``2``, ``0.5``, ``{"working_dir": "."}``),
    a value that is not JSON kept as a string."""
    out: dict[str, Any] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            from .errors import ConfigError

            raise ConfigError(f"--backend-option {item!r} is not KEY=VALUE (e.g. --backend-option num_cpus=2)")
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:
            out[key.strip()] = raw
    return out


def _cmd_train(args: argparse.Namespace) -> int:
    from .errors import ConfigError
    from .train import TrainConfig, pipeline

    game = _game(args)
    steps = args.steps if args.steps is not None else (0 if args.demos else 3_000_000)
    cfg = TrainConfig(steps=steps, seed=args.seed, workers=args.workers, agents_per_game=args.agents,
                      opponents=list(args.opponent or []), init_from=args.init_from, backend=args.backend, address=args.address,
                      backend_options=_backend_options(args.backend_option or []), overlap=args.overlap)
    if args.num_envs is not None:  # (0 is refused by the config check, not taken for "automatic")
        cfg.num_envs = args.num_envs
    if args.league:
        cfg.league.enabled = True
    if args.step_timeout is not None:
        cfg.step_timeout = None if args.step_timeout.lower() in ("none", "off") else _number("--step-timeout", args.step_timeout)
    if args.on_game_error is not None:
        cfg.on_game_error = args.on_game_error
    if args.device is not None:
        cfg.device = args.device
    sets = args.set or []
    _parse_overrides(cfg, [x for x in sets if not x.startswith("bc.")])
    bc_cfg = None
    if not args.demos and any(x.startswith("bc.") for x in sets):
        raise ConfigError(f"--set {' '.join(x for x in sets if x.startswith('bc.'))}: bc.* fields configure behaviour cloning; "
                          "add --demos DIR")
    if args.demos:
        if args.resume or args.init_from:
            raise ConfigError("--demos starts a new agent by behaviour cloning; drop --resume / --init-from")
        if steps:
            cfg.check()  # before cloning, not after it
        else:  # only behaviour cloning runs: PPO's settings would be silently ignored
            unused = [x for x in sets if not x.startswith(("bc.", "net.", "ppo.gamma=", "threads="))]
            if unused:
                raise ConfigError(f"--set {' '.join(unused)}: without --steps, --demos only clones the demonstrations; "
                                  "add --steps N to go on with PPO, or set bc.* fields")
        bc_cfg = pipeline.bc_config(cfg)
        _parse_overrides(bc_cfg, [x[3:] for x in sets if x.startswith("bc.")])
    done = pipeline.run(game, cfg, args.out, game_name=args.game, demos=args.demos, bc_cfg=bc_cfg, resume=args.resume,
                        eval_episodes=args.eval_episodes, progress=not args.quiet, say=print)
    return done.exit_code


def _number(flag: str, raw: str) -> float:
    from .errors import ConfigError

    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{flag} expects a number of seconds or 'none', got {raw!r}") from None


def _cmd_rate(args: argparse.Namespace) -> int:
    from .agent_library import library, write_ratings
    from .agent_specs import describe
    from .errors import ConfigError
    from .games import game_name
    from .rating import rate
    from .spaces import declared_agents

    game = _game_loop(args)
    seats = args.seats if args.seats is not None else declared_agents(game) or 1
    # what is asked of the library to write into is checked before any game is played
    if args.level and not args.into:
        raise ConfigError("--level names agents of the library the ratings go into: give --into LIB too")
    levels = {}
    for kv in args.level or []:
        lv, eq, name = kv.partition("=")
        if not eq or not lv or not name:
            raise ConfigError(f"--level takes LEVEL=AGENT (e.g. easy=league/u3), got {kv!r}")
        levels[lv] = name
    if args.into:
        if seats == 1:
            raise ConfigError(f"{game_name(game)} is a one-player game: its agents get scores, not ratings, so there is "
                              "nothing to write into a library (--into)")
        into = library(args.into)
        for lv, name in levels.items():
            if name not in into:
                raise ConfigError(f"--level {lv}={name}: agent library {args.into} has no agent {name!r}; it has "
                                  f"{', '.join(into.names()[:20])}")
    agents: dict[str, object] = {}

    def add(name: str, agent: object) -> None:
        base, k = name, 2
        while name in agents:  # two specs of one name (two checkpoints called agent.safetensors): keep both
            name = f"{base}#{k}"
            k += 1
        agents[name] = agent

    for lib_path in args.library or []:
        lib = library(lib_path)
        for name in lib.names():  # each checked against the game before any game is played
            add(name, lib.load(name, seed=args.seed, game=game))
    for spec in [*args.agents, *(args.more_agents or [])]:
        if os.path.isdir(spec):
            raise ConfigError(f"agent {spec!r} is a folder; for every agent of an agent library give --library {spec}")
        add(describe(spec) if not os.path.exists(spec) else os.path.splitext(os.path.basename(os.path.normpath(spec)))[0], spec)
    if not agents:
        raise ConfigError("gymloop rate needs agents: specs (random, scripted, module:Class, checkpoint paths) and/or --library LIB")
    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if tty:
            print(f"\rrate: {done}/{total} games", end="" if done < total else "\n", file=sys.stderr, flush=True)

    table = rate(game, agents, episodes=args.episodes, seed=args.seed, progress=progress, agents_per_game=seats)
    print(table.json_text() if args.json else table.table())
    if args.plot:
        table.plot(args.plot)
    if args.into:
        n = write_ratings(args.into, table.document(), levels or None)
        print(f"wrote the ratings of {n} agents into {args.into} (agents it does not hold are left out)")
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from .errors import ConfigError
    from .evaluation import compare

    if args.episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, got {args.episodes}; e.g. --episodes 200")
    game = _game(args)
    result = compare(game, args.agent, game_name=args.game, episodes=args.episodes, seed=args.seed, agents_per_game=args.agents)
    print(result.json_text() if args.json else result.table())
    return 0


def _cmd_library(args: argparse.Namespace) -> int:
    from .agent_library import library, pack_library

    if args.action == "pack":
        if not args.out:
            from .errors import ConfigError

            raise ConfigError("gymloop library pack needs --out FILE (the archive to write)")
        pack_library(args.out, args.path)
        lib = library(args.out)
        print(f"packed {len(lib)} agents into {args.out} ({os.path.getsize(args.out):,} bytes)")
        return 0
    lib = library(args.path)
    ratings = lib.ratings()
    print(f"{lib.path}: {lib.kind}, {len(lib)} agents" + (f", {len(ratings)} rated (gymloop rate)" if ratings else ""))
    for name in lib.names():
        info = lib.info(name)
        ents = ", ".join(info.get("obs_space", {}).get("entities", {}))
        acts = ", ".join(info.get("action_space", {}))
        r = ratings.get(name)
        rated = f" rating={r.mu:.1f}±{r.sigma:.1f}" if r is not None else ""
        print(f"  {name:<30} game={info.get('game', '?')} step={info.get('step', '?')}{rated} entities=[{ents}] actions=[{acts}]")
    return 0


def _seat_args(agents: list[str] | None) -> object:
    """``--agent`` given once: that agent in every seat; several times: one per seat, in order."""
    if not agents:
        return None
    return agents[0] if len(agents) == 1 else list(agents)


def _cmd_play(args: argparse.Namespace) -> int:
    from .render import play
    from .render.keymap import parse_keys

    game = _game_loop(args) if args.game_arg else args.game
    result = play(game, _seat_args(args.agent), seed=args.seed, fps=args.fps, human_vs_agent=args.human_vs_agent,
                  max_steps=args.max_steps, trace=args.trace, seat=args.seat, keys=parse_keys(args.keys))
    scores = ", ".join(f"{s:g}" for s in result.scores) or "none finished"
    n_ep = len(result.episodes)
    print(f"{args.game}: {result.steps} decisions, {n_ep} episode{'s' * (n_ep != 1)} (scores: {scores})")
    return 0


def _cmd_record(args: argparse.Namespace) -> int:
    import os

    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # offscreen: never open a window
    from .render import record

    game = _game_loop(args) if args.game_arg else args.game
    r = record(game, args.out, _seat_args(args.agent), seed=args.seed, max_steps=args.max_steps,
               max_episodes=args.episodes or None, fps=args.fps, seat=args.seat or 0)
    who = " vs ".join(args.agent) if args.agent else "random agents"
    n_ep = len(r.run.episodes)
    print(f"wrote {r.path}: {r.frames} frames, {r.size[0]}x{r.size[1]} px, {r.fps:g} fps "
          f"({args.game} with {who}, {r.run.steps} decisions, {n_ep} episode{'s' * (n_ep != 1)})")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from .export import to_onnx

    io = to_onnx(args.agent, args.onnx)
    size = os.path.getsize(args.onnx)
    print(f"wrote {args.onnx}: {size:,} bytes, ONNX ({io['format']}); inputs {', '.join(io['inputs'])}; "
          f"outputs {', '.join(io['outputs'])}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``gymloop`` command's parser; its help names the registered games (:mod:`gymloop.games.registry`)."""
    from .games import bundled_games

    games = bundled_games()
    game_arg_help = "an option of the game function (repeatable), typed from its signature, e.g. --game-arg size=12"
    game_help = f"bundled game name ({', '.join(g.name for g in games)}) or module:function"

    two = [g.name for g in games if g.agents == 2]
    many = ", ".join(f"{g.agents} for {g.name}" for g in games if g.agents > 1)
    agents_help = f"agents per game (default: what the game declares{': ' + many if many else ''}; else 1)"

    def add_game(p: argparse.ArgumentParser, seed: int = 0, seed_help: str | None = None, agents: str | None = agents_help) -> None:
        """GAME, its --game-arg options and --seed, as every command that plays a game takes them, and
        --agents (how many play a game) unless ``agents`` is None."""
        p.add_argument("game", help=game_help)
        p.add_argument("--game-arg", action="append", default=None, metavar="KEY=VALUE", help=game_arg_help)
        p.add_argument("--seed", type=int, default=seed, help=seed_help or f"root seed of the games (default {seed})")
        if agents is not None:
            p.add_argument("--agents", type=int, default=None, help=agents)
    scripted = ", ".join(g.name for g in games if g.scripted is not None) or "none bundled"
    p = argparse.ArgumentParser(prog="gymloop", description="Game loops as fast RL environments.")
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("bench", help="throughput of snake: gymloop vs Gymnasium vector envs")
    b.add_argument("--seconds", type=float, default=2.0, help="seconds per measurement")
    b.add_argument("--repeats", type=int, default=5, help="measurements per row (the median is shown)")
    b.add_argument("--num-envs", type=int, default=None, help="game copies per vectorized env")
    b.add_argument("--quick", action="store_true", help="a tiny run (smoke test)")
    b.set_defaults(fn=_cmd_bench)

    c = sub.add_parser("check", help="check a game: schemas, masks, determinism, clean close")
    add_game(c)
    c.add_argument("--steps", type=int, default=500)
    c.set_defaults(fn=_cmd_check)

    t = sub.add_parser("train", help="train an agent with PPO (needs the train extra: torch)")
    add_game(t)
    t.add_argument("--steps", type=int, default=None,
                   help="environment steps of PPO, rounded up to whole rollouts (default 3,000,000, about 4 minutes for snake on 2 cores; "
                        "with --demos 0)")
    t.add_argument("--demos", metavar="DIR",
                   help="first clone the agents of the trace files in DIR (behaviour cloning; see gymloop run --trace-dir), "
                        "then go on with PPO if --steps > 0; bc.* config fields (bc.epochs=...) with --set")
    t.add_argument("--out", default="runs/latest", help="output folder (default runs/latest; an earlier run there is replaced)")
    t.add_argument("--workers", type=int, default=0, help="processes (or Ray actors, --backend ray) stepping games (0: the trainer's process)")
    t.add_argument("--backend", choices=["local", "process", "ray"], default=None,
                   help="what steps the games: local (the trainer's process), process (--workers processes; the default for "
                        "--workers 2 or more), ray (--workers Ray actors, this machine or a cluster: needs pip install 'gymloop[ray]')")
    t.add_argument("--address", metavar="ADDR", default=None,
                   help="with --backend ray: the cluster, 'auto' (the one `ray start` runs here) or HOST:PORT of its head node "
                        "(default: a local Ray instance for the run)")
    t.add_argument("--backend-option", action="append", metavar="KEY=VALUE",
                   help="with --backend ray: one of its options (repeatable; the value is JSON, else a string), e.g. "
                        "num_cpus=2, connect_timeout=60, startup_timeout=300, runtime_env='{\"working_dir\": \".\"}'")
    t.add_argument("--overlap", action="store_true",
                   help="step one half of the game copies while the policy acts on the other's batch (pays off with --backend ray "
                        "when stepping and the policy take comparable time; needs an even --num-envs and --workers 0 or even; "
                        "see docs/ray.md)")
    t.add_argument("--num-envs", type=int, default=None)
    t.add_argument("--opponent", action="append", help="frozen opponent checkpoint for self-play (repeatable)")
    t.add_argument("--league", action="store_true",
                   help="self-play league (two-player games): snapshots of the learner as opponents, played most where it loses, "
                        "rated as it trains; OUT/league/ becomes a rated agent library (league.* fields with --set)")
    t.add_argument("--resume", action="store_true", help="continue from OUT's checkpoint and optimizer state")
    t.add_argument("--init-from", metavar="PATH", help="warm-start from an older agent of this game (new features start at zero weight)")
    t.add_argument("--step-timeout", metavar="S",
                   help="seconds a step of the games may take before the run stops with an error naming the copies that did not answer "
                        "(default 60; 'none': no limit); the last completed update is saved first")
    t.add_argument("--on-game-error", choices=["raise", "restart"], default=None,
                   help="raise (default): a game that raises stops the run (after saving the last completed update); restart: that "
                        "copy restarts with a fresh seed (a dead worker too), counted in metrics.csv (game_errors, worker_restarts)")
    t.add_argument("--device", default=None, metavar="DEVICE",
                   help="where the network trains (behaviour cloning and PPO): auto (the default: a CUDA GPU when PyTorch sees one, "
                        "else the CPU), cpu, cuda or cuda:N; a GPU PyTorch does not see is an error, never a CPU run")
    t.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field, e.g. ppo.lr=1e-3")
    t.add_argument("--eval-episodes", type=int, default=200,
                   help="episodes to score the random agent before training and the trained one after (default 200; 0: skip)")
    t.add_argument("--quiet", action="store_true", help="no progress line")
    t.set_defaults(fn=_cmd_train)

    ra = sub.add_parser("rate", help="rate agents against one another (ratings ± uncertainty, win/draw/loss table, plot)",
                        description="Plays every group of agents the game seats (every pair in a two-player game) on the same "
                                    "seeds, each agent in each seat in turn, and rates them with openskill's Plackett-Luce model "
                                    "(mu ± sigma; sorted by mu - 3 sigma). A one-player game gets each agent's mean score with a "
                                    "95% interval instead. Needs pip install 'gymloop[rate]'.")
    add_game(ra, agents=None)
    ra.add_argument("agents", nargs="*", metavar="AGENT", help="random, scripted, module:Class or a checkpoint path")
    ra.add_argument("--agent", action="append", default=None, metavar="AGENT", dest="more_agents",
                    help="one more agent (repeatable; the same as a positional AGENT)")
    ra.add_argument("--library", action="append", default=None, metavar="LIB", help="every agent of an agent library (repeatable)")
    ra.add_argument("--agents", type=int, default=None, dest="seats", metavar="N",
                    help="agents a game seats (default: as the game declares with gl.game(agents=N), else 1)")
    ra.add_argument("--episodes", type=int, default=10, help="games per pair (per group of seats; per agent in a one-player game)")
    ra.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ra.add_argument("--plot", default=None, metavar="FILE.png", help="also draw the ratings")
    ra.add_argument("--into", default=None, metavar="LIB", help="write the ratings into this agent library (its agents' names)")
    ra.add_argument("--level", action="append", default=None, metavar="LEVEL=AGENT",
                    help="with --into: name an agent for a level (e.g. easy=league/u3); default levels are quantiles")
    ra.set_defaults(fn=_cmd_rate)

    ev = sub.add_parser("eval", help="the random agent and an agent checkpoint (or the scripted agent) side by side: mean ± 95%% "
                                     "interval of each metric",
                        description="Plays the same games (the same seeds) with a random agent and with the agent checkpoint (without "
                                    "--agent: with the game's scripted agent, where it has one), and prints "
                                    "per metric the mean over episodes ± the half-width of its 95% confidence interval, by the normal "
                                    "approximation: 1.96 × sample standard deviation / √n, n the episodes that reported it (with several seats per "
                                    "game, a seat's episodes are not independent of the others' in that game: the interval is then the "
                                    "cluster-robust one, each game one cluster). Metrics: "
                                    "the return (sum of rewards), the game's final score (when it differs from the return), the episode "
                                    "length in decisions, and every metric the game reports itself.")
    add_game(ev, seed=10_000, seed_help="root seed of the games, the same for both agents (default 10000)",
             agents=agents_help + "; the agent evaluated plays every seat")
    ev.add_argument("--agent", default=None, metavar="PATH",
                    help="agent checkpoint: the agent.safetensors of gymloop train (or its --out folder), or an enn-trainer checkpoint; "
                         "'scripted': the game's scripted agent; 'random': the random agent alone (default: the random agent and "
                         "the game's scripted agent, where it has one)")
    ev.add_argument("--episodes", type=int, default=200, help="episodes per agent (default 200)")
    ev.add_argument("--json", action="store_true", help="print one JSON object (per agent, per metric: mean, ci95, n) instead of a table")
    ev.set_defaults(fn=_cmd_eval)

    lb = sub.add_parser("library", help="list an agent library, or pack a folder of agents into one archive")
    lb.add_argument("action", choices=["list", "pack"])
    lb.add_argument("path", help="a folder of agent checkpoints, or an archive (list only)")
    lb.add_argument("--out", help="pack: the archive file to write")
    lb.set_defaults(fn=_cmd_library)

    r = sub.add_parser("run", help="play a game with an agent (random by default), print the scores, record traces")
    add_game(r)
    r.add_argument("--episodes", type=int, default=10)
    r.add_argument("--agent", default=None, metavar="random|scripted|module:Class|PATH",
                   help=f"who plays: a random agent (default), the game's scripted agent ({scripted}), your own agent class, "
                        "factory or object as module:Name (e.g. mybot:GreedyBot, constructed with seed= when it takes one), or "
                        "an agent checkpoint")
    r.add_argument("--trace-dir", metavar="DIR",
                   help="record each episode (seeds SEED, SEED+1, ...) as a trace file in DIR, for replay and --demos")
    r.set_defaults(fn=_cmd_run)

    seat_help = ("who plays a seat, once per seat in order (once: every seat): human (play only), random, scripted "
                 f"({scripted}), module:Class (your own agent class), or an agent checkpoint; seats not given are random")
    pl = sub.add_parser("play", help="play a game with the keyboard, or watch agents (needs the render extra)",
                        description="Without --agent you take the first seat (arrows or WASD) and the other seats are "
                                    "random. Watching agents, SPACE or a direction key takes over the drawn seat, SPACE "
                                    "or Enter hands back.")
    add_game(pl, agents=None)
    pl.add_argument("--agent", action="append", metavar="SPEC", help=seat_help)
    pl.add_argument("--fps", type=float, default=8.0, help="decisions per second (0: as fast as possible)")
    pl.add_argument("--human-vs-agent", action="store_true",
                    help=f"a game of two or more players ({', '.join(two) or 'none bundled'}): you (arrows/WASD) in the "
                         "first seat against --agent in the others (default: random); same as --agent human --agent SPEC")
    pl.add_argument("--seat", type=int, default=None, help="the seat whose view is drawn when no human plays (default 0)")
    pl.add_argument("--max-steps", type=int, default=None, help="stop after this many decisions (all players)")
    pl.add_argument("--trace", metavar="FILE", help="also record the play as a trace (demonstrations for train --demos)")
    pl.add_argument("--keys", action="append", metavar="LABEL=KEY[,KEY]",
                    help="your own key for an action label, once per label (e.g. --keys FIRE=f --keys Move.LEFT=j,left); "
                         "by default direction labels are on the arrows/WASD, a fire-like label on SPACE, others on 1-9")
    pl.set_defaults(fn=_cmd_play)

    ex = sub.add_parser("export", help="write an agent's policy as an ONNX model for other engines (needs the onnx extra)",
                        description="One model call is one decision point; inputs, outputs and the spaces are in the model's "
                                    "metadata (gymloop.io). See docs/onnx.md.")
    ex.add_argument("agent", metavar="AGENT", help="agent checkpoint (agent.safetensors, a training run's folder, or an enn-trainer checkpoint)")
    ex.add_argument("--onnx", required=True, metavar="OUT", help="the .onnx file to write")
    ex.set_defaults(fn=_cmd_export)

    rc = sub.add_parser("record", help="write a GIF or MP4 of a game, offscreen (needs the render extra)")
    add_game(rc, agents=None)
    rc.add_argument("--agent", action="append", metavar="SPEC", help=seat_help.replace("human (play only), ", ""))
    rc.add_argument("--out", required=True, help="the video file: .gif or .mp4")
    rc.add_argument("--seat", type=int, default=0, help="the seat whose view is drawn (default 0)")
    rc.add_argument("--max-steps", type=int, default=1000, help="stop after this many decisions (all players)")
    rc.add_argument("--episodes", type=int, default=1, help="stop after this many episodes (0: no limit)")
    rc.add_argument("--fps", type=float, default=10.0, help="frames per second of the video")
    rc.set_defaults(fn=_cmd_record)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gymloop`` console script."""
    from .errors import GymloopError

    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # `gymloop rate` takes its agents before and after the options alike
        if getattr(args, "fn", None) is not _cmd_rate or any(e.startswith("-") for e in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.agents = [*args.agents, *extra]
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # `module:function` games next to the user, as `python -m` would find them
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if getattr(args, "agents", 1) is None:  # what the game declares (gl.game(agents=N)), else 1
            from .games import get_game
            from .spaces import declared_agents

            args.agents = declared_agents(get_game(args.game)) or 1
        return args.fn(args)
    except GymloopError as e:
        print(f"gymloop: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line, no traceback; outputs are written atomically, so none is half-written
        print(f"gymloop: interrupted ({args.command})", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
