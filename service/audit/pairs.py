"""The audit's findings as one flat table of intent pairs, for pandas and spreadsheets.

One row per (new intent, candidate existing intent) that the audit measured,
one per existing intent that a verdict names without its being a candidate
(a composite's part found by splitting utterances at a connector, which the
whole utterances need not accept: contain(N->E) from the report's
co-occurrence counts, contain(E->N) not estimated), and one per pair of new
intents that duplicate each other, in the shape of
cleanlab's ``find_overlapping_classes`` (two classes and how much they
overlap), with our relation and both containment directions:
``intent_a`` (new), ``intent_b``, ``relation`` (the verdict when ``intent_b``
is one of the verdict's existing intents, ``candidate`` for an intent the
audit measured and did not name), ``a_in_b`` / ``b_in_a`` (share of A's rows
the model also accepts as B, and the reverse; empty when not estimable),
their row counts, the entity pivot and its corrected p-value, the severity.

Works on the report document (``AuditReport.to_dict()`` or a saved report), so
a report written earlier can be tabulated without the model.
"""

from __future__ import annotations

import csv
import io
from typing import Any

COLUMNS = ("intent_a", "intent_b", "relation", "a_in_b", "b_in_a", "rows_a", "rows_b", "entity_pivot",
           "pivot_direction", "pivot_p_value", "severity", "source")


def pair_rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The table's rows (dicts keyed by ``COLUMNS``), findings first, then the new pairs."""
    rows = []
    for finding in document["findings"]:
        measured = [pair["existing"] for pair in finding["containment"]]
        for pair in finding["containment"]:
            named = pair["existing"] in finding["existing"]
            backward, pivot = pair["existing_in_new"], pair["entity_pivot"]
            rows.append({
                "intent_a": finding["intent"], "intent_b": pair["existing"],
                "relation": finding["relation"] if named else "candidate",
                "a_in_b": pair["new_in_existing"]["rate"], "b_in_a": None if backward is None else backward["rate"],
                "rows_a": pair["new_in_existing"]["n"], "rows_b": None if backward is None else backward["n"],
                "entity_pivot": None if pivot is None else pivot["entity"],
                "pivot_direction": None if pivot is None else pivot["direction"],
                "pivot_p_value": None if pivot is None else pivot["p_value"],
                "severity": finding["severity"] if named else "info", "source": "finding"})
        for name in finding["existing"]:
            if name not in measured:  # named by the verdict, measured by no containment estimate
                k, n = _accepted(document, finding, name)
                rows.append({
                    "intent_a": finding["intent"], "intent_b": name, "relation": finding["relation"],
                    "a_in_b": None if k is None else round(k / n, 4) if n else 0.0, "b_in_a": None,
                    "rows_a": n, "rows_b": None, "entity_pivot": None, "pivot_direction": None,
                    "pivot_p_value": None, "severity": finding["severity"], "source": "finding"})
    for pair in document.get("new_pairs", []):
        rows.append({
            "intent_a": pair["first"], "intent_b": pair["second"], "relation": pair["relation"],
            "a_in_b": pair["first_in_second"]["rate"], "b_in_a": pair["second_in_first"]["rate"],
            "rows_a": pair["first_in_second"]["n"], "rows_b": pair["second_in_first"]["n"],
            "entity_pivot": None, "pivot_direction": None, "pivot_p_value": None,
            "severity": pair["severity"], "source": "new_pair"})
    return rows


def _accepted(document: dict[str, Any], finding: dict[str, Any], existing: str) -> tuple[int | None, int]:
    """contain(N->E) as ``(k, n)`` from the report's co-occurrence counts (the numerators of every
    ``new_in_existing``; an existing intent that is no column there was accepted on none of the new intents' rows),
    ``k`` None where the document has no co-occurrence for the new intent."""
    matrix = document.get("cooccurrence") or {}
    if finding["intent"] not in matrix.get("new", []):
        return None, finding.get("scored_rows")
    i = matrix["new"].index(finding["intent"])
    n = matrix["rows"][i]
    if existing not in matrix["existing"]:
        return 0, n
    return matrix["counts"][i][matrix["existing"].index(existing)], n


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def pairs_csv(document: dict[str, Any]) -> str:
    """``pair_rows`` as CSV text with a header (empty cells for missing values), RFC 4180: records end in CRLF,
    and a cell holding a comma, a quote, a line feed or a carriage return is quoted. Names are the batch's text
    and may hold a bare carriage return, which Python's csv module quotes only when it is part of the line
    terminator: with a line feed alone as the terminator it was written bare, and pandas, ``csv.reader`` and
    spreadsheets ended the record there.

    A text cell that a spreadsheet would run as a formula (an intent named ``=cmd|...``: it starts with ``=``,
    ``+``, ``-``, ``@``, a tab or a carriage return) is written with a leading ``'``, which spreadsheets read
    as "text" (OWASP's CSV-injection advice); ``pair_rows`` keeps the names as they are.
    """
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\r\n")
    writer.writeheader()
    for row in pair_rows(document):
        writer.writerow({key: _cell(value) for key, value in row.items()})
    return out.getvalue()


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
