"""Fixtures of the render tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def display(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An initialized pygame display on SDL's dummy driver, with an empty event queue."""
    pygame = pytest.importorskip("pygame")
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    monkeypatch.setenv("SDL_AUDIODRIVER", "dummy")
    pygame.display.quit()
    pygame.display.init()
    pygame.event.clear()
    yield pygame
    pygame.display.quit()
