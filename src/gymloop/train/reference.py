"""The reference of every training configuration field, generated from the config dataclasses.

:func:`config_reference` renders one Markdown table per section (``TrainConfig``, ``ppo.``, ``net.``,
``net.relpos.``, ``bc.``) with each field's key as ``gymloop train --set`` takes it, its type, its
default, its range and its meaning, and a table of what the automatic (``None``) fields resolve to
for a few budgets (computed by :meth:`TrainConfig.resolved <gymloop.train.TrainConfig.resolved>`).
The meanings come from the ``Attributes:`` section of each dataclass's docstring, the ranges from the
``RANGES`` dict at the bottom of the dataclass's module; a field missing from either (or an entry
naming no field) is a :class:`~gymloop.errors.ConfigError`, so the reference cannot drift from the code.
``docs/config.md`` is its output (a test keeps them equal); regenerate it with::

    python -m gymloop.train.reference docs/config.md
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import sys
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from .config import TrainConfig

__all__ = ["config_reference"]

#: budgets (``steps``) of the table of automatic fields.
BUDGETS = (50_000, 400_000, 1_000_000, 3_000_000, 10_000_000)
REGENERATE = "python -m gymloop.train.reference docs/config.md"


def config_reference() -> str:
    """The Markdown reference of every training configuration field (the text of ``docs/config.md``).

    Raises:
        ConfigError: a field has no ``Attributes:`` entry in its class's docstring or no range in its
            module's ``RANGES``, or one of those names no field.
    """
    from ..nn.config import FrameConfig, NetConfig, RelposConfig
    from .config import BCConfig, LeagueConfig, PPOConfig

    sections: list[tuple[str, type, str]] = [
        ("", TrainConfig, "`gymloop.train.TrainConfig`: the run."),
        ("ppo.", PPOConfig, "`gymloop.train.PPOConfig`: the PPO update (`TrainConfig.ppo`)."),
        ("net.", NetConfig, "`gymloop.train.NetConfig`: the network (`TrainConfig.net`; with `--demos`, the cloned network too)."),
        ("net.relpos.", RelposConfig,
         "`gymloop.train.RelposConfig`: the relative-position encoding when `net.relpos` is a `RelposConfig`. From Python only: "
         '`NetConfig(relpos=RelposConfig(extent=[5, 5]))`; on the command line `net.relpos` takes `auto` or `none`.'),
        ("net.frame.", FrameConfig,
         "`gymloop.train.FrameConfig`: the egocentric frame when `net.frame` is a `FrameConfig`. From Python only: "
         '`NetConfig(frame=FrameConfig("Car", ["x", "y"], "heading"))`; on the command line `net.frame` takes `auto` or `none`.'),
        ("league.", LeagueConfig, "`gymloop.train.LeagueConfig`: a self-play league for a two-player game (`TrainConfig.league`; "
         "`gymloop train GAME --league` turns it on)."),
        ("bc.", BCConfig, "`gymloop.train.BCConfig`: behaviour cloning, with `gymloop train GAME --demos DIR` (the command line "
                          "passes `seed`, `ppo.gamma`, `threads` and `net` on as `bc.seed`, `bc.gamma`, `bc.threads` and `bc.net`)."),
    ]
    prefixes = {cls: prefix for prefix, cls, _ in sections}
    auto = automatic_fields()
    out = [
        "# Training configuration reference",
        "",
        f"<!-- Generated from the config dataclasses by `{REGENERATE}`: do not edit by hand. -->",
        "",
        "Every field of the training configuration: its key as `gymloop train GAME --set KEY=VALUE` takes it (for example "
        "`--set ppo.lr=1e-3 --set net.d_model=64`; `none` or `auto` sets an automatic field back to automatic), its type, "
        "default, range and meaning. From Python the same fields are keyword arguments: "
        "`TrainConfig(steps=400_000, ppo=PPOConfig(lr=1e-3))`. List fields cannot be set with `--set` (`opponents` has "
        "`--opponent`), and `gymloop train` fills a few fields from its own flags (`--steps`, `--seed`, `--workers`, "
        "`--num-envs`, `--agents`, `--opponent`, `--init-from`, `--backend`, `--address`, `--overlap`; their defaults are in `gymloop train --help`; "
        "`--steps` defaults to 3,000,000 there, `TrainConfig.steps` to 1,000,000). "
        "`TrainConfig.check()` refuses a configuration that cannot work, with the fix in its message.",
        "",
        "A default of `None` (automatic) means the value is chosen from the budget by `TrainConfig.resolved()`; the last "
        "section shows what it chooses.",
    ]
    for prefix, cls, intro in sections:
        title = f"`{prefix}`" if prefix else "`TrainConfig`"
        out += ["", f"## {title}", "", intro, ""]
        out += section_table(cls, prefix, _ranges_of(cls), auto=auto, nested=prefixes)
    out += ["", "## Automatic fields", ""]
    out += _auto_table(auto)
    return "\n".join(out) + "\n"


def automatic_fields() -> list[str]:
    """Keys (``ppo.epochs``) of the fields whose default ``None`` :meth:`TrainConfig.resolved` replaces."""
    found: list[str] = []

    def walk(default: Any, resolved: Any, prefix: str) -> None:
        for f in dataclasses.fields(default):
            a, b = getattr(default, f.name), getattr(resolved, f.name)
            if dataclasses.is_dataclass(a):
                walk(a, b, f"{prefix}{f.name}.")
            elif a is None and b is not None:
                found.append(prefix + f.name)

    base = TrainConfig()
    walk(base, base.resolved(), "")
    return found


def section_table(cls: type, prefix: str, ranges: Mapping[str, str], auto: Collection[str] = (),
                  nested: Mapping[type, str] | None = None) -> list[str]:
    """The Markdown table of dataclass ``cls``'s fields, keys prefixed by ``prefix``.

    ``ranges`` maps every field to its range, ``auto`` lists the automatic keys and ``nested`` maps a
    nested config class to its section's prefix. Raises :class:`ConfigError` when a field lacks a
    docstring entry or a range, or when either names no field.
    """
    names = [f.name for f in dataclasses.fields(cls)]
    meanings = attribute_docs(cls)
    where = f"{cls.__module__}.{cls.__qualname__}"
    problems = [f"{where}.{n} has no entry in the docstring's Attributes: section" for n in names if n not in meanings]
    problems += [f"{where}.{n} has no range in RANGES[{cls.__name__!r}] of {cls.__module__}" for n in names if n not in ranges]
    problems += [f"{where}'s docstring documents {n!r}, which is not a field" for n in meanings if n not in names]
    problems += [f"RANGES[{cls.__name__!r}] of {cls.__module__} has a range for {n!r}, which is not a field" for n in ranges if n not in names]
    if problems:
        raise ConfigError("; ".join(problems) + f"; fix them, then regenerate the reference: {REGENERATE}")
    rows = ["| key | type | default | range | meaning |", "|---|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        key = prefix + f.name
        if dataclasses.is_dataclass(default):
            sub = (nested or {}).get(type(default))
            if sub is None:
                raise ConfigError(f"{where}.{f.name} is a {type(default).__name__}, which has no section in the reference")
            key, shown = f"{key}.*", f"the `{sub}` defaults"
        elif default is dataclasses.MISSING:
            shown = "required"
        else:
            shown = f"`{_value(default)}`" + (" (automatic)" if key in auto else "")
        type_name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        cells = [f"`{key}`", f"`{type_name}`", shown, _markdown(ranges[f.name]), _markdown(meanings[f.name])]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return rows


def attribute_docs(cls: type) -> dict[str, str]:
    """``{field: meaning}`` from the ``Attributes:`` section of ``cls``'s Google-style docstring."""
    lines = (inspect.getdoc(cls) or "").splitlines()
    if "Attributes:" not in lines:
        return {}
    out: dict[str, str] = {}
    indent: int | None = None
    name = None
    for line in lines[lines.index("Attributes:") + 1:]:
        if not line.strip():
            continue
        ind = len(line) - len(line.lstrip())
        indent = ind if indent is None else indent
        if ind < indent:
            break
        m = re.fullmatch(r"(\w+)(?: \([^)]*\))?:\s*(.*)", line.strip())
        if ind == indent and m:
            name = m[1]
            out[name] = m[2]
        elif name is not None:
            out[name] += " " + line.strip()
    return out


