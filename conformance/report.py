"""Reporting: a verdict table in the terminal, and with ``--report DIR`` an HTML report plus
``results.json``. The page (``templates/report.html.j2``) opens with the failures, each linked to its case;
every case appears once, with its KIP clause (link and paraphrase, ``spec/kip-clauses.yaml``), verdict
levels, expected vs actual, the command that reruns it, and an SVG sequence diagram of its frames.
``--junitxml`` is pytest's own and keeps working; each case
adds ``case_id`` and ``clause`` properties to it.
"""

from __future__ import annotations

import html
import json
import shlex
import time
from collections.abc import Iterable, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import pytest
import yaml
from markupsafe import Markup

if TYPE_CHECKING:
    from kraft_tck.conformance.blackbox import BlackBoxValidation
    from kraft_tck.conformance.session import CaseResult, Session, TlcValidation
    from kraft_tck.conformance.virtual import Frame

#: A diagram shows at most this many frames (the last ones: where a failure shows itself).
DIAGRAM_FRAMES = 80
_COLORS = {"passed": "#1a7f37", "failed": "#cf222e", "skipped": "#9a6700", "error": "#8250df"}


def _lane_name(node: int, target_id: int) -> str:
    return f"target ({node})" if node == target_id else f"v{node}" if node >= 0 else "?"


_TARGET_COLOR, _HARNESS_COLOR, _MARK_COLOR = "#0550ae", "#333333", "#cf222e"


def _markers(uid: str) -> str:
    # One arrowhead per colour: SVG 1.1 markers cannot take the colour of the line they end.
    return "<defs>" + "".join(
        f'<marker id="{uid}-{name}" markerWidth="9" markerHeight="9" refX="9" refY="4.5" orient="auto" '
        f'markerUnits="userSpaceOnUse"><path d="M0,0 L9,4.5 L0,9 z" fill="{color}"/></marker>'
        for name, color in (("t", _TARGET_COLOR), ("h", _HARNESS_COLOR))
    ) + "</defs>"


def sequence_svg(
    frames: list[Frame], target_id: int, limit: int = DIAGRAM_FRAMES, *, uid: str = "a", mark: int | None = None
) -> str:
    """An SVG sequence diagram: one lane per node, time on the left, one arrow per frame (requests solid,
    responses dashed, the target's in blue). ``mark``: the ``seq`` of the frame to point at (the target's
    last message before a failed check). ``uid`` keeps marker ids unique when a page holds many diagrams."""
    shown = frames[-limit:]
    nodes = sorted({target_id} | {n for f in shown for n in (f.src, f.dst)}, key=lambda n: (n != target_id, n))
    lane_x = {n: 110 + i * 230 for i, n in enumerate(nodes)}
    width = 110 + 230 * max(1, len(nodes) - 1) + 300
    row = 24
    height = 60 + row * (len(shown) + 1)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" '
        'font-size="11" role="img" aria-label="sequence diagram">',
        _markers(uid),
        '<text x="4" y="18" fill="#57606a">time</text>',
    ]
    for n, x in lane_x.items():
        name = html.escape(_lane_name(n, target_id))
        out.append(f'<text x="{x}" y="18" text-anchor="middle" font-weight="bold">{name}</text>')
        out.append(f'<line x1="{x}" y1="26" x2="{x}" y2="{height - 10}" stroke="#bbb" stroke-dasharray="2,3"/>')
    if len(frames) > len(shown):
        out.append(f'<text x="4" y="40" fill="#666">… {len(frames) - len(shown)} earlier frames</text>')
    for i, f in enumerate(shown):
        y = 50 + row * (i + 1)
        label = html.escape(f.summary())
        out.append(f'<text x="4" y="{y - 3}" fill="#888">{f.ts_ms:.0f} ms</text>')
        if f.kind == "note":
            x = lane_x.get(f.src, 110)
            out.append(f'<text x="{x + 6}" y="{y - 3}" fill="#9a6700">✱ {label}</text>')
            continue
        x1, x2 = lane_x[f.src], lane_x[f.dst]
        if f.seq == mark:
            out.append(f'<rect class="mark" x="{min(x1, x2) - 6}" y="{y - 17}" width="{abs(x2 - x1) + 12}" '
                       f'height="{row - 2}" fill="none" stroke="{_MARK_COLOR}" stroke-width="2" rx="4"/>')
            out.append(f'<text x="{max(x1, x2) + 10}" y="{y + 2}" fill="{_MARK_COLOR}" font-weight="bold">'
                       "◀ the check failed after this</text>")
        dash = "" if f.kind == "request" else ' stroke-dasharray="5,3"'
        who = "t" if f.src == target_id else "h"
        color = _TARGET_COLOR if who == "t" else _HARNESS_COLOR
        out.append(f'<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="{color}"{dash} '
                   f'marker-end="url(#{uid}-{who})"/>')
        tx = min(x1, x2) + 6
        out.append(f'<text x="{tx}" y="{y - 4}" fill="{color}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out)


def legend_svg(uid: str = "legend") -> str:
    """The key to a sequence diagram (``uid``: unique marker ids, one legend per diagram)."""
    items = [
        ("request", _HARNESS_COLOR, "", "h"), ("response", _HARNESS_COLOR, ' stroke-dasharray="5,3"', "h"),
        ("sent by the target", _TARGET_COLOR, "", "t"),
    ]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="900" height="22" font-size="12" '
             f'font-family="system-ui,sans-serif">{_markers(uid)}']
    x = 4
    for text, color, dash, who in items:
        parts.append(f'<line x1="{x}" y1="11" x2="{x + 40}" y2="11" stroke="{color}"{dash} '
                     f'marker-end="url(#{uid}-{who})"/><text x="{x + 48}" y="15">{text}</text>')
        x += 60 + 7 * len(text)
    parts.append(f'<rect x="{x}" y="3" width="40" height="16" fill="none" stroke="{_MARK_COLOR}" '
                 f'stroke-width="2" rx="4"/><text x="{x + 48}" y="15">the target\'s last message before the '
                 "failed check</text>")
    parts.append(f'<text x="{x + 400}" y="15" fill="#9a6700">✱ harness note</text></svg>')
    return "".join(parts)


