// The page: the JS snake on a canvas, played by the exported agent (or at random, or by you).
//
// URL parameters (all optional):
//   model=URL     the exported agent (default snake.onnx, beside this page)
//   mode=agent    agent (default), random (uniform moves, no model: the baseline) or human
//   seed=N        the game's seed (default: a random one); the same seed plays SnakeGame(N)'s game
//   fps=N         decisions per second (default 10; 0: as fast as the model answers)
//   episodes=N    stop after N episodes (default: play on)
//   greedy=1      take the most probable move instead of sampling one
//
// window.gymloopStats tells how it goes (tests/web reads it): ready, error, controller (who plays now),
// episodes ([{length, steps, truncated, controller}]), length, steps, decisions, done, waitingForKey
// (a human's episode waits for the first key), log (the latest 500 decisions: {by, move, episode}).

import { ACTION, MAX_STEPS, MOVES, PyRandom, SIZE, SnakeGame, observe } from "./snake.js";
import { ModelLoadError, OnnxAgent, argmax, sample } from "./agent.js";

const params = new URLSearchParams(location.search);
const intParam = (name, fallback) => {
  const v = params.get(name);
  if (v === null || v === "") return fallback;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`URL parameter ${name} must be a non-negative integer, got "${v}"`);
  return n;
};

const CELL = 40;
const BAR = 36;
const COLORS = {
  background: "rgb(22, 24, 30)", grid: "rgb(38, 42, 52)", bar: "rgb(10, 11, 14)", text: "rgb(235, 235, 235)",
  food: "rgb(235, 72, 72)", head: "rgb(250, 214, 64)", body: "rgb(78, 190, 90)",
};
const KEYS = { ArrowUp: 0, ArrowDown: 1, ArrowLeft: 2, ArrowRight: 3, w: 0, s: 1, a: 2, d: 3 };

const canvas = document.getElementById("board");
const ctx = canvas.getContext("2d");
canvas.width = SIZE * CELL;
canvas.height = SIZE * CELL + BAR;

const stats = {
  ready: false, error: null, mode: null, controller: null, seed: null, model: null,
  episodes: [], length: 1, steps: 0, decisions: 0, done: false, features: null, log: [],
  waitingForKey: false,
};
window.gymloopStats = stats;

function showError(message) {
  stats.error = message;
  const box = document.getElementById("error");
  box.textContent = message;
  box.hidden = false;
  ctx.fillStyle = COLORS.background;
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.fillStyle = COLORS.food;
  ctx.font = "bold 18px sans-serif";
  ctx.fillText("The agent could not start:", 12, 40);
  ctx.fillStyle = COLORS.text;
  ctx.font = "14px sans-serif";
  let line = "";
  let y = 70;
  for (const word of message.split(/\s+/)) { // wrap the message on the canvas too
    if (ctx.measureText(`${line} ${word}`).width > canvas.width - 24 && line) {
      ctx.fillText(line, 12, y);
      y += 20;
      line = word;
    } else {
      line = line ? `${line} ${word}` : word;
    }
  }
  if (line) ctx.fillText(line, 12, y);
  console.error(message);
}

function draw(game, text) {
  ctx.fillStyle = COLORS.background;
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.fillStyle = COLORS.bar;
  ctx.fillRect(0, 0, canvas.width, BAR);
  ctx.strokeStyle = COLORS.grid;
  ctx.lineWidth = 1;
  for (let i = 0; i <= SIZE; i++) {
    ctx.beginPath();
    ctx.moveTo(i * CELL + 0.5, BAR);
    ctx.lineTo(i * CELL + 0.5, BAR + SIZE * CELL);
    ctx.moveTo(0, BAR + i * CELL + 0.5);
    ctx.lineTo(SIZE * CELL, BAR + i * CELL + 0.5);
    ctx.stroke();
  }
  const top = (y) => BAR + (SIZE - 1 - y) * CELL; // y grows upwards, as in gymloop's views
  for (const f of game.food) {
    ctx.fillStyle = COLORS.food;
    ctx.beginPath();
    ctx.arc(f.x * CELL + CELL / 2, top(f.y) + CELL / 2, CELL / 2 - 6, 0, 2 * Math.PI);
    ctx.fill();
  }
  ctx.fillStyle = COLORS.body;
  for (const b of game.body) ctx.fillRect(b.x * CELL + 2, top(b.y) + 2, CELL - 4, CELL - 4);
  ctx.fillStyle = COLORS.head;
  ctx.fillRect(game.head.x * CELL + 2, top(game.head.y) + 2, CELL - 4, CELL - 4);
  ctx.fillStyle = COLORS.text;
  ctx.font = "16px sans-serif";
  ctx.fillText(text, 10, 24);
}

