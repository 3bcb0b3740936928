"""Checkpoint formats besides gymloop's own, as ``gl.load`` reaches them.

``gl.load`` (:func:`gymloop.neural.load`) reads gymloop's ``.safetensors`` agents itself. An importer
of another format builds on :mod:`gymloop.neural` (it returns a :class:`~gymloop.neural.NeuralAgent`),
so ``neural`` must not import it back: instead the importer registers a :class:`ForeignFormat` here
when it is imported, and ``gl.load`` asks :func:`format_of` which format, if any, a path is in. The
dependency runs one way: ``neural`` and the importers both depend on this module, ``neural`` on no
importer. ``import gymloop`` imports the bundled importer (:mod:`gymloop.enn`, enn-trainer
checkpoints), so ``gl.load`` always knows it.

Example:
    >>> import gymloop as gl
    >>> from gymloop.formats import format_of
    >>> format_of("multisnake.roguenet").name, format_of("agent.safetensors")
    ('enn-trainer', None)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import ConfigError

if TYPE_CHECKING:
    from .nn.numpy_policy import NumpyPolicy

__all__ = ["ForeignFormat", "format_of", "formats", "register_format"]


@dataclass(frozen=True)
class ForeignFormat:
    """A checkpoint format that ``gl.load`` opens through an importer.

    Attributes:
        name: a short name of the format (``"enn-trainer"``).
        detect: whether a path (a file system path as ``str``) is in this format; looks at names and
            headers only, and leaves whether the checkpoint is complete and readable to ``open_policy``.
        open_policy: ``(path, game)`` -> the numpy policy of the checkpoint at ``path``; ``game`` is
            the ``game=`` given to ``gl.load`` (or ``None``), for what the format does not record.
            Raises :class:`~gymloop.errors.CheckpointError` for a checkpoint it cannot read.
    """

    name: str
    detect: Callable[[str], bool]
    open_policy: Callable[[str, Any], NumpyPolicy]


_FORMATS: dict[str, ForeignFormat] = {}


def register_format(fmt: ForeignFormat) -> ForeignFormat:
    """Make ``gl.load`` open checkpoints in ``fmt`` (registering the same name again replaces it).

    Raises:
        ConfigError: ``fmt`` has an empty name.
    """
    if not fmt.name:
        raise ConfigError("register_format: a checkpoint format needs a non-empty name")
    _FORMATS[fmt.name] = fmt
    return fmt


def formats() -> list[ForeignFormat]:
    """The registered formats, in registration order."""
    return list(_FORMATS.values())


def format_of(path: str) -> ForeignFormat | None:
    """The first registered format that claims ``path``, or ``None`` (a gymloop checkpoint)."""
    for fmt in _FORMATS.values():
        if fmt.detect(path):
            return fmt
    return None
