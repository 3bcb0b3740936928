"""Which network head answers each action kind (shared by the torch policy and the numpy runtime).

==============================  ===========  =====================================================
kind                            head         computed from
==============================  ===========  =====================================================
categorical                     ``linear``   the actor's final embedding, one logit per label
global_categorical              ``summary``  the observation's summary (the value head's input)
select_entity                   ``pointer``  actor query . candidate key, one logit per candidate
global_select_entity            ``pointer``  summary query . candidate key, one logit per candidate
==============================  ===========  =====================================================

A kind that is not actor-bound (:func:`summary_actions`) reads the observation's summary where an
actor-bound one reads the actor's embedding: the ``summary`` head's input, or the ``pointer``
head's query.

A kind missing from this table has no head: building or loading a network for it is an error that
names the action type, never a silent fall-back to another kind's head.

Example:
    >>> from gymloop.spaces import ActionDesc
    >>> head_of(ActionDesc("Mode", "global_categorical", ("A", "B")))
    'summary'
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import CheckpointError, ConfigError, GymloopError
from ..kinds import ActionKind, CategoricalKind, GlobalKind, GlobalSelectKind, SelectEntityKind
from ..spaces import ActionDesc

__all__ = ["LINEAR", "SUMMARY", "POINTER", "HEADS", "head_of", "summary_actions"]

LINEAR = "linear"
SUMMARY = "summary"
POINTER = "pointer"

#: the head of every kind the networks support
HEADS: dict[type[ActionKind], str] = {
    CategoricalKind: LINEAR, GlobalKind: SUMMARY, SelectEntityKind: POINTER, GlobalSelectKind: POINTER,
}


def head_of(desc: ActionDesc, where: str | None = None, error: type[GymloopError] | None = None) -> str:
    """The head that answers action type ``desc``.

    Raises:
        ConfigError (or ``error``; a ``CheckpointError`` when ``where`` names a file): the network has
            no head for the action type's kind.
    """
    h = HEADS.get(type(desc.kind))
    if h is None:
        err = error or (CheckpointError if where else ConfigError)
        prefix = f"{where}: " if where else ""
        raise err(
            f"{prefix}action type {desc.name!r} is of kind {desc.kind.tag!r}, which the entity network has no head for; "
            f"it supports the kinds {sorted(HEADS_BY_TAG)}"
        )
    return h


HEADS_BY_TAG = {k.tag: h for k, h in HEADS.items()}


def summary_actions(actions: Mapping[str, ActionDesc]) -> frozenset[str]:
    """The action types answered from the observation summary (kinds not tied to an actor entity):
    their rows in the packed inputs are slots (:func:`~gymloop.nn.inputs.pack`'s ``summary_actions``)."""
    return frozenset(n for n, a in actions.items() if not a.kind.actor_bound)
