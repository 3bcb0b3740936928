"""The web page of examples/web (issue 13, item 3): a trained snake playing in the browser.

Two tiers:

* fast (Node only): the JS port of the snake (``examples/web/snake.js``) plays exactly as
  :class:`gymloop.games.snake.SnakeGame` for the same seed and moves (its generator is CPython's
  Mersenne Twister), and builds, observation after observation, the very features gymloop's snake
  loop gives (by the names of the model's observation space: a reordered feature is read
  reordered, an unknown one refused);
* slow (Node and Chromium): the checkpoint ``examples/web/snake.safetensors`` is exported with
  ``gymloop export --onnx``, the page is served on localhost and driven in headless Chromium
  (playwright-core): the agent's snake grows well beyond random play's in the same page, a
  screenshot shows a board, and a model URL that does not load shows a readable message.

They skip (saying why) only where ``node`` or Chromium is missing; ``.ci/run`` installs both.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gymloop as gl
from gymloop.games.snake import Body, Food, GreedyAgent, Head, Move, snake
from gymloop.schema import schema_of

# one pytest-xdist worker runs this module (its module-scoped fixture is set up once)
pytestmark = pytest.mark.xdist_group("web")

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "examples" / "web"
NODE = shutil.which("node")
CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium")) if p and os.access(p, os.X_OK)), None)
TYPES = {"Head": Head, "Body": Body, "Food": Food}

NPM = shutil.which("npm")
CHECKPOINT = WEB / "snake.safetensors"

needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed (.ci/run installs nodejs)")
needs_browser = pytest.mark.skipif(
    NODE is None or NPM is None or CHROMIUM is None,
    reason="the page test needs node, npm and Chromium (/usr/bin/chromium); .ci/run installs nodejs, npm and chromium",
)


def _node(script: str, payload: Any, timeout: float = 30) -> Any:
    """Run an ES-module ``script`` with ``payload`` as JSON on stdin; its stdout is one JSON value."""
    assert NODE is not None
    p = subprocess.run([NODE, "--input-type=module", "-e", script], input=json.dumps(payload), capture_output=True,
                       text=True, timeout=timeout, cwd=WEB)
    if p.returncode:
        raise AssertionError(f"node failed ({p.returncode}):\n{p.stderr}")
    return json.loads(p.stdout)


def _obs_space() -> dict[str, Any]:
    return {"entities": {t: list(schema_of(c).features) for t, c in TYPES.items()}, "globals": []}


class _Recorder:
    """Plays ``inner``'s moves and records every observation as gymloop featurizes it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.steps: list[dict[str, Any]] = []
        self.ends: list[dict[str, Any]] = []

    def act(self, obs: gl.Obs, *action_types: Any) -> Move:
        feats = {t: schema_of(c).featurize(obs.entities_of(c)).tolist() for t, c in TYPES.items()}
        assert obs.actor_list == obs.entities_of(Head)
        move = self.inner.act(obs, *action_types)
        self.steps.append({"obs": feats, "score": obs.score, "move": move.value})
        return move

    def game_over(self, obs: gl.Obs, truncated: bool = False) -> None:
        self.ends.append({"at": len(self.steps), "length": obs.metrics["length"], "truncated": truncated})
        self.inner.game_over(obs, truncated)


class _RandomMoves:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def act(self, obs: gl.Obs, *action_types: Any) -> Move:
        return Move(self.rng.randrange(4))

    def game_over(self, obs: gl.Obs, truncated: bool = False) -> None:
        pass


class _Circler:
    """Loops clockwise inside the head's 2×2 block: never dies, so every episode is truncated."""

    def act(self, obs: gl.Obs, *action_types: Any) -> Move:
        h = obs.actor_list[0]
        return {(0, 0): Move.UP, (0, 1): Move.RIGHT, (1, 1): Move.DOWN, (1, 0): Move.LEFT}[(h.x % 2, h.y % 2)]

    def game_over(self, obs: gl.Obs, truncated: bool = False) -> None:
        pass


