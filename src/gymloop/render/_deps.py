"""Lazy imports of the optional rendering dependencies (the ``render`` extra).

Nothing here runs at import time: each function imports its package on first call and turns a
missing package into a :class:`~gymloop.errors.ConfigError` that says how to install it.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError

_INSTALL = "pip install 'gymloop[render]'"

# bumped each time this module (re)initializes pygame's font module: fonts made before a
# ``pygame.quit()`` are dead, so caches of ``pygame.font.Font`` objects key on it
font_generation = 0


def _missing(what: str, package: str, err: ImportError) -> ConfigError:
    return ConfigError(f"{what} needs the package {package!r}, which cannot be imported ({err}); install it with {_INSTALL}")


def pygame_module() -> Any:
    """Import pygame (pygame-ce) with its fonts ready; no window, no audio."""
    global font_generation
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # no banner on stdout
    try:
        import pygame
        import pygame.surfarray
    except ImportError as e:
        raise _missing("rendering", "pygame-ce", e) from None
    if not pygame.font.get_init():
        pygame.font.init()
        font_generation += 1
    return pygame


def pil_image() -> Any:
    """Import ``PIL.Image`` (Pillow), used to write GIFs."""
    try:
        from PIL import Image
    except ImportError as e:
        raise _missing("writing a GIF", "pillow", e) from None
    return Image


def imageio_ffmpeg_module() -> Any:
    """Import ``imageio_ffmpeg`` (it ships its own ffmpeg binary), used to write MP4s."""
    try:
        import imageio_ffmpeg
    except ImportError as e:
        raise _missing("writing an MP4", "imageio-ffmpeg", e) from None
    return imageio_ffmpeg
