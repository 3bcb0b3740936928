"""Throughput benchmark: one snake, driven through gymloop's APIs and through Gymnasium's.

The same rules (:class:`~gymloop.games.snake.SnakeGame`) run as:

* ``loop_w0`` / ``loop_w2``: the Agent-API game loop :func:`gymloop.games.snake.snake` in a
  :class:`~gymloop.VecEnv` with ``workers=0`` (one process) and ``workers=2`` (two worker processes);
* ``env_w0``: the hand-written low-level :class:`~gymloop.games.snake_envs.SnakeEnv` in a
  ``VecEnv`` with ``workers=0``;
* ``gym_sync`` / ``gym_async``: :class:`~gymloop.games.snake_envs.GymSnakeEnv` under
  ``gymnasium.vector.SyncVectorEnv`` and ``AsyncVectorEnv``;
* ``scale``: ``scale_envs`` game loops (10,000 by default) in one process, with its resident memory.

Every variant takes uniformly random actions from its own API's sampler
(``VecEnv.sample_actions()``, ``envs.action_space.sample()``): a few microseconds per batch, under
1 % of a step of 256 envs and about 2 % of an ``AsyncVectorEnv`` step of 2 envs, so no variant
needed pre-generated actions. A *step* is one decision of one game copy; steps/s is the
median over ``repeats`` timed runs of ``seconds`` each, after a warm-up.

Gymnasium is given the fastest configuration we measured: ``SyncVectorEnv`` over the same
``num_envs`` copies with ``copy=False`` (its speed barely depends on the count); ``AsyncVectorEnv`` with shared memory and
``copy=False`` (observations stay in shared memory), one process per copy as it always is, with
the number of copies picked as the fastest of ``async_num_envs`` in a short trial run. Both use the
``SAME_STEP`` autoreset mode, where, as in gymloop, every step is a decision (the default
``NEXT_STEP`` spends one step per episode on the reset alone and would count it as a step).

Example:
    >>> from gymloop.bench import run_benchmarks, format_table
    >>> rows = run_benchmarks(quick=True, variants=("loop_w0", "env_w0"))
    >>> [r["key"] for r in rows]
    ['loop_w0', 'env_w0']
    >>> rows[0]["steps_per_s"] > 0
    True
    >>> "steps/s" in format_table(rows)
    True
"""

from __future__ import annotations

import gc
import logging
import os
import platform
import resource
import statistics
import sys
import time
from typing import Any, Callable, Iterable

import numpy as np

from .errors import ConfigError

__all__ = ["run_benchmarks", "format_table", "VARIANTS", "rss_mb"]

log = logging.getLogger("gymloop.bench")

VARIANTS = ("loop_w0", "loop_w2", "env_w0", "gym_sync", "gym_async", "scale")
"""Keys of the benchmark rows, in table order."""

# (numerator, denominator, label): the ratios of steps/s printed in the table
_RATIOS = (
    ("loop_w0", "gym_sync", "vs SyncVectorEnv"),
    ("loop_w0", "env_w0", "Agent API vs low-level"),
    ("loop_w2", "gym_async", "vs AsyncVectorEnv"),
    ("loop_w2", "loop_w0", "vs workers=0"),
)


