"""Every code sample of the documentation runs (issue 11, item 4).

The pages are ``README.md`` and ``docs/**/*.md``. On each page, the fenced code blocks run in
document order in one namespace (like pasting them one after another into a Python session), in a
fresh temporary working directory with ``examples/`` on ``sys.path`` (so ``tutorial_game:...``
resolves as it does for a reader working next to the file):

- a ```` ```python ```` block is executed;
- a ```` ```bash ```` (or ``sh``/``shell``/``console``) block holds ``gymloop ...`` commands, one per
  line (``#`` comments allowed); each runs in-process through :func:`gymloop.cli.main` and must exit
  with 0. Any other command in a runnable shell block is an error: mark the block skipped;
- a block right below an HTML comment ``<!-- skip: why -->`` is not run (a window, a long training
  run, an installation). Keep such blocks few, and say why;
- a block titled after a file of ``examples/`` (```` ```python title="tutorial_game.py" ````) is run
  too, and the blocks with that title, joined by two blank lines, must equal the file: the page and
  the shipped example cannot drift apart.

Pages whose samples train (import torch, take seconds) run in the slow tier (``SLOW_PAGES``). The
blocks of ``docs/adapters/stable-baselines3.md`` belong to its own tests (``tests/adapters``).
"""

from __future__ import annotations

import re
import shlex
import sys
import types
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLES = ROOT / "examples"

#: pages whose blocks are not run here (relative to the repository root)
NOT_RUN = {"docs/adapters/stable-baselines3.md"}
#: pages whose samples train agents or record videos: the slow tier
SLOW_PAGES = {"docs/tutorial.md", "docs/agents.md", "docs/formats/checkpoint.md", "docs/play.md", "docs/onnx.md"}
#: the modules a page's samples import beyond gymloop's core (its test skips where one is missing, as in .ci/run's
#: .venv-eg); imported first with their own deprecation warnings ignored (pettingzoo.test imports its classic envs
#: through a deprecated path), as a reader's interpreter shows them rather than failing
REQUIRES = {
    "docs/tutorial.md": ["torch", "pygame"],
    "docs/agents.md": ["torch"],
    "docs/onnx.md": ["torch", "onnx", "onnxruntime"],
    "docs/formats/checkpoint.md": ["torch"],
    "docs/play.md": ["pygame", "PIL", "imageio_ffmpeg"],
    "docs/pygame.md": ["pygame"],
    "docs/levels.md": ["openskill", "matplotlib"],
    "docs/adapters/gymnasium.md": ["gymnasium"],
    "docs/adapters/pettingzoo.md": ["pettingzoo", "pettingzoo.test"],
    "docs/adapters/entity-gym.md": ["entity_gym"],
}

SHELLS = {"bash", "sh", "shell", "console"}
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)(?P<info>[^\n]*)$")
_SKIP = re.compile(r"^\s*<!--\s*skip\b.*-->\s*$")
_TITLE = re.compile(r"""title\s*=\s*"([^"]+)\"""")


@dataclass
class Block:
    """One fenced code block of a page."""

    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    title: str | None
    code: str
    skip: bool

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, in order."""
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent = m.group("fence"), len(m.group("indent"))
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        if i >= len(lines):
            raise AssertionError(f"{rel}:{start + 1}: a code block that is never closed")
        prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        title = _TITLE.search(m.group("info"))
        out.append(Block(rel, start + 1, m.group("lang").lower(), title.group(1) if title else None, "\n".join(body) + "\n",
                         bool(_SKIP.match(prev))))
        i += 1
    return out


def pages() -> list[str]:
    found = ["README.md"] + sorted(p.relative_to(ROOT).as_posix() for p in DOCS.rglob("*.md"))
    return [p for p in found if p not in NOT_RUN and any(b.lang == "python" or b.lang in SHELLS for b in blocks_of(ROOT / p))]


def _param(page: str) -> object:
    return pytest.param(page, id=page, marks=[pytest.mark.slow] if page in SLOW_PAGES else [])


def shell_commands(block: Block) -> list[list[str]]:
    """The ``gymloop`` commands of a shell block, as argument lists (without ``gymloop``)."""
    text = re.sub(r"\\\n", " ", block.code)  # continued lines
    out = []
    for n, line in enumerate(text.splitlines()):
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "$":
            words = words[1:]
        if words[0] != "gymloop":
            raise AssertionError(f"{block.where()}: line {n + 1} of a runnable shell block is not a gymloop command "
                                 f"({line.strip()!r}); run only gymloop commands, or put <!-- skip: why --> above the block")
        out.append(words[1:])
    return out


def run_page(page: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> int:
    """Run every block of ``page`` that is not skipped; the number run."""
    from gymloop.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")  # (gymloop record sets it; undone after the test)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    name = "docs_page_" + re.sub(r"\W", "_", page)
    module = types.ModuleType(name)  # a real module: dataclasses and pickling look classes up in sys.modules
    monkeypatch.setitem(sys.modules, name, module)
    ran = 0
    for block in blocks_of(ROOT / page):
        if block.skip or not (block.lang == "python" or block.lang in SHELLS):
            continue
        if block.lang == "python":
            code = compile(block.code, block.where(), "exec")
            exec(code, module.__dict__)
        else:
            for args in shell_commands(block):
                rc = main(args)
                assert rc == 0, f"{block.where()}: `gymloop {' '.join(args)}` exited with {rc}"
        ran += 1
    return ran


@pytest.mark.parametrize("page", [_param(p) for p in pages()])
def test_page_samples_run(page: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for module in REQUIRES.get(page, []):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pytest.importorskip(module, reason=f"{page}'s samples need {module}")
    assert run_page(page, monkeypatch, tmp_path) > 0


def test_readme_first_game_snippet_runs_as_pasted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The README's "A game" snippet alone, pasted into a fresh interpreter, defines a game that runs and passes the checker."""
    import gymloop as gl

    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert "## A game" in lines, "README.md lost its '## A game' section"
    heading = lines.index("## A game") + 1
    first = next(b for b in blocks_of(ROOT / "README.md") if b.lang == "python" and b.line > heading)
    assert not first.skip
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("readme_game")
    monkeypatch.setitem(sys.modules, "readme_game", module)
    exec(compile(first.code, first.where(), "exec"), module.__dict__)
    games = [v for v in vars(module).values() if callable(v) and gl.declared_types(v) is not None]
    assert len(games) == 1, f"{first.where()}: the snippet should define one @gl.game loop, found {len(games)}"
    result = gl.run(games[0], gl.RandomAgent(seed=0), seed=0, max_episodes=3)
    assert len(result.episodes) == 3
    gl.check(games[0], steps=200)


