// An exported gymloop agent (gymloop export AGENT --onnx OUT.onnx) run by onnxruntime-web.
//
// The model carries its observation and action spaces (entity types, feature names, action labels)
// in its metadata; the page reads them straight from the .onnx file's bytes (readOnnxMetadata) and
// builds every input by name (snake.js observe), so a model of another game, or one whose features
// changed, is refused with the names instead of being fed the wrong columns.

/** The model's metadata_props (ModelProto field 14) as a {key: value} object, read from the raw bytes. */
export function readOnnxMetadata(bytes) {
  const buf = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const decoder = new TextDecoder();
  let pos = 0;
  const varint = (end) => {
    let v = 0;
    let scale = 1;
    for (;;) {
      if (pos >= end) throw new Error("truncated varint");
      const b = buf[pos++];
      v += (b & 0x7f) * scale;
      if (b < 0x80) return v;
      scale *= 128;
      if (scale > 2 ** 63) throw new Error("varint too long");
    }
  };
  const skip = (wire, end) => {
    if (wire === 0) varint(end);
    else if (wire === 1) pos += 8;
    else if (wire === 2) {
      const n = varint(end); // (not pos += varint(): that adds to pos as it was before the length)
      pos += n;
    }
    else if (wire === 5) pos += 4;
    else throw new Error(`unsupported protobuf wire type ${wire}`);
    if (pos > end) throw new Error("a field runs past the end of the file");
  };
  const meta = {};
  const end = buf.length;
  while (pos < end) {
    const tag = varint(end);
    const field = Math.floor(tag / 8);
    const wire = tag & 7;
    if (field === 14 && wire === 2) { // StringStringEntryProto {key = 1, value = 2}
      const n = varint(end);
      const stop = pos + n;
      if (stop > end) throw new Error("a metadata entry runs past the end of the file");
      let key = "";
      let value = "";
      while (pos < stop) {
        const t = varint(stop);
        if ((t & 7) === 2 && (t >>> 3 === 1 || t >>> 3 === 2)) {
          const len = varint(stop);
          if (pos + len > stop) throw new Error("a metadata string runs past its entry");
          const s = decoder.decode(buf.subarray(pos, pos + len));
          pos += len;
          if (t >>> 3 === 1) key = s;
          else value = s;
        } else {
          skip(t & 7, stop);
        }
      }
      meta[key] = value;
    } else {
      skip(wire, end);
    }
  }
  return meta;
}

/** A readable reason why loading failed (the page shows it, the test reads it). */
export class ModelLoadError extends Error {
  constructor(message) {
    super(message);
    this.name = "ModelLoadError";
  }
}

/** The layout of inputs and outputs this page reads (gymloop export's "gymloop.format"; docs/onnx.md). */
export const FORMAT = "gymloop-onnx/1";

/**
 * The model's input/output layout and spaces, from its metadata (docs/onnx.md): the "gymloop.io"
 * document ({format, entities: [{name, input, features}], globals: {input, features}, actors,
 * actions: [{name, kind, labels, mask, mask_rows, candidates, logits, probs}], value}), and from it
 * obsSpace ({entities: {Type: [features]}, globals}) and actions by name.
 */
export function layoutOf(meta, url) {
  const format = meta["gymloop.format"];
  const doc = meta["gymloop.io"];
  if (!format || !doc) {
    const keys = Object.keys(meta);
    throw new ModelLoadError(`${url} is an ONNX model without gymloop's metadata (its metadata keys: `
      + `${keys.length ? keys.join(", ") : "none"}); export the agent with gymloop export AGENT --onnx OUT.onnx`);
  }
  if (format !== FORMAT) {
    throw new ModelLoadError(`${url} has the layout ${format}; this page reads ${FORMAT}: export the agent again `
      + "with the gymloop version of this page (or update the page)");
  }
  let io;
  try {
    io = JSON.parse(doc);
  } catch (e) {
    throw new ModelLoadError(`${url}: its gymloop.io metadata is not JSON (${e.message}); export it again with gymloop export`);
  }
  if (!Array.isArray(io.entities) || !Array.isArray(io.actions) || !io.globals) {
    throw new ModelLoadError(`${url}: its gymloop.io metadata lacks entities, globals or actions; export it again with gymloop export`);
  }
  const obsSpace = {
    entities: Object.fromEntries(io.entities.map((e) => [e.name, e.features])),
    globals: io.globals.features || [],
  };
  const actions = Object.fromEntries(io.actions.map((a) => [a.name, a]));
  return { io, obsSpace, actions };
}

/**
 * The observation of any game, laid out by a model's observation space (`agent.obsSpace`): the
 * generic form of snake.js's observe, for your own game's page.
 *
 * `entities`: {Type: [objects]} for every entity type the model observes (an empty list when none
 * is on the board); each object's features are read by name (`obj[feature]`, numbers or booleans).
 * `actor`: {type, index}: the acting entity (its type and its index in that type's list).
 * `globals`: {name: value} when the model has global features.
 * `masks` (optional): {ActionType: [true/false per label]}: which labels are legal (default: all).
 */
