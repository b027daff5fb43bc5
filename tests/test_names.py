"""One name, one meaning: a class or type alias defined at the top of modules in two places must mean the same
thing there, and two modules of the product do not share a file name unless they are each area's own copy of
one job. A newcomer who greps a name then finds one concept (CONTRIBUTING.md, "Layout").

Names that clashed and were renamed: the transport's ``Request`` / ``Reply`` / ``Encoded`` are
``ServerRequest`` / ``PendingAnswer`` / ``EncodedAnswer`` (``messages.Request`` and ``io.Reply`` are the core's);
the election state the core persists is ``io.ElectionState`` and the quorum-state file's record is
``storage.QuorumStateData`` (``QuorumState`` is Kafka's class of that name, in prose only); ``spec/wire.py``
is ``spec/primitives.py`` (``reference/wire.py`` maps core messages to Kafka bodies).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("spec", "reference", "conformance", "traces", "tla")

#: Names defined in several modules that mean the same thing in each: the harness's own transport and
#: security (it stands on spec/ alone, tests/test_architecture.py), its own broker-state replay, a body dict,
#: a host:port pair, a listener (name, host, port).
SAME_MEANING: dict[str, str] = {
    "Body": "a Kafka message body: the codec's dict",
    "KafkaClient": "the Kafka client transport (reference/net.py; the harness's own in conformance/transport.py)",
    "KafkaServer": "the Kafka server transport (likewise)",
    "ServerRequest": "one decoded request as a server's handler sees it (likewise)",
    "RequestError": "a request that got no response (likewise)",
    "Handler": "a server's request handler (likewise)",
    "FrameObserver": "a transport's frame observer (likewise)",
    "SaslServerSession": "SASL on a server connection (reference/security.py; the harness's own)",
    "SecurityConfigError": "a security setting that does not load (likewise)",
    "BrokerState": "KIP-631's four broker states (reference/registry.py; the harness's own replay)",
    "Endpoint": "a host:port pair",
    "Listener": "a listener: name, host, port",
    "ScenarioFn": "a conformance case's scenario function",
}

#: Clashes still to be renamed, each with its two meanings. The list only shrinks.
KNOWN_CLASHES: dict[str, str] = {
    "Step": "traces/pipeline/pictures.py: a node's role from a time on; tla/tlc.py: one state of a counterexample",
    "Trace": "spec/trace.py: a read trace; tla/trace_translate.py: the rows of one trace for TLA+ (being split)",
}

#: Module file names used in several packages on purpose: each area's own commands, security, message bodies,
#: report, schema and (conformance/traces) brokers.
SAME_FILE_NAME = {"__init__.py", "cli.py", "security.py", "bodies.py", "conftest.py", "schema.py", "brokers.py",
                  "report.py"}
#: Module file names still meaning two things: conformance/session.py (a case's session with the target) and
#: traces/pipeline/session.py (the SparkSession builder). The list only shrinks.
KNOWN_FILE_CLASHES = {"session.py"}


def top_level_names() -> dict[str, set[str]]:
    """Class names and capitalised module-level aliases (``Body = dict[...]``) -> the modules defining them."""
    where: dict[str, set[str]] = defaultdict(set)
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                names: list[str] = []
                if isinstance(node, ast.ClassDef):
                    names = [node.name]
                elif isinstance(node, ast.Assign):
                    names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    names = [node.target.id]
                for name in names:
                    if name[:1].isupper() and not name.isupper():  # a type, not a CONSTANT
                        where[name].add(str(path.relative_to(REPO)))
    return where


def test_a_name_defined_in_two_modules_means_one_thing() -> None:
    clashes = {name: sorted(mods) for name, mods in top_level_names().items()
               if len(mods) > 1 and name not in SAME_MEANING and name not in KNOWN_CLASHES}
    assert not clashes, (
        "a name defined in several modules: rename one, or if it means the same thing in each, add it to "
        f"SAME_MEANING with that meaning: {clashes}"
    )


def test_the_renamed_names_are_gone() -> None:
    """The former clashing names are not defined again."""
    where = top_level_names()
    assert where["Request"] == {"reference/messages.py"}, where["Request"]
    assert where["Reply"] == {"reference/io.py"}, where["Reply"]
    assert where["Encoded"] == {"spec/trace.py"}, where["Encoded"]
    assert "QuorumState" not in where
    assert where["ElectionState"] == {"reference/io.py"}
    assert "QuorumStateSnapshot" not in where and "DurableState" not in where
    assert where["QuorumStateData"] == {"reference/storage.py"}
    assert not (REPO / "spec" / "wire.py").exists()


def test_module_file_names_are_not_shared_across_packages() -> None:
    seen: dict[str, set[str]] = defaultdict(set)
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            seen[path.name].add(package)
    shared = {name: sorted(pkgs) for name, pkgs in seen.items()
              if len(pkgs) > 1 and name not in SAME_FILE_NAME | KNOWN_FILE_CLASHES}
    assert not shared, f"module names used in two packages (``import wire`` would be ambiguous to a reader): {shared}"


def test_the_known_clashes_are_still_clashes() -> None:
    """A clash that was resolved leaves KNOWN_CLASHES (so the list only shrinks)."""
    where = top_level_names()
    resolved = [name for name in KNOWN_CLASHES if len(where.get(name, ())) < 2]
    assert not resolved, f"no longer clashing, remove from KNOWN_CLASHES: {resolved}"
