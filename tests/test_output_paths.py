"""Output paths destroy nothing, input paths never block, path mistakes get typed errors.

Every writer (checkpoints, libraries, traces, ONNX, GIFs, a run's files) refuses a path that is a
folder, FIFO, socket or device, or one of its own inputs, before writing; readers refuse FIFOs
without waiting for a writer. FIFOs and device nodes are made in a temporary folder, never the
machine's own ``/dev`` entries.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gymloop as gl
from gymloop.agent_library import library, pack_library
from gymloop.checkpoint import SafetensorsFile, read_safetensors, write_safetensors
from gymloop.cli import main
from gymloop.errors import CheckpointError, InputPathError, OutputPathError, TraceError
from gymloop.files import AtomicOutput, atomic_output, check_output, make_folder, open_input, write_atomic
from gymloop.games.snake import snake
from gymloop.neural import random_checkpoint
from gymloop.render import GifWriter
from gymloop.train.run_dir import MetricsFile, RunDir, plot_curve


def _special(tmp_path, kind: str) -> str:
    """A path of ``kind`` in ``tmp_path``: 'fifo', 'chardev' (skips without the right), 'socket', 'dir'."""
    p = str(tmp_path / f"special-{kind}")
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "chardev":
        try:
            os.mknod(p, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is, made here
        except PermissionError:
            pytest.skip("making a device node needs privileges this run does not have")
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(p)
        s.close()
    else:
        os.mkdir(p)
    return p


def _raw(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _kind_of(p: str) -> int:
    return stat.S_IFMT(os.lstat(p).st_mode)


@pytest.fixture(scope="module")
def agent_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("agent") / "a.safetensors"
    random_checkpoint(p, snake)
    return str(p)


KINDS = ["fifo", "chardev", "socket", "dir"]


# ---------------------------------------------------------------------- 1. special files are never replaced
@pytest.mark.parametrize("kind", KINDS)
def test_every_writer_refuses_a_special_file_and_leaves_it(tmp_path, agent_file, kind):
    p = _special(tmp_path, kind)
    before = _kind_of(p)
    trace = gl.record_trace(snake, gl.RandomAgent(seed=0), seed=0, max_steps=5)
    writers = {
        "write_safetensors": lambda: write_safetensors(p, {"x": np.zeros(2, np.float32)}),
        "pack_library": lambda: pack_library(p, {"a": agent_file}),
        "trace.save": lambda: trace.save(p),
        "record_trace": lambda: gl.record_trace(snake, gl.RandomAgent(seed=0), seed=0, max_steps=5, path=p),
        "write_atomic": lambda: write_atomic(p, [b"x"]),
        "metrics": lambda: MetricsFile(p, None),
    }
    for name, write in writers.items():
        with pytest.raises(OutputPathError, match=r"cannot write .*special-.*: it is (a folder|a FIFO \(named pipe\)|a character device|a socket), not a file"):
            write()
        assert _kind_of(p) == before, name
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(p)]  # no temporary file left either


@pytest.mark.parametrize("kind", ["fifo", "chardev"])
def test_onnx_export_and_gif_refuse_a_special_file(tmp_path, agent_file, kind):
    pytest.importorskip("onnx")
    pytest.importorskip("PIL")
    from gymloop.export import to_onnx

    p = _special(tmp_path, kind)
    with pytest.raises(OutputPathError, match="not a file"):
        to_onnx(agent_file, p)
    with pytest.raises(OutputPathError, match="not a file"):
        GifWriter(p, fps=5)
    assert main(["export", agent_file, "--onnx", p]) == 2
    assert _kind_of(p) == stat.S_IFCHR if kind == "chardev" else _kind_of(p) == stat.S_IFIFO


def test_the_curve_and_run_folder_refuse_special_paths(tmp_path):
    fifo = _special(tmp_path, "fifo")
    csv = tmp_path / "metrics.csv"
    csv.write_text("step,episode_return_mean,episode_return_count\n1,2,3\n")
    with pytest.raises(OutputPathError, match="FIFO"):
        plot_curve(str(csv), fifo)
    with pytest.raises(OutputPathError, match="is not a folder"):
        RunDir(str(csv)).make()
    with pytest.raises(OutputPathError, match="cannot create the run folder .*below: Not a directory"):
        make_folder(str(csv / "below"), "the run folder")
    assert csv.read_text().startswith("step,")


# ---------------------------------------------------------------------- 2. an output that is an input
def test_export_onto_its_own_input_is_refused_and_the_agent_survives(tmp_path, agent_file):
    pytest.importorskip("onnx")
    from gymloop.export import to_onnx

    p = tmp_path / "self.safetensors"
    p.write_bytes(_raw(agent_file))
    raw = p.read_bytes()
    with pytest.raises(OutputPathError, match="one of this command's inputs"):
        to_onnx(p, p)
    assert main(["export", str(p), "--onnx", str(p)]) == 2
    assert p.read_bytes() == raw
    gl.load(p)  # still an agent
    run = tmp_path / "run"
    run.mkdir()
    (run / "agent.safetensors").write_bytes(raw)
    with pytest.raises(OutputPathError, match="inputs"):
        to_onnx(run, run / "agent.safetensors")


def test_a_library_may_not_overwrite_one_of_its_agents(tmp_path, agent_file):
    a = tmp_path / "a.safetensors"
    a.write_bytes(_raw(agent_file))
    with pytest.raises(OutputPathError, match="inputs"):
        pack_library(a, {"a": a, "b": agent_file})
    gl.load(a)


# ---------------------------------------------------------------------- 3. readers never block
def test_a_fifo_in_a_library_folder_neither_hangs_nor_is_read(tmp_path, agent_file):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "a.safetensors").write_bytes(_raw(agent_file))
    os.mkfifo(lib / "b.safetensors")
    code = textwrap.dedent(f"""
        import gymloop as gl
        print(gl.library({str(lib)!r}).names())
        gl.library({str(lib)!r}).load("a")
        gl.pack_library({str(tmp_path / "out.safetensors")!r}, {str(lib)!r})
        print(gl.library({str(tmp_path / "out.safetensors")!r}).names())
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["['a']", "['a']"]
    assert "skipped" in r.stderr and "not a regular file" in r.stderr  # said, not silent