def tlc_line(tlc: TlcValidation | None) -> str:
    """One line on TLC's validation of the target's node trace, for the terminal and the report."""
    if tlc is None:
        return "TLC validation: did not run (the run stopped before its last item)"
    if tlc.status == "PASS":
        return f"TLC validation: PASS, {tlc.events} events of the target's node trace in {tlc.seconds:.1f} s"
    if tlc.status in ("OFF", "UNAVAILABLE"):
        return f"TLC validation: {tlc.message}"
    return f"TLC validation: {tlc.status}: {tlc.message}"


def blackbox_line(bb: BlackBoxValidation | None) -> str:
    """One line (plus the failure's lines) on TLC's black-box validation of the session harness traces."""
    if bb is None:
        return "TLC black-box validation: did not run (the run stopped before its last item)"
    if bb.status == "PASS":
        return f"TLC black-box validation: PASS, {bb.message} in {bb.seconds:.1f} s"
    if bb.status == "OFF":
        return f"TLC black-box validation: {bb.message}"
    return f"TLC black-box validation: {bb.status}: {bb.message}"


def write_report(
    directory: Path,
    results: Iterable[CaseResult],
    target: str,
    started: float,
    tlc: TlcValidation | None = None,
    blackbox: BlackBoxValidation | None = None,
    repro: str = "pytest conformance",
) -> Path:
    """``results.json`` and ``index.html`` in ``directory``. ``repro``: the command line that reruns this
    run's target (without case selection); each case's "Reproduce" line adds ``--case ID`` to it."""
    directory.mkdir(parents=True, exist_ok=True)
    results = list(results)
    (directory / "results.json").write_text(json.dumps({
        "target": target, "started": started, "cases": [r.to_json() for r in results],
        "tlcValidation": tlc.to_json() if tlc is not None else None,
        "tlcBlackBox": blackbox.to_json() if blackbox is not None else None,
        "summary": {k: sum(r.outcome == k for r in results) for k in _COLORS},
        "durationS": round(sum(r.duration_s for r in results), 3),
        "protocolWaitS": round(sum(r.wait_s for r in results), 3),
    }, indent=1), "utf-8")  # fmt: skip
    cases = [_case_view(r, repro) for r in results]
    sections: dict[str, list[dict[str, Any]]] = {}
    for view in cases:
        sections.setdefault(view["section"], []).append(view)
    kafka = [r for r in results if getattr(r, "kafka_differences", None)]
    page = _template().render(
        target=target,
        started=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        results=results,
        counts={k: sum(r.outcome == k for r in results) for k in _COLORS},
        kafka_cases=len(kafka),
        kafka_checks=sum(len(r.kafka_differences) for r in kafka),
        failures=[v for v in cases if v["outcome"] in ("failed", "error")],
        validations=[_node_validation_view(tlc), _blackbox_view(blackbox)],
        sections=sections,
    )
    index = directory / "index.html"
    index.write_text(page, "utf-8")
    return index


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("kraft_tck.conformance", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,  # a misspelt field is an error, not an empty cell
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template("report.html.j2")


@lru_cache(maxsize=1)
def _clauses() -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str], str]]:
    data = yaml.safe_load(resources.files("kraft_tck.spec").joinpath("kip-clauses.yaml").read_text("utf-8"))
    says = {(c["kip"], c["section"]): " ".join(c["says"].split()) for c in data["sections"]}
    return data["kips"], says


