"""Export second review: each test failed on the code before its fix.

- the int8 accuracy gate of a model with an entity head, on labelled parity rows without spans (a CSV, as the
  README's own example gives), judged the intents alone and passed an int8 graph whose entity answers differ
  from the fp32 graph's, which the service then served by default.

Tiny random checkpoints (``tests.helpers.bundle``) and synthetic graph outputs.
"""

from __future__ import annotations

import json

import numpy as np

from intentvcs.core.dataio import Example
from intentvcs.core.decision import Decision
from intentvcs.core.entities import Entity
from intentvcs.core.oos import ThresholdRule
from intentvcs.core.outputs import GraphOutputs, tuple_array
from intentvcs.export.quantize import accuracy_gate
from intentvcs.service.bundle import serving_graph
from tests.helpers.bundle import make_tiny_checkpoint


def _outputs(top: list[int], entities: list[tuple], labels: int = 3) -> GraphOutputs:
    logits = np.full((len(top), labels), -4.0, dtype=np.float32)
    logits[np.arange(len(top)), top] = 4.0
    pooled = np.zeros((len(top), 4), dtype=np.float32)
    return GraphOutputs(logits, pooled, pooled, tuple_array(entities))


# ------------------------------------------------------------ 1. int8 entities ungated on rows without spans

def test_the_int8_gate_judges_entity_answers_where_the_rows_carry_no_spans():
    decision = Decision(("a", "b", "c"), activation="softmax", thresholds=[0.5] * 3, oos=ThresholdRule(0.9))
    rows = 40
    gold = [i % 3 for i in range(rows)]
    examples = [Example(f"fly to paris {i}", ("abc"[g],)) for i, g in enumerate(gold)]  # labelled, no spans
    city = (Entity("city", 7, 12, 0.9),)
    fp32 = _outputs(gold, [city] * rows)
    # Same intents; the int8 graph loses the entity of a quarter of the rows.
    int8 = _outputs(gold, [() if i % 4 == 0 else city for i in range(rows)])
    gate = accuracy_gate(fp32, int8, decision, examples, "rows.csv")
    assert not gate["passed"], gate
    figure = gate["figures"]["entity_set_agreement"]
    assert figure["fp32"] == 1.0 and figure["int8"] == 0.75 and not figure["passed"]
    # The same int8 entities as fp32's pass it; one row of 40 differing is one row's share, allowed.
    assert accuracy_gate(fp32, fp32, decision, examples, "rows.csv")["passed"]
    one = _outputs(gold, [() if i == 0 else city for i in range(rows)])
    assert accuracy_gate(fp32, one, decision, examples, "rows.csv")["passed"]
    # An intent-only graph has no entity answers to judge; rows with spans are judged by slot F1 instead.
    plain = accuracy_gate(fp32._replace(entities=None), int8._replace(entities=None), decision, examples, "x")
    assert "entity_set_agreement" not in plain["figures"] and plain["passed"]


def test_an_entity_models_export_on_rows_without_spans_gates_its_entities(tmp_path):
    from intentvcs.export.exporter import export_bundle

    rows = tmp_path / "held_out.jsonl"
    rows.write_text("".join(json.dumps({"text": text, "labels": labels}) + "\n" for text, labels in [
        ("play the new album by daft punk", ["PlayMusic"]), ("book a table for two tonight", ["BookRestaurant"]),
        ("will it rain tomorrow in paris", ["GetWeather"]), ("rate this book four stars", ["RateBook"]),
        ("find the movie called dune", ["SearchCreativeWork"]), ("tell me a joke about penguins", []),
    ]))
    checkpoint = make_tiny_checkpoint(tmp_path / "checkpoint", entity_types=("city", "date"))
    result = export_bundle(checkpoint, tmp_path / "bundle", parity_data=rows)
    gate = result["quantization"]["gate"]
    assert "slot_f1" not in gate["figures"] and "entity_set_agreement" in gate["figures"]
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["quantization"]["gate"] == gate
    served, _ = serving_graph(manifest, "auto")
    assert served == ("model.int8.onnx" if gate["passed"] else "model.onnx")
