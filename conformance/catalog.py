"""The scenario catalog as data (spec/scenarios/*.yaml) and the registry of its implementations.

Each YAML file is one KIP section: ``section``, ``module`` (the test module implementing it) and
``cases``, each with an ``id`` ("KIP-595/Vote/3"), a one-line ``title`` in the KIP's words, the
``clause`` it checks (KIP, section, step, and the seed file quoting it when there is one) and readable
``steps`` written in the vocabulary of spec/README.md. Test functions are bound to ids with ``@case``;
tests/conformance checks that every case has exactly one implementation and vice versa.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

CASE_ID = re.compile(r"^(KIP-\d+|PROTOCOL)/[A-Za-z]+/\d+$")


class CatalogError(ValueError):
    """A malformed scenario file: the message names the file, the case and the problem."""


@dataclass(frozen=True)
class Clause:
    kip: str
    section: str
    step: str | None = None
    seed: str | None = None

    def __str__(self) -> str:
        step = f" step {self.step}" if self.step else ""
        return f'{self.kip} "{self.section}"{step}'


@dataclass(frozen=True)
class CaseSpec:
    id: str
    title: str
    clause: Clause
    steps: tuple[str, ...]
    section: str
    module: str
    file: str


def scenarios_dir() -> Path:
    return Path(str(resources.files("kraft_tck.spec").joinpath("scenarios")))


def _case(file: str, section: str, module: str, raw: Any) -> CaseSpec:
    if not isinstance(raw, dict):
        raise CatalogError(f"{file}: every case must be a mapping, got {raw!r}")
    cid = raw.get("id")
    where = f"{file}: case {cid!r}"
    if not isinstance(cid, str) or not CASE_ID.match(cid):
        raise CatalogError(f"{where}: id must look like KIP-595/Vote/3")
    for key in ("title", "clause", "steps"):
        if key not in raw:
            raise CatalogError(f"{where}: missing {key!r}")
    cl = raw["clause"]
    if not isinstance(cl, dict) or not isinstance(cl.get("section"), str) or not isinstance(cl.get("kip"), str):
        raise CatalogError(f"{where}: clause needs kip and section, got {cl!r}")
    steps = raw["steps"]
    if not isinstance(steps, list) or not steps or not all(isinstance(s, str) for s in steps):
        raise CatalogError(f"{where}: steps must be a non-empty list of strings")
    step = cl.get("step")
    return CaseSpec(
        id=cid,
        title=str(raw["title"]),
        clause=Clause(cl["kip"], cl["section"], None if step is None else str(step), cl.get("seed")),
        steps=tuple(steps),
        section=section,
        module=module,
        file=file,
    )


def load_catalog(directory: Path | None = None) -> dict[str, CaseSpec]:
    """Every case of every scenario file, by id, in file then listing order."""
    d = directory or scenarios_dir()
    out: dict[str, CaseSpec] = {}
    files = sorted(d.glob("*.yaml"))
    if not files:
        raise CatalogError(f"{d}: no scenario files (*.yaml)")
    for path in files:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
            raise CatalogError(f"{path.name}: expected a mapping with section, module and a list of cases")
        section, module = doc.get("section"), doc.get("module")
        if not isinstance(section, str) or not isinstance(module, str):
            raise CatalogError(f"{path.name}: section and module must be strings")
        for raw in doc["cases"]:
            spec = _case(path.name, section, module, raw)
            if spec.id in out:
                raise CatalogError(f"{path.name}: case {spec.id} is already defined in {out[spec.id].file}")
            out[spec.id] = spec
    return out


@cache
def catalog() -> dict[str, CaseSpec]:
    return load_catalog()


#: case id -> the implementing coroutine function (filled by ``@case`` as test modules import).
IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {}


def register(case_id: str, fn: Callable[..., Any]) -> None:
    """Bind ``fn`` to ``case_id``; the same function imported twice (two module names) is not a clash."""
    prev = IMPLEMENTATIONS.get(case_id)
    if prev is not None and (prev.__code__.co_filename, prev.__name__) != (fn.__code__.co_filename, fn.__name__):
        raise CatalogError(f"{case_id} is implemented twice: {prev.__name__} and {fn.__name__}")
    IMPLEMENTATIONS[case_id] = fn


def section_names(cases: dict[str, CaseSpec] | None = None) -> dict[str, str]:
    """What ``--section`` accepts, lower-cased, mapped to the section title: each scenario file's
    ``section`` ("Divergence truncation") and the middle part of its case ids ("Divergence")."""
    out: dict[str, str] = {}
    for spec in (cases if cases is not None else catalog()).values():
        out[spec.section.lower()] = spec.section
        out[spec.id.split("/")[1].lower()] = spec.section
    return out


def select_cases(patterns: list[str], sections: list[str], cases: dict[str, CaseSpec] | None = None) -> set[str]:
    """The ids selected by ``--case`` patterns (fnmatch on the id, e.g. ``KIP-595/Vote/*``) and ``--section``
    names: a case matching any of them. A pattern or section that selects nothing raises ``CatalogError``
    naming it (a typo must not turn into a run that tests nothing)."""
    from fnmatch import fnmatchcase

    cases = cases if cases is not None else catalog()
    chosen: set[str] = set()
    for pat in patterns:
        hits = {cid for cid in cases if fnmatchcase(cid, pat)}
        if not hits:
            raise CatalogError(
                f"--case {pat!r} matches no case of the catalog (ids look like KIP-595/Vote/1; "
                "`pytest conformance --collect-only -q` lists them)"
            )
        chosen |= hits
    known = section_names(cases)
    for name in sections:
        title = known.get(name.lower())
        if title is None:
            names = sorted({s.id.split("/")[1] for s in cases.values()})
            raise CatalogError(f"--section {name!r} is not a section of the catalog; sections: {', '.join(names)}")
        chosen |= {cid for cid, spec in cases.items() if spec.section == title}
    return chosen