def clause_link(kip: str, section: str) -> tuple[str, str | None, str | None]:
    """(URL of the clause, the KIP's title, the kit's paraphrase of the clause) for the report."""
    kips, says = _clauses()
    base = kips.get(kip.split(" (")[0])  # "KIP-631 (draft)" -> "KIP-631"
    if base is None:
        return "https://cwiki.apache.org/confluence/display/KAFKA/Kafka+Improvement+Proposals", None, None
    anchor = base.get("anchor_prefix")
    url = base["url"] + (f"#{anchor}{section.split(' (')[0].replace(' ', '')}" if anchor else "")
    return url, base["title"], says.get((kip, section))


def _case_view(r: CaseResult, repro: str) -> dict[str, Any]:
    clause = r.case.clause
    url, kip_title, says = clause_link(clause.kip, clause.section)
    anchor = r.case.id.replace("/", "_")
    target_id = _target_id(r)
    mark = None
    if r.outcome == "failed":
        mark = next((f.seq for f in reversed(r.frames) if f.src == target_id and f.kind != "note"), None)
    levels = [
        {"level": "differs from Kafka" if d.get("level") == "KAFKA" else "INFO",
         "css": "kafka" if d.get("level") == "KAFKA" else "info", "text": difference_line(d)}
        for d in [*getattr(r, "kafka_differences", []), *getattr(r, "observations", [])]
    ]  # fmt: skip
    return {
        "id": r.case.id, "anchor": anchor, "title": r.case.title, "section": r.case.section,
        "outcome": r.outcome, "duration": r.duration_s, "clause_text": str(clause), "clause_url": url,
        "kip_title": kip_title, "says": says, "what": r.what, "expected": r.expected, "actual": r.actual,
        "message": r.message, "levels": levels, "kafka": bool(getattr(r, "kafka_differences", None)),
        "steps": r.case.steps, "trace": r.trace, "tlc": r.tlc,
        "repro": f"{repro} --case '{r.case.id}'",
        "svg": Markup(sequence_svg(r.frames, target_id, uid=f"m-{anchor}", mark=mark)) if r.frames else "",
        "legend": Markup(legend_svg(f"l-{anchor}")),
    }  # fmt: skip


def _node_validation_view(tlc: TlcValidation | None) -> dict[str, Any]:
    status = tlc.status if tlc else "NOT RUN"
    lives = [f"{life['status']}: {life['merged']} (from {', '.join(life['files'])}), {life['events']} events"
             for life in (tlc.lives if tlc else [])]
    return {"anchor": "tlc-node", "title": "TLC validation of the target's node trace", "status": status,
            "css": _status_css(status), "line": tlc_line(tlc), "lives": lives,
            "explain": "the trace the target wrote of its own steps, checked against tla/KRaft.tla"}


def _blackbox_view(bb: BlackBoxValidation | None) -> dict[str, Any]:
    status = bb.status if bb else "NOT RUN"
    lives = [f"life {life['life']}: {life['status']}: {life['file']}, {life['messages']} messages, "
             f"cases {', '.join(life['cases'])}" for life in (bb.lives if bb else [])]
    return {"anchor": "tlc-blackbox", "title": "TLC black-box validation of the session harness trace",
            "status": status, "css": _status_css(status), "line": blackbox_line(bb), "lives": lives,
            "explain": "every message the harness exchanged with the target, checked against tla/KRaft.tla "
                       "with the target's hidden steps inferred"}


def _status_css(status: str) -> str:
    return {"PASS": "passed", "FAIL": "failed"}.get(status, "notrun")


