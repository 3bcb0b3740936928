"""The JSON result file every benchmark script writes, and the machine it describes.

A script adds the options with :func:`add_json_option` (``--json`` alone writes
``benchmarks/results/<name>.json``, ``--json PATH`` writes PATH; ``--conditions TEXT`` records what
else ran on the machine), makes a :class:`Run` when it starts
(which notes the time and the load average) and, at the end, calls :meth:`Run.write` with its
figures. ``benchmarks/report.py`` turns the files in ``benchmarks/results/`` into the table at the top
of BENCHMARKS.md.

One file holds::

    {"schema": 1, "benchmark": "throughput", "title": ..., "section": "1",
     "command": "python benchmarks/throughput.py --json",
     "commit": "f0850cf", "dirty": false, "date": "2026-12-05T02:10:00Z",
     "provenance": "measured",               # or "transcribed" (see below)
     "machine": {"cores": 2, "cpu": ..., "memory_gib": ..., "os": ..., "python": ..., "numpy": ..., "torch": ...},
     "load": {"start": 1.2, "end": 3.4},     # 1-minute load average: above 0 means other work ran beside it
     "conditions": "...",                    # what else ran, in words (optional)
     "figures": [{"metric": ..., "value": ..., "unit": ...,
                  "baseline": ..., "baseline_value": ..., "ratio": ..., "ratio_range": [lo, hi],
                  "target": ..., "decimals": ...}],   # every key after "unit" optional
     "details": {...}}                       # the script's full output, free form

``ratio`` is how many times the baseline's speed the figure is (above 1: faster; for a time, the
baseline's time over the figure's), ``ratio_range`` its spread over interleaved rounds or runs.

A *transcribed* file holds figures measured earlier and recorded in BENCHMARKS.md, too long to rerun
every time (the entity-gym suite takes hours): its ``commit`` and ``date`` are those of the
measurement, and ``transcribed_from`` says where the figures were read.
Versions are read from the installed packages' metadata: importing torch changes numpy's matrix
products in the process (BENCHMARKS.md §3), so nothing here imports it.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SCHEMA = 1
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def add_json_option(parser: argparse.ArgumentParser, name: str) -> None:
    """``--json [PATH]``: write the result file (``benchmarks/results/NAME.json`` when PATH is left out)."""
    parser.add_argument("--json", nargs="?", const=str(RESULTS / f"{name}.json"), default=None, metavar="PATH",
                        help=f"write the result as JSON to PATH (default benchmarks/results/{name}.json)")
    parser.add_argument("--conditions", default=None, metavar="TEXT",
                        help="what else ran on the machine, in words, recorded in the JSON (e.g. 'other jobs on both cores')")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def machine(*packages: str) -> dict[str, Any]:
    """Cores, CPU model, memory, OS, and the versions of Python, numpy, torch and ``packages``."""
    out: dict[str, Any] = {
        "cores": os.cpu_count(), "cpu": _cpu_model(), "memory_gib": _memory_gib(),
        "os": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
    }
    for p in ("numpy", "torch", *packages):
        out[p] = _version(p)
    return out


def commit(*paths: str) -> tuple[str | None, bool]:
    """The checked-out commit (short hash) and whether ``src/`` or ``paths`` differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", "src", *paths))
    except (OSError, subprocess.CalledProcessError):
        return None, False
    return head, dirty


def figure(metric: str, value: float, unit: str, **extra: Any) -> dict[str, Any]:
    """One row of the table: ``extra`` takes the optional keys of the module docstring's schema."""
    return {"metric": metric, "value": value, "unit": unit, **{k: v for k, v in extra.items() if v is not None}}


class Run:
    """One benchmark run: made when the script starts (the time and load average then), written at its end."""

    def __init__(self, file: str, name: str, title: str, section: str, argv: list[str] | None = None) -> None:
        """``file``: the script (its ``__file__``); ``argv``: its arguments as ``main`` got them (None: ``sys.argv``)."""
        self.name, self.title, self.section = name, title, section
        args = list(sys.argv[1:] if argv is None else argv)
        if "--conditions" in args:  # words about the machine, not part of what reproduces the figures
            i = args.index("--conditions")
            del args[i : i + 2]
        args = [a for a in args if not a.startswith("--conditions=")]
        script = Path(os.path.abspath(file)).relative_to(ROOT).as_posix()
        self.script = script
        threads = [f"{k}={os.environ[k]}" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ]
        self.command = shlex.join([*threads, "python", script, *args])
        self.start = datetime.datetime.now(datetime.timezone.utc)
        self.load_start = os.getloadavg()[0]
        self.t0 = time.perf_counter()

    def write(self, args: argparse.Namespace, figures: list[dict[str, Any]], details: Any = None, packages: tuple[str, ...] = ()) -> None:
        """Write the result file to ``args.json`` (nothing when it is None), with ``args.conditions``."""
        path, conditions = args.json, args.conditions
        if path is None:
            return
        head, dirty = commit(self.script, "benchmarks/results.py")
        doc: dict[str, Any] = {
            "schema": SCHEMA, "benchmark": self.name, "title": self.title, "section": self.section, "command": self.command,
            "commit": head, "dirty": dirty, "date": self.start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "duration_s": round(time.perf_counter() - self.t0, 1), "provenance": "measured",
            "machine": machine(*packages), "load": {"start": round(self.load_start, 2), "end": round(os.getloadavg()[0], 2)},
        }
        if conditions:
            doc["conditions"] = conditions
        doc["figures"] = figures
        if details is not None:
            doc["details"] = details
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"result written to {path}", file=sys.stderr)
