"""A game whose module imports a name for type checkers only (``from __future__ import annotations``):
its ``agent`` annotation cannot be resolved at run time, the options' can."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from some_package_not_installed import Agent


def race(agent: Agent, seed: int, laps: int = 3, speed: float = 1.0, fast: bool = False) -> None:
    """Never played: only its signature is read."""
