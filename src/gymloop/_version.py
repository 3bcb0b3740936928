"""The library version, in a module of its own so that no module imports it up from the package root."""

from __future__ import annotations

__version__ = "0.1.0"
