"""The pictures of the pipeline's report, the kind Jepsen- and Maelstrom-style tools draw: per run, a
timeline of every node's role and epoch with the fault windows shaded; commit latency over the run's time;
and the invariant checks' results. Pure functions of plain data (rows collected from the tables, trace
headers), so they are tested without Spark; each writes one PNG into the report directory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Role colours: the leader stands out; followers are calm; elections are warm.
ROLE_COLORS = {
    "Leader": "#cf222e", "Follower": "#2da44e", "Candidate": "#fb8500", "Voted": "#8ecae6",
    "Unattached": "#adb5bd", "Resigned": "#8250df", "Prospective": "#ffb703",
}  # fmt: skip
FAULT_COLORS = {"Crash": "#000000", "Partition": "#0969da", "OneWay": "#9a6700", "Lossy": "#6e7781"}
#: A crashed node is the fault to see first; a lossy network the last.
FAULT_ALPHA = {"Crash": 0.35, "Partition": 0.18, "OneWay": 0.18, "Lossy": 0.1}


@dataclass(frozen=True)
class FaultWindow:
    """A fault of a simulator run's schedule (trace header ``config.schedule``), in run milliseconds.
    ``nodes``: the nodes it hits (all of them for a network-wide fault)."""

    kind: str
    start_ms: float
    end_ms: float
    nodes: tuple[int, ...]
    label: str


def fault_windows(header: Mapping[str, Any] | None, nodes: Sequence[int]) -> list[FaultWindow]:
    """The fault windows of a trace header; none for a trace without a schedule (node and harness traces)."""
    schedule = ((header or {}).get("config") or {}).get("schedule") or []
    out: list[FaultWindow] = []
    for f in schedule:
        kind, at = str(f.get("kind")), float(f.get("at_ms", 0))
        if kind == "Crash":
            node = int(f["node"])
            how = "stop" if f.get("graceful") else "crash"
            out.append(FaultWindow(kind, at, at + float(f["down_ms"]), (node,), f"{how} {node}"))
        elif kind == "Partition":
            groups = [list(g) for g in f.get("groups", [])]
            label = " | ".join(",".join(map(str, g)) for g in groups)
            out.append(FaultWindow(kind, at, at + float(f["duration_ms"]), tuple(nodes), f"partition {label}"))
        elif kind == "OneWay":
            src, dst = int(f["src"]), int(f["dst"])
            out.append(FaultWindow(kind, at, at + float(f["duration_ms"]), (src, dst), f"{src}↛{dst}"))
        elif kind == "Lossy":
            loss = float(f.get("loss", 0))
            out.append(FaultWindow(kind, at, at + float(f["duration_ms"]), tuple(nodes), f"loss {loss:.0%}"))
    return out


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


@dataclass(frozen=True)
class Step:
    """A node's role from ``ts`` (run ms) on: a row of the transitions table."""

    node: int
    ts: float
    role: str
    epoch: int


def role_segments(steps: Sequence[Step], t_end: float) -> dict[int, list[tuple[float, float, str, int]]]:
    """node -> (start, end, role, epoch) segments, each lasting until the node's next step."""
    by_node: dict[int, list[Step]] = {}
    for s in sorted(steps, key=lambda s: (s.node, s.ts)):
        by_node.setdefault(s.node, []).append(s)
    out: dict[int, list[tuple[float, float, str, int]]] = {}
    for node, rows in by_node.items():
        ends = [r.ts for r in rows[1:]] + [max(t_end, rows[-1].ts)]
        out[node] = [(r.ts, end, r.role, r.epoch) for r, end in zip(rows, ends, strict=True) if end >= r.ts]
    return out


