"""One vocabulary: spec/README.md's action names = trace event names = core handlers = TLA+ actions."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kraft_tck.reference.core import KRaftCore
from kraft_tck.spec.trace import ACTIONS, MESSAGE_EVENTS, schema

REPO = Path(__file__).resolve().parent.parent


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def readme_actions() -> list[str]:
    text = (REPO / "spec" / "README.md").read_text(encoding="utf-8")
    section = text.split("### Actions", 1)[1].split("Message events", 1)[0]
    return re.findall(r"^\| `([A-Za-z]+)` \|", section, flags=re.M)


def test_readme_and_trace_module_agree() -> None:
    assert tuple(readme_actions()) == ACTIONS


def test_trace_schema_names_every_action() -> None:
    names = set(schema()["$defs"]["event"]["properties"]["event"]["enum"])
    assert set(ACTIONS) | set(MESSAGE_EVENTS) <= names


@pytest.mark.parametrize("action", [a for a in ACTIONS if a != "Restart"])
def test_core_has_a_handler_per_action(action: str) -> None:
    # Restart is the shell building a new core from durable state, not a method of a running core.
    assert callable(getattr(KRaftCore, snake(action), None)), f"KRaftCore.{snake(action)} missing for {action}"


@pytest.mark.parametrize("action", ACTIONS)
def test_tla_spec_defines_each_action(action: str) -> None:
    tla = (REPO / "tla" / "KRaft.tla").read_text(encoding="utf-8")
    assert re.search(rf"^{action}\s*(\(|==)", tla, flags=re.M), f"tla/KRaft.tla defines no action {action}"
