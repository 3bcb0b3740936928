"""Griffe extension: read gymloop's docstrings as the API reference should show them.

gymloop's docstrings are Google style with reStructuredText touches (they also serve ``help()``
and the doctests). For the site:

* an ``Example:`` section is read as Google's ``Examples:``, so its ``>>>`` lines render as code;
* a cross-reference role (``:class:`~gymloop.VecEnv```, ``:func:``, ``:meth:``, ...) becomes inline
  code with the name it shows in Sphinx (the last part after ``~``).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.MULTILINE)
_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`(~?)([^`]+)`")


def _role(m: re.Match[str]) -> str:
    target = m.group(2)
    if m.group(1):  # ~a.b.C shows C
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def rewrite(text: str) -> str:
    """The docstring ``text`` as the site reads it."""
    return _ROLE.sub(_role, _EXAMPLE.sub(r"\1Examples:", text))


class GymloopDocstrings(griffe.Extension):
    """Rewrites each object's docstring before it is parsed (see the module docstring)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
