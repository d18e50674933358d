"""A self-contained HTML page for an audit report (stdlib and the audit's own modules only).

The page reads the report *dict* (``AuditReport.to_dict()`` or a saved
report.json), so a stored report can be re-rendered. No external assets: the
co-occurrence heatmap is inline SVG drawn here (matplotlib is not a serving
dependency), styles are inline, and every string from the data is escaped.
Shares are written as the rationales write them (``containment.percent``), and one under a threshold of the
report's config never reads at or above it (``containment.percent_under``, as the rationales write such a rate).
"""

from __future__ import annotations

import html
import json
from typing import Any, Iterable, Mapping, Sequence

from intentvcs.service.audit.config import RATES, AuditConfig
from intentvcs.service.audit.containment import percent, percent_under
from intentvcs.service.audit.slots import format_p

CELL = 30          # heatmap cell size, px
CHAR_W = 7.0       # approximate width of one 12px character, px
SEVERITY_COLOURS = {"blocking": "#c0392b", "warning": "#d68910", "info": "#2e86c1"}
# The config's thresholds that the shares on the page (containment, coverage, multi-intent and out-of-scope rows)
# are compared with by the rules.
THRESHOLDS = tuple(name for name in RATES if name not in ("corank_min", "part_share", "same_alpha", "entity_gap"))

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;
vertical-align:top;font-size:13px}th{background:#f4f4f4}.badge{color:#fff;padding:1px 8px;border-radius:8px;
font-size:12px}.finding{border-top:2px solid #eee;margin-top:1.5em}code,pre{font-size:12px;background:#f8f8f8}
pre{padding:.5em;overflow-x:auto}.muted{color:#777}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _badge(severity: str) -> str:
    return f'<span class="badge" style="background:{SEVERITY_COLOURS[severity]}">{_e(severity)}</span>'


def thresholds(config: Mapping[str, Any]) -> tuple[float, ...]:
    """``THRESHOLDS`` as the report's config sets them (the defaults for those a report written before lacks)."""
    return tuple(float(config.get(name, getattr(AuditConfig, name))) for name in THRESHOLDS)


def _pct(share: float, limits: Sequence[float] = ()) -> str:
    """``share`` as ``percent`` writes it, but one under a threshold of ``limits`` never at or above it: rounded,
    99 of 199 rows (49.7%) read "50%" in the containment table beside a rationale that said "only 49% of E lies
    in N: too specific" (``back_high`` 50%), and an interval bound under a threshold read as reaching it."""
    above = [limit for limit in limits if limit > share]
    return percent_under(share, min(above)) if above else percent(share)


def _colour(rate: float) -> str:
    """White (0) to dark blue (1), linear in each RGB channel."""
    low, high = (255, 255, 255), (8, 48, 107)
    return "#" + "".join(f"{round(a + (b - a) * rate):02x}" for a, b in zip(low, high))


def heatmap_svg(cooccurrence: Mapping[str, Any], max_columns: int, thresholds: Sequence[float] = ()) -> str:
    """Inline SVG of contain(N->E): rows new intents, columns existing intents (at most ``max_columns``); a rate
    under one of ``thresholds`` never reads at or above it."""
    new, existing = cooccurrence["new"], cooccurrence["existing"][:max_columns]
    if not new or not existing:
        return '<p class="muted">No existing intent is accepted on the new intents\' rows.</p>'
    # From the counts: the rates are rounded to 4 places, and a whole percent of those can differ from the
    # rationale's (86 of 103 is 83%, its 0.835 84%).
    rates = [[k / n if n else 0.0 for k in row[:len(existing)]]
             for row, n in zip(cooccurrence["counts"], cooccurrence["rows"])]
    left = 10 + CHAR_W * max(len(x) for x in new)
    slant = CHAR_W * max(len(x) for x in existing) * 0.72  # column labels at -45 degrees: up and right
    top = 10 + slant
    width, height = left + CELL * len(existing) + slant + 10, top + CELL * len(new) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
             f'font-family="sans-serif" font-size="12" role="img" aria-label="co-occurrence heatmap">']
    for j, name in enumerate(existing):
        x = left + CELL * j + CELL / 2
        parts.append(f'<text x="{x:.1f}" y="{top - 6:.1f}" transform="rotate(-45 {x:.1f} {top - 6:.1f})">'
                     f'{_e(name)}</text>')
    for i, name in enumerate(new):
        y = top + CELL * i
        parts.append(f'<text x="{left - 6:.1f}" y="{y + CELL / 2 + 4:.1f}" text-anchor="end">{_e(name)}</text>')
        for j, rate in enumerate(rates[i]):
            x = left + CELL * j
            shown = _pct(rate, thresholds)
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{CELL}" height="{CELL}" fill="{_colour(rate)}" '
                         f'stroke="#fff"><title>{_e(name)} -&gt; {_e(existing[j])}: {_e(shown)}</title></rect>')
            if rate >= 0.05:
                ink = "#fff" if rate > 0.5 else "#222"
                parts.append(f'<text x="{x + CELL / 2:.1f}" y="{y + CELL / 2 + 4:.1f}" text-anchor="middle" '
                             f'font-size="10" fill="{ink}">{_e(shown[:-1])}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _count(count: Mapping[str, Any] | None, thresholds: Sequence[float] = ()) -> str:
    """A count as its share, ``k/n`` and interval; no figure under one of ``thresholds`` reads at or above it (an
    interval then holds a threshold on the page exactly when the verdict's ``straddles`` says so)."""
    if count is None:
        return '<span class="muted">n/a</span>'
    rate = count["k"] / count["n"] if count["n"] else count["rate"]  # k / n, as the rationale, not rounded twice
    return (f'{_e(_pct(rate, thresholds))} <span class="muted">({count["k"]}/{count["n"]}, '
            f'CI {_e(_pct(count["ci_low"], thresholds))}&ndash;{_e(_pct(count["ci_high"], thresholds))})</span>')


def _top(top: list[Mapping[str, Any]]) -> str:
    # Through ``percent`` as every figure of the page: "%.2f" read 0.996 "1.00" and 0.0001 "0.00".
    return ", ".join(f'{t["intent"]} {percent(t["confidence"])}' for t in top)


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """An HTML table; ``headers`` and cells are HTML already (escape text with ``_e``)."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _rows_table(rows: list[Mapping[str, Any]], title: str) -> str:
    if not rows:
        return ""
    return f"<h4>{_e(title)}</h4>" + _table(
        ["utterance", "accepted", "top confidences"],
        ([_e(r["text"]), _e(", ".join(r["accepted"]) or "-"), _e(_top(r["top"]))] for r in rows))


def _relabel_table(rows: list[Mapping[str, Any]]) -> str:
    if not rows:
        return ""
    return "<h4>Old utterances that probably also belong to this intent (add the label)</h4>" + _table(
        ["utterance", "labels now", "P(in new intent)", "from"],
        ([_e(r["text"]), _e(", ".join(r["labels"])), _e(percent(r["probability"])), _e(r["source"])] for r in rows))


def _same(test: Mapping[str, Any] | None) -> str:
    if test is None:
        return '<span class="muted">too few rows</span>'
    return (f'{format_p(test["p_value"])} (same-sample neighbours {_e(percent(test["statistic"]))}, '
            f'{_e(percent(test["null_mean"]))} expected)')


def _share(share: float, rows: int) -> float:
    """A share of ``rows`` rows as the rationale states it: the report's is rounded to 4 places, which its
    whole percent can contradict (17 of 103 rows: 0.165, "16%"); the row count it is a share of recovers it."""
    return round(share * rows) / rows if rows else share


def _pivot(pivot: Mapping[str, Any] | None, alpha: float = AuditConfig.same_alpha) -> str:
    """The entity whose share differs most, in the column of what tells the intents apart: only a difference
    below the report's threshold ``alpha`` (its ``same_alpha``) does, as the verdicts read it; one above it is
    shown muted, saying so."""
    if pivot is None:
        return '<span class="muted">none</span>'
    new, old = _share(pivot["new_share"], pivot["new_rows"]), _share(pivot["existing_share"], pivot["existing_rows"])
    text = (f'{_e(pivot["entity"])}: on {_e(percent(new))} of the new rows, {_e(percent(old))} of the old '
            f'({format_p(pivot["p_value"])}')
    if pivot["p_value"] < alpha:
        return text + ")"
    return f'<span class="muted">{text}, not below {alpha:g}: does not tell them apart)</span>'


def _new_pairs(pairs: list[Mapping[str, Any]], limits: Sequence[float] = ()) -> str:
    if not pairs:
        return ""
    return "<h2>New intents that duplicate each other (merge them)</h2>" + _table(
        ["first", "second", "severity", "first in second", "second in first", "same utterances?"],
        ([_e(p["first"]), _e(p["second"]), _badge(p["severity"]), _count(p["first_in_second"], limits),
          _count(p["second_in_first"], limits), _same(p["same_distribution"])] for p in pairs))


def _finding(f: Mapping[str, Any], alpha: float, limits: Sequence[float] = ()) -> str:
    pairs = "".join(
        f'<tr><td>{_e(c["existing"])}</td><td>{_count(c["new_in_existing"], limits)}</td>'
        f'<td>{_count(c["existing_in_new"], limits)}</td><td>{_pivot(c["entity_pivot"], alpha)}</td>'
        f'<td>{_e(c["reference"] or "-")}</td></tr>'
        for c in f["containment"])
    intent = _e(f["intent"])
    table = (f'<table><tr><th>existing E</th><th>contain({intent}&rarr;E)</th><th>contain(E&rarr;{intent})</th>'
             f'<th>entity that tells them apart</th><th>E rows from</th></tr>{pairs}</table>') if pairs else ""
    borderline = ' <span class="muted">(borderline)</span>' if f["borderline"] else ""
    return (f'<div class="finding" id="f-{intent}"><h3>{intent}: {_e(f["relation"])} '
            f'{_e(", ".join(f["existing"]))} {_badge(f["severity"])}{borderline}</h3>'
            f'<p>{_e(f["rationale"])}. {_rows(f)}; multi-intent rows {_count(f["multi_intent"], limits)}; '
            f'answered out of scope by the service {_count(f["out_of_scope"], limits)}.</p>'
            f'{table}{_rows_table(f["examples"], "Examples")}'
            f'{_rows_table(f["counter_examples"], "Counter-examples")}{_relabel_table(f["relabel"])}'
            f'<h4>Proposed fix: {_e(f["fix"]["action"])}</h4>'
            f'<pre>{_e(json.dumps(f["fix"], indent=1, ensure_ascii=False))}</pre></div>')


def _rows(finding: Mapping[str, Any]) -> str:
    """How many rows the new intent has, and how many of them the figures rest on when that is fewer."""
    rows, scored = finding["rows"], finding["scored_rows"]
    return f"{rows} rows" if scored == rows else f"{rows} rows, figures from a seeded sample of {scored}"


def _repeats(summary: Mapping[str, Any]) -> str:
    """The rows set aside as repeats, when there are any (reports written before they were counted have none)."""
    repeats = summary.get("duplicate_rows", 0)
    return f" ({repeats} repeated rows set aside: one row counts once)" if repeats else ""


def render_html(report: Mapping[str, Any]) -> str:
    """The report as one self-contained HTML document."""
    summary = report["summary"]
    alpha = report["config"].get("same_alpha", AuditConfig.same_alpha)  # what the verdicts were judged at
    # Not a key the schema requires (a report written before it has none): the default then.
    columns = report["config"].get("heatmap_cap", AuditConfig.heatmap_cap)
    limits = thresholds(report["config"])
    overview = "".join(
        f'<tr><td><a href="#f-{_e(f["intent"])}">{_e(f["intent"])}</a></td><td>{_e(f["relation"])}</td>'
        f'<td>{_e(", ".join(f["existing"]))}</td><td>{_badge(f["severity"])}</td>'
        f'<td>{f["rows"]}</td></tr>' for f in report["findings"])
    counts = ", ".join(f"{k} {v}" for k, v in summary["relations"].items())
    missing = ""
    if summary["missing_references"]:
        missing = (f"<p>No rows of {_e(', '.join(summary['missing_references']))} to estimate how much of them "
                   "lies in the new intents: duplicates of them show as subsets. Audit with a sample of the old "
                   "data.</p>")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>intentvcs upgrade audit</title><style>{_STYLE}</style></head><body>"
        f"<h1>Upgrade audit {_badge(summary['severity'])}</h1>"
        f"<p>{summary['batch_rows']} batch rows{_repeats(summary)}, {summary['audited_rows']} with new intents; "
        f"{len(summary['new_intents'])} new intents against {summary['existing_intents']} existing "
        f"({_e(counts)}).</p>{missing}"
        "<h2>Co-occurrence: share of each new intent's rows on which the classifier accepts an existing intent</h2>"
        f"{heatmap_svg(report['cooccurrence'], columns, limits)}"
        "<h2>Findings</h2><table><tr><th>new intent</th><th>relation</th><th>existing</th><th>severity</th>"
        f"<th>rows</th></tr>{overview}</table>"
        f"{''.join(_finding(f, alpha, limits) for f in report['findings'])}"
        f"{_new_pairs(report['new_pairs'], limits)}"
        "<h2>Proposed relations file</h2>"
        # The relations file itself (what --relations-out writes and train --relations reads), not the whole fix.
        f"<details><summary>relations.json</summary>"
        f"<pre>{_e(json.dumps(report['fix']['relations'], indent=1, ensure_ascii=False))}</pre></details>"
        "</body></html>\n"
    )
