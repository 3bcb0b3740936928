"""Throughput benchmark: one snake, driven through gymloop's APIs and through Gymnasium's.

The same rules (:class:`~gymloop.games.snake.SnakeGame`) run as:

* ``loop_w0`` / ``loop_w2``: the Agent-API game loop :func:`gymloop.games.snake.snake` in a
  :class:`~gymloop.VecEnv` with ``workers=0`` (one process) and ``workers=2`` (two worker processes);
* ``env_w0``: the hand-written low-level :class:`~gymloop.games.snake_envs.SnakeEnv` in a
  ``VecEnv`` with ``workers=0``;
* ``gym_sync`` / ``gym_async``: :class:`~gymloop.games.snake_envs.GymSnakeEnv` under
  ``gymnasium.vector.SyncVectorEnv`` and ``AsyncVectorEnv``;
* ``scale``: ``scale_envs`` game loops (10,000 by default) in one process, with its resident memory
  (measured right after that vector env is created and reset, before any other variant's env exists).

Every variant takes uniformly random actions from its own API's sampler
(``VecEnv.sample_actions()``, ``envs.action_space.sample()``): a few microseconds per batch, under
1 % of a step of 256 envs and about 2 % of an ``AsyncVectorEnv`` step of 2 envs, so no variant
needed pre-generated actions. A *step* is one decision of one game copy.

**Interleaved timing.** The speed of a (virtual) machine drifts, so the variants are not timed one
after the other. Each variant's vector env is created once (``scale`` first, then the
``AsyncVectorEnv`` size trial below, then the others) and warmed up once, and all of them stay
alive until the end. Then come ``repeats`` rounds; in each round every variant is timed for one run
of ``seconds``, in a fixed order (``scale``, ``gym_sync``, ``loop_w0``, ``env_w0``, ``loop_w2``,
``gym_async``: the two sides of each ratio are neighbours, or one apart) that is reversed every
other round, so a drift within a round tilts the ratios one way in one round and the other way in
the next. A row's steps/s is the median of its ``repeats`` runs (the table also shows their
min-max). A *ratio* is the median over the rounds of the ratio of the two variants' steps/s *in the
same round*, so a drift between rounds cancels out of it; it is not the ratio of the two medians.
A variant that cannot be created, or that raises while timed, is reported as ``n/a`` (with the
error) and left out of the later rounds; its env is closed at once, and every other env when the
benchmark ends, normally or not.

Gymnasium is given the fastest configuration we measured: ``SyncVectorEnv`` over the same
``num_envs`` copies with ``copy=False`` (its speed barely depends on the count); ``AsyncVectorEnv`` with shared memory and
``copy=False`` (observations stay in shared memory), one process per copy as it always is, with
the number of copies picked as the fastest of ``async_num_envs`` in a short trial run (each size
timed once, one after the other, before the rounds). Both use the ``SAME_STEP`` autoreset mode,
where, as in gymloop, every step is a decision (the default ``NEXT_STEP`` spends one step per
episode on the reset alone and would count it as a step).

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

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

# The order in which a round times the variants (reversed every other round): the two sides of
# each ratio in _RATIOS are neighbours (loop_w2 / loop_w0: one apart), so little drift falls between them.
_TIMING_ORDER = ("scale", "gym_sync", "loop_w0", "env_w0", "loop_w2", "gym_async")


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


def _time_run(step: Callable[[], None], batch: int, seconds: float) -> float:
    """Steps per second of one run of ``seconds`` (``step`` advances ``batch`` games)."""
    clock = time.perf_counter
    n = 0
    t0 = clock()
    end = t0 + seconds
    while True:
        step()
        n += 1
        t = clock()
        if t >= end:
            break
    return n * batch / (t - t0)


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
        "ratio_runs": {},
        **extra,
    }


def _error_text(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


@dataclass
class _Variant:
    """One row while it is measured: its live vector env, its step function and its runs so far."""

    key: str
    variant: str
    vectorizer: str
    num_envs: int
    workers: int
    env: Any = None
    step: Callable[[], None] | None = None
    runs: list[float] = field(default_factory=list)
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def close(self) -> None:
        env, self.env, self.step = self.env, None, None
        if env is not None:
            try:
                env.close()
            except Exception as e:  # closing one env must not keep the others open
                log.warning("benchmark %s: close failed: %s", self.key, _error_text(e))

    def fail(self, e: BaseException) -> None:
        self.error = _error_text(e)
        log.warning("benchmark %s failed: %s", self.key, self.error)
        self.close()

    def row(self) -> dict[str, Any]:
        if self.error is not None:
            return _row(self.key, self.variant, self.vectorizer, self.num_envs, self.workers, None, self.error)
        return _row(self.key, self.variant, self.vectorizer, self.num_envs, self.workers, self.runs, self.note, **self.extra)


def _gym_vec(kind: str, num_envs: int) -> Any:
    import gymnasium

    from .games.snake_envs import GymSnakeEnv

    fns = [GymSnakeEnv] * num_envs
    mode = gymnasium.vector.AutoresetMode.SAME_STEP
    if kind == "sync":
        return gymnasium.vector.SyncVectorEnv(fns, copy=False, autoreset_mode=mode)
    return gymnasium.vector.AsyncVectorEnv(fns, shared_memory=True, copy=False, autoreset_mode=mode)


def _prime_gym(envs: Any, seed: int, warmup: int) -> Callable[[], None]:
    """Reset and warm up a Gymnasium vector env; returns its timed step (random actions)."""
    envs.reset(seed=seed)
    envs.action_space.seed(seed)
    sample = envs.action_space.sample
    for _ in range(warmup):
        envs.step(sample())

    def step() -> None:
        envs.step(sample())

    return step


def _prime_gl(env: Any, warmup: int) -> Callable[[], None]:
    """Warm up a reset gymloop ``VecEnv``; returns its timed step (random actions)."""
    for _ in range(warmup):
        env.step(env.sample_actions())

    def step() -> None:
        env.step(env.sample_actions())

    return step


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

    All variants' envs are created and warmed up first and then timed in interleaved rounds, one
    run of each per round. A variant that fails (e.g. ``workers > 0`` where process workers are
    unavailable) gives a row with ``steps_per_s=None`` and the error in ``note``, and is left out
    of the later rounds; the others still run. Every env is closed before this returns or raises.

    Args:
        seconds: length of each timed run.
        repeats: rounds; each times every variant once. A row reports the median of its runs.
        num_envs: game copies of the gymloop variants and of ``SyncVectorEnv`` (default 256).
        workers: worker processes of the ``loop_w2`` variant.
        worker_num_envs: game copies of the ``loop_w2`` variant (default 1024: 512 games in this
            process and 512 in the worker; more per process costs more per game, fewer leave the
            hand-off's fixed cost less amortized).
        scale_envs: game copies of the ``scale`` variant.
        async_num_envs: the ``AsyncVectorEnv`` sizes tried (one process each); the fastest is kept.
        variants: which rows to run (keys of :data:`VARIANTS`).
        quick: a tiny run for tests (0.05 s, one repeat, at most 8 envs, 200 for ``scale``).
        seed: root seed of every variant.

    Returns:
        One dict per row, in :data:`VARIANTS` order, with keys ``key``, ``variant``, ``vectorizer``,
        ``num_envs``, ``workers``, ``steps_per_s`` (median, or ``None``), ``runs`` (one per round),
        ``note``, ``ratios`` (label → median over the rounds of the ratio of the two variants'
        steps/s in the same round, or ``None``), ``ratio_runs`` (label → those per-round ratios),
        and for ``scale`` also ``rss_mb`` and ``rss_delta_mb``.
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
    for name, val, lo in (("num_envs", num_envs, 1), ("repeats", repeats, 1), ("scale_envs", scale_envs, 1), ("workers", workers, 1)):
        if isinstance(val, bool) or not isinstance(val, int) or val < lo:
            raise ConfigError(f"{name} must be an int >= {lo}, got {val!r}")
    if not seconds > 0:
        raise ConfigError(f"seconds must be > 0, got {seconds!r}")
    async_sizes = tuple(async_num_envs)
    if not async_sizes or any(not isinstance(n, int) or n < 1 for n in async_sizes):
        raise ConfigError(f"async_num_envs must be ints >= 1, got {async_sizes!r}")
    warmup = 3 if quick else 20
    w_name = f"workers={workers}"
    n_w = max(worker_num_envs or 1024, workers)

    from .games.snake import snake
    from .games.snake_envs import SnakeEnv
    from .vector import VecEnv

    loop, low, gym = "Agent API snake (game loop)", "low-level SnakeEnv", "GymSnakeEnv"
    specs = {
        "loop_w0": _Variant("loop_w0", loop, "gl.VecEnv workers=0", num_envs, 0),
        "loop_w2": _Variant("loop_w2", loop, f"gl.VecEnv {w_name}", n_w, workers),
        "env_w0": _Variant("env_w0", low, "gl.VecEnv workers=0", num_envs, 0),
        "gym_sync": _Variant("gym_sync", gym, "gymnasium SyncVectorEnv", num_envs, 0),
        "gym_async": _Variant("gym_async", gym, "gymnasium AsyncVectorEnv", async_sizes[0], async_sizes[0]),
        "scale": _Variant("scale", loop, "gl.VecEnv workers=0", scale_envs, 0),
    }
    live = {k: specs[k] for k in VARIANTS if k in variants}

    def open_scale(v: _Variant) -> None:
        gc.collect()
        before = rss_mb()
        v.env = env = VecEnv(snake, num_envs=scale_envs, workers=0, seed=seed)
        env.reset()
        after = rss_mb()  # before any other variant's env exists, so only this env is in the delta
        delta = after - before
        v.note = f"RSS {after:.0f} MiB ({delta:+.0f} MiB for the envs, {delta * 1024 / scale_envs:.1f} KiB per snake)"
        v.extra = {"rss_mb": after, "rss_delta_mb": delta}
        v.step = _prime_gl(env, min(warmup, 5))

    def open_gl(game: Any, n: int, w: int) -> Callable[[_Variant], None]:
        def open_(v: _Variant) -> None:
            v.env = env = VecEnv(game, num_envs=n, workers=w, seed=seed)
            env.reset()
            v.step = _prime_gl(env, warmup)

        return open_

    def open_gym_sync(v: _Variant) -> None:
        v.env = envs = _gym_vec("sync", num_envs)
        v.step = _prime_gym(envs, seed, warmup)

    def open_gym_async(v: _Variant) -> None:
        # a short trial of each size, one after the other, before the interleaved rounds
        trial = min(seconds, 0.5)
        tried = {}
        for n in async_sizes:
            envs = _gym_vec("async", n)
            try:
                tried[n] = _time_run(_prime_gym(envs, seed, warmup), n, trial)
            finally:
                envs.close()
        best = max(tried, key=tried.__getitem__)
        v.num_envs = v.workers = best
        trials = ", ".join(f"{n}: {r:,.0f}" for n, r in tried.items())
        v.note = f"shared memory; fastest size of trial (num_envs: steps/s) {trials}"
        v.env = envs = _gym_vec("async", best)
        v.step = _prime_gym(envs, seed, warmup)

    openers: dict[str, Callable[[_Variant], None]] = {
        "scale": open_scale,  # first, so its memory delta is not blurred by the other variants' envs
        "gym_async": open_gym_async,
        "gym_sync": open_gym_sync,
        "loop_w0": open_gl(snake, num_envs, 0),
        "env_w0": open_gl(SnakeEnv, num_envs, 0),
        "loop_w2": open_gl(snake, n_w, workers),
    }

    try:
        for key, open_ in openers.items():
            if key not in live:
                continue
            v = live[key]
            log.info("benchmark %s: creating and warming up ...", key)
            try:
                open_(v)
            except Exception as e:  # a variant that cannot run is reported, not fatal
                v.fail(e)

        order = [k for k in _TIMING_ORDER if k in live]
        for r in range(repeats):
            for key in order if r % 2 == 0 else order[::-1]:
                v = live[key]
                if v.error is not None:
                    continue
                try:
                    assert v.step is not None  # set by its opener, which succeeded (no error)
                    v.runs.append(_time_run(v.step, v.num_envs, seconds))
                except Exception as e:
                    v.fail(e)
            done = ", ".join(f"{k} {live[k].runs[-1]:,.0f}" for k in order if live[k].error is None)
            log.info("benchmark round %d/%d (steps/s): %s", r + 1, repeats, done or "-")
    finally:
        for v in live.values():
            v.close()

    rows = {k: v.row() for k, v in live.items()}
    for num, den, label in _RATIOS:
        if num in rows and den in rows:
            a, b = rows[num]["runs"], rows[den]["runs"]
            per = [x / y for x, y in zip(a, b) if y > 0] if len(a) == len(b) else []
            rows[num]["ratio_runs"][label] = per
            rows[num]["ratios"][label] = statistics.median(per) if per else None
    for r_ in rows.values():
        if r_["steps_per_s"] is not None:
            log.info("benchmark %s: %.0f steps/s", r_["key"], r_["steps_per_s"])
    return [rows[k] for k in VARIANTS if k in rows]


def _spin(n: int) -> float:
    t = time.perf_counter()
    x = 0
    for i in range(n):
        x += i
    return time.perf_counter() - t


def cpu_parallelism(n: int = 3_000_000) -> float:
    """Effective cores right now: how much work two processes get done, relative to one.

    On a shared virtual machine two "cores" can behave like one for minutes at a time; the
    ``workers=2`` row only means something next to this figure (about 2.0 when both cores are
    really there, about 1.0 when the host gives the two of them one core's time).
    """
    import multiprocessing as mp

    solo = min(_spin(n) for _ in range(2))
    ctx = mp.get_context("fork" if hasattr(os, "fork") else "spawn")
    with ctx.Pool(2) as pool:
        pair = max(pool.map(_spin, [n, n]))
    return 2.0 * solo / pair


def format_table(rows: list[dict[str, Any]], parallelism: float | None = None) -> str:
    """The rows of :func:`run_benchmarks` as one plain-text table (steps/s, spread, ratios, notes)."""
    import importlib.metadata as md

    try:
        gym_v = md.version("gymnasium")
    except md.PackageNotFoundError:  # pragma: no cover
        gym_v = "not installed"
    head = (
        f"snake throughput, random actions: Python {platform.python_version()}, numpy {np.__version__}, "
        f"gymnasium {gym_v}, {os.cpu_count()} CPUs"
        + (f" (effective cores measured just before: {parallelism:.2f})" if parallelism is not None else "")
    )
    cols = ("variant", "vectorizer", "envs", "procs", "steps/s", "min-max", "ratios", "note")
    table = []
    for r in rows:
        sps = r["steps_per_s"]
        runs = r["runs"]
        ratios = []
        for label, v in r["ratios"].items():
            per = r.get("ratio_runs", {}).get(label) or []
            if v is None:
                ratios.append(f"n/a {label}")
            elif len(per) > 1:
                ratios.append(f"{v:.2f}x ({min(per):.2f}-{max(per):.2f}) {label}")
            else:
                ratios.append(f"{v:.2f}x {label}")
        table.append((
            r["variant"] + (" [scale]" if r["key"] == "scale" else ""),
            r["vectorizer"],
            f"{r['num_envs']:,}",
            str(r["workers"]),
            "n/a" if sps is None else f"{sps:,.0f}",
            f"{min(runs):,.0f}-{max(runs):,.0f}" if len(runs) > 1 else "",
            "; ".join(ratios),
            r["note"],
        ))
    widths = [max(len(c), *(len(t[i]) for t in table)) if table else len(c) for i, c in enumerate(cols)]
    right = {2, 3, 4, 5}

    def fmt(cells: tuple) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    lines = [head, fmt(cols), fmt(tuple("-" * w for w in widths))]
    lines += [fmt(t) for t in table]
    lines.append(
        "procs: processes stepping games (0: the calling process). Variants timed in interleaved rounds, "
        "one run each per round. Steps/s: median of the runs (min-max: their range). Ratio: median over "
        "the rounds of the ratio of the two variants' steps/s in the same round (in parentheses: their range)."
    )
    return "\n".join(lines)
