"""The model's sample of its training rows for the upgrade audit (intentvcs.core.references):
drawn by training, shipped by the export, read by the audit when the caller sends no training rows."""

from __future__ import annotations

import json

import pytest

from intentvcs.core.dataio import Example, Span
from intentvcs.core.manifest import BundleError, read
from intentvcs.core.references import REFERENCES_FILE, reference_sample
from tests.helpers.bundle import make_tiny_bundle


def _rows():
    rows = [Example(f"play song {i}", ("PlayMusic",), f"p{i}", (Span(5, 9, "thing"),)) for i in range(50)]
    rows += [Example(f"book table {i}", ("BookRestaurant",)) for i in range(5)]
    rows += [Example(f"both {i}", ("PlayMusic", "BookRestaurant")) for i in range(3)]
    rows += [Example("what is love", ()), Example("nonsense", ("oos",))]
    return rows


def test_the_sample_caps_each_intent_keeps_order_and_skips_out_of_scope():
    rows = _rows()
    sample = reference_sample(rows, cap=10, seed=0)
    assert sample == reference_sample(rows, cap=10, seed=0)  # seeded
    assert sample != reference_sample(rows, cap=10, seed=1)
    positions = [rows.index(ex) for ex in sample]
    assert positions == sorted(positions)
    music = [ex for ex in sample if "PlayMusic" in ex.labels]
    booking = [ex for ex in sample if "BookRestaurant" in ex.labels]
    # Every booking row fits under the cap; music is capped, give or take the shared rows.
    assert len(booking) == 8 and 10 <= len(music) <= 13
    assert all(ex.labels and "oos" not in ex.labels for ex in sample)
    assert sample[0].spans == (Span(5, 9, "thing"),) and sample[0].id == "p" + sample[0].text.split()[-1]


def test_the_export_ships_the_sample_unless_told_not_to(tmp_path):
    from intentvcs.export.exporter import export_bundle
    from intentvcs.service.engine import Engine

    rows = [{"text": f"play a song {i}", "labels": ["PlayMusic"]} for i in range(7)]
    bundle = make_tiny_bundle(tmp_path / "with", references=rows)
    manifest = read(bundle / "manifest.json")
    entry = manifest["references"]
    assert entry == {"rows": 7, "intents": 1, "rows_per_intent": 200,
                     "bytes": (bundle / REFERENCES_FILE).stat().st_size}
    assert REFERENCES_FILE in manifest["files"]
    assert [ex.text for ex in Engine(bundle, provider="cpu").reference_rows()] == [r["text"] for r in rows]
    bare = export_bundle(bundle.parent / "checkpoint", tmp_path / "bare", quantize=False, references=False)
    assert bare["references"] is None and not (tmp_path / "bare" / REFERENCES_FILE).exists()
    assert Engine(tmp_path / "bare", provider="cpu").reference_rows() is None
    # A checkpoint written before the sample existed exports as before.
    old = make_tiny_bundle(tmp_path / "old")
    assert read(old / "manifest.json")["references"] is None


def test_an_edited_sample_or_manifest_entry_is_refused(tmp_path):
    from intentvcs.core import manifest as bundle_manifest
    from intentvcs.service.engine import Engine

    bundle = make_tiny_bundle(tmp_path / "m", references=[{"text": "play a song", "labels": ["PlayMusic"]}])
    # Checked when the bundle is opened, so a bundle whose sample is edited or left out (a bento that did not
    # ship it) never starts serving, instead of failing every /audit without training rows.
    original = (bundle / REFERENCES_FILE).read_bytes()
    with (bundle / REFERENCES_FILE).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"text": "sneaked in", "labels": ["PlayMusic"]}) + "\n")
    with pytest.raises(BundleError, match=REFERENCES_FILE):
        Engine(bundle, provider="cpu")
    (bundle / REFERENCES_FILE).unlink()
    with pytest.raises(BundleError, match=f"{REFERENCES_FILE}: missing from the bundle"):
        Engine(bundle, provider="cpu")
    (bundle / REFERENCES_FILE).write_bytes(original)
    assert [ex.text for ex in Engine(bundle, provider="cpu").reference_rows()] == ["play a song"]
    body = json.loads((bundle / "manifest.json").read_text())
    body["references"] = None
    with pytest.raises(BundleError, match="references"):
        bundle_manifest.validate(bundle_manifest.seal(body))