# the JS side: the same loop as snake.py's (reset in place after a death or at MAX_STEPS decisions)
_REPLAY = """
import { readFileSync } from "node:fs";
import { MAX_STEPS, SnakeGame, observe } from "./snake.js";
const { games, obsSpace } = JSON.parse(readFileSync(0, "utf8"));
const out = games.map(({ seed, moves }) => {
  const game = new SnakeGame(seed);
  const steps = [];
  const ends = [];
  for (const move of moves) {
    const o = observe(game, obsSpace);
    const obs = {};
    for (const [t, e] of Object.entries(o.entities)) {
      obs[t] = [];
      for (let i = 0; i < e.count; i++) obs[t].push(Array.from(e.data.subarray(i * e.features, (i + 1) * e.features)));
    }
    steps.push({ obs, score: game.score, move });
    game.step(move);
    if (game.over || game.steps >= MAX_STEPS) {
      ends.push({ at: steps.length, length: game.length, truncated: !game.over });
      game.reset();
    }
  }
  return { steps, ends };
});
process.stdout.write(JSON.stringify(out));
"""


@needs_node
def test_js_snake_plays_exactly_as_python() -> None:
    """Same seed, same moves: the JS game's observations (features by name), scores and episode ends
    are the Python loop's, step for step: growth, food spawns, deaths, restarts in place and the
    500-decision truncation, on small and 64-bit seeds."""
    games, expected = [], []
    for seed, inner, steps in ((0, GreedyAgent(seed=0), 1100), (7, GreedyAgent(seed=3), 700),
                               (2**40 + 3, _RandomMoves(1), 400), (123456789, _RandomMoves(2), 300), (11, _Circler(), 1100)):
        rec = _Recorder(inner)
        gl.run(snake, rec, seed=seed, max_steps=steps)
        games.append({"seed": seed, "moves": [s["move"] for s in rec.steps]})
        expected.append({"steps": rec.steps, "ends": rec.ends})
    got = _node(_REPLAY, {"games": games, "obsSpace": _obs_space()})
    lengths = [max(len(s["obs"]["Body"]) + 1 for s in e["steps"]) for e in expected]
    assert max(lengths) >= 10, f"the scripted player should grow the snake (lengths {lengths})"
    assert any(end["truncated"] for e in expected for end in e["ends"]), "no episode reached the time limit"
    assert sum(len(e["ends"]) for e in expected) >= 20
    for g, e, w in zip(games, expected, got):
        for i, (a, b) in enumerate(zip(e["steps"], w["steps"])):
            assert a == b, f"seed {g['seed']}, decision {i}: Python {a} != JS {b}"
        assert len(e["steps"]) == len(w["steps"])
        assert e["ends"] == w["ends"], f"seed {g['seed']}: episode ends differ"


_OBSERVE = """
import { readFileSync } from "node:fs";
import { SnakeGame, observe } from "./snake.js";
const spaces = JSON.parse(readFileSync(0, "utf8"));
const game = new SnakeGame(5);
for (const m of [0, 0, 3, 3, 3, 1]) if (!game.over) game.step(m);
const out = spaces.map((space) => {
  try {
    const o = observe(game, space);
    return { ok: Object.fromEntries(Object.entries(o.entities).map(([t, e]) => [t, Array.from(e.data)])) };
  } catch (e) {
    return { error: e.message };
  }
});
process.stdout.write(JSON.stringify({ head: game.head, food: game.food, out }));
"""


@needs_node
def test_js_observation_follows_the_models_feature_names() -> None:
    """The page builds inputs by the names in the model's metadata: swapped features come swapped,
    an unknown feature, entity type or a global is refused with the names."""
    space = _obs_space()
    swapped = json.loads(json.dumps(space))
    swapped["entities"]["Food"] = ["y", "x"]
    unknown_feature = json.loads(json.dumps(space))
    unknown_feature["entities"]["Body"] = ["x", "y", "age"]
    unknown_type = {"entities": {**space["entities"], "Wall": ["x", "y"]}, "globals": []}
    missing_type = {"entities": {"Head": ["x", "y"], "Food": ["x", "y"]}, "globals": []}
    with_globals = {**space, "globals": ["tick"]}
    r = _node(_OBSERVE, [space, swapped, unknown_feature, unknown_type, missing_type, with_globals])
    plain, sw, *errors = r["out"]
    assert plain["ok"]["Head"] == [r["head"]["x"], r["head"]["y"]]
    assert plain["ok"]["Food"] == [v for f in r["food"] for v in (f["x"], f["y"])]
    assert sw["ok"]["Food"] == [v for f in r["food"] for v in (f["y"], f["x"])]
    assert sw["ok"]["Head"] == plain["ok"]["Head"]
    msgs = [e.get("error", "") for e in errors]
    assert 'feature "age"' in msgs[0] and "Body" in msgs[0], msgs[0]
    assert 'entity type "Wall"' in msgs[1], msgs[1]
    assert 'entity type "Body"' in msgs[2] and "does not observe" in msgs[2], msgs[2]
    assert "global features tick" in msgs[3], msgs[3]


