"""Skyfall, a game that draws itself with pygame: how fast it runs headless and drawn.

Prints frames (decisions) per second, the median of ``--rounds`` rounds each:

* ``VecEnv, 256 copies, headless``: ``gl.VecEnv(skyfall, 256)`` stepped with random actions, as
  training steps it (pygame is never imported);
* ``one game, headless``: ``gl.run`` with the scripted player;
* ``one game, window, no pacing``: the same, drawn into a window (``gl.Display.window(fps=None)``;
  SDL's dummy driver unless ``SDL_VIDEODRIVER`` says otherwise): the cost of drawing;
* ``one game, window at 60 fps``: the same, paced by ``display.tick()``.

Usage::

    python benchmarks/pygame_speed.py --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import gymloop as gl
from gymloop.display import with_display
from gymloop.games.skyfall import Catcher, skyfall


def vec_rate(seconds: float) -> float:
    env = gl.VecEnv(skyfall, 256, seed=0)
    env.reset()
    n, t = 0, time.perf_counter()
    while time.perf_counter() - t < seconds:
        env.step(env.sample_actions())
        n += 256
    rate = n / (time.perf_counter() - t)
    env.close()
    return rate


def run_rate(display: gl.Display, steps: int) -> float:
    t = time.perf_counter()
    r = gl.run(with_display(skyfall, display), Catcher(), seed=0, max_steps=steps)
    rate = r.steps / (time.perf_counter() - t)
    display.close()
    return rate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=3.0, help="per VecEnv round")
    args = p.parse_args()
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    cases = [
        ("VecEnv, 256 copies, headless", lambda: vec_rate(args.seconds)),
        ("one game, headless", lambda: run_rate(gl.HEADLESS, 5000)),
        ("one game, window, no pacing", lambda: run_rate(gl.Display.window(fps=None), 3000)),
        ("one game, window at 60 fps", lambda: run_rate(gl.Display.window(fps=60), 180)),
    ]
    print(f"{'case':<32} {'frames/s (median)':>18}")
    for name, fn in cases:
        rates = [fn() for _ in range(args.rounds)]
        print(f"{name:<32} {statistics.median(rates):>18,.0f}")


if __name__ == "__main__":
    main()
