"""Reporting: a verdict table in the terminal, and with ``--report DIR`` an HTML report (cases grouped by
KIP section, pass/fail/skip with reasons, expected vs actual, an SVG sequence diagram of the exchanged
frames per case) plus ``results.json``. ``--junitxml`` is pytest's own and keeps working; each case
adds ``case_id`` and ``clause`` properties to it.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kraft_tck.conformance.blackbox import BlackBoxValidation
    from kraft_tck.conformance.session import CaseResult, Session, TlcValidation
    from kraft_tck.conformance.virtual import Frame

#: A diagram shows at most this many frames (the last ones: where a failure shows itself).
DIAGRAM_FRAMES = 80
_COLORS = {"passed": "#1a7f37", "failed": "#cf222e", "skipped": "#9a6700", "error": "#8250df"}


def _lane_name(node: int, target_id: int) -> str:
    return f"target ({node})" if node == target_id else f"v{node}" if node >= 0 else "?"


def sequence_svg(frames: list[Frame], target_id: int, limit: int = DIAGRAM_FRAMES) -> str:
    """An SVG sequence diagram: one lane per node, one arrow per frame, requests solid, responses dashed."""
    shown = frames[-limit:]
    nodes = sorted({target_id} | {n for f in shown for n in (f.src, f.dst)}, key=lambda n: (n != target_id, n))
    lane_x = {n: 90 + i * 230 for i, n in enumerate(nodes)}
    width = 90 + 230 * max(1, len(nodes) - 1) + 260
    row = 24
    height = 60 + row * (len(shown) + 1)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" '
        'font-size="11">',
        '<defs><marker id="a" markerWidth="8" markerHeight="8" refX="8" refY="4" orient="auto">'
        '<path d="M0,0 L8,4 L0,8 z" fill="#333"/></marker></defs>',
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
        out.append(f'<text x="4" y="{y - 3}" fill="#888">{f.ts_ms:.0f}ms</text>')
        if f.kind == "note":
            x = lane_x.get(f.src, 90)
            out.append(f'<text x="{x + 6}" y="{y - 3}" fill="#9a6700">✱ {label}</text>')
            continue
        x1, x2 = lane_x[f.src], lane_x[f.dst]
        dash = "" if f.kind == "request" else ' stroke-dasharray="5,3"'
        color = "#0550ae" if f.src == target_id else "#333"
        out.append(f'<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="{color}"{dash} marker-end="url(#a)"/>')
        tx = min(x1, x2) + 6
        out.append(f'<text x="{tx}" y="{y - 4}" fill="{color}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out)


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
) -> Path:
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
    sections: dict[str, list[CaseResult]] = {}
    for r in results:
        sections.setdefault(r.case.section, []).append(r)
    counts = {k: sum(r.outcome == k for r in results) for k in _COLORS}
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>kraft-tck conformance report</title><style>",
        "body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse}"
        "td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}"
        ".o{font-weight:bold;color:white;padding:1px 6px;border-radius:3px}"
        "details{margin:.5em 0 1.5em 0}pre{background:#f6f8fa;padding:8px;overflow-x:auto}"
        ".ev{display:grid;grid-template-columns:1fr 1fr;gap:1em}.svg{overflow-x:auto}</style></head><body>",
        "<h1>kraft-tck conformance report</h1>",
        f"<p>Target: <code>{html.escape(target)}</code> — run "
        f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(started))}"
        f" — {' · '.join(f'{v} {k}' for k, v in counts.items())}</p>",
    ]
    tlc_color = {"PASS": "passed", "FAIL": "failed"}.get(tlc.status if tlc else "", "skipped")
    parts.append(
        f"<h2>TLC validation of the target's node trace</h2><div><span class='o' "
        f"style='background:{_COLORS[tlc_color]}'>{html.escape(tlc.status if tlc else 'NOT RUN')}</span> "
        f"<pre>{html.escape(tlc_line(tlc))}</pre></div>"
    )
    for life in tlc.lives if tlc else []:
        parts.append(
            f"<p>{html.escape(life['status'])}: <code>{html.escape(life['merged'])}</code> "
            f"(from {html.escape(', '.join(life['files']))}), {life['events']} events</p>"
        )
    bb_color = {"PASS": "passed", "FAIL": "failed"}.get(blackbox.status if blackbox else "", "skipped")
    parts.append(
        f"<h2>TLC black-box validation of the session harness trace</h2><div><span class='o' "
        f"style='background:{_COLORS[bb_color]}'>{html.escape(blackbox.status if blackbox else 'NOT RUN')}</span> "
        f"<pre>{html.escape(blackbox_line(blackbox))}</pre></div>"
    )
    for life in blackbox.lives if blackbox else []:
        parts.append(
            f"<p>life {life['life']}: {html.escape(life['status'])}: <code>{html.escape(life['file'])}</code>, "
            f"{life['messages']} messages, cases {html.escape(', '.join(life['cases']))}</p>"
        )
    for section, rs in sections.items():
        parts.append(
            f"<h2>{html.escape(section)}</h2><table><tr><th>case</th><th>verdict</th><th>title</th>"
            "<th>clause</th><th>time</th></tr>"
        )
        for r in rs:
            anchor = r.case.id.replace("/", "_")
            parts.append(
                f"<tr><td><a href='#{anchor}'>{html.escape(r.case.id)}</a></td>"
                f"<td><span class='o' style='background:{_COLORS.get(r.outcome, '#555')}'>{r.outcome}</span>"
                f"{' (differs from Kafka)' if getattr(r, 'kafka_differences', None) else ''}</td>"
                f"<td>{html.escape(r.case.title)}</td><td>{html.escape(str(r.case.clause))}</td>"
                f"<td>{r.duration_s:.2f}s</td></tr>"
            )
        parts.append("</table>")
        for r in rs:
            anchor = r.case.id.replace("/", "_")
            opened = " open" if r.outcome in ("failed", "error") else ""
            parts.append(
                f"<details id='{anchor}'{opened}><summary><b>{html.escape(r.case.id)}</b> "
                f"{html.escape(r.case.title)} — {r.outcome}</summary>"
            )
            seed = f" (seed {html.escape(r.case.clause.seed)})" if r.case.clause.seed else ""
            parts.append(f"<p>Clause: {html.escape(str(r.case.clause))}{seed}</p>")
            parts.append("<p>Steps:</p><ol>" + "".join(f"<li>{html.escape(s)}</li>" for s in r.case.steps) + "</ol>")
            if r.outcome == "failed":
                parts.append(
                    f"<p>Check: {html.escape(r.what)}</p><div class='ev'>"
                    f"<div><b>expected</b><pre>{html.escape(r.expected)}</pre></div>"
                    f"<div><b>actual</b><pre>{html.escape(r.actual)}</pre></div></div>"
                )
            elif r.message:
                parts.append(f"<pre>{html.escape(r.message)}</pre>")
            parts.append(_levels_html(r))
            if r.trace:
                parts.append(f"<p>Trace: <code>{html.escape(r.trace)}</code></p>")
            if r.tlc:
                parts.append(f"<p>TLC: {html.escape(r.tlc)}</p>")
            parts.append(f"<div class='svg'>{sequence_svg(r.frames, _target_id(r))}</div></details>")
    parts.append("</body></html>")
    index = directory / "index.html"
    index.write_text("\n".join(parts), "utf-8")
    return index


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
            )