# ---------------------------------------------------------------------- the page, in Chromium (slow)
@pytest.fixture(scope="module")
def web_deps() -> Path:
    """examples/web/node_modules as package-lock.json pins it (``npm ci`` when missing or stale)."""
    pins = json.loads((WEB / "package.json").read_text())
    wanted = {**pins.get("dependencies", {}), **pins.get("devDependencies", {})}

    def installed(name: str) -> str | None:
        f = WEB / "node_modules" / name / "package.json"
        return json.loads(f.read_text()).get("version") if f.is_file() else None

    if any(installed(n) != v for n, v in wanted.items()):
        assert NPM is not None
        p = subprocess.run([NPM, "ci", "--no-audit", "--no-fund"], cwd=WEB, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, f"npm ci failed in {WEB}:\\n{p.stdout}\\n{p.stderr}"
    bad = {n: installed(n) for n, v in wanted.items() if installed(n) != v}
    assert not bad, f"examples/web/node_modules does not hold the pinned versions {wanted}: {bad}"
    return WEB / "node_modules"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed checkpoint exported by ``gymloop export --onnx`` (and a file that is no model)."""
    from gymloop.cli import main

    d = tmp_path_factory.mktemp("model")
    assert main(["export", str(CHECKPOINT), "--onnx", str(d / "snake.onnx")]) == 0
    shutil.copy(CHECKPOINT, d / "not-onnx.onnx")  # a safetensors file under an .onnx name
    return d


class _Handler(SimpleHTTPRequestHandler):
    """examples/web, plus /model/NAME from the test's folder of exported models."""

    models: Path
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".mjs": "text/javascript", ".js": "text/javascript",
                      ".wasm": "application/wasm", ".onnx": "application/octet-stream"}

    def translate_path(self, path: str) -> str:
        if path.startswith("/model/"):
            return str(self.models / Path(path.split("?")[0]).name)
        return super().translate_path(path)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def _serve(models: Path) -> Iterator[str]:
    handler = type("Handler", (_Handler,), {"models": models})
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(WEB)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _drive(jobs: list[dict[str, Any]], tmp: Path) -> list[dict[str, Any]]:
    """Open each page in one headless Chromium (examples/web/drive.mjs) and return what each reported."""
    profile = tmp / "chromium-profile"
    profile.mkdir()
    spec = tmp / "jobs.json"
    spec.write_text(json.dumps({"chromium": CHROMIUM, "userDataDir": str(profile), "jobs": jobs}))
    assert NODE is not None
    # its own session, so that a timeout kills Chromium with the driver (Playwright's cleanup does not
    # run on SIGKILL); the limit is above the sum of the jobs' own timeouts
    p = subprocess.Popen([NODE, "drive.mjs", str(spec)], cwd=WEB, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"the driver did not finish within 300 s:\n{out}\n{err}")
    assert p.returncode == 0, f"the driver failed ({p.returncode}):\n{out}\n{err}"
    results: list[dict[str, Any]] = json.loads(out)["results"]
    return results


def _count(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 3) -> int:
    return int((np.abs(img[..., :3].astype(int) - np.array(rgb)) <= tol).all(axis=-1).sum())


HEAD_RGB, BODY_RGB, BACKGROUND_RGB, FOOD_RGB = (250, 214, 64), (78, 190, 90), (22, 24, 30), (235, 72, 72)
CELL_PX = 36 * 36  # a snake cell as the page fills it: 40 px cells, 2 px inset


