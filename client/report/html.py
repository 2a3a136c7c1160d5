"""The self-contained HTML page of ``kgroup report``: a verdict, plots and tables.

Plots are drawn with matplotlib's object API (no pyplot, no global backend)
into PNGs embedded as base64 ``data:`` URIs, so the page is one file that
opens anywhere. Everything drawn here was aggregated by Spark; this module
only lays it out.
"""

from __future__ import annotations

import base64
import datetime
import html
import io
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

__all__ = ["render_report"]

# Tableau 20: distinguishable members in the Gantt (colours repeat beyond 20).
_PALETTE = [
    "#4e79a7",
    "#a0cbe8",
    "#f28e2b",
    "#ffbe7d",
    "#59a14f",
    "#8cd17d",
    "#b6992d",
    "#f1ce63",
    "#499894",
    "#86bcb6",
    "#79706e",
    "#bab0ac",
    "#d37295",
    "#fabfd2",
    "#b07aa1",
    "#d4a6c8",
    "#9d7660",
    "#d7b5a6",
    "#17becf",
    "#bcbd22",
]
_REASON_COLOURS = {
    "closed": "#59a14f",
    "unsubscribed": "#59a14f",
    "fenced": "#e15759",
    "poll_timeout": "#f28e2b",
    "fatal": "#e15759",
    None: "#9c9c9c",
}
_DOUBLE = "#d62728"


def _colour(member: str) -> str:
    # Stable across runs and pages: the same member keeps its colour.
    return _PALETTE[zlib.crc32(member.encode()) % len(_PALETTE)]


