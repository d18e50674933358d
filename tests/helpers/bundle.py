"""Checkpoints and bundles from the tiny random backbone, for tests.

``make_tiny_checkpoint`` trains nothing: it writes a valid checkpoint
(``intentvcs.training.checkpoint.write_checkpoint``) around the tiny BERT with a random
head and a simple decision, and with ``entity_types`` a random entity tagger
(BIO over words, ``intentvcs.core.entities``); ``make_tiny_bundle`` exports one
with the real export code. Both take about a second.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Sequence

DEFAULT_LABELS = ("PlayMusic", "BookRestaurant", "GetWeather", "RateBook", "SearchCreativeWork")
MAX_LENGTH = 24
# A random head on the random encoder gives nearly uniform confidences;
# scaled by 4, top confidences on the built-in parity sample span ~0.47-0.85,
# so the default decision both accepts and rejects (OOS) some texts.
HEAD_SCALE = 4.0
# A random tagger: its weights scaled by TAG_SCALE and "O" favoured by
# OUTSIDE_BIAS, so that some words of a typical utterance are tagged and most
# are not. What it tags is arbitrary but fixed by the seed (tests check the
# form of entities, never which words).
TAG_SCALE = 4.0
OUTSIDE_BIAS = 5.0


def make_tiny_checkpoint(directory: str | Path, labels: Sequence[str] = DEFAULT_LABELS, seed: int = 0,
                         max_length: int = MAX_LENGTH, oos_threshold: float = 0.4,
                         relations: dict | None = None, spelling_texts: Sequence[str] | None = None,
                         entity_types: Sequence[str] | None = None, references: Sequence[dict] = ()) -> Path:
    """Write a checkpoint with a random head and a softmax/threshold decision to ``directory``.

    The decision accepts labels with confidence >= 0.3 and calls a text out of
    scope when its top confidence is below ``1 - oos_threshold``; ``relations``
    (a relations file object) is applied as closure when given; a spelling
    normaliser built from ``spelling_texts`` is included when given;
    ``entity_types`` (e.g. ``("city", "date")``) adds a random entity tagger
    over those types, recorded in the meta as training records it; ``references`` (canonical rows)
    become the checkpoint's sample of training rows for the audit (none by default).
    """
    import torch

    from intentvcs.core.dataio import parse_row
    from intentvcs.core.decision import Decision
    from intentvcs.core.entities import OUTSIDE, tag_vocabulary
    from intentvcs.core.entities import entity_types as types_of
    from intentvcs.core.oos import ThresholdRule
    from intentvcs.core.relations import LabelRelations
    from intentvcs.core.spelling import Spelling
    from tests.helpers.tiny import make_tiny_backbone
    from intentvcs.training.checkpoint import write_checkpoint
    from intentvcs.training.model import IntentModel, load_tokenizer

    with tempfile.TemporaryDirectory() as scratch:
        backbone = make_tiny_backbone(Path(scratch) / "backbone", seed=seed)
        torch.manual_seed(seed)
        tags = tag_vocabulary(entity_types) if entity_types else []
        model = IntentModel.from_backbone(backbone, len(labels), num_tags=len(tags)).eval()
        with torch.no_grad():
            model.head.weight.mul_(HEAD_SCALE)
            if tags:
                model.tagger.weight.mul_(TAG_SCALE)
                model.tagger.bias[tags.index(OUTSIDE)] += OUTSIDE_BIAS
        decision = Decision(
            tuple(labels), activation="softmax", thresholds=[0.3] * len(labels),
            oos=ThresholdRule(oos_threshold),
            relations=None if relations is None else LabelRelations.from_dict(relations),
        )
        return write_checkpoint(directory, model, load_tokenizer(backbone), {
            "labels": list(labels),
            "backbone": "tiny-random-bert",
            "max_length": max_length,
            "method": "pu",
            "train_config": {"note": "untrained test checkpoint"},
            "decision": decision.to_dict(),
            "relations": relations,
            "data_fingerprint": "sha256:" + "0" * 64,
            "metrics": {"valid": {"note": "untrained"}},
            # As training.pipeline._entities_summary writes it.
            "entities": {"tags": tags, "types": types_of(tags), "weight": 1.0} if tags else None,
        }, spelling=None if spelling_texts is None else Spelling.from_texts(spelling_texts),
            references=[parse_row(row) for row in references])


def make_tiny_bundle(directory: str | Path, quantize: bool = False, **checkpoint_options) -> Path:
    """Write ``directory/checkpoint`` (``make_tiny_checkpoint``) and export it to ``directory/bundle``."""
    from intentvcs.export.exporter import export_bundle

    directory = Path(directory)
    checkpoint = make_tiny_checkpoint(directory / "checkpoint", **checkpoint_options)
    return Path(export_bundle(checkpoint, directory / "bundle", quantize=quantize)["bundle"])


def export_over(source: Path, served: Path) -> None:
    """What ``intentvcs export --out served`` does to a served folder (``intentvcs.core.atomic``): the new
    folder renamed over the old one, the old one removed."""
    import os
    import shutil

    staged, old = served.with_name(served.name + ".new"), served.with_name(served.name + ".old")
    shutil.copytree(source, staged)
    os.replace(served, old)
    os.replace(staged, served)
    shutil.rmtree(old)