@pytest.mark.slow
@needs_browser
def test_page_agent_outgrows_random_play_and_shows_errors(web_deps: Path, model_dir: Path, tmp_path: Path) -> None:
    """The exported agent plays the JS snake in headless Chromium: its snakes grow far beyond random
    moves' in the same page; the screenshot is the board (the head, as many body cells as the page
    reports, the dark background); a model URL that does not load, or a file that is no gymloop
    model, shows a readable message on the page instead of a blank canvas; the keys hand control to
    a human and back, as gymloop play's TakeOver."""
    from PIL import Image

    with _serve(model_dir) as base:
        results = _drive([
            {"url": f"{base}/?mode=agent&fps=0&episodes=3&seed=1&model=/model/snake.onnx", "until": "done",
             "timeoutMs": 40000, "screenshot": str(tmp_path / "agent.png")},
            {"url": f"{base}/?mode=random&fps=0&episodes=40&seed=1", "until": "done", "timeoutMs": 20000},
            {"url": f"{base}/?mode=agent&model=/model/missing.onnx", "until": "error", "timeoutMs": 20000,
             "screenshot": str(tmp_path / "error.png")},
            {"url": f"{base}/?mode=agent&model=/model/not-onnx.onnx", "until": "error", "timeoutMs": 20000},
            {"url": f"{base}/?mode=agent&fps=25&seed=3&model=/model/snake.onnx", "until": "ready", "timeoutMs": 20000, "steps": [
                {"waitFor": "gymloopStats.decisions >= 3"},
                {"press": "Space"}, {"waitFor": "gymloopStats.log.some((e) => e.by === 'human')"},
                {"press": "ArrowLeft"}, {"waitFor": "gymloopStats.log.some((e) => e.by === 'human' && e.move === 'LEFT')"},
                {"press": "Enter"}, {"waitFor": "gymloopStats.log.at(-1).by === 'agent' && gymloopStats.log.some((e) => e.by === 'human')"},
                {"snapshot": True},
            ]},
        ], tmp_path)
    agent, rand, missing, not_onnx, takeover = results
    for r in (agent, rand):
        assert not r["timedOut"] and r["stats"]["error"] is None and r["errorText"] is None, r
        assert r["stats"]["done"], r
    assert [e["controller"] for e in agent["stats"]["episodes"]] == ["agent"] * 3
    assert agent["stats"]["features"] == {"Body": ["x", "y"], "Food": ["x", "y"], "Head": ["x", "y"]}
    agent_len = [e["length"] for e in agent["stats"]["episodes"]]
    rand_len = [e["length"] for e in rand["stats"]["episodes"]]
    assert len(rand_len) == 40 and all(e["controller"] == "random" for e in rand["stats"]["episodes"])
    mean_agent, mean_rand = float(np.mean(agent_len)), float(np.mean(rand_len))
    # measured: the agent about 25-30 (gymloop eval: 25.3), random moves about 1.2 (eval: 1.27)
    assert mean_agent >= 10 and mean_agent >= 5 * mean_rand, f"agent {agent_len}, random {rand_len}"
    assert min(agent_len) > max(rand_len) or mean_agent > 3 * max(rand_len), f"agent {agent_len}, random {rand_len}"

    img = np.asarray(Image.open(tmp_path / "agent.png").convert("RGB"))
    assert abs(img.shape[0] - 436) <= 4 and abs(img.shape[1] - 400) <= 4, img.shape  # the canvas (and its border)
    final = agent["stats"]["episodes"][-1]["length"]
    assert _count(img, HEAD_RGB) >= CELL_PX  # (the bar's text is light grey, not yellow)
    assert abs(_count(img, BODY_RGB) - (final - 1) * CELL_PX) <= 4 * 36, (final, _count(img, BODY_RGB))
    assert _count(img, BACKGROUND_RGB) > 0.3 * img.shape[0] * img.shape[1]

    assert "could not load the model /model/missing.onnx: HTTP 404" in (missing["errorText"] or ""), missing
    assert "gymloop export" in missing["errorText"]
    err = np.asarray(Image.open(tmp_path / "error.png").convert("RGB"))
    assert _count(err, FOOD_RGB, tol=40) > 200  # the red title drawn on the canvas
    assert (np.abs(err.astype(int) - np.array(BACKGROUND_RGB)).sum(axis=-1) > 100).sum() > 1500  # and the message
    assert "not-onnx.onnx" in (not_onnx["errorText"] or "") and "gymloop" in not_onnx["errorText"], not_onnx

    # SPACE takes over (the human goes on with the agent's last move), an arrow steers, Enter hands back
    assert not takeover["timedOut"], takeover
    (snap,) = takeover["snapshots"]
    log = snap["log"]
    by = [e["by"] for e in log]
    first = by.index("human")
    assert first > 0 and by[first - 1] == "agent", by
    if log[first]["episode"] == log[first - 1]["episode"]:
        assert log[first]["move"] == log[first - 1]["move"], log[first - 1: first + 1]
    last = len(by) - 1 - by[::-1].index("human")
    assert any(e["move"] == "LEFT" for e in log[first: last + 1]) and set(by[first: last + 1]) == {"human"}, log
    assert by[last + 1:] and set(by[last + 1:]) == {"agent"} and snap["controller"] == "agent", by