def test_readers_refuse_a_fifo_and_a_folder_at_once(tmp_path):
    fifo = _special(tmp_path, "fifo")
    with pytest.raises(InputPathError, match="FIFO"):
        open_input(fifo)
    with pytest.raises(CheckpointError, match="cannot read checkpoint .*FIFO"):
        SafetensorsFile(fifo)
    with pytest.raises(CheckpointError, match="cannot read checkpoint .*FIFO"):
        gl.load(fifo)
    with pytest.raises(TraceError):
        gl.load_trace(fifo)
    with pytest.raises(InputPathError, match="a folder"):
        open_input(tmp_path)


# ---------------------------------------------------------------------- 4. counts bounded
def test_a_trace_with_a_billion_seats_is_refused_on_load_and_replay(tmp_path):
    path = tmp_path / "t.trace.safetensors"
    gl.record_trace(snake, gl.RandomAgent(seed=0), seed=0, max_steps=5).save(path)
    tensors, meta = read_safetensors(path)
    doc = json.loads(meta["gymloop-trace"])
    doc["agents"] = 10**9
    forged = tmp_path / "forged.trace.safetensors"
    write_safetensors(forged, tensors, {**meta, "gymloop-trace": json.dumps(doc)})  # re-signed: the checksum fits
    with pytest.raises(TraceError, match=r"agents 1000000000 is more seats than a trace may have \(at most 65536\)"):
        gl.load_trace(forged)
    with pytest.raises(TraceError, match="more seats"):
        gl.replay(forged)


# ---------------------------------------------------------------------- 5. path mistakes: typed errors, exit 2
def test_cli_path_mistakes_get_one_line_errors(tmp_path, capsys, agent_file):
    f = tmp_path / "file"
    f.write_text("x")
    d = tmp_path / "dir"
    d.mkdir()
    cases = [
        (["train", "snake", "--out", str(f), "--steps", "64"], "run folder"),
        (["run", "snake", "--trace-dir", str(f), "--episodes", "1"], "trace folder"),
        (["library", "pack", str(tmp_path / "nothing"), "--out", str(d)], None),
        (["check", "json:__doc__"], "'json:__doc__' is a str, not a game"),
    ]
    for argv, want in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("gymloop: error: ") and "Traceback" not in err, (argv, err)
        if want:
            assert want in err, (argv, err)
    assert f.read_text() == "x" and d.is_dir()


def test_pack_library_into_a_folder_is_refused(tmp_path, agent_file):
    with pytest.raises(OutputPathError, match="it is a folder"):
        pack_library(tmp_path, {"a": agent_file})