def rss_mb() -> float:
    """Resident memory of this process in MiB (``VmRSS``; the peak where ``/proc`` is missing)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _rates(step: Callable[[], None], batch: int, seconds: float, repeats: int) -> list[float]:
    """Steps per second of ``repeats`` runs of ``seconds`` each (``step`` advances ``batch`` games)."""
    out = []
    clock = time.perf_counter
    for _ in range(repeats):
        n = 0
        t0 = clock()
        end = t0 + seconds
        while True:
            step()
            n += 1
            t = clock()
            if t >= end:
                break
        out.append(n * batch / (t - t0))
    return out


def _row(key: str, variant: str, vectorizer: str, num_envs: int, workers: int, runs: list[float] | None, note: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "key": key,
        "variant": variant,
        "vectorizer": vectorizer,
        "num_envs": num_envs,
        "workers": workers,
        "steps_per_s": statistics.median(runs) if runs else None,
        "runs": list(runs or []),
        "note": note,
        "ratios": {},
        **extra,
    }


def _gl_rates(game: Any, num_envs: int, workers: int, seed: int, seconds: float, repeats: int, warmup: int) -> list[float]:
    from .vector import VecEnv

    env = VecEnv(game, num_envs=num_envs, workers=workers, seed=seed)
    try:
        env.reset()
        for _ in range(warmup):
            env.step(env.sample_actions())

        def step() -> None:
            env.step(env.sample_actions())

        return _rates(step, num_envs, seconds, repeats)
    finally:
        env.close()


def _gym_vec(kind: str, num_envs: int) -> Any:
    import gymnasium

    from .games.snake_envs import GymSnakeEnv

    fns = [GymSnakeEnv] * num_envs
    mode = gymnasium.vector.AutoresetMode.SAME_STEP
    if kind == "sync":
        return gymnasium.vector.SyncVectorEnv(fns, copy=False, autoreset_mode=mode)
    return gymnasium.vector.AsyncVectorEnv(fns, shared_memory=True, copy=False, autoreset_mode=mode)


def _gym_rates(kind: str, num_envs: int, seed: int, seconds: float, repeats: int, warmup: int) -> list[float]:
    envs = _gym_vec(kind, num_envs)
    try:
        envs.reset(seed=seed)
        envs.action_space.seed(seed)
        sample = envs.action_space.sample
        for _ in range(warmup):
            envs.step(sample())

        def step() -> None:
            envs.step(sample())

        return _rates(step, num_envs, seconds, repeats)
    finally:
        envs.close()


def _scale_row(n: int, seed: int, seconds: float, repeats: int, warmup: int) -> dict[str, Any]:
    from .games.snake import snake
    from .vector import VecEnv

    gc.collect()
    before = rss_mb()
    env = VecEnv(snake, num_envs=n, workers=0, seed=seed)
    try:
        env.reset()
        for _ in range(warmup):
            env.step(env.sample_actions())
        runs = _rates(lambda: env.step(env.sample_actions()), n, seconds, repeats)
        after = rss_mb()
    finally:
        env.close()
    delta = after - before
    return _row(
        "scale", "Agent API snake (game loop)", "gl.VecEnv workers=0", n, 0, runs,
        f"RSS {after:.0f} MiB ({delta:+.0f} MiB for the envs, {delta * 1024 / n:.1f} KiB per snake)",
        rss_mb=after, rss_delta_mb=delta,
    )


def run_benchmarks(
    seconds: float = 2.0,
    repeats: int = 5,
    num_envs: int | None = None,
    workers: int = 2,
    worker_num_envs: int | None = None,
    scale_envs: int = 10_000,
    async_num_envs: Iterable[int] = (2, 4, 8, 16),
    variants: Iterable[str] = VARIANTS,
    quick: bool = False,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Measure the steps per second of every variant; one dict per row (see the module docstring).

    A variant that fails (e.g. ``workers > 0`` where process workers are unavailable) gives a row
    with ``steps_per_s=None`` and the error in ``note``; the others still run.

    Args:
        seconds: length of each timed run.
        repeats: timed runs per variant; the row reports their median.
        num_envs: game copies of the gymloop variants and of ``SyncVectorEnv`` (default 256).
        workers: worker processes of the ``loop_w2`` variant.
        worker_num_envs: game copies of the ``loop_w2`` variant (default 2048: each hand-off to a
            worker then carries 1024 games, which amortizes its fixed cost).
        scale_envs: game copies of the ``scale`` variant.
        async_num_envs: the ``AsyncVectorEnv`` sizes tried (one process each); the fastest is kept.
        variants: which rows to run (keys of :data:`VARIANTS`).
        quick: a tiny run for tests (0.05 s, one repeat, at most 8 envs, 200 for ``scale``).
        seed: root seed of every variant.

    Returns:
        One dict per row, in :data:`VARIANTS` order, with keys ``key``, ``variant``, ``vectorizer``,
        ``num_envs``, ``workers``, ``steps_per_s`` (median, or ``None``), ``runs`` (each repeat),
        ``note``, ``ratios`` (label → ratio of steps/s, or ``None``), and for ``scale`` also
        ``rss_mb`` and ``rss_delta_mb``.
    """
    variants = tuple(variants)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ConfigError(f"unknown benchmark variant(s) {unknown}; choose from {list(VARIANTS)}")
    if num_envs is None:
        num_envs = 256
    if quick:
        seconds, repeats = min(seconds, 0.05), 1
        num_envs, scale_envs = min(num_envs, 8), min(scale_envs, 200)
        worker_num_envs = min(worker_num_envs or 8, 8)
        async_num_envs = (2,)
    for name, v, lo in (("num_envs", num_envs, 1), ("repeats", repeats, 1), ("scale_envs", scale_envs, 1), ("workers", workers, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ConfigError(f"{name} must be an int >= {lo}, got {v!r}")
    if not seconds > 0:
        raise ConfigError(f"seconds must be > 0, got {seconds!r}")
    async_sizes = tuple(async_num_envs)
    if not async_sizes or any(not isinstance(n, int) or n < 1 for n in async_sizes):
        raise ConfigError(f"async_num_envs must be ints >= 1, got {async_sizes!r}")
    warmup = 3 if quick else 20
    w_name = f"workers={workers}"
    rows: dict[str, dict[str, Any]] = {}

    def attempt(key: str, make_row: Callable[[], dict[str, Any]], fallback: tuple) -> None:
        log.info("benchmark %s ...", key)
        try:
            rows[key] = make_row()
        except Exception as e:  # a variant that cannot run is reported, not fatal
            msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            log.warning("benchmark %s failed: %s", key, msg)
            rows[key] = _row(key, *fallback, None, msg)
        r = rows[key]
        if r["steps_per_s"] is not None:
            log.info("benchmark %s: %.0f steps/s", key, r["steps_per_s"])

    from .games.snake import snake
    from .games.snake_envs import SnakeEnv

    loop, low, gym = "Agent API snake (game loop)", "low-level SnakeEnv", "GymSnakeEnv"
    # scale first, so its memory delta is not blurred by what the other variants leave allocated
    if "scale" in variants:
        attempt("scale", lambda: _scale_row(scale_envs, seed, seconds, repeats, min(warmup, 5)),
                (loop, "gl.VecEnv workers=0", scale_envs, 0))
    if "gym_async" in variants:
        def async_row() -> dict[str, Any]:
            trial = min(seconds, 0.5)
            tried = {}
            for n in async_sizes:
                tried[n] = statistics.median(_gym_rates("async", n, seed, trial, 1, warmup))
            best = max(tried, key=tried.__getitem__)
            runs = _gym_rates("async", best, seed, seconds, repeats, warmup)
            trials = ", ".join(f"{n}: {v:,.0f}" for n, v in tried.items())
            return _row("gym_async", gym, "gymnasium AsyncVectorEnv", best, best, runs,
                        f"shared memory; fastest size of trial (num_envs: steps/s) {trials}")

        attempt("gym_async", async_row, (gym, "gymnasium AsyncVectorEnv", async_sizes[0], async_sizes[0]))
    if "gym_sync" in variants:
        attempt("gym_sync", lambda: _row("gym_sync", gym, "gymnasium SyncVectorEnv", num_envs, 0,
                                         _gym_rates("sync", num_envs, seed, seconds, repeats, warmup)),
                (gym, "gymnasium SyncVectorEnv", num_envs, 0))
    if "loop_w0" in variants:
        attempt("loop_w0", lambda: _row("loop_w0", loop, "gl.VecEnv workers=0", num_envs, 0,
                                        _gl_rates(snake, num_envs, 0, seed, seconds, repeats, warmup)),
                (loop, "gl.VecEnv workers=0", num_envs, 0))
    if "env_w0" in variants:
        attempt("env_w0", lambda: _row("env_w0", low, "gl.VecEnv workers=0", num_envs, 0,
                                       _gl_rates(SnakeEnv, num_envs, 0, seed, seconds, repeats, warmup)),
                (low, "gl.VecEnv workers=0", num_envs, 0))
    if "loop_w2" in variants:
        n_w = max(worker_num_envs or 2048, workers)
        attempt("loop_w2", lambda: _row("loop_w2", loop, f"gl.VecEnv {w_name}", n_w, workers,
                                        _gl_rates(snake, n_w, workers, seed, seconds, repeats, warmup)),
                (loop, f"gl.VecEnv {w_name}", n_w, workers))

    for num, den, label in _RATIOS:
        if num in rows and den in rows:
            a, b = rows[num]["steps_per_s"], rows[den]["steps_per_s"]
            rows[num]["ratios"][label] = a / b if a is not None and b else None
    return [rows[k] for k in VARIANTS if k in rows]


def format_table(rows: list[dict[str, Any]]) -> str:
    """The rows of :func:`run_benchmarks` as one plain-text table (steps/s, spread, ratios, notes)."""
    import importlib.metadata as md

    try:
        gym_v = md.version("gymnasium")
    except md.PackageNotFoundError:  # pragma: no cover
        gym_v = "not installed"
    head = (
        f"snake throughput, random actions: Python {platform.python_version()}, numpy {np.__version__}, "
        f"gymnasium {gym_v}, {os.cpu_count()} CPUs"
    )
    cols = ("variant", "vectorizer", "envs", "procs", "steps/s", "min-max", "ratios", "note")
    table = []
    for r in rows:
        sps = r["steps_per_s"]
        runs = r["runs"]
        ratios = "; ".join(f"{v:.2f}x {k}" if v is not None else f"n/a {k}" for k, v in r["ratios"].items())
        table.append((
            r["variant"] + (" [scale]" if r["key"] == "scale" else ""),
            r["vectorizer"],
            f"{r['num_envs']:,}",
            str(r["workers"]),
            "n/a" if sps is None else f"{sps:,.0f}",
            f"{min(runs):,.0f}-{max(runs):,.0f}" if len(runs) > 1 else "",
            ratios,
            r["note"],
        ))
    widths = [max(len(c), *(len(t[i]) for t in table)) if table else len(c) for i, c in enumerate(cols)]
    right = {2, 3, 4, 5}

    def fmt(cells: tuple) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    lines = [head, fmt(cols), fmt(tuple("-" * w for w in widths))]
    lines += [fmt(t) for t in table]
    lines.append("procs: processes stepping games (0: the calling process). Steps/s: median of the repeats.")
    return "\n".join(lines)