def _png(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _img(fig: Figure, alt: str) -> str:
    return f'<img class="plot" alt="{html.escape(alt)}" src="data:image/png;base64,{_png(fig)}">'


def _utc(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


# Drawn spans never get narrower than this, so a zero-length interval still shows.
_MIN_WIDTH = 1e-9


@dataclass(frozen=True, slots=True)
class _TimeAxis:
    """The x axis of the timeline plots: time since ``t0`` in a unit that suits the span."""

    t0: float
    t1: float
    divisor: float
    unit: str

    @classmethod
    def spanning(cls, t0: float, t1: float) -> _TimeAxis:
        span = max(t1 - t0, _MIN_WIDTH)
        if span <= 180:
            return cls(t0, t1, 1.0, "s")
        if span <= 3 * 3600:
            return cls(t0, t1, 60.0, "min")
        return cls(t0, t1, 3600.0, "h")

    @classmethod
    def of_group(cls, data: Mapping[str, Any]) -> _TimeAxis:
        """The axis over a group's whole telemetry (``data`` is a group's plot data)."""
        group = data["group"]
        return cls.spanning(group.first_ts, group.last_ts)

    def at(self, ts: float) -> float:
        """Where ``ts`` falls on the axis."""
        return (ts - self.t0) / self.divisor

    def bar(self, start: float, end: float) -> tuple[float, float]:
        """(x, width) of the span ``start``-``end``, as ``broken_barh`` takes it."""
        return self.at(start), max((end - start) / self.divisor, _MIN_WIDTH)

    @property
    def length(self) -> float:
        """The axis' extent, ``t0`` to ``t1``."""
        return self.bar(self.t0, self.t1)[1]

    @property
    def label(self) -> str:
        return f"time since {_utc(self.t0)} UTC ({self.unit})"


def _short(member: str | None) -> str:
    if not member:
        return "-"
    return member if len(member) <= 12 else member[:10] + "…"


def _timeline_figure(height: float) -> tuple[Figure, Axes]:
    """A page-wide figure ``height`` inches tall for a plot over time, and its one axes."""
    fig = Figure(figsize=(11, height))
    return fig, fig.add_subplot()


def _gantt(data: Mapping[str, Any]) -> str:
    rows: Sequence[Mapping[str, Any]] = data["gantt"]
    if not rows:
        return "<p>No partition was fetched.</p>"
    axis = _TimeAxis.of_group(data)
    partitions = sorted({(r["topic"], r["partition"]) for r in rows})
    y = {tp: i for i, tp in enumerate(partitions)}
    fig, ax = _timeline_figure(0.8 + 0.32 * len(partitions))
    members = sorted({r["member_id"] for r in rows})
    for r in rows:
        row = y[(r["topic"], r["partition"])]
        ax.broken_barh(
            [axis.bar(r["start"], r["end"])],
            (row - 0.35, 0.7),
            facecolors=_colour(r["member_id"]),
        )
    for d in data["gantt_doubles"]:
        doubled = y.get((d["topic"], d["partition"]))
        if doubled is None:
            continue
        ax.broken_barh(
            [axis.bar(d["start"], d["end"])],
            (doubled - 0.5, 1.0),
            facecolors="none",
            edgecolors=_DOUBLE,
            linewidth=2,
            hatch="////",
        )
    ax.set_yticks(range(len(partitions)), [f"{t}-{p}" for t, p in partitions], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(axis.label)
    ax.set_xlim(0, axis.length)
    ax.grid(axis="x", alpha=0.3)
    handles = [Patch(color=_colour(m), label=_short(m)) for m in members[:12]]
    if data["gantt_doubles"]:
        handles.append(
            Patch(facecolor="none", edgecolor=_DOUBLE, hatch="////", label="double ownership")
        )
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    ax.set_title("Who fetched each partition (one bar per ownership interval)")
    return _img(fig, "ownership Gantt per partition")


def _heatmap(data: Mapping[str, Any]) -> str:
    heat = data["heatmap"]
    members: Sequence[str] = heat["members"]
    if not members:
        return "<p>No member telemetry.</p>"
    axis = _TimeAxis.spanning(heat["t0"], heat["t1"])
    fig, ax = _timeline_figure(1.2 + min(0.22 * len(members), 14))
    image = ax.imshow(
        heat["grid"],
        aspect="auto",
        interpolation="nearest",
        cmap=ListedColormap(["#f4f4f4", *_blues(12)])
        if max(map(max, heat["grid"])) <= 12
        else "Blues",
        extent=(0, axis.length, len(members) - 0.5, -0.5),
    )
    if len(members) <= 60:
        ax.set_yticks(range(len(members)), [_short(m) for m in members], fontsize=7)
    else:
        ax.set_ylabel(f"{len(members)} members, in order of first appearance")
    ax.set_xlabel(axis.label)
    fig.colorbar(image, ax=ax, label="partitions fetched")
    ax.set_title("Partitions each member fetched over time")
    return _img(fig, "ownership per member over time")


def _blues(n: int) -> list[str]:
    out = []
    for i in range(n):
        f = (i + 1) / n
        r, g, b = int(222 - 190 * f), int(235 - 150 * f), int(247 - 90 * f)
        out.append(f"#{r:02x}{g:02x}{b:02x}")
    return out


def _membership(data: Mapping[str, Any]) -> str:
    members: Sequence[Mapping[str, Any]] = data["members"]
    if not members:
        return "<p>No member telemetry.</p>"
    axis = _TimeAxis.of_group(data)
    fig, ax = _timeline_figure(1.0 + 0.3 * len(members))
    for i, m in enumerate(members):
        begin = m["joined"] if m["joined"] is not None else m["first_seen"]
        end = m["left"] if m["left"] is not None else m["last_seen"]
        colour = _REASON_COLOURS.get(m["leave_reason"], "#9c9c9c")
        ax.broken_barh(
            [axis.bar(begin, end)],
            (i - 0.3, 0.6),
            facecolors=colour,
        )
        if m["left"] is None:
            # No leave event: the telemetry just stops (killed, or the data ends).
            ax.plot([axis.at(end)], [i], marker=">", color="#555555", markersize=5)
    member_index = {m["member_id"]: i for i, m in enumerate(members)}
    for f in data["fencing"]:
        at = member_index.get(f["member_id"])
        if at is not None:
            ax.plot([axis.at(f["ts"])], [at], marker="x", color=_DOUBLE, markersize=8)
    labels = [
        (m["instance_id"] + " / " if m["instance_id"] else "") + _short(m["member_id"])
        for m in members
    ]
    ax.set_yticks(range(len(members)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, axis.length)
    ax.set_xlabel(axis.label)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(
        handles=[
            Patch(color=_REASON_COLOURS["closed"], label="left: closed"),
            Patch(color=_REASON_COLOURS["fenced"], label="left: fenced / fatal"),
            Patch(color=_REASON_COLOURS["poll_timeout"], label="left: poll timeout"),
            Patch(color="#9c9c9c", label="no leave seen (▶: telemetry stops)"),
        ],
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        fontsize=8,
    )
    more = data["member_total"] - len(members)
    ax.set_title(
        "Members joining and leaving (x: fenced)"
        + (f"; first {len(members)} of {data['member_total']}" if more > 0 else "")
    )
    return _img(fig, "membership timeline")


def _histogram(hist: Mapping[str, Any], title: str, xlabel: str, non_positive: str) -> str:
    edges: Sequence[float] = hist["edges"]
    counts: Sequence[int] = hist["counts"]
    fig = Figure(figsize=(7, 3.2))
    ax = fig.add_subplot()
    if sum(counts):
        first = next(i for i, c in enumerate(counts) if c)
        last = max(i for i, c in enumerate(counts) if c)
        lo, hi = max(first - 1, 0), min(last + 2, len(counts))
        ax.stairs(counts[lo:hi], edges[lo : hi + 1], fill=True, color="#4e79a7")
        ax.set_xscale("log")
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    extra = hist["non_positive"]
    ax.set_title(title + (f" ({extra} {non_positive})" if extra else ""))
    ax.grid(alpha=0.3)
    return _img(fig, title)


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1000:,.1f}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    if not rows:
        return "<p class='none'>none</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _group_section(data: Mapping[str, Any], clock_skew_s: float) -> str:
    g = data["group"]
    ok = g.double_ownership == 0
    verdict = (
        f"<div class='verdict ok'>No double ownership: no partition was fetched by two members "
        f"at once in {g.ownership_intervals:,} ownership intervals.</div>"
        if ok
        else f"<div class='verdict bad'>DOUBLE OWNERSHIP: {g.double_ownership} intervals in which "
        f"two members fetched one partition, {g.double_ownership_s:.3f} s in all.</div>"
    )
    if g.double_ownership_within_skew:
        verdict += (
            f"<p>{g.double_ownership_within_skew} further overlaps are no longer than the "
            f"clock-skew tolerance ({clock_skew_s} s) and are not counted.</p>"
        )
    facts = _table(
        [
            "events",
            "members",
            "partitions",
            "rebalances",
            "rebalance p50 / max (ms)",
            "unowned gaps",
            "unowned (s)",
            "longest gap (ms)",
            "fencings",
            "from",
            "to",
        ],
        [
            [
                f"{g.events:,}",
                g.members,
                g.partitions,
                g.rebalances,
                f"{_ms(g.rebalance_p50_s)} / {_ms(g.rebalance_max_s)}",
                g.unowned_gaps,
                f"{g.unowned_s:.3f}",
                _ms(g.longest_gap_s),
                g.fencings,
                _utc(g.first_ts),
                _utc(g.last_ts),
            ]
        ],
    )
    doubles = _table(
        [
            "topic",
            "partition",
            "member a",
            "member b",
            "epochs",
            "from (UTC)",
            "to (UTC)",
            "overlap (ms)",
            "a ended",
            "b ended",
            "within skew",
        ],
        [
            [
                d["topic"],
                d["partition"],
                d["member_a"],
                d["member_b"],
                f"{d['epoch_a']} / {d['epoch_b']}",
                _utc(d["start"]),
                _utc(d["end"]),
                _ms(d["overlap_s"]),
                d["end_reason_a"],
                d["end_reason_b"],
                d["within_skew"],
            ]
            for d in data["doubles"]
        ],
    )
    causes = _table(
        ["cause", "error the previous owner reported", "gaps", "total (s)", "longest (ms)"],
        [
            [
                c["cause"],
                c["cause_error"] or "-",
                c["count"],
                f"{c['total_s']:.3f}",
                _ms(c["max_s"]),
            ]
            for c in data["gap_causes"]
        ],
    )
    longest = _table(
        ["topic", "partition", "from (UTC)", "duration (ms)", "cause", "error", "previous", "next"],
        [
            [
                r["topic"],
                r["partition"],
                _utc(r["start"]),
                _ms(r["duration_s"]),
                r["cause"],
                r["cause_error"] or "-",
                _short(r["prev_member"]),
                _short(r["next_member"]),
            ]
            for r in data["longest_gaps"]
        ],
    )
    rebalances = _table(
        ["start (UTC)", "duration (ms)", "trigger", "members", "epochs", "unfinished"],
        [
            [
                _utc(r["start"]),
                _ms(r["duration_s"]),
                r["trigger"],
                r["member_count"],
                f"{r['epoch_from']} → {r['epoch_to']}",
                r["incomplete"],
            ]
            for r in data["longest_rebalances"]
        ],
    )
    latency = _table(
        ["metric", "count", "p50 (ms)", "p90 (ms)", "p99 (ms)", "max (ms)"],
        [
            [
                r["metric"],
                r["count"],
                _ms(r["p50_s"]),
                _ms(r["p90_s"]),
                _ms(r["p99_s"]),
                _ms(r["max_s"]),
            ]
            for r in data["latency"]
        ],
    )
    fencing = _table(
        ["time (UTC)", "member", "instance", "host", "error", "code", "epoch"],
        [
            [
                _utc(f["ts"]),
                f["member_id"],
                f["instance_id"] or "-",
                f["host"],
                f["error"],
                f["error_code"],
                f["epoch"],
            ]
            for f in data["fencing"]
        ],
    )
    return f"""
<section>
<h2>Group {html.escape(g.group)}</h2>
{verdict}
{facts}
<h3>Ownership</h3>
{_heatmap(data)}
{_gantt(data)}
<p class="note">The Gantt shows the partitions with double ownership first, then those that
changed hands most (at most 24); the <code>ownership</code> table has every interval.</p>
<h3>Double ownership</h3>
{doubles}
<h3>Membership</h3>
{_membership(data)}
<h3>Rebalances</h3>
<div class="row">
{_histogram(data["rebalance_hist"], "Rebalance durations", "duration (s)", "of zero length")}
{
        _histogram(
            data["gap_hist"],
            "Hand-over gaps: a partition's release to its next owner's first fetch",
            "gap (s)",
            "overlapping: the next owner started first",
        )
    }
</div>
<h4>Longest rebalances</h4>
{rebalances}
<h3>Unowned gaps (nobody fetched)</h3>
{causes}
<h4>Longest gaps</h4>
{longest}
<h3>Latency</h3>
{latency}
<h3>Fencing</h3>
{fencing}
</section>
"""


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1250px; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2em; }
.verdict { font-size: 1.3em; padding: 0.6em 1em; border-radius: 6px; margin: 0.8em 0; }
.verdict.ok { background: #e5f5e0; border: 1px solid #59a14f; }
.verdict.bad { background: #fde0dd; border: 1px solid #d62728; font-weight: bold; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.85em; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: left; }
th { background: #f4f4f4; }
img.plot { max-width: 100%; display: block; margin: 0.5em 0; }
.row { display: flex; flex-wrap: wrap; gap: 1em; } .row img.plot { max-width: 48%; }
.note, .none { color: #666; font-size: 0.9em; }
"""


def render_report(
    *,
    groups: Sequence[Any],
    data: Sequence[Mapping[str, Any]],
    source: str,
    events: int,
    malformed: int,
    clock_skew_s: float,
    more_groups: int = 0,
) -> str:
    """The whole page."""
    total_doubles = sum(g.double_ownership for g in groups)
    headline = (
        f"<div class='verdict ok'>0 double ownership in {len(groups)} group(s).</div>"
        if total_doubles == 0
        else f"<div class='verdict bad'>{total_doubles} double-ownership intervals.</div>"
    )
    overview = _table(
        [
            "group",
            "events",
            "members",
            "partitions",
            "rebalances",
            "unowned gaps",
            "double ownership",
            "fencings",
        ],
        [
            [
                g.group,
                f"{g.events:,}",
                g.members,
                g.partitions,
                g.rebalances,
                g.unowned_gaps,
                g.double_ownership,
                g.fencings,
            ]
            for g in groups
        ],
    )
    sections = "".join(_group_section(d, clock_skew_s) for d in data)
    tail = (
        f"<p class='note'>{more_groups} more groups are in the Parquet tables.</p>"
        if more_groups
        else ""
    )
    bad_lines = (
        f"; {malformed:,} lines were not telemetry events (table <code>events</code>, "
        "<code>valid=false</code>)"
        if malformed
        else ""
    )
    generated = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>kgroup fleet report</title>
<style>{_CSS}</style></head>
<body>
<h1>kgroup fleet report</h1>
<p class="note">{events:,} events from {html.escape(source)}{bad_lines}. Generated {generated}.</p>
{headline}
{overview}
{sections}
{tail}
</body></html>
"""
