"""Many units deciding every frame: the cost of one frame's decisions for 1, 10, 100 and 1,000 units.

The game is ``examples/swarm.py``: every drone is an actor of one observation, so one
``agent.act(obs, Fly)`` answers all of them with one forward pass of the default network
(``NetConfig()``, random weights; speed does not depend on training). Per frame, the median over
``--frames`` frames of the time ``act`` takes (observation to choices), with the numpy runtime
(``gl.load``'s default) and onnxruntime (``runtime="onnx"``, when installed), on a quiet machine
and again while a second process keeps one core busy (as a game running beside the agent does).
Target (issue 32): at most 2 ms a frame for 100 units beside a busy process.

Usage::

    python benchmarks/many_units.py            # ~1 min
    python benchmarks/many_units.py --quick    # a tiny run, to check that it works
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from typing import Any

from results import Run, add_json_option, figure

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from inference import _busy_core  # noqa: E402


def _frame_ms(agent: Any, units: int, frames: int) -> float:
    from swarm import SIZE, Beacon, Drone, Fly

    import gymloop as gl

    rng = random.Random(units)
    drones = [Drone(rng.randrange(SIZE), rng.randrange(SIZE)) for _ in range(units)]
    goals = [Beacon(rng.randrange(SIZE), rng.randrange(SIZE)) for _ in range(8)]
    obs = gl.Obs().entities(goals).actors(drones)
    for _ in range(min(5, frames)):
        agent.act(obs, Fly)
    times = []
    for _ in range(frames):
        t = time.perf_counter()
        agent.act(obs, Fly)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=60, help="frames timed per case (a tenth of it for 1,000 units)")
    p.add_argument("--quick", action="store_true", help="a tiny run (for tests)")
    add_json_option(p, "many_units")
    args = p.parse_args(argv)
    run = Run(__file__, "many_units", "Many units deciding every frame (swarm, default network)", "13", argv)
    sizes = [1, 10, 100] if args.quick else [1, 10, 100, 1000]
    frames = 3 if args.quick else args.frames

    from swarm import swarm

    import gymloop as gl
    from gymloop.neural import random_checkpoint

    tmp = tempfile.TemporaryDirectory()
    path = os.path.join(tmp.name, "swarm.safetensors")
    random_checkpoint(path, swarm, seed=0)
    agents = {"numpy": gl.load(path, seed=0)}
    try:
        agents["onnx"] = gl.load(path, seed=0, runtime="onnx")
    except gl.ConfigError:
        pass
    rows = []
    for busy in (False, True):
        with _busy_core() if busy else contextlib.nullcontext():
            for n in sizes:
                for rt, agent in agents.items():
                    rows.append((rt, n, busy, _frame_ms(agent, n, max(1, frames // 10) if n >= 1000 else frames)))
    print(f"{'runtime':8} {'units':>6} {'beside':>10} {'ms per frame':>13} {'µs per unit':>12}")
    for rt, n, busy, ms in rows:
        print(f"{rt:8} {n:6,} {'busy core' if busy else 'quiet':>10} {ms:13.3f} {ms * 1e3 / n:12.1f}")
    at100 = [ms for rt, n, busy, ms in rows if rt == "numpy" and n == 100 and busy]
    figs = []
    if at100:
        ok = at100[0] <= 2.0
        print(f"100 units beside a busy core: {at100[0]:.2f} ms a frame (target <= 2 ms): {'ok' if ok else 'MISSED'}")
        figs.append(figure("one frame's decisions, 100 units, beside a busy core (numpy)", at100[0], "ms", target="<= 2 ms"))
    run.write(args, figs, [{"runtime": rt, "units": n, "busy": busy, "ms": ms} for rt, n, busy, ms in rows])
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
