"""Exported ONNX models: size, and µs per decision in onnxruntime beside the numpy runtime (issue 13).

For snake and tactics with the default network (``NetConfig()``, random weights: speed does not
depend on training), on observations of random play (200 per game, the same for every runtime):

* **size**: bytes of the ``.onnx`` file next to the ``.safetensors`` checkpoint it came from;
* **numpy network**: :meth:`NumpyPolicy.logits_one` on the prepared inputs (what ``gl.load``'s
  agents run per decision, without turning the observation into arrays and the choice back);
* **onnxruntime**: ``InferenceSession.run`` on the same inputs (one intra-op thread, all graph
  optimizations), asking for the probabilities of every action type, then for every output (with the
  value, which the numpy agent never computes);
* **numpy act**: ``agent.act(obs, ...)``: observation to action, for scale.

Median of individually timed calls, interleaved in rounds. Before timing, every observation's
probabilities are checked against the numpy runtime's (1e-5).

Usage::

    python benchmarks/onnx_speed.py            # ~20 s
    python benchmarks/onnx_speed.py --quick    # a tiny run, to check that it works
    python benchmarks/onnx_speed.py --json     # also write benchmarks/results/onnx_speed.json
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
from typing import Any

import numpy as np
from results import Run, add_json_option, figure

# the timing loop and the recording agent of the numpy runtime's benchmark (this folder)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inference import _Recorder, _timings  # noqa: E402


def _measure(name: str, game: Any, tmp: str, calls: int, quick: bool) -> tuple:
    """``(name, .onnx bytes, .safetensors bytes, median entities, {variant: µs})`` of one game."""
    import onnxruntime as ort

    import gymloop as gl
    from gymloop.export import to_onnx
    from gymloop.export.runtime import model_inputs
    from gymloop.neural import load, random_checkpoint

    ckpt = os.path.join(tmp, f"{name}.safetensors")
    model = os.path.join(tmp, f"{name}.onnx")
    random_checkpoint(ckpt, game, seed=0)
    io = to_onnx(ckpt, model)
    agent = load(ckpt, seed=0)
    policy = agent.policy
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    rec = _Recorder(seed=1)
    gl.run(game, rec, seed=1, max_steps=50 if quick else 2000)
    seen = rec.seen[:: max(1, len(rec.seen) // 200)]
    preps = [agent.encoder.prepare_one(obs, types) for obs, types in seen]
    feeds = [model_inputs(io, *pr[:4]) for pr in preps]
    probs = [a["probs"] for a in io["actions"]]
    for pr, f in zip(preps, feeds):  # the same answers before timing them
        ref = policy.logits_one(*pr[:4])
        for lg, got in zip(ref, sess.run(probs, f)):
            e = np.exp(lg - lg.max(-1, keepdims=True))
            if not np.allclose(got, e / e.sum(-1, keepdims=True), atol=1e-5):
                raise SystemExit(f"{name}: onnxruntime and the numpy runtime disagree")
    nets, ort_p, ort_all, acts = (itertools.cycle(x) for x in (preps, feeds, feeds, seen))
    variants = {
        "numpy network": lambda: policy.logits_one(*next(nets)[:4]),
        "onnxruntime (probs)": lambda: sess.run(probs, next(ort_p)),
        "onnxruntime (all outputs)": lambda: sess.run(None, next(ort_all)),
        "numpy act": lambda: (lambda o, t: agent.act(o, *t))(*next(acts)),
    }
    t = _timings(variants, calls)
    ents = [sum(x if isinstance(x, int) else x.shape[0] for _, x in pr[0]) for pr in preps]
    return name, os.path.getsize(model), os.path.getsize(ckpt), statistics.median(ents), t


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20_000, help="decisions timed per variant (default 20000)")
    p.add_argument("--quick", action="store_true", help="a tiny run (for tests)")
    add_json_option(p, "onnx_speed")
    args = p.parse_args(argv)
    run = Run(__file__, "onnx_speed", "ONNX export: onnxruntime beside the numpy runtime", "11", argv)
    if args.quick:
        args.calls = 200

    import onnxruntime as ort

    from gymloop.games.snake import snake
    from gymloop.games.tactics import tactics

    with tempfile.TemporaryDirectory() as tmp:
        rows_out = [_measure(name, game, tmp, args.calls, args.quick) for name, game in (("snake", snake), ("tactics", tactics))]
    print(f"onnxruntime {ort.__version__}, numpy {np.__version__}; default NetConfig(); median of {args.calls} calls per variant")
    print()
    print("| game | .onnx bytes | .safetensors bytes | entities (median) | numpy network µs | onnxruntime probs µs "
          "| onnxruntime all outputs µs | numpy act µs |")
    print("|---|---|---|---|---|---|---|---|")
    for name, size, csize, ents, t in rows_out:
        print(f"| {name} | {size:,} | {csize:,} | {ents:g} | {t['numpy network']:.1f} | {t['onnxruntime (probs)']:.1f} "
              f"| {t['onnxruntime (all outputs)']:.1f} | {t['numpy act']:.1f} |")
    figs = [figure(f"{name}: onnxruntime, one decision's probabilities ({ents:g} entities)", t["onnxruntime (probs)"], "µs",
                   baseline="numpy runtime (`NumpyPolicy.logits_one`)", baseline_value=t["numpy network"],
                   ratio=t["numpy network"] / t["onnxruntime (probs)"]) for name, _, _, ents, t in rows_out]
    run.write(args, figs, [{"game": name, "onnx_bytes": size, "safetensors_bytes": csize, "entities_median": ents, "median_us": t}
                           for name, size, csize, ents, t in rows_out], packages=("onnxruntime",))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
