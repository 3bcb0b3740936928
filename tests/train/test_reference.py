"""The training configuration reference (docs/config.md) is generated from the config dataclasses (issue 9, item 6)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gymloop.errors import ConfigError
from gymloop.train import reference
from gymloop.train.reference import REGENERATE, attribute_docs, section_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "config.md"


def test_docs_config_md_is_the_generated_reference():
    pytest.importorskip("torch")  # the bc. section: gymloop.train.bc imports torch
    text = reference.config_reference()
    assert DOC.read_text(encoding="utf-8") == text, f"docs/config.md is out of date with the config dataclasses; regenerate it: {REGENERATE}"


def test_every_section_and_automatic_field_is_in_the_reference():
    pytest.importorskip("torch")
    text = reference.config_reference()
    for heading in ("## `TrainConfig`", "## `ppo.`", "## `net.`", "## `net.relpos.`", "## `bc.`", "## Automatic fields"):
        assert heading in text
    for key in ("`ppo.lr`", "`ppo.gamma`", "`net.d_model`", "`net.relpos.extent`", "`bc.epochs`", "`num_envs`"):
        assert f"| {key} |" in text
    assert "| `num_envs` | `int \\| None` | `None` (automatic) |" in text
    assert reference.automatic_fields() == ["num_envs", "ppo.lr", "ppo.epochs", "ppo.minibatch_size"]


def test_main_writes_the_file(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "config.md"
    assert reference.main([str(out)]) == 0
    assert out.read_text(encoding="utf-8") == reference.config_reference()
    assert reference.main([]) == 0
    assert capsys.readouterr().out == reference.config_reference()
    assert reference.main(["--help"]) == 2


@dataclass
class Dummy:
    """A config section.

    Attributes:
        size: how big, in
            two lines.
        name (str): what it is called.
        items: a list.
    """

    size: int = 3
    name: str | None = None
    items: list[int] = field(default_factory=lambda: [1, 2])


@dataclass
class Undocumented:
    """A config section whose docstring misses a field.

    Attributes:
        size: how big.
    """

    size: int = 3
    colour: str = "red"


@dataclass
class StaleDoc:
    """A config section whose docstring documents a field it no longer has.

    Attributes:
        size: how big.
        weight: how heavy.
    """

    size: int = 3


RANGES = {"size": ">= 1", "name": "any", "items": "ints"}


def test_attribute_docs_reads_google_style_entries():
    assert attribute_docs(Dummy) == {"size": "how big, in two lines.", "name": "what it is called.", "items": "a list."}


def test_a_documented_section_renders_one_row_per_field():
    rows = section_table(Dummy, "dummy.", RANGES, auto=["dummy.name"])
    assert rows[2:] == [
        "| `dummy.size` | `int` | `3` | >= 1 | how big, in two lines. |",
        "| `dummy.name` | `str \\| None` | `None` (automatic) | any | what it is called. |",
        "| `dummy.items` | `list[int]` | `[1, 2]` | ints | a list. |",
    ]


def test_a_field_without_a_meaning_makes_the_generator_raise():
    with pytest.raises(ConfigError, match=r"Undocumented\.colour has no entry in the docstring's Attributes: section.*python -m gymloop\.train\.reference"):
        section_table(Undocumented, "dummy.", {"size": ">= 1", "colour": "a colour"})


def test_a_field_without_a_range_makes_the_generator_raise():
    with pytest.raises(ConfigError, match=r"Dummy\.name has no range in RANGES\['Dummy'\]"):
        section_table(Dummy, "dummy.", {"size": ">= 1", "items": "ints"})


def test_a_range_or_entry_for_no_field_makes_the_generator_raise():
    with pytest.raises(ConfigError, match=r"has a range for 'weight', which is not a field"):
        section_table(Dummy, "dummy.", {**RANGES, "weight": "> 0"})
    with pytest.raises(ConfigError, match=r"StaleDoc's docstring documents 'weight', which is not a field"):
        section_table(StaleDoc, "dummy.", {"size": ">= 1"})
