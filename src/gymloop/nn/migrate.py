"""Agent documents of older format versions brought to the current one, in one step at load time.

An agent checkpoint records its spaces and network configuration in a ``gymloop`` metadata document
(:func:`gymloop.checkpoint.agent_document`) with a ``format_version``. Every reader
(:func:`gymloop.checkpoint.read_agent`, :class:`~gymloop.nn.numpy_policy.NumpyPolicy`, the agent
library, the ONNX exporter) calls :func:`current_document` first, so nothing after it knows about
older documents: what an older document means is written here and only here.

Example:
    >>> old = {"format_version": 1, "net": {"d_model": 16, "n_layer": 1}}
    >>> current_document(old)["net"]
    {'d_model': 16, 'n_layer': 1, 'readout': False, 'summary_mean': False, 'summary_count': False, 'frame': None, 'relpos_1d': False}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["FORMAT_VERSION", "current_document"]

#: the format version of the agent documents this gymloop writes
FORMAT_VERSION = 1

#: Network options added after the first files of format version 1 were written, each with the
#: value that rebuilds the network such a file holds (new files record every option):
#: ``readout`` (those files ran every block over every entity), ``summary_mean`` (their summary
#: was attention alone), ``summary_count`` (their summary had no entity count), ``frame``
#: (positions as the game gave them) and ``relpos_1d`` (no encoding on ``x`` alone).
_V1_LATER_NET_OPTIONS: dict[str, Any] = {"readout": False, "summary_mean": False, "summary_count": False, "frame": None,
                                         "relpos_1d": False}


def _v1(doc: dict[str, Any]) -> dict[str, Any]:
    """Version 1, any age → current: the network options its first files lack."""
    net = doc.get("net")
    if isinstance(net, Mapping) and any(k not in net for k in _V1_LATER_NET_OPTIONS):
        doc["net"] = {**net, **{k: v for k, v in _V1_LATER_NET_OPTIONS.items() if k not in net}}
    return doc


#: per format version, the step that brings its documents to the current one
_STEPS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1}

#: the format versions this gymloop reads
READABLE_VERSIONS = frozenset(_STEPS)


def current_document(info: Mapping[str, Any]) -> dict[str, Any]:
    """The agent document ``info`` of any readable format version, as the current version has it.

    A document without ``format_version`` (one made in memory, not read from a file) counts as the
    current version. A new dict is returned; ``info`` is left as it is. An unreadable version comes
    back unchanged (:func:`gymloop.checkpoint.check_agent_document` refuses it with its name).
    """
    doc = dict(info)
    step = _STEPS.get(doc.get("format_version", FORMAT_VERSION))
    return step(doc) if step is not None else doc
