"""Network configuration (typed, documented, checked at start-up)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .._ranges import Range, check_fields, describe
from ..errors import ConfigError

__all__ = ["FrameConfig", "NetConfig", "RelposConfig"]

#: position feature pairs that ``net.frame="auto"`` recognizes (in this order)
POSITION_NAMES: tuple[tuple[str, str], ...] = (
    ("x", "y"), ("x_pos", "y_pos"), ("pos_x", "pos_y"), ("pos.x", "pos.y"), ("position_x", "position_y"),
)
#: heading features (radians) that ``net.frame="auto"`` recognizes on the reference entity type
HEADING_NAMES: tuple[str, ...] = ("direction", "heading", "angle", "orientation", "rotation", "yaw", "theta")


@dataclass
class RelposConfig:
    """Relative-position encoding on named position features (keys and values of attention).

    Attributes:
        position_features: names of the position features (e.g. ``["x", "y"]``); every entity type
            must have them.
        extent: relative offsets in ``[-extent, extent]`` get their own embedding per dimension;
            larger offsets are clamped.
        value_gate: ``"relu"`` gates the relative values by a projection of the attended entity;
            ``None`` disables the gate.
    """

    position_features: list[str] = field(default_factory=lambda: ["x", "y"])
    extent: list[int] = field(default_factory=lambda: [10, 10])
    value_gate: str | None = "relu"

    def check(self) -> None:
        """Raise :class:`ConfigError` with the fix if a field is out of its range (:data:`SPECS`)."""
        check_fields(self, SPECS["RelposConfig"], "net.relpos.")
        if not isinstance(self.extent, list) or not all(isinstance(e, int) and not isinstance(e, bool) for e in self.extent):
            raise ConfigError(f"relpos: extent must be a list of ints, one per position feature, got {self.extent!r}")
        if len(self.extent) != len(self.position_features):
            raise ConfigError(
                f"relpos: extent {self.extent} needs one value per position feature {self.position_features}"
            )
        if any(e < 1 for e in self.extent):
            raise ConfigError(f"relpos: every extent must be >= 1, got {self.extent}")


@dataclass
class FrameConfig:
    """Positions seen from one entity: the other entities' positions in its frame (egocentric input).

    Before the network (torch and numpy alike, in :func:`gymloop.nn.inputs.pack_entities`), the
    position features of every other entity type that has them are replaced by their offset from
    the first ``reference`` entity of the observation, rotated into its heading when
    ``heading_feature`` is set (``forward, left = R(-heading) (p - p_ref)``); the reference keeps
    its own features. An observation without a reference entity is left as it is.

    Attributes:
        reference: the entity type at the origin (e.g. the vehicle the agent drives).
        position_features: the two position feature names (e.g. ``["x_pos", "y_pos"]``); the
            reference type must have them.
        heading_feature: the reference type's heading in radians, or ``None`` (translate only).
    """

    reference: str
    position_features: list[str] = field(default_factory=lambda: ["x", "y"])
    heading_feature: str | None = None

    def check(self) -> None:
        """Raise :class:`ConfigError` with the fix if a field is out of its range."""
        check_fields(self, SPECS["FrameConfig"], "net.frame.")
        if len(self.position_features) != 2:
            raise ConfigError(f"net.frame.position_features must name 2 features (x, y), got {self.position_features!r}")


@dataclass
class NetConfig:
    """Entity transformer hyperparameters.

    Attributes:
        d_model: width of entity embeddings.
        n_layer: transformer blocks.
        n_head: attention heads (must divide ``d_model``).
        d_qk: query/key width of select-entity heads.
        relpos: relative-position encoding; ``"auto"`` enables it on ``x``/``y`` when every entity
            type has both features, ``None`` disables it.
        norm_clip: normalized features are clipped to ``[-norm_clip, norm_clip]``.
        mlp_ratio: hidden width of each block's MLP, in multiples of ``d_model``.
        readout: compute the last block only where its output is used: for the actors (action
            heads) and for one learned value query per observation (value head). Its attention
            then costs O(entities) per actor instead of O(entities^2) per observation. ``False``
            gives the rogue-net layout: every block over every entity, value from the mean of the
            final embeddings.
        summary_mean: the observation summary (the readout's value query, which feeds the value
            head and global decisions) adds the mean of the entities' attention values to its
            attention. Attention alone can harden onto one entity and stop seeing the others:
            entity-gym's Xor then stayed at 0.875 (the summary could not tell two equal bits from
            two different ones); with the mean both seeds reached 1.0 (docs/training.md).
            Checkpoints written before this option load with ``False``.
        summary_count: the observation summary (after the readout block) also adds the
            observation's number of entities, normalized by its running mean and deviation, times
            a learned vector. Attention and a mean are blind to how many entities there are: in
            the fire-fighting suite game, where the return depends on how many cells burn, the
            value's explained variance ended at 0.85 without it and 0.94 with it
            (docs/training.md). Checkpoints written before this option load with ``False``.
        frame: egocentric positions (:class:`FrameConfig`). ``"auto"`` enables it when exactly
            one entity type has a recognized position pair (:data:`POSITION_NAMES`) and a heading
            (:data:`HEADING_NAMES`, radians) and another type has the same position pair: an agent
            that moves the way it faces needs the world in its own frame, a rotation that one
            attention layer and a small MLP do not learn from an angle (docs/training.md);
            ``None`` disables it. Checkpoints written before this option load with ``None``.
        relpos_1d: ``relpos="auto"`` also enables the encoding on ``x`` alone when every entity
            type has ``x`` but some lack ``y`` (a ship that moves along one row: the suite's
            ``invaders``: without it the ship has to learn from absolute columns whether a bomb or
            an alien is above it; docs/training.md). Checkpoints written before this option load with ``False``.
    """

    d_model: int = 32
    n_layer: int = 1
    n_head: int = 2
    d_qk: int = 16
    relpos: RelposConfig | str | None = "auto"
    norm_clip: float = 5.0
    mlp_ratio: int = 2
    readout: bool = True
    summary_mean: bool = True
    summary_count: bool = True
    frame: FrameConfig | str | None = "auto"
    relpos_1d: bool = True

    def check(self) -> None:
        """Raise :class:`ConfigError` with the fix if a field is out of its range (:data:`SPECS`) or
        the fields do not fit together."""
        check_fields(self, SPECS["NetConfig"], "net.")
        if self.readout and self.n_layer < 1:
            raise ConfigError("readout=True needs n_layer >= 1 (the readout is the last block); set readout=False for n_layer=0")
        if self.d_model < 1 or self.n_layer < 0 or self.n_head < 1 or self.d_qk < 1 or self.mlp_ratio < 1:
            raise ConfigError(f"network sizes must be positive, got {self}")
        if self.d_model % self.n_head:
            heads = max(h for h in range(1, self.n_head + 1) if self.d_model % h == 0)
            raise ConfigError(f"n_head={self.n_head} must divide d_model={self.d_model}; e.g. use n_head={heads} or "
                              f"d_model={self.n_head * (self.d_model // self.n_head + 1)}")
        if isinstance(self.relpos, RelposConfig):
            self.relpos.check()
        elif self.relpos not in ("auto", None):
            raise ConfigError(f"net.relpos must be a RelposConfig, 'auto' or None, got {self.relpos!r}")
        if isinstance(self.frame, FrameConfig):
            self.frame.check()
        elif self.frame not in ("auto", None):
            raise ConfigError(f"net.frame must be a FrameConfig, 'auto' or None, got {self.frame!r}")

    def resolve_frame(self, entity_features: dict[str, tuple[str, ...]]) -> FrameConfig | None:
        """The egocentric frame for an observation space (``"auto"`` resolved; see :attr:`frame`).

        Raises:
            ConfigError: an explicit :class:`FrameConfig` names a type or feature the space lacks.
        """
        if self.frame is None:
            return None
        if self.frame == "auto":
            for pair in POSITION_NAMES:
                having = [t for t, f in entity_features.items() if pair[0] in f and pair[1] in f]
                headed = [(t, h) for t in having for h in HEADING_NAMES if h in entity_features[t]]
                refs = {t for t, _ in headed}
                if len(refs) == 1 and len(having) > 1:
                    t, h = headed[0]
                    return FrameConfig(t, list(pair), h)
            return None
        if not isinstance(self.frame, FrameConfig):  # check() refuses anything else
            raise ConfigError(f"net.frame must be a FrameConfig, 'auto' or None, got {self.frame!r}")
        f = self.frame
        feats = entity_features.get(f.reference)
        if feats is None:
            raise ConfigError(f"net.frame.reference={f.reference!r} is not an entity type of the game ({sorted(entity_features)})")
        want = list(f.position_features) + ([f.heading_feature] if f.heading_feature else [])
        missing = [n for n in want if n not in feats]
        if missing:
            raise ConfigError(f"net.frame: entity type {f.reference!r} lacks the features {missing} (it has {list(feats)})")
        return f

    def resolve_relpos(self, entity_features: dict[str, tuple[str, ...]]) -> RelposConfig | None:
        """The relative-position settings for an observation space (``"auto"`` resolved)."""
        if self.relpos is None:
            return None
        if self.relpos == "auto":
            if entity_features and all("x" in f and "y" in f for f in entity_features.values()):
                return RelposConfig()
            if self.relpos_1d and entity_features and all("x" in f for f in entity_features.values()):
                return RelposConfig(position_features=["x"], extent=[10])
            return None
        assert isinstance(self.relpos, RelposConfig)
        missing = {t: [p for p in self.relpos.position_features if p not in f] for t, f in entity_features.items()}
        missing = {t: m for t, m in missing.items() if m}
        if missing:
            raise ConfigError(f"relpos position features missing in entity types: {missing}; set relpos=None or rename features")
        return self.relpos

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("d_model", "n_layer", "n_head", "d_qk", "norm_clip", "mlp_ratio", "readout", "summary_mean",
                                       "summary_count", "relpos_1d")}
        r = self.relpos
        d["relpos"] = r if isinstance(r, str) or r is None else {
            "position_features": list(r.position_features), "extent": list(r.extent), "value_gate": r.value_gate,
        }
        fr = self.frame
        d["frame"] = fr if isinstance(fr, str) or fr is None else {
            "reference": fr.reference, "position_features": list(fr.position_features), "heading_feature": fr.heading_feature,
        }
        return d

    @classmethod
    def from_dict(cls, d: dict) -> NetConfig:
        """The config of :meth:`to_dict`'s dict; a missing field takes its default (a checkpoint's
        ``net`` comes through :func:`gymloop.nn.migrate.current_document` first, which fills what
        older files lack)."""
        d = dict(d)
        r = d.get("relpos")
        if isinstance(r, dict):
            d["relpos"] = RelposConfig(**r)
        fr = d.get("frame")
        if isinstance(fr, dict):
            d["frame"] = FrameConfig(**fr)
        return cls(**d)


#: upper bounds of the network's sizes: far beyond what trains on a CPU, they keep absurd values
#: (``net.d_model=10**12``) a clear error instead of an allocation that never ends.
MAX_WIDTH, MAX_LAYERS, MAX_HEADS, MAX_MLP_RATIO = 2**16, 2**10, 2**10, 2**6

#: The range of each field: what ``check()`` enforces (:func:`gymloop._ranges.check_fields`).
SPECS: dict[str, dict[str, Range]] = {
    "NetConfig": {
        "d_model": Range("int", lo=1, hi=MAX_WIDTH, note=", a multiple of n_head"),
        "n_layer": Range("int", lo=0, hi=MAX_LAYERS, note="; >= 1 with readout"),
        "n_head": Range("int", lo=1, hi=MAX_HEADS, note=", a divisor of d_model"),
        "d_qk": Range("int", lo=1, hi=MAX_WIDTH),
        "relpos": Range("any", text='"auto", None, or a RelposConfig (the `net.relpos.` fields below)'),
        "norm_clip": Range("float", lo=0, lo_open=True),
        "mlp_ratio": Range("int", lo=1, hi=MAX_MLP_RATIO),
        "readout": Range("bool"),
        "summary_mean": Range("bool"),
        "summary_count": Range("bool"),
        "frame": Range("any", text='"auto", None, or a FrameConfig (the `net.frame.` fields below)'),
        "relpos_1d": Range("bool"),
    },
    "FrameConfig": {
        "reference": Range("str", text="an entity type of the game with the position (and heading) features"),
        "position_features": Range("str_list", note=": the two position feature names (x, y)"),
        "heading_feature": Range("str", none="translate only", text="a feature of the reference type (radians), or None"),
    },
    "RelposConfig": {
        "position_features": Range("str_list", note=": feature names that every entity type has, one per extent"),
        "extent": Range("any", text="ints >= 1, one per position feature"),
        "value_gate": Range("choice", choices=("relu", "gelu", "sigmoid", "linear"), none="no gate"),
    },
}

#: The meaningful values of each field, as :mod:`gymloop.train.reference` shows them in ``docs/config.md``
#: (``{class name: {field: range}}``), made from :data:`SPECS`. Every field needs one: the reference
#: refuses to generate without it.
RANGES: dict[str, dict[str, str]] = {name: describe(specs) for name, specs in SPECS.items()}
