"""Reporting: a verdict table in the terminal, and with ``--report DIR`` an HTML report plus
``results.json``. The page (``templates/report.html.j2``) opens with the failures, each linked to its case;
every case appears once, with its KIP clause (link and paraphrase, ``spec/kip-clauses.yaml``), verdict
levels, expected vs actual, the command that reruns it, and an SVG sequence diagram of its frames.
``--junitxml`` is pytest's own and keeps working; each case
adds ``case_id`` and ``clause`` properties to it.

In a parallel run (pytest-xdist ``-n N``) each worker drives a target of its own; the controller gathers the
workers' verdicts and TLC results (``WorkerResults``) and prints and writes them as one run's.
"""

from __future__ import annotations

import html
import json
import shlex
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import drawsvg as dw
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


_TARGET_COLOR, _HARNESS_COLOR, _MARK_COLOR, _NOTE_COLOR = "#0550ae", "#333333", "#cf222e", "#9a6700"


def _arrowheads(uid: str) -> dict[str, dw.Marker]:
    """One arrowhead per colour (SVG 1.1 markers cannot take the colour of the line they end), keyed "t"
    (sent by the target) and "h" (sent by the harness); ``uid`` keeps the ids unique on the page."""
    heads = {}
    for who, color in (("t", _TARGET_COLOR), ("h", _HARNESS_COLOR)):
        head = dw.Marker(0, 0, 9, 9, id=f"{uid}-{who}", refX=9, refY=4.5, markerUnits="userSpaceOnUse")
        head.append(dw.Lines(0, 0, 9, 4.5, 0, 9, close=True, fill=color))
        heads[who] = head
    return heads


def _svg(drawing: dw.Drawing) -> str:
    return drawing.as_svg(header="")  # inline in the page: no XML declaration


def sequence_svg(
    frames: list[Frame], target_id: int, limit: int = DIAGRAM_FRAMES, *, uid: str = "a", mark: int | None = None
) -> str:
    """An SVG sequence diagram (drawn with drawsvg): one lane per node, time on the left, one arrow per
    frame (requests solid, responses dashed, the target's in blue). ``mark``: the ``seq`` of the frame to
    point at (the target's last message before a failed check). ``uid`` keeps marker ids unique when a
    page holds many diagrams."""
    shown = frames[-limit:]
    nodes = sorted({target_id} | {n for f in shown for n in (f.src, f.dst)}, key=lambda n: (n != target_id, n))
    lane_x = {n: 110 + i * 230 for i, n in enumerate(nodes)}
    width = 110 + 230 * max(1, len(nodes) - 1) + 300
    row = 24
    height = 60 + row * (len(shown) + 1)
    d = dw.Drawing(width, height, id_prefix=uid, font_family="monospace", font_size=11, role="img",
                   aria_label="sequence diagram")
    heads = _arrowheads(uid)
    d.append(dw.Text("time", 11, 4, 18, fill="#57606a"))
    for n, x in lane_x.items():
        d.append(dw.Text(_lane_name(n, target_id), 11, x, 18, text_anchor="middle", font_weight="bold"))
        d.append(dw.Line(x, 26, x, height - 10, stroke="#bbb", stroke_dasharray="2,3"))
    if len(frames) > len(shown):
        d.append(dw.Text(f"… {len(frames) - len(shown)} earlier frames", 11, 4, 40, fill="#666"))
    for i, f in enumerate(shown):
        y = 50 + row * (i + 1)
        d.append(dw.Text(f"{f.ts_ms:.0f} ms", 11, 4, y - 3, fill="#888"))
        if f.kind == "note":
            d.append(dw.Text(f"✱ {f.summary()}", 11, lane_x.get(f.src, 110) + 6, y - 3, fill=_NOTE_COLOR))
            continue
        x1, x2 = lane_x[f.src], lane_x[f.dst]
        if f.seq == mark:
            d.append(dw.Rectangle(min(x1, x2) - 6, y - 17, abs(x2 - x1) + 12, row - 2, class_="mark", fill="none",
                                  stroke=_MARK_COLOR, stroke_width=2, rx=4))
            d.append(dw.Text("◀ the check failed after this", 11, max(x1, x2) + 10, y + 2, fill=_MARK_COLOR,
                             font_weight="bold"))
        who = "t" if f.src == target_id else "h"
        color = _TARGET_COLOR if who == "t" else _HARNESS_COLOR
        dash = {} if f.kind == "request" else {"stroke_dasharray": "5,3"}
        d.append(dw.Line(x1, y, x2, y, stroke=color, marker_end=heads[who], **dash))
        d.append(dw.Text(f.summary(), 11, min(x1, x2) + 6, y - 4, fill=color))
    return _svg(d)


def legend_svg(uid: str = "legend") -> str:
    """The key to a sequence diagram (``uid``: unique marker ids, one legend per diagram)."""
    d = dw.Drawing(960, 22, id_prefix=uid, font_size=12, font_family="system-ui,sans-serif")  # "✱ harness note" fits
    heads = _arrowheads(uid)
    x = 4
    for text, who, dash in (("request", "h", {}), ("response", "h", {"stroke_dasharray": "5,3"}),
                            ("sent by the target", "t", {})):
        color = _TARGET_COLOR if who == "t" else _HARNESS_COLOR
        d.append(dw.Line(x, 11, x + 40, 11, stroke=color, marker_end=heads[who], **dash))
        d.append(dw.Text(text, 12, x + 48, 15))
        x += 60 + 7 * len(text)
    d.append(dw.Rectangle(x, 3, 40, 16, fill="none", stroke=_MARK_COLOR, stroke_width=2, rx=4))
    d.append(dw.Text("the target's last message before the failed check", 12, x + 48, 15))
    d.append(dw.Text("✱ harness note", 12, x + 400, 15, fill=_NOTE_COLOR))
    return _svg(d)


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


