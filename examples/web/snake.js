// The bundled snake (src/gymloop/games/snake.py) in JavaScript: the same rules, entity types,
// feature names and values, actions, score and random generator, so that a game seeded here plays
// exactly as SnakeGame(seed) does in Python for the same moves (tests/web checks it).
//
// An ES module with no dependencies: the page imports it, and so can Node.

export const SIZE = 10;
export const MAX_STEPS = 500;
export const FOOD_EVERY = 8;

/** The action type and its labels, in the order of the Python Enum's values. */
export const ACTION = "Move";
export const MOVES = ["UP", "DOWN", "LEFT", "RIGHT"];
const DELTA = [[0, 1], [0, -1], [-1, 0], [1, 0]];
const OPPOSITE = [1, 0, 3, 2];

/**
 * Python's random.Random (MT19937, seeded like CPython from a non-negative integer), with the two
 * methods the game uses: randrange(n) and random(). PyRandom(s).randrange(n) draws what
 * random.Random(s).randrange(n) draws.
 */
export class PyRandom {
  constructor(seed = 0) {
    this.mt = new Uint32Array(624);
    this.mti = 624;
    this.seed(seed);
  }

  seed(seed) {
    if (!Number.isSafeInteger(seed)) {
      throw new Error(`PyRandom: the seed must be an integer (at most 2**53), got ${seed}`);
    }
    let s = Math.abs(seed);
    const key = [];
    do {
      key.push(s % 0x100000000);
      s = Math.floor(s / 0x100000000);
    } while (s > 0);
    this.initByArray(key);
  }

  initGenrand(s) {
    const mt = this.mt;
    mt[0] = s >>> 0;
    for (let i = 1; i < 624; i++) {
      const prev = mt[i - 1] ^ (mt[i - 1] >>> 30);
      mt[i] = (Math.imul(1812433253, prev) + i) >>> 0;
    }
    this.mti = 624;
  }

  initByArray(key) {
    const mt = this.mt;
    this.initGenrand(19650218);
    let i = 1;
    let j = 0;
    for (let k = Math.max(624, key.length); k > 0; k--) {
      const prev = mt[i - 1] ^ (mt[i - 1] >>> 30);
      mt[i] = ((mt[i] ^ Math.imul(prev, 1664525)) + key[j] + j) >>> 0;
      i++;
      j++;
      if (i >= 624) {
        mt[0] = mt[623];
        i = 1;
      }
      if (j >= key.length) j = 0;
    }
    for (let k = 623; k > 0; k--) {
      const prev = mt[i - 1] ^ (mt[i - 1] >>> 30);
      mt[i] = ((mt[i] ^ Math.imul(prev, 1566083941)) - i) >>> 0;
      i++;
      if (i >= 624) {
        mt[0] = mt[623];
        i = 1;
      }
    }
    mt[0] = 0x80000000;
    this.mti = 624;
  }

  uint32() {
    const mt = this.mt;
    if (this.mti >= 624) {
      let kk = 0;
      let y;
      for (; kk < 624 - 397; kk++) {
        y = (mt[kk] & 0x80000000) | (mt[kk + 1] & 0x7fffffff);
        mt[kk] = mt[kk + 397] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
      }
      for (; kk < 623; kk++) {
        y = (mt[kk] & 0x80000000) | (mt[kk + 1] & 0x7fffffff);
        mt[kk] = mt[kk - 227] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
      }
      y = (mt[623] & 0x80000000) | (mt[0] & 0x7fffffff);
      mt[623] = mt[396] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
      this.mti = 0;
    }
    let y = mt[this.mti++];
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /** An integer in [0, n), as CPython's randrange(n) (getrandbits with rejection), n < 2**32. */
  randrange(n) {
    if (!Number.isInteger(n) || n < 1 || n > 0xffffffff) {
      throw new Error(`PyRandom.randrange: n must be an integer in [1, 2**32), got ${n}`);
    }
    const k = 32 - Math.clz32(n); // n.bit_length()
    let r = this.uint32() >>> (32 - k);
    while (r >= n) r = this.uint32() >>> (32 - k);
    return r;
  }

  /** A float in [0, 1), as CPython's random(). */
  random() {
    const a = this.uint32() >>> 5;
    const b = this.uint32() >>> 6;
    return (a * 67108864 + b) / 9007199254740992;
  }
}

/**
 * The rules, as SnakeGame in snake.py: a head, body segments (nearest first), foods; move with
 * step(moveIndex) (0 UP, 1 DOWN, 2 LEFT, 3 RIGHT); over is set when the snake dies.
 */
export class SnakeGame {
  constructor(seed = 0, size = SIZE) {
    this.size = size;
    this.rng = new PyRandom(seed);
    this.reset();
  }

  reset() {
    const size = this.size;
    const rng = this.rng;
    const x = rng.randrange(size);
    const y = rng.randrange(size);
    this.head = { x, y };
    this.body = [];
    this.food = [];
    this.heading = rng.randrange(4);
    this.occupied = new Uint8Array(size * size); // cells taken by body segments or food (2 = food)
    this.tick = 0;
    this.steps = 0;
    this.over = false;
    this.spawnFood();
  }

  get length() {
    return 1 + this.body.length;
  }

