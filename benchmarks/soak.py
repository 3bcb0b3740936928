"""Soak test: many minutes at full speed with games that fault and a worker killed, nothing leaking.

Snake copies run in a ``gl.VecEnv`` with worker processes, ``on_game_error="restart"`` and
``restart_workers=True``, stepped with random legal actions as fast as they go. Every copy raises now
and then (after a random number of decisions, about ``--fault-every`` on average, so a few faults a
minute over the whole VecEnv), and once, at a third of the run, one worker process is killed with
SIGKILL. Every ``--window`` seconds it records the steps/s, the resident memory of this process and
of the workers, open file descriptors, shared-memory segments, faults and worker restarts.

At the end it prints the table and the verdict:

- **memory flat**: resident memory (this process plus workers) of the last window within 5% of the
  first window after warm-up (``--warmup`` seconds);
- **throughput not decaying**: the median steps/s of the last third of the windows at least 90% of
  the first third's (the killed worker's window excluded);
- **no leak**: after ``close()`` the fds and ``/dev/shm`` segments are back to what they were before
  the VecEnv was made, and no worker process is left;
- **nothing lost**: every batch had exactly one decision per game copy (faulting copies and the
  killed worker's copies came back within the step), and the counted faults match the truncated
  episodes they ended.

Usage::

    python benchmarks/soak.py                   # 10 minutes, 2 workers, 256 copies
    python benchmarks/soak.py --minutes 0.5     # a short run, to check that it works
    python benchmarks/soak.py --json            # also write benchmarks/results/soak.json (every window in it)

Exit status 0 when every check holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import random
import signal
import statistics
import sys
import time
from typing import Any

from results import Run, add_json_option, figure

import gymloop as gl
from gymloop.games.snake import Body, Food, Head, Move, snake


class _FaultingAgent:
    """Passes every call to the training agent, and raises once its game has asked ``limit`` decisions."""

    def __init__(self, agent: Any, limit: int) -> None:
        self.agent = agent
        self.left = limit

    def act(self, obs: Any, *action_types: Any) -> Any:
        self.left -= 1
        if self.left <= 0:
            raise RuntimeError("soak: an injected game fault")
        return self.agent.act(obs, *action_types)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.agent, name)


@gl.game(entities=[Head, Body, Food], actions=[Move])
def faulting_snake(agent: Any, seed: int, fault_every: float = 1e6) -> None:
    """Snake whose copy raises after an exponentially distributed number of decisions (mean ``fault_every``)."""
    limit = 1 + int(random.Random(seed ^ 0x50A4).expovariate(1.0 / fault_every))
    snake(_FaultingAgent(agent, limit), seed)


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _shm() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def _worker_pids(env: gl.VecEnv) -> list[int]:
    backend = env._state.backend  # the process backend's worker handles (a benchmark may look inside)
    return [w.pid for w in getattr(backend, "workers", []) if w.pid is not None]


def _children() -> set[int]:
    """Child processes of this one, but multiprocessing's resource tracker (it lives as long as this process)."""
    me = os.getpid()
    kids = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) != me:
                        continue
                with open(f"/proc/{d}/cmdline") as f:
                    if "resource_tracker" not in f.read():
                        kids.add(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return kids


def soak(minutes: float, num_envs: int, workers: int, fault_every: float, window: float, warmup: float, seed: int) -> dict[str, Any]:
    """Run the soak; returns the windows, the totals and the checks."""
    with gl.VecEnv(snake, 2, workers=2) as warm:  # starts what lives as long as this process (the resource tracker)
        warm.reset()
    fds0, shm0 = _fds(), _shm()
    game = functools.partial(faulting_snake, fault_every=fault_every)
    env = gl.VecEnv(game, num_envs, workers=workers, seed=seed, on_game_error="restart", restart_workers=True, step_timeout=30.0)
    batch = env.reset()
    windows: list[dict[str, Any]] = []
    t_end = time.perf_counter() + minutes * 60
    kill_at = time.perf_counter() + minutes * 60 / 3
    killed_pid = None
    steps = lost = episodes = truncated = 0
    t0 = w_start = time.perf_counter()
    w_steps, w_killed = 0, False
    while True:
        batch = env.step(env.sample_actions())
        steps += num_envs
        w_steps += num_envs
        if batch.actor_slot["Move"].size != num_envs:
            lost += 1
        done = batch.terminated | batch.truncated
        episodes += int(done.sum())
        truncated += int(batch.truncated.sum())
        now = time.perf_counter()
        if killed_pid is None and now >= kill_at and workers > 1:
            killed_pid = _worker_pids(env)[0]
            os.kill(killed_pid, signal.SIGKILL)
            w_killed = True
        if now - w_start >= window:
            pids = [os.getpid(), *_worker_pids(env)]
            windows.append({
                "t_s": round(now - t0, 1),
                "steps_per_s": w_steps / (now - w_start),
                "rss_mib": sum(_rss_kib(p) for p in pids) / 1024,
                "fds": _fds(),
                "shm": len(_shm() - shm0),
                "faults": env.num_game_errors,
                "worker_restarts": env.num_worker_restarts,
                "killed": w_killed,
            })
            logging.info("%(t_s)7.1f s  %(steps_per_s)9.0f steps/s  %(rss_mib)7.1f MiB  fds %(fds)d  shm %(shm)d  "
                         "faults %(faults)d  worker restarts %(worker_restarts)d", windows[-1])
            w_start, w_steps, w_killed = now, 0, False
            if now >= t_end:
                break
    faults, restarts = env.num_game_errors, env.num_worker_restarts
    t_close = time.perf_counter()
    env.close()
    close_s = time.perf_counter() - t_close
    time.sleep(0.2)
    fds1, shm1, kids = _fds(), _shm(), _children()

    after = [w for w in windows if w["t_s"] > warmup] or windows
    rss_growth = after[-1]["rss_mib"] / after[0]["rss_mib"] - 1
    speeds = [w["steps_per_s"] for w in after if not w["killed"]]
    third = max(1, len(speeds) // 3)
    speed_ratio = statistics.median(speeds[-third:]) / statistics.median(speeds[:third])
    checks = {
        "memory flat (growth < 5%)": rss_growth < 0.05,
        "throughput not decaying (last third >= 90% of first)": speed_ratio >= 0.90,
        "no fd leak": fds1 <= fds0,
        "no shared-memory leak": not (shm1 - shm0),
        "no worker left": not kids,
        "close() within 2 s": close_s < 2.0,
        "nothing lost (one decision per copy every step)": lost == 0,
        "faults came back as truncated episodes": faults > 0 and truncated >= faults,
        "the killed worker was restarted": workers < 2 or restarts >= 1,
    }
    return {
        "config": {"minutes": minutes, "num_envs": num_envs, "workers": workers, "fault_every": fault_every, "seed": seed},
        "windows": windows,
        "totals": {
            "steps": steps, "seconds": round(time.perf_counter() - t0, 1), "episodes": episodes, "truncated": truncated,
            "faults": faults, "worker_restarts": restarts, "rss_growth": rss_growth, "speed_ratio": speed_ratio,
            "fds_before": fds0, "fds_after": fds1, "shm_left": len(shm1 - shm0), "close_s": close_s, "killed_pid": killed_pid,
        },
        "checks": checks,
    }


def format_report(r: dict[str, Any]) -> str:
    """The windows as a table, the totals and the checks."""
    lines = ["| t (s) | steps/s | RSS (MiB) | fds | shm | faults | worker restarts |", "|---|---|---|---|---|---|---|"]
    for w in r["windows"]:
        mark = " (worker killed)" if w["killed"] else ""
        lines.append(f"| {w['t_s']:.0f} | {w['steps_per_s']:,.0f}{mark} | {w['rss_mib']:.1f} | {w['fds']} | {w['shm']} | "
                     f"{w['faults']} | {w['worker_restarts']} |")
    t = r["totals"]
    lines.append("")
    lines.append(f"{t['steps']:,} steps in {t['seconds']} s; {t['episodes']:,} episodes ({t['truncated']:,} truncated); "
                 f"{t['faults']} game faults restarted; {t['worker_restarts']} worker restarts; RSS growth after warm-up "
                 f"{100 * t['rss_growth']:+.1f}%; steps/s last third / first third {t['speed_ratio']:.3f}; fds {t['fds_before']} -> "
                 f"{t['fds_after']}; shared-memory segments left {t['shm_left']}; close() {t['close_s']:.2f} s")
    for name, ok in r["checks"].items():
        lines.append(f"{'PASS' if ok else 'FAIL'}  {name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0, help="length of the run (default 10)")
    p.add_argument("--num-envs", type=int, default=256, help="game copies (default 256)")
    p.add_argument("--workers", type=int, default=2, help="processes, this one included (default 2)")
    p.add_argument("--fault-every", type=float, default=2e6,
                   help="mean decisions of one copy before it raises (default 2e6: a few faults a minute)")
    p.add_argument("--window", type=float, default=10.0, help="seconds per table row (default 10)")
    p.add_argument("--warmup", type=float, default=60.0, help="seconds before memory is compared (default 60)")
    p.add_argument("--seed", type=int, default=0)
    add_json_option(p, "soak")
    args = p.parse_args(argv)
    run = Run(__file__, "soak", "Soak: faulting games and a killed worker", "7", argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    logging.getLogger("gymloop").setLevel(logging.ERROR)  # one warning per injected fault would flood the output
    warmup = min(args.warmup, args.minutes * 60 / 4)
    r = soak(args.minutes, args.num_envs, args.workers, args.fault_every, args.window, warmup, args.seed)
    print(format_report(r))
    t = r["totals"]
    run.write(args, [
        figure(f"snake steps/s over {t['seconds']:.0f} s, {args.num_envs} copies, workers={args.workers}, "
               f"{t['faults']} game faults restarted, {t['worker_restarts']} worker restart(s)",
               statistics.median(w["steps_per_s"] for w in r["windows"]), "steps/s (median window)"),
        figure("resident memory growth after warm-up", 100 * t["rss_growth"], "%", target="within 5%", decimals=1),
        figure("checks passed (memory flat, no decay, nothing leaked, nothing lost)", sum(r["checks"].values()), f"of {len(r['checks'])}",
               decimals=0),
    ], r)
    return 0 if all(r["checks"].values()) else 1


if __name__ == "__main__":  # the guard matters: worker processes are spawned and import this file
    sys.exit(main())
