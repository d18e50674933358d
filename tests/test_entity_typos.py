"""benchmarks.entity_typos: one typo in each entity value, the spans moved with it."""

from __future__ import annotations

from benchmarks.entity_typos import misspelt
from intentvcs.core.dataio import Example, Span


def test_each_value_gets_one_typo_and_its_span_follows():
    row = Example("wake me up tomorrow at seven please", ("set_alarm",),
                  spans=(Span(11, 19, "date"), Span(23, 28, "time")))
    typo = misspelt(row, seed=0)
    assert typo.labels == row.labels and [s.label for s in typo.spans] == ["date", "time"]
    for before, after in zip(row.spans, typo.spans):
        old, new = row.text[before.start:before.end], typo.text[after.start:after.end]
        assert old != new and abs(len(old) - len(new)) <= 1  # one keyboard typo: same length or one off
    assert typo.text.endswith(" please") and typo.text.startswith("wake me up ")
    assert misspelt(row, seed=0) == typo  # seeded per text


def test_a_row_whose_values_have_no_word_to_misspell_is_left_out():
    assert misspelt(Example("alarm at 7", ("set_alarm",), spans=(Span(9, 10, "time"),)), seed=0) is None
