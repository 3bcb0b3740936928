"""The batch layout is one table (``gymloop.batch.FIELDS``): every operation on batches reads it.

A test-only subclass adds two fields (one row per entity, one row per actor) to the table and to
the dataclass, and nothing else: its batches concatenate, stack, take, slice, relayout, compare,
go through the worker's shared-memory format and through the trace file's tensors.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pytest

import gymloop as gl
import gymloop.tracefile as tracefile_module
from gymloop.batch import ACTION_TYPE, ACTOR, ENTITY_TYPE, FIELDS, ROW, Batch, Field, SlotRanges, relayout, stack, take
from gymloop.checkpoint import read_safetensors
from gymloop.games.tactics import tactics
from gymloop.runtime import workers
from gymloop.trace import TRACE_SUFFIX


@dataclass
class TaggedBatch(Batch):
    """A batch with an ``age`` per entity row and an ``urgency`` per actor."""

    FIELDS: ClassVar[tuple[Field, ...]] = FIELDS + (
        Field("age", ROW, ENTITY_TYPE, np.dtype(np.int64)),
        Field("urgency", ACTOR, ACTION_TYPE, np.dtype(np.float32), lambda sp, k: (2,)),
    )
    age: dict[str, np.ndarray] = field(default_factory=dict)
    urgency: dict[str, np.ndarray] = field(default_factory=dict)


def tagged(b: Batch, base: int = 0) -> TaggedBatch:
    """``b`` with its new fields filled: every row and actor numbered from ``base``."""
    kw = {f.name: getattr(b, f.name) for f in dataclasses.fields(Batch)}
    age = {k: base + np.arange(len(v), dtype=np.int64) for k, v in b.entities.items()}
    urgency = {k: np.repeat(base + np.arange(len(v), dtype=np.float32)[:, None], 2, axis=1) for k, v in b.actor_slot.items()}
    return TaggedBatch(**kw, age=age, urgency=urgency)


@pytest.fixture(scope="module")
def env_batches():
    env = gl.VecEnv(tactics, num_envs=4, seed=1)
    rng = np.random.default_rng(0)
    try:
        out = [env.reset()]
        for _ in range(6):
            out.append(env.step(gl.vector.sample_legal(out[-1], env.spaces, rng)))
        return env.spaces, out
    finally:
        env.close()


def test_the_table_covers_every_array_of_a_batch():
    arrays = {f.name for f in dataclasses.fields(Batch)} - {"num_slots", "metrics", "candidate_types", "final"}
    assert {f.name for f in FIELDS} == arrays
    assert {f.name for f in TaggedBatch.FIELDS} == arrays | {"age", "urgency"}


def test_an_added_field_is_empty_concatenated_stacked_and_taken(env_batches):
    spaces, batches = env_batches
    e = TaggedBatch.empty(spaces, 3)
    assert e.age["Unit"].shape == (0,) and e.urgency["Order"].shape == (0, 2) and e.layout_problem(spaces) is None
    b = tagged(batches[-1])
    assert b.layout_problem(spaces) is None
    bad = tagged(batches[-1])
    bad.age["Unit"] = bad.age["Unit"][1:]
    assert "age['Unit'] is int64 of shape" in (bad.layout_problem(spaces) or "")

    # concat: the shards of one step
    c = TaggedBatch.concat([b, tagged(batches[-2], 100)])
    assert isinstance(c, TaggedBatch)
    for k in b.age:
        assert c.age[k].tolist() == b.age[k].tolist() + (100 + np.arange(batches[-2].counts[k].sum())).tolist()
    assert c.urgency["Order"].shape == (b.num_actors("Order") + batches[-2].num_actors("Order"), 2)

    # take, then stack the pieces back: the same batch (no metrics, no final)
    lo, hi = take(b, np.array([0, 1])), take(b, np.array([2, 3]))
    assert isinstance(lo[0], TaggedBatch)
    rows = int(b.counts["Unit"][:2].sum())
    assert lo[0].age["Unit"].tolist() == b.age["Unit"][:rows].tolist()
    assert lo[0].urgency["Order"].tolist() == b.urgency["Order"][lo[1]["Order"]].tolist()
    again = stack([lo[0], hi[0]])
    whole = dataclasses.replace(b, metrics={}, final=None)
    assert again.equal(whole)
    again.urgency["Order"] = again.urgency["Order"] + 1
    assert not again.equal(whole)

    # one slot at a time, then stacked: the same batch
    r = SlotRanges(b)
    assert stack([r.slot(k) for k in range(b.num_slots)]).equal(whole)

    # a final batch where one shard has none
    with_final = dataclasses.replace(b, final=TaggedBatch.empty(spaces, b.num_slots))
    joined = TaggedBatch.concat([with_final, b])
    assert joined.final is not None and joined.final.age["Unit"].shape == (0,) and joined.final.num_slots == 2 * b.num_slots


def test_an_added_field_goes_through_the_workers_shared_memory_format(env_batches):
    spaces, batches = env_batches
    b = tagged(batches[-1], 7)
    b.final = tagged(Batch.empty(spaces, b.num_slots))
    b.metrics = {"episode_return": np.arange(b.num_slots, dtype=np.float64)}
    arrays, names = b.to_wire()
    head, size = workers._layout(arrays)
    buf = memoryview(bytearray(max(size, 1)))
    workers._write(buf, arrays)
    back = TaggedBatch.from_wire(workers._read(buf, head), names, spaces, b.num_slots)
    assert back.equal(b) and back.metrics["episode_return"].tolist() == list(range(b.num_slots))


def test_an_added_field_is_saved_and_loaded_with_a_trace(tmp_path, monkeypatch):
    trace = gl.record_trace(tactics, gl.RandomAgent(seed=0), seed=2, max_steps=8)
    trace.batch = tagged(trace.batch, 3)
    path = trace.save(tmp_path / f"tagged{TRACE_SUFFIX}")
    tensors, _ = read_safetensors(path, mmap=False)
    assert {"age/Unit", "age/Enemy", "urgency/Order", "urgency/Target"} <= set(tensors)
    assert "reward" not in tensors and "active" not in tensors  # not saved: zeros and ones when loaded
    with pytest.raises(gl.TraceError, match=r"unexpected tensors \['age/"):
        gl.load_trace(path)  # a gymloop without the field refuses what it does not know
    monkeypatch.setattr(tracefile_module, "Batch", TaggedBatch)
    loaded = gl.load_trace(path)
    assert isinstance(loaded.batch, TaggedBatch)
    assert loaded.batch.equal(trace.batch)
    lo, hi = SlotRanges(trace.batch).span(ACTOR, "Order", 3)
    assert loaded.decision(3).urgency["Order"].tolist() == trace.batch.urgency["Order"][lo:hi].tolist()


def test_relayout_keeps_an_added_field_and_gives_new_types_empty_ones():
    unit = gl.ActionDesc("Go", "categorical", ("A", "B"))
    src = gl.Spaces(gl.ObsSpace({"B": ("x",)}), {"Go": unit})
    stay = gl.ActionDesc("Stay", "categorical", ("A", "B"))
    dst = gl.Spaces(gl.ObsSpace({"A": ("x",), "B": ("x",)}), {"Go": unit, "Stay": stay})
    b = tagged(Batch.empty(src, 2))
    b.entities["B"] = np.ones((3, 1), np.float32)
    b.counts["B"] = np.array([1, 2])
    b.actor_slot["Go"], b.actor_index["Go"] = np.array([1]), np.array([1])
    b.masks["Go"] = np.ones((1, 2), bool)
    b = tagged(b, 5)
    out = relayout(b, src, dst)
    assert isinstance(out, TaggedBatch) and out.layout_problem(dst) is None
    assert out.age["B"].tolist() == [5, 6, 7] and out.age["A"].shape == (0,)
    assert out.urgency["Go"].tolist() == [[5, 5]] and out.urgency["Stay"].shape == (0, 2)
    assert out.actor_index["Go"].tolist() == [1]  # A (no rows) comes first: the same index


def test_the_flat_format_round_trips_a_real_batch(env_batches):
    spaces, batches = env_batches
    for b in batches:
        back = Batch.from_flat(iter(b.to_flat()), spaces, b.num_slots)
        assert back.equal(dataclasses.replace(b, metrics={}, final=None))
        whole = Batch.from_wire(*b.to_wire(), spaces, b.num_slots)  # with final and metrics
        assert whole.equal(b) and whole.metrics.keys() == b.metrics.keys()