def test_readme_quick_start_unchanged() -> None:
    """The quick start's two commands are the ones CI and new users rely on: kept exactly."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert ("python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 && .venv/bin/pip install -e '.[train]' && "
            ".venv/bin/gymloop train snake --steps 2000000 --out runs/snake") in readme
    assert ("python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 && .venv/bin/pip install -e '.[dev]' && "
            ".venv/bin/pytest") in readme
    assert "mkdocs serve" in readme


@pytest.mark.parametrize("page", ["README.md"] + sorted(p.relative_to(ROOT).as_posix() for p in DOCS.rglob("*.md")))
def test_titled_blocks_equal_the_example_files(page: str) -> None:
    """Blocks titled after a file of examples/ are that file, in order (joined by two blank lines)."""
    by_title: dict[str, list[str]] = {}
    for b in blocks_of(ROOT / page):
        if b.title is not None and (EXAMPLES / b.title).is_file():
            by_title.setdefault(b.title, []).append(b.code.rstrip("\n"))
    for title, parts in by_title.items():
        expected = (EXAMPLES / title).read_text(encoding="utf-8")
        assert "\n\n\n".join(parts) + "\n" == expected, f"{page}: the blocks titled {title!r} differ from examples/{title}; make them equal"


def test_the_tutorial_ships_its_game() -> None:
    """docs/tutorial.md shows the whole of examples/tutorial_game.py, and that game is not snake."""
    titled = [b for b in blocks_of(DOCS / "tutorial.md") if b.title == "tutorial_game.py"]
    assert len(titled) >= 2
    text = (EXAMPLES / "tutorial_game.py").read_text(encoding="utf-8")
    assert "snake" not in text.lower()


def test_shell_blocks_refuse_other_commands() -> None:
    block = Block("x.md", 1, "bash", None, "gymloop check snake\npip install gymloop\n", False)
    with pytest.raises(AssertionError, match=r"x.md:1: line 2 .* not a gymloop command"):
        shell_commands(block)
    block = Block("x.md", 1, "bash", None, "# a comment\ngymloop run snake \\\n  --episodes 2   # two\n", False)
    assert shell_commands(block) == [["run", "snake", "--episodes", "2"]]


def test_block_parser(tmp_path: Path) -> None:
    page = tmp_path / "probe.md"
    page.write_text('Text\n\n<!-- skip: a window -->\n```python\nopen_window()\n```\n\n```python title="a.py"\nx = 1\n```\n'
                    "    ```bash\n    gymloop check snake\n    ```\n", encoding="utf-8")
    bs = blocks_of(page)
    assert [(b.lang, b.skip, b.title, b.code) for b in bs] == [
        ("python", True, None, "open_window()\n"), ("python", False, "a.py", "x = 1\n"), ("bash", False, None, "gymloop check snake\n"),
    ]


@pytest.mark.slow
def test_site_builds_strict_and_offline(tmp_path: Path) -> None:
    """``mkdocs build --strict`` passes (as in .ci/run), and the site loads nothing from the network."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings_handlers.python")
    import subprocess

    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    external = re.compile(r"""<(?:script|link|img)\b[^>]*(?:src|href)=["'](?:https?:)?//""", re.I)
    offenders = []
    for html in site.rglob("*.html"):
        for m in external.finditer(html.read_text(encoding="utf-8")):
            offenders.append(f"{html.relative_to(site)}: {m.group(0)}")
    assert not offenders, "pages load assets from the network:\n" + "\n".join(offenders[:20])
    for page in ("tutorial", "api/gymloop", "formats/checkpoint", "reliability", "adapters/gymnasium"):
        assert (site / page / "index.html").is_file(), page
