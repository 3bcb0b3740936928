"""The base of the bundled games' rules: a seeded random stream and episodes that restart in place.

A game's rules class keeps the state of one episode, draws every random choice from its own
``random.Random(seed)`` (so a copy's episodes depend on its seed alone), and starts the next
episode with :meth:`Rules.reset` in the same object: the game loop holds one for its whole life.

Example:
    >>> from gymloop.games.rules import Rules
    >>> class Coin(Rules):
    ...     __slots__ = ("side",)
    ...     def reset(self) -> None:
    ...         self.side = self.rng.choice("HT")
    >>> Coin(seed=3).side == Coin(seed=3).side
    True
"""

from __future__ import annotations

import random

__all__ = ["Rules"]


class Rules:
    """A game's rules: ``rng`` is ``random.Random(seed)``, and the constructor starts the first episode.

    Subclasses define :meth:`reset` (draw an episode's start from ``self.rng``) and their own
    ``__slots__``.

    Attributes:
        rng: every random choice of the rules, in order.
    """

    __slots__ = ("rng",)

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.reset()

    def reset(self) -> None:
        """Start an episode (the constructor calls it once)."""
        raise NotImplementedError
