"""BENCHMARKS.md's table of today's figures is generated from benchmarks/results/*.json (issue 28, item 7)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "BENCHMARKS.md"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``benchmarks/report.py`` (and ``benchmarks/results.py`` beside it), imported as the scripts import them."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    for name in ("results", "report", "entity_gym_suite"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import report

    return report


def test_the_table_is_what_the_result_files_generate(bench: ModuleType) -> None:
    text = DOC.read_text(encoding="utf-8")
    assert bench.render(text, bench.load()) == text, f"BENCHMARKS.md's table is out of date with benchmarks/results/; regenerate it: {bench.REGENERATE}"


def test_benchmarks_md_is_at_most_30_kb() -> None:
    size = DOC.stat().st_size
    assert size <= 30_000, f"BENCHMARKS.md is {size:,} bytes; at most 30,000: method and caveats only, history stays in git"


def test_every_section_the_table_links_to_is_a_heading(bench: ModuleType) -> None:
    headings = {line.lstrip("#").strip() for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith("## ")}
    assert set(bench.SECTIONS.values()) <= headings
    assert {d["section"] for d in bench.load()} <= set(bench.SECTIONS)


def test_every_result_file_says_where_it_was_measured(bench: ModuleType) -> None:
    docs = bench.load()
    assert {"throughput", "inference", "train_throughput", "onnx_speed", "entity_gym_suite"} <= {d["benchmark"] for d in docs}
    for d in docs:
        assert re.fullmatch(r"([A-Z_]+=\S+ )*python benchmarks/\w+\.py.*", d["command"]), d["command"]
        assert d["commit"] and d["date"] and d["figures"]
        if d["provenance"] == "transcribed":
            assert d["transcribed_from"] and "description" in d["machine"]
        else:
            assert d["provenance"] == "measured" and {"cores", "cpu", "python", "numpy", "torch"} <= set(d["machine"]) and "load" in d


def _write(bench: ModuleType, tmp_path: Path, figures: list[dict[str, Any]], **kw: Any) -> Path:
    import results

    run = results.Run(str(ROOT / "benchmarks" / "throughput.py"), "throughput", "Environment throughput", "1", ["--quick", "--json", "x.json", "--conditions", "busy"])
    out = tmp_path / "results" / "throughput.json"
    run.write(argparse.Namespace(json=str(out), conditions="busy"), figures, {"rows": []}, **kw)
    return out


def test_a_run_writes_the_schema_and_the_table_shows_it(bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import results

    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # (recorded in the command when set: CI sets one)
        monkeypatch.delenv(name, raising=False)

    figs = [results.figure("steps/s, workers=0", 262508.4, "steps/s", baseline="SyncVectorEnv", baseline_value=198340.0,
                           ratio=1.3234, ratio_range=[1.30, 1.37]),
            results.figure("memory", 138.2, "MiB", target="< 500 MB", decimals=0, note=None)]
    path = _write(bench, tmp_path, figs, packages=("gymnasium",))
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["command"] == "python benchmarks/throughput.py --quick --json x.json"  # --conditions is not part of the command
    assert doc["conditions"] == "busy" and doc["provenance"] == "measured" and doc["schema"] == results.SCHEMA
    assert {"cores", "cpu", "python", "numpy", "torch", "gymnasium"} <= set(doc["machine"])
    assert "note" not in doc["figures"][1]
    table = bench.table(bench.load(path.parent))
    rows = table.splitlines()[2:]
    assert rows[0].startswith("| [1](#1-environment-throughput) | steps/s, workers=0 | 262,508 steps/s | SyncVectorEnv: 198,340 steps/s; **1.32x** (1.30-1.37) |")
    assert "`python benchmarks/throughput.py --quick --json x.json` |" in rows[0]
    assert rows[1] == "|  | memory | 138 MiB | target < 500 MB |  |  |  |"


def test_main_rewrites_the_block_and_check_fails_when_stale(bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import results

    path = _write(bench, tmp_path, [results.figure("x", 2.5, "x")])
    doc = tmp_path / "B.md"
    doc.write_text(f"# B\n\n{bench.BEGIN}\nold\n{bench.END}\n\nmethod\n", encoding="utf-8")
    argv = ["--doc", str(doc), "--results", str(path.parent)]
    assert bench.main([*argv, "--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert bench.main(argv) == 0
    text = doc.read_text(encoding="utf-8")
    assert "| 2.50x | - |" in text and "old" not in text and text.endswith("\n\nmethod\n")
    assert bench.main([*argv, "--check"]) == 0


def test_a_malformed_result_or_doc_is_refused(bench: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps({"schema": 1, "benchmark": "bad"}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.json: expected a result file of schema 1 .* rewrite it with the script's --json"):
        bench.load(tmp_path)
    with pytest.raises(ValueError, match="must hold the two lines"):
        bench.render("no markers", [])


def test_numbers_are_formatted_for_reading(bench: ModuleType) -> None:
    assert bench.number(262508.4, "steps/s") == "262,508 steps/s"
    assert bench.number(82.71, "µs") == "82.7 µs"
    assert bench.number(0.8091) == "0.809"
    assert bench.number(2.07, "x") == "2.07x"
    assert bench.number(12, "of 13", 0) == "12 of 13"


def test_the_entity_gym_suite_writes_its_headline_figures(bench: ModuleType) -> None:
    import entity_gym_suite as suite

    runs = [{"trainer": t, "env": e, "seed": s, "final": f, "eval": f, "sps_cpu": c}
            for e, fg, fe, cg, ce in (("Xor", 1.0, 0.5, 20_000, 10_000), ("Count", 0.5, 0.6, 9_000, 3_000), ("Bandit", 0.9, 0.905, 4_000, 4_000))
            for s in (1, 2) for t, f, c in (("gymloop", fg, cg), ("enn", fe, ce))]
    speed, level = suite.figures(runs, ["gymloop", "enn"], ["Xor", "Count", "Bandit"], 49_152)
    assert speed["value"] == 2.0 and speed["ratio_range"] == [1.0, 3.0] and speed["unit"] == "x"
    assert level["value"] == 2 and level["unit"] == "of 3"
    alone = suite.figures([r for r in runs if r["trainer"] == "gymloop"], ["gymloop"], ["Xor", "Count"], 393_216)
    assert [f["value"] for f in alone] == [1.0, 0.5]