  /** The score the Python loop puts in every observation: the snake's length. */
  get score() {
    return this.length;
  }

  spawnFood() {
    const size = this.size;
    const occ = this.occupied;
    const hc = this.head.x * size + this.head.y;
    let c = -1;
    for (let t = 0; t < 16; t++) { // rejection sampling first; the board is rarely crowded
      const d = this.rng.randrange(size * size);
      if (!occ[d] && d !== hc) {
        c = d;
        break;
      }
    }
    if (c < 0) {
      const free = [];
      for (let d = 0; d < size * size; d++) if (!occ[d] && d !== hc) free.push(d);
      if (!free.length) return;
      c = free[this.rng.randrange(free.length)];
    }
    occ[c] = 2;
    this.food.push({ x: Math.floor(c / size), y: c % size });
  }

  /** Advance one tick with move index `move`; sets `over` when the snake dies. */
  step(move) {
    if (!Number.isInteger(move) || move < 0 || move > 3) {
      throw new Error(`SnakeGame.step: move must be 0..3 (${MOVES.join(", ")}), got ${move}`);
    }
    const size = this.size;
    if (this.body.length && move === OPPOSITE[this.heading]) move = this.heading;
    this.heading = move;
    const [dx, dy] = DELTA[move];
    const h = this.head;
    const nx = h.x + dx;
    const ny = h.y + dy;
    this.steps += 1;
    if (nx < 0 || ny < 0 || nx >= size || ny >= size) {
      this.over = true;
      return;
    }
    const occ = this.occupied;
    const c = nx * size + ny;
    const eat = occ[c] === 2;
    const body = this.body;
    const grow = eat || body.length > 0; // a new segment where the head was (decided before the tail moves)
    if (eat) {
      occ[c] = 0;
      const i = this.food.findIndex((f) => f.x === nx && f.y === ny);
      if (i >= 0) this.food.splice(i, 1);
    } else if (body.length) {
      const tail = body.pop();
      occ[tail.x * size + tail.y] = 0;
    }
    if (occ[c]) {
      this.over = true;
      return;
    }
    if (grow) {
      body.unshift({ x: h.x, y: h.y });
      occ[h.x * size + h.y] = 1;
    }
    h.x = nx;
    h.y = ny;
    this.tick += 1;
    if (this.tick % FOOD_EVERY === 0) this.spawnFood();
  }

  /** Whether the episode ended at the time limit (the Python loop truncates at MAX_STEPS). */
  get truncated() {
    return !this.over && this.steps >= MAX_STEPS;
  }

  /** The entities of the observation the Python loop builds, by entity type; Head is the actor. */
  entities() {
    return { Head: [this.head], Body: this.body, Food: this.food };
  }
}

/** The entity types of the observation and their features (as snake.py declares them); Head acts. */
export const FEATURES = { Head: ["x", "y"], Body: ["x", "y"], Food: ["x", "y"] };
export const ACTOR = "Head";

/**
 * The observation as gymloop featurizes it, laid out by the model's observation space.
 *
 * `obsSpace` is the space an exported model (or a checkpoint) carries:
 * `{entities: {Type: [feature names]}, globals: [names]}`. Every feature is read by name from the
 * game's objects, in the model's order, so a model whose types or features differ from this
 * game's is refused here with the names, never fed shifted columns.
 *
 * Returns `{entities: {Type: {count, features, data: Float32Array(count * features)}}, globals:
 * Float32Array(0), actor: {type, index}}` (rows in the order the Python loop lists them).
 */
export function observe(game, obsSpace) {
  const spaceTypes = Object.keys((obsSpace && obsSpace.entities) || {});
  const have = Object.keys(FEATURES);
  const fix = "export an agent trained on gymloop's bundled snake";
  for (const t of spaceTypes) {
    if (!have.includes(t)) {
      throw new Error(`the model observes entity type "${t}", which this snake does not have `
        + `(it has ${have.join(", ")}): ${fix}`);
    }
    for (const name of obsSpace.entities[t]) {
      if (!FEATURES[t].includes(name)) {
        throw new Error(`the model's ${t} has feature "${name}", which this snake's ${t} does not `
          + `(it has ${FEATURES[t].join(", ")}): ${fix}`);
      }
    }
  }
  for (const t of have) {
    if (!spaceTypes.includes(t)) {
      throw new Error(`this snake has entity type "${t}", which the model does not observe `
        + `(it observes ${spaceTypes.join(", ") || "nothing"}): ${fix}`);
    }
  }
  const globals = (obsSpace && obsSpace.globals) || [];
  if (globals.length) {
    throw new Error(`the model observes global features ${globals.join(", ")}; this snake has none: ${fix}`);
  }
  const ents = game.entities();
  const out = { entities: {}, globals: new Float32Array(0), actor: { type: ACTOR, index: 0 } };
  for (const t of spaceTypes) {
    const names = obsSpace.entities[t];
    const objs = ents[t];
    const f = names.length;
    const data = new Float32Array(objs.length * f);
    for (let i = 0; i < objs.length; i++) {
      for (let j = 0; j < f; j++) data[i * f + j] = objs[i][names[j]];
    }
    out.entities[t] = { count: objs.length, features: f, data };
  }
  return out;
}
