"""Neural-agent inference speed: numpy (``gl.load``) beside torch, on snake with the default network.

Two measurements, each for numpy and for torch on exactly the same inputs:

* **single decision**: the latency of one ``agent.act(obs, Move)`` (observation to action) on real
  snake observations, median over many calls. Beside it the forward pass alone on the same
  observation packed as a one-slot batch, in numpy and in torch. Targets: ``act`` <= 50 us at 2-12
  entities, <= 60 us at 44 (on a normal host).
* **batched**: one forward pass (and sampling) over a 256-slot batch of snake observations taken from
  a ``VecEnv``; decisions per second = slots / median time.
  Also with numpy's BLAS left at its default thread count (``numpy, BLAS threads free``; gymloop
  holds it to one thread during a pass: :mod:`gymloop.nn.blas`).
* **busy core**: the batched rows and ``act`` again while a second process keeps one core busy
  (the benchmark starts it), as a game running beside the agent does. Target: numpy >= 150,000
  decisions/s there.

The network is ``NetConfig()`` (the defaults) with random weights and normalization statistics
gathered from play: speed does not depend on training. Torch runs on the CPU (``--torch-threads``,
default 1), under ``torch.inference_mode()``.

Usage::

    python benchmarks/inference.py            # ~1 minute (3 repeats)
    python benchmarks/inference.py --quick    # a tiny run, to check that it works
    python benchmarks/inference.py --checkpoint snake.safetensors   # a given snake agent
    python benchmarks/inference.py --json     # also write benchmarks/results/inference.json
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from results import Run, add_json_option, figure


def _timings(variants: dict[str, Callable[[], Any]], calls: int, rounds: int = 5, per_call: bool = True) -> dict[str, float]:
    """Median time of one call of each variant, in microseconds.

    The variants are timed in interleaved rounds (round-robin, ``calls // rounds`` calls each per
    round, after a warm-up), so that a noisy machine's slow moments hit every variant alike.
    ``per_call``: the median of individually timed calls; otherwise the median over rounds of the
    mean time per call (for calls long enough that the timer's own cost does not matter).
    """
    per = max(1, calls // rounds)
    for fn in variants.values():
        for _ in range(min(per, 200)):
            fn()
    times: dict[str, list[float]] = {k: [] for k in variants}
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for name, fn in variants.items():
            out = times[name]
            if per_call:
                for _ in range(per):
                    t0 = clock()
                    fn()
                    out.append(clock() - t0)
            else:
                t0 = clock()
                for _ in range(per):
                    fn()
                out.append((clock() - t0) / per)
    return {k: statistics.median(v) / 1e3 for k, v in times.items()}


@contextlib.contextmanager
def _busy_core() -> Iterator[None]:
    """A second process spinning on one core meanwhile (what a game beside the agent looks like)."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        yield
    finally:
        proc.kill()
        proc.wait()


class _Recorder:
    """Plays like a random agent and keeps the observations it was shown."""

    def __init__(self, seed: int) -> None:
        import gymloop as gl

        self.inner = gl.RandomAgent(seed)
        self.seen: list[tuple] = []

    def act(self, obs: Any, *types: Any) -> Any:
        self.seen.append((copy.deepcopy(obs), types))  # the game mutates the lists it observed
        return self.inner.act(obs, *types)

    def game_over(self, obs: Any, truncated: bool = False) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20_000, help="single decisions timed (default 20000)")
    p.add_argument("--num-envs", type=int, default=256, help="slots of the batched measurement (default 256)")
    p.add_argument("--batches", type=int, default=50, help="batched forward passes timed (default 50)")
    p.add_argument("--checkpoint", help="a snake agent checkpoint (default: a random NetConfig() network, needs torch)")
    p.add_argument("--no-torch", action="store_true", help="numpy rows only")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch intra-op threads (default 1: faster than torch's default on batches this small)")
    p.add_argument("--repeats", type=int, default=3, help="whole measurements; each row is the median over them (default 3)")
    p.add_argument("--quick", action="store_true", help="a tiny run (for tests)")
    add_json_option(p, "inference")
    args = p.parse_args(argv)
    run = Run(__file__, "inference", "Neural agent inference (snake, default network)", "3", argv)
    if args.quick:
        args.calls, args.batches, args.num_envs, args.repeats = 300, 3, 16, 1

    import gymloop as gl
    from gymloop.games.snake import Move, snake
    from gymloop.neural import load, random_checkpoint

    tmp = None
    path = args.checkpoint
    if path is None:
        tmp = tempfile.TemporaryDirectory()
        path = os.path.join(tmp.name, "snake.safetensors")
        try:
            random_checkpoint(path, snake, seed=0)
        except ImportError:
            p.error("without torch, give a snake agent with --checkpoint (a random one is made with torch)")
    agent = load(path, seed=0)
    policy = agent.policy
    use_torch = not args.no_torch
    if use_torch:
        try:
            import torch

            from gymloop.checkpoint import read_agent
            from gymloop.nn.torch_policy import policy_from_file
        except ImportError:
            use_torch = False
    if use_torch:
        torch.set_num_threads(args.torch_threads)
        tpol = policy_from_file(read_agent(path)).eval()
        gen = torch.Generator().manual_seed(0)

    # ---- single decisions: 200 observations of random play (short snakes), and one long snake
    rec = _Recorder(seed=1)
    gl.run(snake, rec, seed=1, max_steps=2000)
    seen = rec.seen[:: max(1, len(rec.seen) // 200)]
    lengths = [len(o.entity_list()) for o, _ in seen]
    def acting(who: Any) -> Callable[[], Any]:
        """One ``who.act`` per call, over the recorded observations in turn."""
        order = itertools.cycle(seen)

        def call() -> Any:
            obs, types = next(order)
            return who.act(obs, *types)

        return call

    act_one = acting(agent)

    # a long snake: the head, 40 segments winding behind it, 3 foods
    from gymloop.games.snake import Body, Food, Head

    cells = [(x if y % 2 == 0 else 9 - x, y) for y in range(10) for x in range(10)][:41]
    long_obs = gl.Obs(score=41).entities([Food(0, 9), Food(5, 8), Food(9, 9)]).entities([Body(x, y) for x, y in cells[-2::-1]])
    long_obs = long_obs.actor(Head(*cells[-1]))
    n_long = len(long_obs.entity_list())

    # the same observations as one-slot batches (built by the agent's own batch path)
    packed1 = [agent.encoder.packed([(agent, o, *t)])[0] for o, t in seen]
    j = 0

    def np_forward1() -> None:
        nonlocal j
        policy.sample(packed1[j % len(packed1)], agent.rng)
        j += 1

    try:  # the same agent through onnxruntime (gl.load(path, runtime="onnx")), when installed
        ox = load(path, seed=0, runtime="onnx")
    except gl.ConfigError:
        ox = None
    k = 0

    def torch_forward1() -> None:
        nonlocal k
        tpol(packed1[k % len(packed1)], generator=gen)
        k += 1

    # ---- batched: one pass over every slot of a VecEnv batch
    env = gl.VecEnv(snake, num_envs=args.num_envs, seed=2)
    b = env.reset()
    for _ in range(60):  # let the snakes grow a little
        b = env.step(env.sample_actions())
    env.close()
    pb = policy.pack(b)
    S = b.num_slots
    rng = np.random.default_rng(0)
    variants = {"numpy": lambda: policy.sample(pb, rng)}
    if use_torch:
        def torch_batch() -> None:
            with torch.inference_mode():
                tpol(pb, generator=gen)

        variants["torch"] = torch_batch
    # numpy's BLAS at its default thread count (not held to one thread, as gymloop.nn.blas does).
    # Timed on its own, after the others: its BLAS threads spin on after each call and would slow
    # whatever is timed next.
    free = copy.copy(policy)
    free.logits = types.MethodType(type(policy).logits.__wrapped__, free)  # type: ignore[method-assign]
    unheld = {"numpy, BLAS threads free": lambda: free.sample(pb, rng)}

    def batched() -> dict[str, float]:
        t = _timings(variants, args.batches, rounds=min(5, args.batches), per_call=False)
        t.update(_timings(unheld, args.batches, rounds=min(5, args.batches), per_call=False))
        return t

    few, long = f"{min(lengths)}-{max(lengths)} entities", f"{n_long} entities"
    numpy_acts = {"act": act_one, "long": lambda: agent.act(long_obs, Move)}
    onnx_acts = {} if ox is None else {"onnx act": acting(ox), "onnx long": lambda: ox.act(long_obs, Move)}

    def measure() -> list[tuple[str, str, float, int]]:
        """Every row once: (backend, what, median microseconds a call, decisions a call)."""
        out = []
        t = _timings({**numpy_acts, "fwd": np_forward1}, args.calls)
        out.append(("numpy", f"NeuralAgent.act, {few}", t["act"], 1))
        out.append(("numpy", f"NeuralAgent.act, {long}", t["long"], 1))
        out.append(("numpy", "forward+sample, 1-slot batch", t["fwd"], 1))
        if onnx_acts:
            t = _timings(onnx_acts, args.calls)
            out.append(("onnx", f"NeuralAgent.act, {few}", t["onnx act"], 1))
            out.append(("onnx", f"NeuralAgent.act, {long}", t["onnx long"], 1))
        if use_torch:
            with torch.inference_mode():
                t = _timings({"fwd": torch_forward1}, args.calls // 10)
            out.append(("torch", "forward+sample, 1-slot batch", t["fwd"], 1))
        for backend, us in batched().items():
            out.append((backend, f"forward+sample, {S}-slot batch", us, S))
        with _busy_core():  # the same, beside a process that keeps one core busy (as a game does)
            tb = _timings({**numpy_acts, **onnx_acts}, args.calls // 4)
            t = batched()
        for backend, us in t.items():
            out.append((backend, f"forward+sample, {S}-slot batch, busy core", us, S))
        for key, us in tb.items():
            backend = "onnx" if key.startswith("onnx") else "numpy"
            out.append((backend, f"NeuralAgent.act, {long if key.endswith('long') else few}, busy core", us, 1))
        return out

    # the whole measurement --repeats times, each row the median over them: a burst of CPU steal
    # on a shared machine then spoils one repeat, not the figure
    repeats = [measure() for _ in range(args.repeats)]
    rows = [(backend, what, statistics.median(r[i][2] for r in repeats), n) for i, (backend, what, _, n) in enumerate(repeats[0])]
    t_act = next(us for backend, what, us, _ in rows if backend == "numpy" and what == f"NeuralAgent.act, {few}")
    t_long = next(us for backend, what, us, _ in rows if backend == "numpy" and what == f"NeuralAgent.act, {long}")
    spread = {(backend, what): (min(r[i][2] for r in repeats), max(r[i][2] for r in repeats))
              for i, (backend, what, _, _) in enumerate(repeats[0])}

    cfg = policy.cfg
    print(
        f"snake, NetConfig(d_model={cfg.d_model}, n_layer={cfg.n_layer}, n_head={cfg.n_head}, readout={cfg.readout}, "
        f"relpos={'on' if policy.relpos is not None else 'off'}); observations of {min(lengths)}-{max(lengths)} entities "
        f"(median {int(np.median(lengths))}), batch of {S} slots with {int(pb.lengths.sum())} entities"
        + (f"; torch {torch.__version__}, {torch.get_num_threads()} thread(s)" if use_torch else "")
    )
    print(f"{'backend':8} {'what':36} {'median':>12} {'per decision':>14} {'decisions/s':>13}   range over {args.repeats} repeat(s)")
    for backend, what, us, n in rows:
        lo, hi = spread[backend, what]
        print(f"{backend:8} {what:36} {us:9.1f} us {us / n:11.2f} us {n / us * 1e6:13,.0f}   {lo:.1f}-{hi:.1f} us")
    verdict = []
    verdict.append(f"act latency {t_act:.0f} us (target <= 50 us): {'ok' if t_act <= 50 else 'MISSED'}")
    verdict.append(f"act latency at {n_long} entities {t_long:.0f} us (target <= 60 us): {'ok' if t_long <= 60 else 'MISSED'}")
    thr = [r for r in rows if r[0] == "numpy" and r[1] == f"forward+sample, {S}-slot batch"][0]
    tput = thr[3] / thr[2] * 1e6
    busy = [r for r in rows if r[0] == "numpy" and r[1] == f"forward+sample, {S}-slot batch, busy core"][0]
    tput_busy = busy[3] / busy[2] * 1e6
    verdict.append(f"batched beside a busy core {tput_busy:,.0f} decisions/s (target >= 150,000): "
                   f"{'ok' if tput_busy >= 150_000 else 'MISSED'}")
    print("; ".join(verdict))
    torch_rows = {what: us for backend, what, us, _ in rows if backend == "torch"}
    one, many = "forward+sample, 1-slot batch", f"forward+sample, {S}-slot batch"
    figs = [figure(f"`NeuralAgent.act` latency (numpy), {rows[0][1].split(', ')[1]}", t_act, "µs", target="<= 50 µs"),
            figure(f"`NeuralAgent.act` latency (numpy), {n_long} entities", t_long, "µs", target="<= 60 µs")]
    fwd1 = next(us for backend, what, us, _ in rows if backend == "numpy" and what == one)
    for what, value, unit in ((one, fwd1, "µs"), (many, tput, "decisions/s")):
        base = torch_rows.get(what)
        if base is not None and unit == "decisions/s":
            base = S / base * 1e6
        figs.append(figure(f"{what} (numpy)", value, unit, baseline=f"torch {torch.__version__}, 1 thread" if base else None,
                           baseline_value=base, ratio=(base / value if unit == "µs" else value / base) if base else None,
                           target=None))
    figs.append(figure(f"{many}, beside a busy core (numpy)", tput_busy, "decisions/s", target=">= 150,000 decisions/s"))
    run.write(args, figs, [{"backend": b, "what": w, "median_us": us, "slots": n} for b, w, us, n in rows])
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
