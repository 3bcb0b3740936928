"""Which network head answers each action kind (shared by the torch policy and the numpy runtime).

==============================  ===========  =====================================================
kind                            head         computed from
==============================  ===========  =====================================================
categorical                     ``linear``   the actor's final embedding, one logit per label
global_categorical              ``summary``  the observation's summary (the value head's input)
select_entity                   ``pointer``  actor query . candidate key, one logit per candidate
==============================  ===========  =====================================================

A kind missing from this table has no head: building or loading a network for it is an error that
names the action type, never a silent fall-back to another kind's head.

Example:
    >>> from gymloop.spaces import ActionDesc
    >>> head_of(ActionDesc("Mode", "global_categorical", ("A", "B")))
    'summary'
"""

from __future__ import annotations

from ..errors import CheckpointError, ConfigError, GymloopError
from ..kinds import ActionKind, CategoricalKind, GlobalKind, SelectEntityKind
from ..spaces import ActionDesc

__all__ = ["LINEAR", "SUMMARY", "POINTER", "HEADS", "head_of"]

LINEAR = "linear"
SUMMARY = "summary"
POINTER = "pointer"

#: the head of every kind the networks support
HEADS: dict[type[ActionKind], str] = {CategoricalKind: LINEAR, GlobalKind: SUMMARY, SelectEntityKind: POINTER}


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
