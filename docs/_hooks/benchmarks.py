"""MkDocs hook: the repository's BENCHMARKS.md, one file, also as the site's page ``benchmarks.md``.

Links written for the repository (``docs/x.md``, ``docs/snake_curve.png``) are rewritten to the
site's paths, so the page builds under ``mkdocs build --strict``.
"""

from __future__ import annotations

import os
import re
from typing import Any

from mkdocs.structure.files import File, Files

_SOURCE = "BENCHMARKS.md"
_PAGE = "benchmarks.md"


def _source(config: Any) -> str:
    return os.path.join(os.path.dirname(config.config_file_path), _SOURCE)


def on_files(files: Files, config: Any) -> Files:
    """Add ``benchmarks.md``, generated from the repository's BENCHMARKS.md."""
    with open(_source(config), encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"\]\(docs/", "](", text)  # the repository's docs/ folder is the site's root
    files.append(File.generated(config, _PAGE, content=text))
    return files


def on_serve(server: Any, config: Any, builder: Any) -> Any:
    """``mkdocs serve`` rebuilds when BENCHMARKS.md changes."""
    server.watch(_source(config))
    return server