def difference_line(d: dict[str, Any]) -> str:
    """One KAFKA/INFO outcome in one line: check, expected vs actual, the Kafka row it names."""
    row = f" [{d['kafka']}]" if d.get("kafka") else ""
    met = "info" if d.get("met") else "info (not met)"
    head = "differs from Kafka" if d.get("level") == "KAFKA" else met
    return f"{head}{row}: {d['check']}: expected {d['expected']}; actual {d['actual']}"


def _levels_html(r: CaseResult) -> str:
    items = [*getattr(r, "kafka_differences", []), *getattr(r, "observations", [])]
    if not items:
        return ""
    return "<ul class='lv'>" + "".join(f"<li>{html.escape(difference_line(d))}</li>" for d in items) + "</ul>"


def _target_id(r: CaseResult) -> int:
    return int(getattr(r, "target_id", 1))


#: Options that choose cases or outputs, not the target: left out of a case's "Reproduce" command.
_SELECTION_OPTIONS = {"--case", "--section", "-k", "-m", "--report", "--junitxml", "--junit-xml", "--rootdir",
                      "-p", "--maxfail", "--basetemp", "-o"}
_SELECTION_FLAGS = {"-x", "-q", "-v", "-vv", "-s", "--exitfirst", "--quiet", "--verbose", "--strict",
                    "--no-header", "-rA", "-ra"}
#: The harness's own options that take no value (plugin.py ``store_true``).
_HARNESS_FLAGS = {"--no-validate", "--no-tlc"}


def repro_command(args: Sequence[str]) -> str:
    """``pytest conformance`` with the options of ``args`` that say which target and how (the target, its
    ids, ports, cluster id, profile, --no-tlc), without those that choose cases or outputs."""
    kept: list[str] = []
    items = list(args)
    i = 0
    while i < len(items):
        arg = items[i]
        name = arg.split("=", 1)[0]
        if name in _SELECTION_OPTIONS:
            i += 1 if "=" in arg or (len(arg) > 2 and not arg.startswith("--")) else 2
            continue
        if arg in _SELECTION_FLAGS or not arg.startswith("-"):
            i += 1  # a flag, or a path (the catalog is named once, below)
            continue
        kept.append(arg)
        if "=" not in arg and arg not in _HARNESS_FLAGS and i + 1 < len(items) and not items[i + 1].startswith("-"):
            kept.append(items[i + 1])
            i += 1
        i += 1
    return shlex.join(["pytest", "conformance", *kept])


class ReportPlugin:
    """Collects verdicts from the session; prints the table; writes the HTML/JSON report at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.session: Session | None = None
        self.started = time.time()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.session is None or not self.session.results:
            return
        tr = terminalreporter
        tr.section("KRaft conformance verdicts")
        by_section: dict[str, list[CaseResult]] = {}
        for r in self.session.results.values():
            by_section.setdefault(r.case.section, []).append(r)
        for section, rs in by_section.items():
            tr.write_line(section)
            for r in rs:
                mark = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "error": "ERR "}[r.outcome]
                tr.write_line(f"  {mark}  {r.case.id:<34} {r.case.title}  [{r.case.clause}]  {r.duration_s:.2f}s")
                if r.outcome == "skipped":
                    tr.write_line(f"        skipped: {r.message}")
                for d in r.kafka_differences:
                    tr.write_line(f"        {difference_line(d)}")
        diffs = [r for r in self.session.results.values() if r.kafka_differences]
        if diffs:
            n = sum(len(r.kafka_differences) for r in diffs)
            tr.write_line(f"differs from Kafka: {n} KAFKA-level check(s) in {len(diffs)} case(s) (not failures)")
        tr.write_line(tlc_line(self.session.tlc_result))
        tr.write_line(blackbox_line(self.session.blackbox_result))
        report_dir = self.config.getoption("--report", None)
        if report_dir:
            tr.write_line(f"HTML report: {Path(report_dir) / 'index.html'}")

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        report_dir = self.config.getoption("--report", None)
        if report_dir and self.session is not None:
            for r in self.session.results.values():
                r.target_id = self.session.target.node_id
            write_report(
                Path(report_dir),
                self.session.results.values(),
                self.session.target.describe(),
                self.started,
                self.session.tlc_result,
                self.session.blackbox_result,
                repro_command(self.config.invocation_params.args),
            )
