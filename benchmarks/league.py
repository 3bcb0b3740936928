"""A self-play league against plain self-play, on the two-snake game (duel).

For each seed: ``gymloop train duel --league`` and ``gymloop train duel`` (plain self-play: the live
policy plays both seats), the same budget, one torch thread each; then

* the league's snapshots, its final agent and the random agent are rated against one another
  (``gymloop rate``, ``--episodes`` games per pair): the Spearman correlation between a snapshot's
  place in training and its rating (target >= 0.8), where the random agent ranks, and the final
  agent's score against the first snapshot (target >= 70%, wins plus half the draws);
* the two runs' final agents and the random agent are rated together: the league's agent should be
  at least as strong as plain self-play's (its rating's interval above or overlapping);
* the ratings go into the league's library (``write_ratings``), ``library.pick(level="easy")`` and
  ``pick(level="hard")`` play each other (``2 * --episodes`` games): hard should score above 50%;
* ten of the trained agents (snapshots spread over the run, and the final one) are rated again,
  ``--episodes`` games per pair, timed: the issue's target is under a minute on two cores.

Usage::

    python benchmarks/league.py --seeds 0 1 --steps 1000000 --json     # ~10 min on two cores
    python benchmarks/league.py --quick                                 # a tiny run, to check that it works
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
from results import Run, add_json_option, figure


def _ranks(a: Any) -> np.ndarray:
    return np.argsort(np.argsort(np.asarray(a, dtype=np.float64)))


def spearman(x: Any, y: Any) -> float:
    """Spearman's rank correlation (no ties expected: ratings are real numbers)."""
    return float(np.corrcoef(_ranks(x), _ranks(y))[0, 1])