#: Options that choose cases, outputs or how the run is spread (pytest-xdist's ``-n``), not the target: left
#: out of a case's "Reproduce" command.
_SELECTION_OPTIONS = {"--case", "--section", "-k", "-m", "--report", "--junitxml", "--junit-xml", "--rootdir",
                      "-p", "--maxfail", "--basetemp", "-o", "-n", "--numprocesses", "--dist", "--maxprocesses",
                      "--tlc-life-frames"}
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


#: The names of the TLC validation items (plugin.py), one pair per target.
NODE_ITEM = "TLC validation of the target's node trace"
BLACKBOX_ITEM = "TLC black-box validation of the session harness trace"


@dataclass
class WorkerResults:
    """What one pytest-xdist worker's target made of its share of the cases (its ``workeroutput``)."""

    worker: str
    target: str
    results: list[CaseResult] = field(default_factory=list)
    tlc: TlcValidation | None = None
    blackbox: BlackBoxValidation | None = None

    @classmethod
    def from_json(cls, out: dict[str, Any]) -> WorkerResults:
        from kraft_tck.conformance.blackbox import BlackBoxValidation
        from kraft_tck.conformance.session import CaseResult, TlcValidation

        results = [CaseResult.from_json(r) for r in out.get("results", [])]
        for r in results:
            r.target_id = int(out.get("targetId", 1))
        return cls(
            str(out.get("worker")), str(out.get("target", "")), results,
            TlcValidation.from_json(out["tlc"]) if out.get("tlc") else None,
            BlackBoxValidation.from_json(out["blackbox"]) if out.get("blackbox") else None,
        )  # fmt: skip

    def validation_items(self) -> list[tuple[str, str, str]]:
        """(item name, status, message) of this worker's two TLC validations, as the serial run's items."""
        items = []
        if self.tlc is not None:
            items.append((NODE_ITEM, self.tlc.status, f"{NODE_ITEM}: {self.tlc.status}\n{self.tlc.message}"))
        if self.blackbox is not None:
            bb = self.blackbox
            items.append((BLACKBOX_ITEM, bb.status, f"{BLACKBOX_ITEM}: {bb.status}\n{bb.message}"))
        return items


class ReportPlugin:
    """Collects verdicts from the session (or, in a parallel run, from every worker); prints the table;
    writes the HTML/JSON report at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.session: Session | None = None
        self.workers: list[WorkerResults] = []
        self.started = time.time()

    def add_worker(self, worker: WorkerResults) -> None:
        self.workers.append(worker)

    def results(self) -> list[CaseResult]:
        """Every case's result: the session's, or the workers' in catalog order."""
        if self.session is not None:
            return list(self.session.results.values())
        from kraft_tck.conformance.catalog import catalog

        order = {cid: k for k, cid in enumerate(catalog())}
        merged = [r for w in self.workers for r in w.results]
        return sorted(merged, key=lambda r: order.get(r.case.id, len(order)))

    def validations(self) -> tuple[TlcValidation | None, BlackBoxValidation | None]:
        """The TLC verdicts on the node traces and session traces of every target of the run."""
        if self.session is not None:
            return self.session.tlc_result, self.session.blackbox_result
        from kraft_tck.conformance.blackbox import merge_blackbox
        from kraft_tck.conformance.session import merge_tlc

        tlcs = [w.tlc for w in self.workers if w.tlc is not None]
        bbs = [w.blackbox for w in self.workers if w.blackbox is not None]
        return (merge_tlc(tlcs) if tlcs else None), (merge_blackbox(bbs) if bbs else None)

    def target(self) -> str:
        if self.session is not None:
            return self.session.target.describe()
        described = sorted({w.target for w in self.workers})
        return f"{len(self.workers)} targets in parallel: " + "; ".join(described) if described else ""

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        results = self.results()
        if not results:
            return
        tr = terminalreporter
        tr.section("KRaft conformance verdicts")
        by_section: dict[str, list[CaseResult]] = {}
        for r in results:
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
        diffs = [r for r in results if r.kafka_differences]
        if diffs:
            n = sum(len(r.kafka_differences) for r in diffs)
            tr.write_line(f"differs from Kafka: {n} KAFKA-level check(s) in {len(diffs)} case(s) (not failures)")
        tlc, blackbox = self.validations()
        if self.workers:
            tr.write_line(f"{len(results)} cases on {len(self.workers)} targets in parallel (pytest-xdist)")
        tr.write_line(tlc_line(tlc))
        tr.write_line(blackbox_line(blackbox))
        report_dir = self.config.getoption("--report", None)
        if report_dir:
            tr.write_line(f"HTML report: {Path(report_dir) / 'index.html'}")

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        report_dir = self.config.getoption("--report", None)
        if getattr(self.config, "workerinput", None) is not None:
            return  # an xdist worker: the controller writes the run's report
        if report_dir and (self.session is not None or self.workers):
            if self.session is not None:
                for r in self.session.results.values():
                    r.target_id = self.session.target.node_id
            tlc, blackbox = self.validations()
            write_report(
                Path(report_dir),
                self.results(),
                self.target(),
                self.started,
                tlc,
                blackbox,
                repro_command(self.config.invocation_params.args),
            )
