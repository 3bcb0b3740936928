"""Action kinds: what sort of choice an action type asks for, and everything that depends on it.

Every action type has one kind. A kind is a type (a subclass of :class:`ActionKind`, used through its
one instance) that owns what differs between kinds: how its descriptor is validated, the shape of its
masks in a :class:`~gymloop.batch.Batch`, how actions are validated and sampled from a batch, and how
its JSON tag reads. The runtime, the trainer and the numpy runtime dispatch on the kind object, never
on a bare string, so an unknown kind is an error (:func:`kind_named`) and never takes another kind's
path.

=====================  ==========================  ======================================================
kind                   tag                         one choice per
=====================  ==========================  ======================================================
:data:`CATEGORICAL`    ``categorical``             actor entity, among fixed labels (an Enum, a composite)
:data:`SELECT_ENTITY`  ``select_entity``           actor entity, among the observed entities of some types
:data:`GLOBAL`         ``global_categorical``      observation (no actor entity), among fixed labels
:data:`GLOBAL_SELECT`  ``global_select_entity``    observation (no actor entity), among observed entities
=====================  ==========================  ======================================================

A kind compares equal to its tag (``kind == "categorical"``) and hashes like it, so the spaces read
the same as before kinds were types, and ``repr`` shows the tag.

Example:
    >>> from gymloop.kinds import kind_named, GLOBAL
    >>> kind_named("global_categorical") is GLOBAL
    True
    >>> GLOBAL == "global_categorical", GLOBAL.actor_bound
    (True, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .errors import SchemaError

if TYPE_CHECKING:  # pragma: no cover
    from .batch import Batch

__all__ = ["ActionKind", "CategoricalKind", "SelectEntityKind", "GlobalKind", "GlobalSelectKind", "CATEGORICAL",
           "SELECT_ENTITY", "GLOBAL", "GLOBAL_SELECT", "KINDS", "kind_named"]

_EMPTY = np.zeros(0, dtype=np.int64)


class ActionKind:
    """The behaviour shared by every action type of one kind (subclass it for a new kind).

    Class attributes:
        tag: the kind's name in spaces JSON, checkpoints and traces.
        actor_bound: one choice per actor entity (``True``) or one per observation (``False``).
        selects_entities: the choices are observed entities (ragged masks, ``num_candidates``)
            rather than fixed labels.
    """

    tag: ClassVar[str] = ""
    actor_bound: ClassVar[bool] = True
    selects_entities: ClassVar[bool] = False
    #: what one choice is called in messages
    choice_word: ClassVar[str] = "choice"

    # A kind is its tag for comparisons, hashing and display: spaces written with strings stay equal.
    def __eq__(self, other: object) -> bool:
        if isinstance(other, ActionKind):
            return other.tag == self.tag
        return isinstance(other, str) and other == self.tag

    def __hash__(self) -> int:
        return hash(self.tag)

    def __repr__(self) -> str:
        return repr(self.tag)

    def __str__(self) -> str:
        return self.tag

    def __reduce__(self) -> Any:
        return (kind_named, (self.tag,))

    # ------------------------------------------------------------------ descriptors
    def check_desc(self, name: str, labels: Sequence[str], among: Sequence[str]) -> None:
        """Raise :class:`SchemaError` unless ``labels`` / ``among`` fit this kind."""
        if self.selects_entities:
            if not among:
                raise SchemaError(f"action type {name!r} is {self.tag}: it needs at least one candidate entity type in among")
            if labels:
                raise SchemaError(f"action type {name!r} is {self.tag}: it has candidate types only, not labels {list(labels)}")
        else:
            if not labels:
                raise SchemaError(f"action type {name!r} is {self.tag}: it needs at least one label")
            if among:
                raise SchemaError(f"action type {name!r} is {self.tag}: it has labels only, not candidate types {list(among)}")
            if len(set(labels)) != len(labels):
                raise SchemaError(f"action type {name!r} has duplicate labels {list(labels)}")

    def describe(self, labels: Sequence[str], among: Sequence[str]) -> str:
        """A short human description (for error messages)."""
        if self.selects_entities:
            return f"{'' if self.actor_bound else 'global '}select-entity among {list(among)}"
        return f"{self.tag} with labels {list(labels)}"

    # ------------------------------------------------------------------ masks in a batch
    def empty_masks(self, n_choices: int) -> np.ndarray:
        """The masks of a batch with no actor of this action type."""
        return np.zeros(0 if self.selects_entities else (0, n_choices), dtype=bool)

    def all_legal(self, n_actors: int, n_choices: int, n_candidates: int = 0) -> np.ndarray:
        """Masks allowing every choice: ``(n_actors, n_choices)``, or ``(n_candidates,)`` when selecting entities."""
        return np.ones(n_candidates if self.selects_entities else (n_actors, n_choices), dtype=bool)

    def no_legal(self, masks: np.ndarray, num_candidates: np.ndarray | None) -> int | None:
        """Index of the first actor whose mask allows nothing (or, selecting entities, that has no
        candidate), or ``None``."""
        if self.selects_entities:
            nc = num_candidates if num_candidates is not None else _EMPTY
            if not nc.size:
                return None
            if (nc == 0).any():  # (reduceat below needs non-empty segments)
                return int(np.flatnonzero(nc == 0)[0])
            legal = np.add.reduceat(masks.astype(np.int64), np.cumsum(nc) - nc)
            return int(np.flatnonzero(legal == 0)[0]) if (legal == 0).any() else None
        if masks.shape[0] and not masks.any(axis=1).all():
            return int(np.flatnonzero(~masks.any(axis=1))[0])
        return None

    # ------------------------------------------------------------------ actions against a batch
    def check_actions(self, b: Batch, name: str, n_choices: int, labels: Sequence[str], arr: np.ndarray) -> tuple[int, str] | None:
        """``(actor, why)`` for the first action of ``arr`` (int64, one per actor) that is illegal, else ``None``."""
        n_act = arr.shape[0]
        m = b.masks[name]
        if self.selects_entities:
            nc = b.num_candidates[name]
            bad = (arr < 0) | (arr >= nc)
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                return j, f"out of range [0, {int(nc[j])}) (the actor's candidate count)"
            if n_act:
                start = np.cumsum(nc) - nc
                ok = m[start + arr]
                if not ok.all():
                    j = int(np.flatnonzero(~ok)[0])
                    legal = np.flatnonzero(m[start[j] : start[j] + nc[j]]).tolist()
                    return j, f"masked out (legal candidate indices: {legal})"
            return None
        bad = (arr < 0) | (arr >= n_choices)
        if bad.any():
            return int(np.flatnonzero(bad)[0]), f"out of range [0, {n_choices})"
        if n_act:
            ok = m[np.arange(n_act), arr]
            if not ok.all():
                j = int(np.flatnonzero(~ok)[0])
                return j, f"masked out (legal: {[labels[i] for i in np.flatnonzero(m[j]).tolist()]})"
        return None

    def sample(self, b: Batch, name: str, n_choices: int, rng: np.random.Generator) -> np.ndarray:
        """Uniformly random legal choices for every actor of ``name`` in ``b`` (int64)."""
        m = b.masks[name]
        if self.selects_entities:
            nc = b.num_candidates[name]
            if nc.size == 0:
                return np.zeros(0, dtype=np.int64)
            r = rng.random(len(m))
            r[~m] = -1.0
            start = np.cumsum(nc) - nc
            seg = np.repeat(np.arange(nc.size), nc)
            order = np.lexsort((-r, seg))  # by (segment, -r): each segment's first entry is its maximum
            return (order[start] - start).astype(np.int64)
        n_act: int = m.shape[0]
        if n_act == 0:
            return np.zeros(0, dtype=np.int64)
        if m.all():
            return rng.integers(0, n_choices, size=n_act, dtype=np.int64)
        r = rng.random(m.shape)
        r[~m] = -1.0
        return r.argmax(axis=1).astype(np.int64)


class CategoricalKind(ActionKind):
    """One of fixed labels per actor entity (an Enum, or a dataclass of Enums)."""

    tag = "categorical"


class SelectEntityKind(ActionKind):
    """One of the observed entities of some types per actor entity (``gl.SelectEntity``)."""

    tag = "select_entity"
    selects_entities = True
    choice_word = "candidate"


class GlobalKind(ActionKind):
    """One of fixed labels per observation, tied to no actor entity (``@gl.global_decision``).

    In a batch it has one row per observation that asked for it: ``actor_slot`` is that observation's
    slot and ``actor_index`` is ``-1`` (no entity); its masks are ``(n, n_choices)``. The network
    answers it from a summary of the whole observation.
    """

    tag = "global_categorical"
    actor_bound = False


class GlobalSelectKind(ActionKind):
    """One of the observed entities of some types per observation, tied to no actor entity
    (``gl.global_decision(gl.SelectEntity(...))``: a doctor, who is not an entity, choosing a patient).

    In a batch it has one row per observation that asked for it, as a global decision has
    (``actor_slot`` its slot, ``actor_index`` ``-1``), and candidates as a select-entity action has
    (``num_candidates`` one per row, masks one per candidate). The network's query is the summary
    of the whole observation.
    """

    tag = "global_select_entity"
    actor_bound = False
    selects_entities = True
    choice_word = "candidate"


CATEGORICAL: ActionKind = CategoricalKind()
SELECT_ENTITY: ActionKind = SelectEntityKind()
GLOBAL: ActionKind = GlobalKind()
GLOBAL_SELECT: ActionKind = GlobalSelectKind()

#: every kind by tag; a new kind is one subclass of :class:`ActionKind` added here
KINDS: dict[str, ActionKind] = {k.tag: k for k in (CATEGORICAL, SELECT_ENTITY, GLOBAL, GLOBAL_SELECT)}


def kind_named(tag: Any, what: str = "an action type") -> ActionKind:
    """The kind whose tag is ``tag`` (a kind passes through).

    Raises:
        SchemaError: for an unknown tag; the message lists the known ones.

    Example:
        >>> kind_named("select_entity").selects_entities
        True
        >>> kind_named("continuous")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        gymloop.errors.SchemaError: an action type has unknown kind 'continuous'; known kinds: ['categorical', 'select_entity', ...]
    """
    if isinstance(tag, ActionKind):
        return tag
    k = KINDS.get(tag) if isinstance(tag, str) else None
    if k is None:
        raise SchemaError(f"{what} has unknown kind {tag!r}; known kinds: {list(KINDS)}")
    return k