def _train(out: str, seed: int, steps: int, league: bool, snapshot_every: int | None) -> None:
    cmd = [sys.executable, "-m", "gymloop", "train", "duel", "--steps", str(steps), "--seed", str(seed), "--out", out,
           "--set", "threads=1"] + (["--league"] if league else [])
    if league and snapshot_every:
        cmd += ["--set", f"league.snapshot_every={snapshot_every}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--steps", type=int, default=1_000_000)
    p.add_argument("--episodes", type=int, default=20, help="games per pair when rating")
    p.add_argument("--snapshot-every", type=int, default=None, help="league.snapshot_every (default: the config's)")
    p.add_argument("--quick", action="store_true", help="a tiny run (for tests)")
    add_json_option(p, "league")
    args = p.parse_args(argv)
    run = Run(__file__, "league", "Self-play league against plain self-play (duel)", "13", argv)
    if args.quick:
        args.seeds, args.steps, args.episodes, args.snapshot_every = [0], 30_000, 2, 2

    from gymloop.agent_library import library, write_ratings
    from gymloop.games.duel import duel
    from gymloop.rating import rate

    rows = []
    tmp = tempfile.TemporaryDirectory()
    for seed in args.seeds:
        lg, plain = os.path.join(tmp.name, f"league{seed}"), os.path.join(tmp.name, f"plain{seed}")
        _train(lg, seed, args.steps, True, args.snapshot_every)
        _train(plain, seed, args.steps, False, None)
        lib = os.path.join(lg, "league")
        snaps = sorted(n[:-12] for n in os.listdir(lib) if n.startswith("u") and n.endswith(".safetensors"))
        agents: dict[str, Any] = {n: os.path.join(lib, n + ".safetensors") for n in snaps}
        agents["final"] = os.path.join(lib, "final.safetensors")
        agents["random"] = "random"
        t = rate(duel, agents, episodes=args.episodes, seed=seed)
        mus = [t.ratings[n].mu for n in snaps]
        rho = spearman(range(len(snaps)), mus) if len(snaps) > 1 else float("nan")
        w, d, lo = t.wins[("final", snaps[0])]
        vs_first = (w + 0.5 * d) / max(1, w + d + lo)
        random_last = t.order()[-1] == "random"
        h = rate(duel, {"league": agents["final"], "plain": os.path.join(plain, "agent.safetensors"), "random": "random"},
                 episodes=args.episodes * 2, seed=seed)
        lr, pr = h.ratings["league"], h.ratings["plain"]
        w2, d2, l2 = h.wins[("league", "plain")]
        write_ratings(lib, t.document())
        picked = library(lib)
        easy, hard = picked.pick(level="easy"), picked.pick(level="hard")
        eh = rate(duel, {"hard": agents[hard], "easy": agents[easy]}, episodes=args.episodes * 2, seed=seed + 1)
        w3, d3, l3 = eh.wins[("hard", "easy")]
        trained = snaps + ["final"]
        ten = [trained[i] for i in sorted({round(k * (len(trained) - 1) / 9) for k in range(10)})]
        t0 = time.perf_counter()
        rate(duel, {n: agents[n] for n in ten}, episodes=args.episodes, seed=seed)
        rate_s = time.perf_counter() - t0
        rows.append({"seed": seed, "snapshots": len(snaps), "spearman": rho, "random_lowest": random_last,
                     "final_vs_first": vs_first, "league_mu": lr.mu, "league_sigma": lr.sigma, "plain_mu": pr.mu,
                     "plain_sigma": pr.sigma, "league_vs_plain": (w2 + 0.5 * d2) / max(1, w2 + d2 + l2),
                     "easy": easy, "hard": hard, "hard_vs_easy": (w3 + 0.5 * d3) / max(1, w3 + d3 + l3),
                     "rated_agents": len(ten), "rate_s": rate_s})
    tmp.cleanup()
    print(f"duel, {args.steps:,} steps per run, {args.episodes} games per pair when rating")
    print(f"{'seed':>4} {'snaps':>5} {'spearman':>8} {'random last':>11} {'final vs first':>14} {'league mu':>12} "
          f"{'plain mu':>12} {'league vs plain':>15} {'hard vs easy':>22} {'rate 10 (s)':>11}")
    for r in rows:
        print(f"{r['seed']:4d} {r['snapshots']:5d} {r['spearman']:8.2f} {str(r['random_lowest']):>11} {r['final_vs_first']:14.0%} "
              f"{r['league_mu']:6.1f} ± {r['league_sigma']:3.1f} {r['plain_mu']:6.1f} ± {r['plain_sigma']:3.1f} "
              f"{r['league_vs_plain']:15.0%} {r['hard'] + ' vs ' + r['easy'] + ' ' + format(r['hard_vs_easy'], '.0%'):>22} "
              f"{r['rate_s']:11.1f}")
    figs = [
        figure("league snapshots: Spearman of training order and rating (duel, min over seeds)", min(r["spearman"] for r in rows),
               "", target=">= 0.8"),
        figure("league: final agent's score against its first snapshot (min over seeds)", 100 * min(r["final_vs_first"] for r in rows),
               "%", target=">= 70%"),
        figure("league's final agent against plain self-play's, same budget (score, median over seeds)",
               100 * float(np.median([r["league_vs_plain"] for r in rows])), "%", baseline="plain self-play"),
        figure("league's rating vs plain's: seeds overlapping or above (mu ± sigma)",
               sum(r["league_mu"] + r["league_sigma"] >= r["plain_mu"] - r["plain_sigma"] for r in rows), "",
               target=f"{len(rows)} of {len(rows)}", decimals=0),
        figure('league library: pick(level="hard") against pick(level="easy"), score (min over seeds)',
               100 * min(r["hard_vs_easy"] for r in rows), "%", target="> 50%"),
        figure(f"gymloop rate: {min(r['rated_agents'] for r in rows)} trained duel agents, {args.episodes} games per pair "
               "(max over seeds)", max(r["rate_s"] for r in rows), "s", target="< 60 s"),
    ]
    run.write(args, figs, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
