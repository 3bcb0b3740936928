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

/**
 * The spaces of the model, from its metadata (see docs/onnx.md for the keys the exporter writes):
 * {obsSpace: {entities: {Type: [features]}, globals: [...]}, actionSpace: {Name: {kind, labels}}}.
 */
export function spacesOf(meta, url) {
  const doc = meta.gymloop;
  if (!doc) {
    const keys = Object.keys(meta);
    throw new ModelLoadError(`${url} is an ONNX model without gymloop's metadata (its metadata keys: `
      + `${keys.length ? keys.join(", ") : "none"}); export the agent with gymloop export AGENT --onnx OUT.onnx`);
  }
  let parsed;
  try {
    parsed = JSON.parse(doc);
  } catch (e) {
    throw new ModelLoadError(`${url}: its "gymloop" metadata is not JSON (${e.message}); export it again with gymloop export`);
  }
  const obsSpace = parsed.obs_space;
  const actionSpace = parsed.action_space;
  if (!obsSpace || !obsSpace.entities || !actionSpace) {
    throw new ModelLoadError(`${url}: its "gymloop" metadata has no obs_space/action_space; export it again with gymloop export`);
  }
  return { obsSpace, actionSpace, doc: parsed };
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
  constructor(ort, session, spaces, url) {
    this.ort = ort;
    this.session = session;
    this.obsSpace = spaces.obsSpace;
    this.actionSpace = spaces.actionSpace;
    this.doc = spaces.doc;
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
    const bytes = new Uint8Array(await res.arrayBuffer());
    let meta;
    try {
      meta = readOnnxMetadata(bytes);
    } catch (e) {
      throw new ModelLoadError(`could not load the model ${url}: it is not an ONNX model (${e.message})`);
    }
    const spaces = spacesOf(meta, url);
    let session;
    try {
      session = await ort.InferenceSession.create(bytes, { executionProviders: ["wasm"] });
    } catch (e) {
      throw new ModelLoadError(`could not load the model ${url}: onnxruntime-web refused it (${e.message || e})`);
    }
    return new OnnxAgent(ort, session, spaces, url);
  }

  /** The feeds of one observation (snake.js observe's output), by the model's input names. */
  feeds(obs, action) {
    const ort = this.ort;
    const feeds = {};
    for (const [t, e] of Object.entries(obs.entities)) {
      feeds[`entities.${t}`] = new ort.Tensor("float32", e.data, [e.count, e.features]);
    }
    // the actor's index in the observation's entity sequence (types in obs-space order, then rows)
    let offset = 0;
    for (const t of Object.keys(this.obsSpace.entities)) {
      if (t === obs.actor.type) break;
      offset += obs.entities[t].count;
    }
    feeds[`actors.${action}`] = new ort.Tensor("int64", BigInt64Array.from([BigInt(offset + obs.actor.index)]), [1]);
    const n = this.actionSpace[action].labels.length;
    feeds[`masks.${action}`] = new ort.Tensor("bool", new Uint8Array(n).fill(1), [1, n]);
    return feeds;
  }

  /** The probabilities of `action`'s labels for the observation's actor. */
  async probs(obs, action) {
    const out = await this.session.run(this.feeds(obs, action));
    const p = out[`probs.${action}`];
    if (!p) {
      throw new Error(`the model has no output probs.${action} (its outputs: ${this.session.outputNames.join(", ")})`);
    }
    return Array.from(p.data);
  }
}