def test_ctrl_c_in_a_command_exits_130_with_one_line(monkeypatch, capsys):
    import gymloop.checker

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(gymloop.checker, "check", interrupted)
    assert main(["check", "snake"]) == 130
    err = capsys.readouterr().err
    assert err == "gymloop: interrupted (check)\n"


# ---------------------------------------------------------------------- 8. library names and duplicates
@pytest.mark.parametrize("name", ["../x", "a\x00b", "/abs", "a//b", "a/", ".", "x\\y", ""])
def test_pack_library_refuses_names_that_are_not_library_names(tmp_path, agent_file, name):
    with pytest.raises(CheckpointError, match="is not a valid library name"):
        pack_library(tmp_path / "l.safetensors", {name: agent_file})
    assert not (tmp_path / "l.safetensors").exists()


def test_pack_library_refuses_a_name_that_is_not_a_string(tmp_path, agent_file):
    with pytest.raises(CheckpointError, match="agent names must be strings, got 5 of type int"):
        pack_library(tmp_path / "l.safetensors", {5: agent_file})


def test_two_checkpoints_of_one_name_in_a_library_folder_are_refused(tmp_path, agent_file):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "x.safetensors").write_bytes(_raw(agent_file))
    (lib / "x.roguenet").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"two checkpoints are named 'x' \(.*x.roguenet and .*x.safetensors\)|two checkpoints are named 'x'"):
        library(lib)
    with pytest.raises(CheckpointError, match="two checkpoints are named 'x'"):
        pack_library(tmp_path / "l.safetensors", lib)


# ---------------------------------------------------------------------- the helper itself
def test_atomic_output_keeps_the_old_file_on_an_error_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "keep.txt"
    p.write_text("old")
    with pytest.raises(RuntimeError, match="boom"), atomic_output(p) as tmp:
        with open(tmp, "w") as f:
            f.write("new")
        raise RuntimeError("boom")
    assert p.read_text() == "old" and os.listdir(tmp_path) == ["keep.txt"]
    out = AtomicOutput(p)
    assert out.tmp.endswith(".txt") and os.path.dirname(out.tmp) == str(tmp_path)
    with pytest.raises(OutputPathError, match="cannot write .*keep.txt: No such file"):
        out.commit()  # nothing was written to the temporary file
    assert p.read_text() == "old"


def test_check_output_refuses_what_is_not_a_path(tmp_path):
    with pytest.raises(OutputPathError, match="must be a str or os.PathLike, got 5"):
        check_output(5)  # type: ignore[arg-type]
    with pytest.raises(OutputPathError, match="non-empty"):
        check_output("")


_PATH_KINDS = ["new", "regular", "dir", "fifo", "socket", "symlink-to-dir", "under-a-file", "input"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(_PATH_KINDS), writer=st.sampled_from(["safetensors", "atomic", "library", "metrics"]))
def test_fuzz_output_paths_write_a_regular_file_or_refuse_cleanly(tmp_path_factory, agent_file, kind, writer):
    d = tmp_path_factory.mktemp("fuzz")
    src = d / "input.safetensors"
    src.write_bytes(_raw(agent_file))
    p = str(d / "out")
    if kind == "regular":
        open(p, "w").close()
    elif kind == "dir":
        os.mkdir(p)
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "socket":
        _special(d, "socket")
        p = str(d / "special-socket")
    elif kind == "symlink-to-dir":
        os.mkdir(d / "real")
        os.symlink(d / "real", p)
    elif kind == "under-a-file":
        open(d / "f", "w").close()
        p = str(d / "f" / "out")
    elif kind == "input":
        p = str(src)
    before = os.lstat(p).st_mode if os.path.lexists(p) else None
    write = {
        "safetensors": lambda: write_safetensors(p, {"x": np.zeros(1, np.float32)}, inputs=[src]),
        "atomic": lambda: write_atomic(p, [b"abc"], inputs=[src]),
        "library": lambda: pack_library(p, {"a": src}),
        "metrics": lambda: MetricsFile(p, None).close(),
    }[writer]
    try:
        write()
    except OutputPathError:
        assert kind not in ("new", "regular") and not (kind == "input" and writer == "metrics")
        if before is not None:
            assert os.lstat(p).st_mode == before  # left as it was
        if kind == "input":
            gl.load(src)
    else:  # (metrics has no inputs: the input file is just a regular file to it)
        assert kind in ("new", "regular") or (kind == "input" and writer == "metrics")
        assert stat.S_ISREG(os.lstat(p).st_mode)
    left = [n for n in os.listdir(d) if ".tmp" in n]
    assert not left
