"""The pipeline's report: Markdown and HTML with the same tables, and matplotlib PNG plots, in `--out`."""

from __future__ import annotations

import html
import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kraft_tck.traces.checker import INVARIANTS, Violation
from kraft_tck.traces.pipeline.metrics import MEMBERSHIP_COLUMNS, Metrics
from kraft_tck.traces.pipeline.tlc_fanout import Verdict

MAX_ROWS = 200  # per table in the documents; the Parquet tables and report.json hold everything


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    return "" if v is None else str(v)


def _plot(name: str, values: list[float], out: Path) -> str | None:
    if not values:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fname = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") + ".png"
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.hist(values, bins=min(50, max(5, len(set(values)))), color="#4a78b0")
    ax.set_title(f"Distribution of {name}")
    ax.set_xlabel(name)
    ax.set_ylabel("count")
    fig.tight_layout()
    fig.savefig(out / fname, dpi=90)
    plt.close(fig)
    return fname


#: The implementation suffix of simulator runs with pre-vote (traces/sim/cluster.py's header).
PRE_VOTE_SUFFIX = "+pre-vote"
#: The metrics compared with and without pre-vote.
PRE_VOTE_METRICS = ("leader changes per run", "largest epoch per run")


def pre_vote_rows(summary: list[dict[str, Any]]) -> list[list[Any]]:
    """(source, implementation, metric, runs, mean and max without pre-vote, the same with it): one row per
    implementation that has runs both ways (``simulate --compare-pre-vote`` writes the same seeds both ways)."""
    by_key = {(m["source"], m["implementation"], m["metric"]): m for m in summary}
    rows: list[list[Any]] = []
    for (source, impl, metric), on in sorted(by_key.items()):
        if metric not in PRE_VOTE_METRICS or not impl.endswith(PRE_VOTE_SUFFIX):
            continue
        off = by_key.get((source, impl.removesuffix(PRE_VOTE_SUFFIX), metric))
        if off is None:
            continue
        rows.append([source, impl.removesuffix(PRE_VOTE_SUFFIX), metric, f"{off['n']} / {on['n']}",
                     off["mean"], on["mean"], off["max"], on["max"]])
    return rows


def write_report(out: Path, *, summary: dict[str, Any], violations: list[Violation],
                 quarantine: list[dict[str, Any]], metrics: Metrics, verdicts: list[Verdict],
                 validator_name: str | None,
                 pictures: list[tuple[str, str, str]] | None = None) -> tuple[Path, Path]:
    """``pictures``: (title, PNG file in ``out``, caption), shown first (pictures.py draws them)."""
    out.mkdir(parents=True, exist_ok=True)
    plots = {name: _plot(name, vals, out) for name, vals in metrics.samples.items()}
    sections: list[tuple[str, list[str], list[list[Any]]]] = [
        ("Summary", ["item", "value"], [[k, v] for k, v in summary.items()]),
        ("Safety violations", ["invariant", "source", "run", "node", "epoch", "seq", "detail"],
         [[v.invariant, v.source, v.run, v.node, v.epoch, v.seq, v.detail] for v in violations]),
        ("Quarantined lines", ["file", "line", "reason"], [[q["file"], q["line"], q["reason"]] for q in quarantine]),
        ("Metrics", ["metric", "source", "implementation", "n", "min", "p50", "p95", "p99", "max", "mean"],
         [[m[k] for k in ("metric", "source", "implementation", "n", "min", "p50", "p95", "p99", "max", "mean")]
          for m in metrics.summary]),
    ]
    if pre_vote := pre_vote_rows(metrics.summary):
        sections.insert(4, ("Pre-vote: leader changes side by side",
                            ["source", "implementation", "metric", "runs (off / on)", "mean without pre-vote",
                             "mean with pre-vote", "max without", "max with"], pre_vote))
    if metrics.membership:  # KIP-853
        sections.insert(4, ("Membership changes", MEMBERSHIP_COLUMNS, metrics.membership))
    if validator_name is not None:
        sections.append((f"Trace validation ({validator_name})", ["file", "ok", "first bad seq", "message", "s"],
                         [[v.file, v.ok, v.first_bad_seq, v.message, v.seconds] for v in verdicts]))
    notes = {"Safety violations": "Checks run: " + ", ".join(INVARIANTS) + ".",
             "Pre-vote: leader changes side by side": "Runs of one implementation with and without KIP-996 "
             "pre-vote (its traces' implementation ends in " + PRE_VOTE_SUFFIX + "), e.g. the same simulator "
             "seeds of `kraft-tck simulate --faults reconnect --compare-pre-vote`.",
             "Membership changes": "KIP-853: AddRaftVoter/RemoveRaftVoter requests the leaders received and their "
             "answers (NONE once the VotersRecord committed; REQUEST_TIMED_OUT when it did not in time or another "
             "change was in progress); leader removals = leaders that resigned after removing themselves."}
    md = ["# kraft-tck trace pipeline report", ""]
    body = ["<h1>kraft-tck trace pipeline report</h1>"]
    if pictures:
        md += ["## Pictures", ""]
        body.append("<h2>Pictures</h2>")
        for title, fname, caption in pictures:
            md += [f"### {title}", "", f"![{title}]({fname})", "", caption, ""]
            body.append(f'<h3>{html.escape(title)}</h3><p><img src="{html.escape(fname)}" '
                        f'alt="{html.escape(title)}" style="max-width:100%"></p><p>{html.escape(caption)}</p>')
    for title, cols, rows in sections:
        shown = rows[:MAX_ROWS]
        md += [f"## {title}", ""]
        body.append(f"<h2>{html.escape(title)}</h2>")
        if title in notes:
            md += [notes[title], ""]
            body.append(f"<p>{html.escape(notes[title])}</p>")
        if not rows:
            md += ["(none)", ""]
            body.append("<p>(none)</p>")
            continue
        md.append("| " + " | ".join(cols) + " |")
        md.append("|" + "---|" * len(cols))
        md += ["| " + " | ".join(_fmt(c).replace("|", "\\|") for c in r) + " |" for r in shown]
        body.append("<table border=1 cellspacing=0 cellpadding=3><tr>" +
                    "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>")
        body += ["<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in r) + "</tr>" for r in shown]
        body.append("</table>")
        if len(rows) > len(shown):
            note = f"{len(rows) - len(shown)} more rows in report.json and the Parquet tables."
            md.append(f"\n{note}")
            body.append(f"<p>{note}</p>")
        md.append("")
    md += ["## Plots", ""]
    body.append("<h2>Plots</h2>")
    for name, plot in plots.items():
        if plot:
            md.append(f"![{name}]({plot})")
            body.append(f'<p><img src="{plot}" alt="{html.escape(name)}"></p>')
    md_path, html_path = out / "report.md", out / "report.html"
    md_path.write_text("\n".join(md) + "\n", encoding="utf-8")
    html_path.write_text("<!doctype html><html><head><meta charset='utf-8'><title>kraft-tck pipeline</title>"
                         "</head><body>" + "\n".join(body) + "</body></html>\n", encoding="utf-8")
    (out / "report.json").write_text(json.dumps({
        "summary": summary, "violations": [asdict(v) for v in violations], "quarantine": quarantine,
        "metrics": metrics.summary, "membership": metrics.membership, "validation": [asdict(v) for v in verdicts],
    }, indent=1, default=str) + "\n", encoding="utf-8")
    return md_path, html_path