function updatePanel(game, hint) {
  const eps = stats.episodes;
  const mean = eps.length ? eps.reduce((s, e) => s + e.length, 0) / eps.length : 0;
  document.getElementById("length").textContent = String(game.length);
  document.getElementById("score").textContent = String(game.score);
  document.getElementById("episodes").textContent = String(eps.length);
  document.getElementById("mean").textContent = eps.length ? mean.toFixed(2) : "-";
  document.getElementById("best").textContent = eps.length ? String(Math.max(...eps.map((e) => e.length))) : "-";
  document.getElementById("who").textContent = hint;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const mode = params.get("mode") || "agent";
  if (!["agent", "random", "human"].includes(mode)) throw new Error(`URL parameter mode must be agent, random or human, got "${mode}"`);
  const seed = intParam("seed", Math.floor(Math.random() * 2 ** 31));
  const fps = intParam("fps", 10);
  const maxEpisodes = intParam("episodes", 0);
  const greedy = params.get("greedy") === "1";
  const modelUrl = params.get("model") || "snake.onnx";
  Object.assign(stats, { mode, seed, model: mode === "agent" ? modelUrl : null });
  const game = new SnakeGame(seed);
  const rng = new PyRandom(seed + 1); // the agent's draws (and the random player's)
  draw(game, "loading…");

  let agent = null;
  if (mode === "agent") {
    let ort;
    try {
      ort = await import("./node_modules/onnxruntime-web/dist/ort.wasm.min.mjs");
    } catch (e) {
      throw new ModelLoadError(`could not load onnxruntime-web (${e.message}): run npm ci in examples/web, `
        + "and serve .mjs files as text/javascript");
    }
    ort.env.wasm.wasmPaths = new URL("./node_modules/onnxruntime-web/dist/", location.href).href;
    ort.env.wasm.numThreads = 1; // no cross-origin isolation needed, and a tiny model gains nothing
    ort.env.wasm.proxy = false;
    agent = await OnnxAgent.load(ort, modelUrl);
    const action = agent.actions[ACTION];
    if (!action || JSON.stringify(action.labels) !== JSON.stringify(MOVES)) {
      throw new ModelLoadError(`the model's actions (${Object.keys(agent.actions).join(", ")}) are not snake's `
        + `${ACTION} with labels ${MOVES.join(", ")}: export an agent trained on gymloop's snake`);
    }
    try {
      observe(game, agent.obsSpace); // a model of another game is refused before play starts
    } catch (e) {
      throw new ModelLoadError(`${modelUrl} does not fit this snake: ${e.message}`);
    }
    stats.features = agent.obsSpace.entities;
  }

  // who plays: the agent (or the random player) until a key takes over, as gymloop play's TakeOver
  let human = mode === "human";
  let humanStarted = false; // a human's episode starts at their first key press
  let lastMove = game.heading;
  const queued = [];
  const hint = () => {
    if (human) return mode === "human" ? "you play: arrow keys or WASD" : "you play - SPACE or Enter: hand back";
    return `${mode === "agent" ? "the agent" : "random moves"} play${mode === "agent" ? "s" : ""} - SPACE or an arrow key: take over`;
  };
  const controller = () => (human ? "human" : mode === "random" ? "random" : "agent");
  stats.controller = controller();
  window.addEventListener("keydown", (ev) => {
    const move = KEYS[ev.key];
    const isSpace = ev.key === " ";
    if (move === undefined && !isSpace && ev.key !== "Enter") return;
    ev.preventDefault();
    if (human) {
      if ((isSpace || ev.key === "Enter") && mode !== "human") {
        human = false;
        queued.length = 0;
      } else if (move !== undefined) {
        if (queued.length < 64) queued.push(move);
        humanStarted = true;
      }
    } else if (isSpace || move !== undefined) {
      human = true;
      humanStarted = true; // taking over mid-episode continues the agent's last move
      queued.length = 0;
      if (move !== undefined) queued.push(move);
    }
    stats.controller = controller();
    updatePanel(game, hint());
  });

  stats.ready = true;
  const humanFps = fps || 8;
  let sinceYield = 0;
  for (;;) {
    const started = performance.now();
    stats.waitingForKey = human && !humanStarted;
    if (human && !humanStarted) {
      draw(game, `length ${game.length} - press an arrow key to start`);
      updatePanel(game, hint());
      await sleep(50);
      continue;
    }
    let move;
    if (human) {
      move = queued.length ? queued.shift() : lastMove;
    } else if (agent) {
      const p = await agent.probs(observe(game, agent.obsSpace), ACTION);
      move = greedy ? argmax(p) : sample(p, rng.random());
    } else {
      move = rng.randrange(MOVES.length);
    }
    lastMove = move;
    stats.log.push({ by: controller(), move: MOVES[move], episode: stats.episodes.length });
    if (stats.log.length > 500) stats.log.shift();
    game.step(move);
    stats.decisions += 1;
    stats.steps = game.steps;
    stats.length = game.length;
    if (game.over || game.steps >= MAX_STEPS) {
      stats.episodes.push({ length: game.length, steps: game.steps, truncated: !game.over, controller: controller() });
      draw(game, `${game.over ? "game over" : "time up"}: length ${game.length}`);
      updatePanel(game, hint());
      if (maxEpisodes && stats.episodes.length >= maxEpisodes) break;
      if (fps) await sleep(600);
      game.reset();
      lastMove = game.heading;
      if (human) humanStarted = false;
    }
    draw(game, `length ${game.length}`);
    updatePanel(game, hint());
    const tick = human ? humanFps : fps;
    if (tick) {
      await sleep(Math.max(0, 1000 / tick - (performance.now() - started)));
    } else if (++sinceYield >= 25) { // as fast as possible, but let the page paint
      sinceYield = 0;
      await sleep(0);
    }
  }
  stats.done = true;
  document.getElementById("who").textContent = `done: ${stats.episodes.length} episodes`;
}

main().catch((e) => showError(e instanceof ModelLoadError ? e.message : `the page failed: ${e.message || e}`));
