"""docs/architecture.md's batch-layout table lists :data:`gymloop.batch.FIELDS` as it is."""

from pathlib import Path

from gymloop import batch

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
INDEX = {batch.SLOT: "slot", batch.ROW: "entity row", batch.ACTOR: "actor", batch.CANDIDATE: "candidate", batch.CHOICE: "choice"}
VALUES = {None: "", batch.SLOT: "slot", batch.ROW: "entity row"}


def _doc_rows() -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## 3. The batch layout", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [[cell.strip().strip("`") for cell in line.strip("|").split("|")] for line in rows]


def test_the_field_table_is_batch_fields_in_order() -> None:
    expected = [
        [f.name, INDEX[f.index], f.per or "", str(f.dtype), VALUES[f.values], "yes" if f.saved else "no"]
        for f in batch.FIELDS
    ]
    assert _doc_rows() == expected
