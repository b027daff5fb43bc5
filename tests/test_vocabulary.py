"""One vocabulary: spec/README.md's action names = trace event names = core handlers = TLA+ actions."""

from __future__ import annotations

import re
from collections.abc import Iterator
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


def test_readme_and_the_trace_format_agree() -> None:
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


# ------------------------------------------------------------------- the vocabulary checked the other way


def next_disjuncts(tla: str) -> list[str]:
    """The action each disjunct of ``Next ==`` in a TLA+ module applies (``\\/ \\E i ... : Name(i, m)``)."""
    body = tla.split("\nNext ==", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\s*\\/\s*(?:\\E[^:]*:\s*)?([A-Z][A-Za-z]*)\s*\(", body, flags=re.M)


def test_every_step_of_the_model_is_an_action_or_a_declared_model_step() -> None:
    from kraft_tck.spec.trace import MODEL_STEPS, READ_ONLY_ACTIONS

    steps = next_disjuncts((REPO / "tla" / "KRaft.tla").read_text(encoding="utf-8"))
    assert len(steps) >= len(ACTIONS), steps  # the parse found Next
    assert set(steps) == (set(ACTIONS) - set(READ_ONLY_ACTIONS)) | set(MODEL_STEPS), (
        "tla/KRaft.tla Next and the vocabulary disagree: "
        f"model only {sorted(set(steps) - set(ACTIONS) - set(MODEL_STEPS))}, "
        f"vocabulary only {sorted(set(ACTIONS) - set(READ_ONLY_ACTIONS) - set(steps))}")


def test_next_disjuncts_parse_sees_a_missing_action() -> None:
    tla = "\nNext ==\n    \\/ \\E i \\in Nodes : StartElection(i)\n    \\/ \\E m \\in DOMAIN msgs : DropMessage(m)\n\n"
    assert next_disjuncts(tla) == ["StartElection", "DropMessage"]


def test_every_core_pointer_in_the_model_names_a_real_function() -> None:
    tla = (REPO / "tla" / "KRaft.tla").read_text(encoding="utf-8")
    pointers = re.findall(r"\\\* core: ([A-Za-z_][A-Za-z_0-9]*)", tla)
    assert len(pointers) >= 10, pointers
    missing = [p for p in pointers if not callable(getattr(KRaftCore, p, None))]
    assert not missing, f"tla/KRaft.tla names core functions that do not exist: {missing}"


def test_every_trace_event_type_is_in_the_vocabulary() -> None:
    from kraft_tck.spec.trace import BROKER_EVENTS

    names = schema()["$defs"]["event"]["properties"]["event"]["enum"]
    assert sorted(names) == sorted({*ACTIONS, *MESSAGE_EVENTS, *BROKER_EVENTS}), names


def test_every_election_cause_the_core_gives_is_in_the_vocabulary() -> None:
    from kraft_tck.spec.trace import CAUSES

    core = (REPO / "reference" / "core.py").read_text(encoding="utf-8")
    given = {*re.findall(r'start_election\("([A-Za-z]+)"\)', core),
             *re.findall(r'deadline_cause = "([A-Za-z]+)"', core)}
    assert given and given <= set(CAUSES), sorted(given - set(CAUSES))
    readme = (REPO / "spec" / "README.md").read_text(encoding="utf-8")
    assert all(f"`{c}`" in readme for c in CAUSES)


def vocabulary_words() -> set[str]:
    """Every CamelCase name a scenario step may use: actions, events, model steps, causes, and the message,
    record and field names of spec/messages."""
    import json

    from kraft_tck.spec.trace import BROKER_EVENTS, CAUSES, MODEL_STEPS

    words = {*ACTIONS, *MESSAGE_EVENTS, *BROKER_EVENTS, *MODEL_STEPS, *CAUSES}

    def fields(specs: list[dict]) -> Iterator[str]:  # type: ignore[type-arg]
        for f in specs or []:
            yield f["name"]
            yield f.get("type", "").lstrip("[]")
            yield from fields(f.get("fields", []))

    for path in (REPO / "spec" / "messages").glob("*.json"):
        message = json.loads(path.read_text(encoding="utf-8"))
        name = message["name"]
        words |= {name, name.removesuffix("Request").removesuffix("Response").removesuffix("Message")}
        words |= set(fields(message.get("fields", [])))
        for struct in message.get("commonStructs", []) or []:
            words |= {struct["name"], *fields(struct.get("fields", []))}
    return words


#: Names a step may use that are no part of the protocol, each with its reason.
NOT_PROTOCOL = {
    "KafkaException": "Kafka's exception named as the behaviour observed (a halt)",
}


def test_scenario_steps_use_vocabulary_names() -> None:
    import yaml

    words = vocabulary_words() | set(NOT_PROTOCOL)
    camel = re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b")
    unknown: list[str] = []
    files = sorted((REPO / "spec" / "scenarios").glob("*.yaml"))
    assert files
    for path in files:
        for case in yaml.safe_load(path.read_text(encoding="utf-8"))["cases"]:
            for step in case.get("steps", []):
                unknown += [f"{case['id']}: {t!r} in {step!r}" for t in camel.findall(step) if t not in words]
    assert not unknown, "scenario steps name what is in no vocabulary:\n" + "\n".join(unknown)