_PROBS = """
import * as ort from "onnxruntime-web";
import { readFileSync } from "node:fs";
import { OnnxAgent } from "./agent.js";
import { MAX_STEPS, SnakeGame, observe } from "./snake.js";
ort.env.wasm.numThreads = 1;
const { model, seed, moves } = JSON.parse(readFileSync(0, "utf8"));
const agent = await OnnxAgent.fromBytes(ort, readFileSync(model), model);
const game = new SnakeGame(seed);
const probs = [];
for (const move of moves) {
  probs.push(await agent.probs(observe(game, agent.obsSpace), "Move"));
  game.step(move);
  if (game.over || game.steps >= MAX_STEPS) game.reset();
}
process.stdout.write(JSON.stringify(probs));
"""


class _ProbsRecorder:
    """Plays a loaded agent and records, at every decision, the probabilities it chooses from."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.probs: list[list[float]] = []
        self.moves: list[int] = []

    def act(self, obs: gl.Obs, *action_types: Any) -> Move:
        (lg,) = self.agent.logits(obs, *action_types)
        e = np.exp(lg[0] - lg[0].max())
        self.probs.append((e / e.sum()).tolist())
        move: Move = self.agent.act(obs, *action_types)
        self.moves.append(move.value)
        return move

    def game_over(self, obs: gl.Obs, truncated: bool = False) -> None:
        self.agent.game_over(obs, truncated)


@pytest.mark.slow
@needs_browser
def test_js_agent_decides_as_gl_load(web_deps: Path, model_dir: Path) -> None:
    """The page's agent code (snake.js observations, agent.js feeds by the model's metadata,
    onnxruntime-web's wasm backend) gives, decision after decision of a played game, the
    probabilities gl.load's numpy runtime gives for the same checkpoint (within 1e-5)."""
    rec = _ProbsRecorder(gl.load(CHECKPOINT, seed=0))
    gl.run(snake, rec, seed=4, max_steps=200)
    got = np.array(_node(_PROBS, {"model": str(model_dir / "snake.onnx"), "seed": 4, "moves": rec.moves}, timeout=120))
    want = np.array(rec.probs)
    assert got.shape == want.shape == (200, 4)
    assert np.abs(got - want).max() < 1e-5, np.abs(got - want).max()
    assert want.max(axis=1).mean() > 0.5  # a trained agent: the comparison is not of near-uniform rows


_AGENT_JS = """
import { readFileSync } from "node:fs";
import { OnnxAgent, layoutOf, observation, readOnnxMetadata } from "./agent.js";
const { model, io } = JSON.parse(readFileSync(0, "utf8"));
const out = {};
const meta = readOnnxMetadata(Uint8Array.from(model));
out.meta = meta;
class Tensor { constructor(type, data, dims) { this.type = type; this.data = Array.from(data, Number); this.dims = dims; } }
const layout = layoutOf({ "gymloop.format": "gymloop-onnx/1", "gymloop.io": JSON.stringify(io) }, "m.onnx");
const agent = new OnnxAgent({ Tensor }, null, layout, "m.onnx");
const units = [{ x: 1, y: 2, hp: 3 }, { x: 4, y: 5, hp: 6 }];
const obs = observation({ Wall: [{ x: 9, y: 9 }], Unit: units }, agent.obsSpace, { type: "Unit", index: 1 }, { turn: 7 },
  { Act: [true, false, true] });
out.feeds = agent.feeds(obs, "Act");
out.errors = [];
for (const f of [
  () => observation({ Unit: units }, agent.obsSpace, { type: "Unit", index: 0 }, { turn: 1 }),
  () => observation({ Wall: [], Unit: [{ x: 1, y: 2 }] }, agent.obsSpace, { type: "Unit", index: 0 }, { turn: 1 }),
  () => observation({ Wall: [], Unit: units }, agent.obsSpace, { type: "Unit", index: 0 }, {}),
  () => observation({ Wall: [], Unit: units, Ghost: [] }, agent.obsSpace, { type: "Unit", index: 0 }, { turn: 1 }),
  () => observation({ Wall: [], Unit: units }, agent.obsSpace, { type: "Unit", index: 2 }, { turn: 1 }),
  () => agent.feeds(observation({ Wall: [], Unit: units }, agent.obsSpace, { type: "Unit", index: 0 }, { turn: 1 }, { Act: [true] }), "Act"),
  () => layoutOf({ "gymloop.format": "gymloop-onnx/9", "gymloop.io": "{}" }, "new.onnx"),
  () => layoutOf({ other: "1" }, "plain.onnx"),
  () => readOnnxMetadata(Uint8Array.from([0x72, 0x05, 0x01])),
]) {
  try { f(); out.errors.push(null); } catch (e) { out.errors.push(e.message); }
}
process.stdout.write(JSON.stringify(out));
"""


