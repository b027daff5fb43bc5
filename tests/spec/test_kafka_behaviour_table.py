"""spec/kafka-behaviour.yaml: Kafka's wire-visible KRaft behaviour, one row each.

The file must validate against a small schema, its ids must be unique, and every ``checked_by`` entry
must resolve: ``test:<path>::<function>`` names a file of this repository and a test function defined
in it (read with ``ast``, not imported), ``case:<id>`` names a case of the conformance catalog.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from kraft_tck.conformance.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "spec" / "kafka-behaviour.yaml"
LEVELS = ("MUST", "KAFKA", "INFO")
RPCS = ("Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch", "FetchSnapshot", "DescribeQuorum", "ApiVersions",
        "Election", "CheckQuorum", "AddRaftVoter", "RemoveRaftVoter", "UpdateRaftVoter")

_TEXT_OR_NULL = {"type": ["string", "null"]}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["rows"],
    "additionalProperties": False,
    "properties": {
        "rows": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "rpc", "kafka_test", "kafka_code", "request", "answer", "kip", "level",
                             "since", "note", "checked_by"],
                "properties": {
                    "id": {"type": "string", "pattern": r"^[a-z]+\.[a-z0-9]+(-[a-z0-9]+)*$"},
                    "rpc": {"enum": list(RPCS)},
                    "kafka_test": _TEXT_OR_NULL,
                    "kafka_code": _TEXT_OR_NULL,
                    "request": {"type": "string", "minLength": 1},
                    "answer": {"type": "string", "minLength": 1},
                    "kip": _TEXT_OR_NULL,
                    "level": {"enum": list(LEVELS)},
                    "since": _TEXT_OR_NULL,
                    "note": _TEXT_OR_NULL,
                    "checked_by": {
                        "type": "array",
                        "minItems": 1,
                        "items": {"type": "string", "pattern": r"^(test:[^:]+\.py::[A-Za-z_][A-Za-z0-9_]*|case:\S+)$"},
                    },
                },
            },
        }
    },
}


@cache
def table() -> dict[str, Any]:
    doc = yaml.safe_load(TABLE.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def rows() -> list[dict[str, Any]]:
    return list(table()["rows"])


@cache
def functions_in(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return frozenset(
        node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    )


def unresolved(entry: str, case_ids: set[str]) -> str | None:
    """Why ``entry`` does not resolve, or None when it does."""
    kind, _, ref = entry.partition(":")
    if kind == "case":
        return None if ref in case_ids else f"no conformance case {ref!r}"
    path_text, _, function = ref.partition("::")
    path = ROOT / path_text
    if not path.is_file():
        return f"no file {path_text}"
    if function not in functions_in(path):
        return f"{path_text} defines no function {function}"
    return None


def test_table_validates_against_the_schema() -> None:
    jsonschema.validate(table(), SCHEMA)


def test_ids_are_unique() -> None:
    ids = [r["id"] for r in rows()]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    assert not dupes, f"duplicate row ids: {dupes}"


def test_every_row_is_checked_and_every_check_resolves() -> None:
    case_ids = set(load_catalog())
    problems = []
    for row in rows():
        if not row["checked_by"]:
            problems.append(f"{row['id']}: no checked_by")
        for entry in row["checked_by"]:
            why = unresolved(entry, case_ids)
            if why is not None:
                problems.append(f"{row['id']}: {entry}: {why}")
    assert not problems, "\n".join(problems)


def test_levels_say_what_they_mean() -> None:
    """INFO rows are the kit's own choices or notes; a MUST row cites the KIP clause it enforces."""
    for row in rows():
        assert row["level"] in LEVELS
        if row["level"] == "MUST":
            assert row["kip"], f"{row['id']}: a MUST row names its KIP clause"


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("test:tests/spec/test_kafka_behaviour_table.py::test_ids_are_unique", None),
        ("test:tests/spec/test_kafka_behaviour_table.py::no_such_function", "defines no function"),
        ("test:tests/spec/no_such_file.py::test_x", "no file"),
        ("case:KIP-595/Vote/1", None),
        ("case:KIP-595/Vote/999", "no conformance case"),
    ],
)
def test_the_resolver_can_fail(entry: str, expected: str | None) -> None:
    why = unresolved(entry, set(load_catalog()))
    if expected is None:
        assert why is None
    else:
        assert why is not None and expected in why


def test_the_schema_rejects_a_bad_row() -> None:
    bad = {"rows": [dict(rows()[0], level="SHOULD")]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, SCHEMA)
    bad = {"rows": [dict(rows()[0], checked_by=[])]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, SCHEMA)