def _ranges_of(cls: type) -> Mapping[str, str]:
    ranges = getattr(sys.modules[cls.__module__], "RANGES", {})
    if cls.__name__ not in ranges:
        raise ConfigError(f"{cls.__module__} has no RANGES[{cls.__name__!r}] (the range of each field); add it, then: {REGENERATE}")
    return ranges[cls.__name__]


def _auto_table(auto: Sequence[str]) -> list[str]:
    base = TrainConfig()
    per_env = f"{base.agents_per_game} agent{'s' if base.agents_per_game != 1 else ''} per game, rollout_steps={base.rollout_steps}"
    rows = [
        f"`TrainConfig.resolved()` replaces {', '.join(f'`{k}`' for k in auto)} when they are `None`. What it chooses "
        f"for a few budgets, the other fields at their defaults ({per_env}); the rollout is `num_envs * agents_per_game * "
        "rollout_steps` slot-steps, a PPO update is one rollout, and a gradient step one minibatch:",
        "",
        "| steps | " + " | ".join(f"`{k}`" for k in auto) + " | rollout | PPO updates | gradient steps |",
        "|---:|" + "---:|" * (len(auto) + 3),
    ]
    for steps in BUDGETS:
        r = TrainConfig(steps=steps).resolved()
        updates = max(1, math.ceil(steps / r.batch_size))
        assert r.ppo.epochs is not None and r.ppo.minibatch_size is not None  # resolved() fills them
        grad_steps = updates * r.ppo.epochs * (r.batch_size // r.ppo.minibatch_size)
        values = [_value(_get(r, k)) for k in auto]
        rows.append(f"| {_budget(steps)} | " + " | ".join(values) + f" | {_value(r.batch_size)} | {_value(updates)} | {_value(grad_steps)} |")
    return rows


def _get(obj: Any, key: str) -> Any:
    for part in key.split("."):
        obj = getattr(obj, part)
    return obj


def _budget(n: int) -> str:
    for unit, div in (("M", 1_000_000), ("K", 1_000)):
        if n % div == 0:
            return f"{n // div}{unit}"
    return f"{n:_}"


def _value(v: Any) -> str:
    """A value as Python writes it (``_`` between thousands of large ints; ``int()`` reads them too)."""
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10_000:
        return f"{v:_}"
    return repr(v)


def _markdown(text: str) -> str:
    """reStructuredText roles and literals of a docstring as Markdown."""

    def role(m: re.Match[str]) -> str:
        target = m[3].rsplit(".", 1)[-1] if m[2] else m[3]
        return f"`{target}{'()' if m[1] in ('meth', 'func') else ''}`"

    text = re.sub(r":(\w+):`(~?)([^`<]+?)`", role, text)
    return re.sub(r"``([^`]+)``", r"`\1`", text)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gymloop.train.reference [PATH]``: print the reference, or write it to ``PATH``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) > 1 or any(a.startswith("-") for a in args):
        print(f"usage: python -m gymloop.train.reference [PATH]  (e.g. {REGENERATE})", file=sys.stderr)
        return 2
    text = config_reference()
    if args:
        with open(args[0], "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