def _pb_model(meta: dict[str, str]) -> bytes:
    """A minimal ONNX ModelProto's bytes: ir_version, a graph field to skip, a fixed64, metadata_props."""

    def varint(n: int) -> bytes:
        out = b""
        while True:
            b, n = n & 0x7F, n >> 7
            out += bytes([b | (0x80 if n else 0)])
            if not n:
                return out

    def ld(field: int, payload: bytes) -> bytes:
        return varint(field << 3 | 2) + varint(len(payload)) + payload

    body = varint(1 << 3) + varint(8) + ld(7, b"\x0a\x03abc" * 50) + varint(99 << 3 | 1) + b"\x00" * 8
    for k, v in meta.items():
        body += ld(14, ld(1, k.encode()) + ld(2, v.encode()))
    return body


@needs_node
def test_agent_js_feeds_any_game_by_the_models_layout() -> None:
    """agent.js (no onnxruntime needed here): the metadata is read from the model's bytes; the generic
    observation() reads features by name; feeds() names every input after gymloop.io, puts the
    actor's row in the concatenation of the entity inputs, and the masks given; bad input is refused
    with the names."""
    io = {
        "format": "gymloop-onnx/1",
        "entities": [{"name": "Wall", "input": "entities.Wall", "features": ["x", "y"]},
                     {"name": "Unit", "input": "entities.Unit", "features": ["hp", "x"]}],
        "globals": {"input": "globals", "features": ["turn"]}, "actors": "actors",
        "actions": [{"name": "Act", "kind": "categorical", "labels": ["a", "b", "c"], "mask": "mask.Act", "mask_rows": "actors",
                     "candidates": None, "logits": "logits.Act", "probs": "probs.Act"}],
        "value": "value",
    }
    meta = {"gymloop.format": "gymloop-onnx/1", "gymloop.io": json.dumps(io), "ünïcode": "✓" * 200}
    r = _node(_AGENT_JS, {"model": list(_pb_model(meta)), "io": io})
    assert r["meta"] == meta
    f = r["feeds"]
    assert f["entities.Wall"] == {"type": "float32", "data": [9, 9], "dims": [1, 2]}
    assert f["entities.Unit"] == {"type": "float32", "data": [3, 1, 6, 4], "dims": [2, 2]}  # hp, x: the model's order
    assert f["globals"] == {"type": "float32", "data": [7], "dims": [1]}
    assert f["actors"] == {"type": "int64", "data": [2], "dims": [1]}  # 1 Wall row, then Unit #1
    assert f["mask.Act"] == {"type": "bool", "data": [1, 0, 1], "dims": [1, 3]}
    e = r["errors"]
    assert "Wall" in e[0] and "empty list" in e[0], e[0]
    assert 'feature "hp" is missing' in e[1], e[1]
    assert 'global feature "turn" is missing' in e[2], e[2]
    assert '"Ghost" is not observed' in e[3], e[3]
    assert "is not one of the observation's entities" in e[4], e[4]
    assert "mask of Act has 1 entries" in e[5] and "a, b, c" in e[5], e[5]
    assert "new.onnx has the layout gymloop-onnx/9; this page reads gymloop-onnx/1" in e[6], e[6]
    assert "plain.onnx is an ONNX model without gymloop's metadata (its metadata keys: other)" in e[7], e[7]
    assert "runs past" in e[8], e[8]