def plot_timeline(title: str, steps: Sequence[Step], t_end: float, windows: Sequence[FaultWindow],
                  out: Path) -> tuple[str, Any]:
    """One run: a row per node, coloured by role, the leader's epoch written on its segments, fault windows
    shaded on the rows they hit. Returns the file name and the figure's axes (for tests)."""
    plt = _pyplot()
    segments = role_segments(steps, t_end)
    nodes = sorted(segments)
    row = {n: i for i, n in enumerate(nodes)}
    fig, ax = plt.subplots(figsize=(11, 0.7 * len(nodes) + 1.8))
    for w in windows:
        for n in w.nodes:
            if n in row:
                ax.axvspan(w.start_ms / 1000, w.end_ms / 1000, ymin=row[n] / len(nodes),
                           ymax=(row[n] + 1) / len(nodes), color=FAULT_COLORS.get(w.kind, "#888"),
                           alpha=FAULT_ALPHA.get(w.kind, 0.15), lw=0, gid=f"fault-{w.kind}")
    for n, segs in segments.items():
        for start, end, role, epoch in segs:
            ax.broken_barh([(start / 1000, max((end - start) / 1000, 1e-3))], (row[n] + 0.2, 0.6),
                           facecolors=ROLE_COLORS.get(role, "#57606a"))
            if role == "Leader" and (end - start) > 0.03 * max(t_end, 1):
                ax.text((start + end) / 2000, row[n] + 0.5, f"e{epoch}", ha="center", va="center", fontsize=8,
                        color="white", fontweight="bold")
    ax.set_yticks([row[n] + 0.5 for n in nodes], [f"node {n}" for n in nodes])
    ax.set_ylim(0, len(nodes))
    ax.set_xlim(0, max(t_end, 1) / 1000)
    ax.set_xlabel("time (s)")
    ax.set_title(title)
    from matplotlib.patches import Patch

    seen_roles = sorted({role for segs in segments.values() for _, _, role, _ in segs})
    handles = [Patch(color=ROLE_COLORS.get(r, "#57606a"), label=r) for r in seen_roles]
    handles += [Patch(color=FAULT_COLORS.get(k, "#888"), alpha=FAULT_ALPHA.get(k, 0.15) * 2, label=f"{k} (fault)")
                for k in sorted({w.kind for w in windows})]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=min(10, len(handles)),
              fontsize=8, frameon=False)
    fig.tight_layout()
    fname = f"timeline-{slug(title)}.png"
    fig.savefig(out / fname, dpi=90)
    plt.close(fig)
    return fname, ax


def plot_commit_latency(points: Mapping[str, Sequence[tuple[float, float]]], out: Path) -> str | None:
    """Commit latency (ms) of each client write against the time it was written (s), one series per run."""
    if not any(points.values()):
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 3.6))
    for run, pts in points.items():
        if pts:
            xs, ys = zip(*sorted(pts), strict=True)
            ax.plot([x / 1000 for x in xs], ys, marker=".", ms=3, lw=0.6, label=run)
    ax.set_xlabel("time the write was appended (s)")
    ax.set_ylabel("commit latency (ms)")
    ax.set_title("Commit latency over time")
    ax.legend(fontsize=8, ncol=3)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fname = "commit-latency-over-time.png"
    fig.savefig(out / fname, dpi=90)
    plt.close(fig)
    return fname


def plot_invariants(violations: Mapping[str, int], out: Path) -> str:
    """One bar per invariant: how many violations it found (a green tick where none)."""
    plt = _pyplot()
    names = list(violations)
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(names) + 1.2))
    counts = [violations[n] for n in names]
    ax.barh(names, counts, color=["#cf222e" if c else "#2da44e" for c in counts])
    for i, c in enumerate(counts):
        ax.text(max(c, 0) + 0.05, i, "✓ none" if c == 0 else str(c), va="center", fontsize=9,
                color="#2da44e" if c == 0 else "#cf222e")
    ax.set_xlabel("violations found")
    ax.set_xlim(0, max([*counts, 1]) * 1.3 + 0.5)
    ax.invert_yaxis()
    ax.set_title("Safety invariants checked over every trace")
    fig.tight_layout()
    fname = "invariants.png"
    fig.savefig(out / fname, dpi=90)
    plt.close(fig)
    return fname
