"""Upgrade audit: how a batch's new intents are entangled with the model's intents.

Before retraining, a team hands over a batch of labelled rows, often with new
intents (labels the bundle does not know). For each new intent N the audit
reports its relation to the existing intents E, with figures, evidence and a
fix that is data (DialogVCS, docs/RESEARCH.md section 1):

``duplicate``  same meaning as one E (version conflict)      -> merge / duplicate relation
``subset``     N within E, too specific (version conflict)   -> subset(child=N, parent=E)
``superset``   N spans one or more E, too generic            -> subset(child=E, parent=N)
``composite``  N's rows carry several E at once (``a&b``)    -> composite(N, parts)
``novel``      none of the above                             -> nothing to fix

API (numpy + stdlib + tqdm; no torch, runs inside the service)::

    from intentvcs.service.audit import AuditConfig, audit_batch, render_html
    report = audit_batch(engine, rows, training_rows=None, config=AuditConfig())
    report.to_dict()          # the JSON report (schema below)
    report.fails("blocking")  # for CI exit codes
    report.fix_relations()    # intentvcs.core.relations.LabelRelations to save as relations.json
    render_html(report.to_dict())  # self-contained page with an SVG heatmap
    pairs_csv(report.to_dict())    # one row per intent pair, for pandas (``pairs``)

Modules: ``containment`` (both directions, Wilson intervals), ``rules`` (the
decision rules, documented there), ``evidence`` (examples, PU relabel list),
``report`` (report and fix), ``render`` (HTML), ``pairs`` (the flat pair
table), ``slots`` (the entity-profile test), ``words`` (the word pivot),
``batch`` (orchestration), ``config`` (thresholds).

Report JSON (``report.schema.json``, JSON Schema 2020-12, is normative)::

    {
      "format": "intentvcs-audit", "format_version": 1,
      "engine":  {... engine.info ...},
      "config":  {... AuditConfig ...},
      "summary": {"severity": "blocking"|"warning"|"info", "batch_rows", "audited_rows",
                  "scored_rows", "duplicate_rows",   # repeated rows (text, labels) set aside
                  "missing_references": [E...],   # candidates without rows for contain(E->N)
                  "existing_intents", "new_intents": [N...],
                  "relations": {"duplicate": 1, "subset": 0, ...}, "new_duplicates": n, "blocking": [N...],
                  "timing_s": {"reading", "inference", "total"}},
      "findings": [{
          "intent": N, "relation": ..., "existing": [E...], "severity": ..., "borderline": bool,
          "rationale": str, "rows": n, "scored_rows": n,   # the intent's rows, and those the model scored
          "statistic": Count|null,          # coverage (superset) / multi-intent share (composite)
          "multi_intent": Count,            # rows with >= 2 independent existing intents
          "out_of_scope": Count,            # rows the served decision answers out of scope
          "containment": [{"existing": E, "new_in_existing": Count,
                           "existing_in_new": Count|null, "reference": "training"|"model"|"batch"|null,
                           "entity_pivot": {"entity", "direction", "new_share", "existing_share",
                                            "p_value", "tested", "test", "correction", ...}|null}],
          "examples": [Row], "counter_examples": [Row],
          "relabel": [{"text", "id"?, "labels", "existing", "probability", "odds", "source"}],
          "fix": {"action": "merge"|"link"|"multi_label"|"none", "label_map": {N: E}, "relations": [...]}
      }],
      "new_pairs": [{"first": N, "second": N, "relation": "duplicate", "severity",
                     "first_in_second": Count, "second_in_first": Count, "same_distribution": {...},
                     "fix": {"action": "merge", "label_map": {N: N}, "relations": [...]}}],
      "cooccurrence": {"new": [N...], "existing": [E...], "rows": [n...], "counts": [[k]], "rate": [[k/n]]},
      "fix": {"label_map": {N: E}, "relations": {... relations.json object ...}}
    }
    Count = {"k", "n", "rate", "ci_low", "ci_high"}   (Wilson interval at config.confidence)
    Row   = {"text", "id"?, "accepted": [E...], "top": [{"intent", "confidence"}]}
"""

from intentvcs.service.audit.batch import AuditInputError, AuditStopped, audit_batch, validate_rows
from intentvcs.service.audit.config import AuditConfig
from intentvcs.service.audit.pairs import pairs_csv
from intentvcs.service.audit.render import render_html
from intentvcs.service.audit.report import SCHEMA_PATH, AuditReport

__all__ = ["SCHEMA_PATH", "AuditConfig", "AuditInputError", "AuditReport", "AuditStopped", "audit_batch",
           "pairs_csv", "render_html", "validate_rows"]
