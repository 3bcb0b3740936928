"""The cost of checkpoint integrity: SHA-256 checksums and durable (fsynced) writes.

For a snake agent with the default network and a large agent (snake, ``d_model=256``,
``n_layer=8``, ``mlp_ratio=4``: ~25 MB of weights), median times of:

* **write**: ``write_agent`` (checksum + fsync of file and folder, the default) beside the same file
  written without a checksum (``write_safetensors(..., checksum=False)``), and without a checksum
  or fsync (as gymloop wrote files before);
* **checksum**: the hash alone (``tensors_checksum`` over the weights);
* **read_agent**: open, check the header and metadata, with and without verifying the checksum;
* **load**: ``NumpyPolicy.from_file`` (what ``gl.load`` builds: the whole numpy network), with and
  without verification.

Reads come from the page cache (the file was just written), which is the worst case for the
relative cost of hashing. Variants are timed in interleaved rounds.

Usage::

    python benchmarks/checkpoint_integrity.py          # ~30 s
    python benchmarks/checkpoint_integrity.py --quick  # a tiny run, to check that it works
    python benchmarks/checkpoint_integrity.py --json   # also write benchmarks/results/checkpoint_integrity.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from results import Run, add_json_option, figure


def _timings(variants: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Median seconds of one call of each variant, timed in interleaved rounds."""
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for k, fn in variants.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


def _ms(s: float) -> str:
    return f"{s * 1e3:,.2f} ms" if s < 1 else f"{s:,.2f} s"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a tiny run (small agents, few rounds)")
    ap.add_argument("--rounds", type=int, default=15)
    add_json_option(ap, "checkpoint_integrity")
    args = ap.parse_args(argv)
    run = Run(__file__, "checkpoint_integrity", "Checkpoint integrity: checksums and durable writes", "6", argv)

    from gymloop import checkpoint as ck
    from gymloop.checkpoint import read_agent, tensors_checksum, write_agent, write_safetensors
    from gymloop.games.snake import snake
    from gymloop.neural import random_checkpoint
    from gymloop.nn.numpy_policy import NumpyPolicy

    rounds = 3 if args.quick else args.rounds
    sizes = {"snake (default network)": {}, "large (d_model 256, 8 layers, mlp 4)": dict(d_model=256, n_layer=8, mlp_ratio=4)}
    if args.quick:
        sizes = {"snake (default network)": {}, "larger (d_model 64, 2 layers)": dict(d_model=64, n_layer=2)}
    real_verify = ck.SafetensorsFile.verify
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for label, net in sizes.items():
            src = os.path.join(d, "src.safetensors")
            random_checkpoint(src, snake, seed=0, **net)
            af = read_agent(src)
            tensors = {k: v.copy() for k, v in af.tensors.items()}
            info = dict(af.info)
            f = ck.SafetensorsFile(src)
            meta = dict(f.metadata)
            nbytes = sum(v.nbytes for v in tensors.values())
            a, b = os.path.join(d, "a.safetensors"), os.path.join(d, "b.safetensors")
            def no_fsync() -> None:
                real = os.fsync
                os.fsync = lambda fd: None
                try:
                    write_safetensors(b, tensors, meta, checksum=False)  # noqa: B023
                finally:
                    os.fsync = real

            write = _timings({
                "with": lambda: write_agent(a, tensors, info),  # noqa: B023
                "without": lambda: write_safetensors(b, tensors, meta, checksum=False),  # noqa: B023
                "bare": no_fsync,
            }, rounds)
            digest = _timings({"with": lambda: tensors_checksum(meta, tensors)}, rounds)  # noqa: B023

            def unverified(fn: Callable[[], Any]) -> Callable[[], Any]:
                def run() -> Any:
                    ck.SafetensorsFile.verify = lambda self: True  # type: ignore[method-assign]
                    try:
                        return fn()
                    finally:
                        ck.SafetensorsFile.verify = real_verify  # type: ignore[method-assign]
                return run

            read = _timings({"with": lambda: read_agent(a), "without": unverified(lambda: read_agent(a))}, rounds)  # noqa: B023
            load = _timings({
                "with": lambda: NumpyPolicy.from_file(a),  # noqa: B023
                "without": unverified(lambda: NumpyPolicy.from_file(a)),  # noqa: B023
            }, rounds)
            rows.append((label, nbytes, write, digest, read, load))
    print(f"rounds: {rounds} (medians)\n")
    print("| agent | weights | write (checksum + fsync) | write (no checksum, fsync) | write (neither) | checksum alone "
          "| read_agent verified | read_agent unverified | load verified | load unverified |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, nbytes, write, digest, read, load in rows:
        print(f"| {label} | {nbytes / 1e6:,.2f} MB | {_ms(write['with'])} | {_ms(write['without'])} | {_ms(write['bare'])} | {_ms(digest['with'])} | "
              f"{_ms(read['with'])} | {_ms(read['without'])} | {_ms(load['with'])} | {_ms(load['without'])} |")
    figs = []
    for label, nbytes, write, _, _, load in rows:
        figs.append(figure(f"load an agent, checksum verified: {label}, {nbytes / 1e6:.2f} MB", load["with"] * 1e3, "ms",
                           baseline="the same load unverified", baseline_value=load["without"] * 1e3, ratio=load["without"] / load["with"]))
        figs.append(figure(f"write an agent, checksum + fsync: {label}", write["with"] * 1e3, "ms",
                           baseline="neither", baseline_value=write["bare"] * 1e3, ratio=write["bare"] / write["with"]))
    run.write(args, figs, [{"agent": label, "weight_bytes": nbytes, "write_s": write, "checksum_s": digest, "read_agent_s": read, "load_s": load}
                           for label, nbytes, write, digest, read, load in rows])


if __name__ == "__main__":
    main()