export function observation(entities, obsSpace, actor, globals = {}, masks = undefined) {
  const out = { entities: {}, globals: null, actor, masks };
  for (const [t, names] of Object.entries(obsSpace.entities)) {
    const objs = entities[t];
    if (!Array.isArray(objs)) {
      throw new Error(`the model observes entity type "${t}"; pass its objects (an empty list when there are none), `
        + `got ${objs === undefined ? "nothing" : typeof objs}`);
    }
    const f = names.length;
    const data = new Float32Array(objs.length * f);
    for (let i = 0; i < objs.length; i++) {
      for (let j = 0; j < f; j++) {
        const v = objs[i][names[j]];
        if (typeof v !== "number" && typeof v !== "boolean") {
          throw new Error(`${t} #${i}: the model's feature "${names[j]}" is ${v === undefined ? "missing" : `a ${typeof v}`}; `
            + `give every ${t} a number for each of ${names.join(", ")}`);
        }
        data[i * f + j] = Number(v);
      }
    }
    out.entities[t] = { count: objs.length, features: f, data };
  }
  for (const t of Object.keys(entities)) {
    if (!(t in obsSpace.entities)) {
      throw new Error(`entity type "${t}" is not observed by the model (it observes ${Object.keys(obsSpace.entities).join(", ")})`);
    }
  }
  const gnames = obsSpace.globals || [];
  out.globals = new Float32Array(gnames.length);
  gnames.forEach((name, j) => {
    const v = globals[name];
    if (typeof v !== "number" && typeof v !== "boolean") {
      throw new Error(`the model's global feature "${name}" is ${v === undefined ? "missing" : `a ${typeof v}`}; pass it in globals`);
    }
    out.globals[j] = Number(v);
  });
  if (!actor || !(actor.type in out.entities) || !(actor.index >= 0 && actor.index < out.entities[actor.type].count)) {
    throw new Error(`the actor ${JSON.stringify(actor)} is not one of the observation's entities`);
  }
  return out;
}

/** An index drawn from probabilities `p` with a uniform draw `u` in [0, 1). */
export function sample(p, u) {
  let acc = 0;
  for (let i = 0; i < p.length; i++) {
    acc += p[i];
    if (u < acc) return i;
  }
  return p.length - 1;
}

export function argmax(p) {
  let best = 0;
  for (let i = 1; i < p.length; i++) if (p[i] > p[best]) best = i;
  return best;
}

/**
 * The exported policy: act(observation) gives the probabilities of one action type's labels for the
 * actor, from which the page samples (or takes the argmax).
 */
export class OnnxAgent {
  constructor(ort, session, layout, url) {
    this.ort = ort;
    this.session = session;
    this.io = layout.io;
    this.obsSpace = layout.obsSpace;
    this.actions = layout.actions;
    this.url = url;
  }

  /** Fetch, check and open the model at `url`; every failure is a ModelLoadError saying why. */
  static async load(ort, url) {
    let res;
    try {
      res = await fetch(url);
    } catch (e) {
      throw new ModelLoadError(`could not load the model ${url}: ${e.message}`);
    }
    if (!res.ok) {
      throw new ModelLoadError(`could not load the model ${url}: HTTP ${res.status} ${res.statusText}; `
        + "build it with gymloop export AGENT --onnx OUT.onnx and pass its URL as ?model=");
    }
    return OnnxAgent.fromBytes(ort, new Uint8Array(await res.arrayBuffer()), url);
  }

  /** Open a model from its bytes (`url` names it in messages); failures are ModelLoadErrors. */
  static async fromBytes(ort, bytes, url) {
    let meta;
    try {
      meta = readOnnxMetadata(bytes);
    } catch (e) {
      throw new ModelLoadError(`could not load the model ${url}: it is not an ONNX model (${e.message}); `
        + "export the agent with gymloop export AGENT --onnx OUT.onnx");
    }
    const layout = layoutOf(meta, url);
    let session;
    try {
      session = await ort.InferenceSession.create(bytes, { executionProviders: ["wasm"] });
    } catch (e) {
      throw new ModelLoadError(`could not load the model ${url}: onnxruntime-web refused it (${e.message || e})`);
    }
    return new OnnxAgent(ort, session, layout, url);
  }

  /**
   * The feeds of one observation (snake.js observe's output, built with this.obsSpace) for one
   * actor and the action type `action`, by the input names of the model's gymloop.io.
   */
  feeds(obs, action) {
    const ort = this.ort;
    const io = this.io;
    const feeds = {};
    let row = -1;
    let offset = 0;
    for (const e of io.entities) { // the actor's row in the concatenation of the entity inputs
      const x = obs.entities[e.name];
      feeds[e.input] = new ort.Tensor("float32", x.data, [x.count, x.features]);
      if (e.name === obs.actor.type) row = offset + obs.actor.index;
      offset += x.count;
    }
    if (io.globals.input) feeds[io.globals.input] = new ort.Tensor("float32", obs.globals, [obs.globals.length]);
    if (io.actors) {
      if (row < 0) throw new Error(`the actor's type ${obs.actor.type} is not among the model's entity types`);
      feeds[io.actors] = new ort.Tensor("int64", BigInt64Array.from([BigInt(row)]), [1]);
    }
    for (const a of io.actions) {
      if (a.candidates) {
        throw new Error(`action type ${a.name} selects entities (${a.kind}); this page plays label actions only`);
      }
      const n = a.labels.length;
      const legal = obs.masks && obs.masks[a.name];
      if (legal && legal.length !== n) {
        throw new Error(`the mask of ${a.name} has ${legal.length} entries; the model has ${n} labels (${a.labels.join(", ")})`);
      }
      const mask = legal ? Uint8Array.from(legal, (v) => (v ? 1 : 0)) : new Uint8Array(n).fill(1); // one actor
      feeds[a.mask] = new ort.Tensor("bool", mask, [1, n]);
    }
    if (!(action in this.actions)) {
      throw new Error(`the model has no action type ${action} (it has ${Object.keys(this.actions).join(", ")})`);
    }
    return feeds;
  }

  /** The probabilities of `action`'s labels for the observation's actor. */
  async probs(obs, action) {
    const name = this.actions[action].probs;
    const out = await this.session.run(this.feeds(obs, action), [name]);
    return Array.from(out[name].data);
  }
}
