"""Fine-tune an encoder with a multi-label head, pick the best epoch on
validation, and keep what the decision layer needs to be fitted afterwards.

``Trainer.fit`` reads top to bottom: set up (seeds, labels, model, encoded
rows, optimiser), then per epoch train on length-bucketed batches (with
robust training, on the rows plus perturbed copies, drawn afresh each epoch)
and measure validation (the loss, and for an entity head span F1 and overall
accuracy), keeping the best weights and stopping early. With ``ema_decay``
the weights judged and kept are the moving average of the trained ones.
Steps run on ``TrainConfig.device`` (a GPU when there is one); the trained
model is handed back on the CPU, where the decision layer, the checkpoint and
the export read it. Its settings are ``TrainConfig`` (``intentvcs.training.config``).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import random
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import get_linear_schedule_with_warmup

from intentvcs.core.boundaries import segment_starts
from intentvcs.core.dataio import Example
from intentvcs.core.entities import IGNORE, aligned, span_set, tag_vocabulary
from intentvcs.core.evaluation import knows_some
from intentvcs.core.outputs import BOUNDARY_OUTPUT, TAG_OUTPUT
from intentvcs.core.scoring import overall_accuracy, span_metrics
from intentvcs.training.averaging import WeightAverage
from intentvcs.training.batching import (
    Encoded,
    collate,
    concatenate,
    encode,
    grouped_training_batches,
    training_batches,
)
from intentvcs.training.checkpoint import max_length_problem
from intentvcs.training.config import TrainConfig
from intentvcs.training.losses import METHODS, boundary_loss, consistency_loss, negative_sampling_loss, tag_loss
from intentvcs.training.model import IntentModel, load_tokenizer
from intentvcs.training.vocabulary import extend_vocabulary

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    model: IntentModel
    tokenizer: object
    labels: list[str]
    best_epoch: int
    history: list[dict]
    seconds: float
    tags: list[str]  # the entity head's BIO tags; [] without one
    entities: dict | None  # what the entity head was trained on (rows, spans, how many align with words)
    device: str  # where the steps ran: "cpu", or "cuda (<GPU name>)"


def training_device(name: str) -> torch.device:
    """The torch device for ``TrainConfig.device``: ``auto`` takes CUDA when torch sees a GPU; ``cuda``
    without one is refused (training 10-50x slower on the CPU than asked would be a silent surprise)."""
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError(f"device 'cuda' requested but torch {torch.__version__} sees no CUDA GPU")
    return torch.device("cuda")


def device_name(device: torch.device) -> str:
    """How a checkpoint records where it was trained: ``cpu`` or ``cuda (<GPU name>)``."""
    return "cpu" if device.type == "cpu" else f"cuda ({torch.cuda.get_device_name(device)})"


def targets_matrix(examples: Sequence[Example], labels: Sequence[str]) -> np.ndarray:
    """[N, L] float32 0/1 matrix; labels outside ``labels`` are ignored."""
    index = {label: i for i, label in enumerate(labels)}
    out = np.zeros((len(examples), len(labels)), dtype=np.float32)
    for row, ex in enumerate(examples):
        for label in ex.labels:
            if label in index:
                out[row, index[label]] = 1.0
    return out


@dataclass
class _Run:
    """What ``Trainer.fit``'s set-up hands to its epochs."""

    model: IntentModel
    tokenizer: object
    labels: list[str]
    tags: list[str]  # the entity head's tag vocabulary; [] when there is none
    train: list[Example]  # labelled training rows
    clean: Encoded  # ``train`` encoded
    rows: Encoded  # what the current epoch trains on: ``clean``, plus perturbed copies when augmenting
    valid: Encoded  # the validation rows (plus copies with ``validate_perturbed``); empty: no validation
    # The rows ``valid`` encodes, in its order: the validation rows, then with ``validate_perturbed`` one
    # perturbed copy of each (their spans, which the copies carry re-mapped, score the entity head).
    valid_examples: list[Example]
    params: list[torch.nn.Parameter]  # the trained ones
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    rng: random.Random  # batch order
    generator: torch.Generator  # negative sampling of the training steps (validation draws its own)
    average: WeightAverage | None  # the moving average of ``params`` that is judged and kept; None: the raw weights
    clean_valid: int = 0  # how many of ``valid_examples`` are validation rows (the rest: their copies)
    # With a consistency term, every epoch's rows and batches, drawn up front to size the schedule (``_plan``);
    # [] otherwise (each epoch draws its own).
    planned: list[tuple[Encoded, list[list[int]]] | None] = field(default_factory=list)


@dataclass
class _Best:
    """The best epoch on validation so far (``score``: higher is better, compared as a tuple), its weights,
    and the epochs since."""

    score: tuple[float, ...] = (-math.inf,)
    epoch: int = 0
    state: dict | None = None
    stale: int = 0


class Trainer:
    def __init__(self, config: TrainConfig):
        self.config = config
        self.method = METHODS[config.method]
        self.device = training_device(config.device)
        # Tag -> index of the entity head's output, set by ``fit``'s set-up (None: no entity head).
        self.tag_index: dict[str, int] | None = None
        # Whether a boundary head is trained (chained rows in training and a boundary weight), set likewise.
        self.boundaries = False

    def fit(self, train: Sequence[Example], valid: Sequence[Example]) -> TrainResult:
        """Set up, then train epoch after epoch, keeping the weights of the best one on ``valid``."""
        start = time.time()
        run = self._set_up(train, valid)
        best, history = _Best(), []
        for epoch in range(1, self.config.epochs + 1):
            started = time.time()
            train_loss = self._train_epoch(run, epoch)
            with self._judged_weights(run):
                history.append(self._validate(run, epoch, train_loss, started))
                go_on = self._keep_best(run, best, history[-1])
            if not go_on:
                break
        run.model.load_state_dict(best.state)
        run.model.eval()
        run.model.to("cpu")
        return TrainResult(run.model, run.tokenizer, run.labels, best.epoch, history, time.time() - start,
                           run.tags, _entity_summary(run), device_name(self.device))

    # -- set-up ---------------------------------------------------------------------------------------------
    # Seeding comes first: the head's initialisation then draws from torch's seeded generator.

    def _set_up(self, train: Sequence[Example], valid: Sequence[Example]) -> _Run:
        cfg = self.config
        rng, generator = self._seed()
        train, valid, labels = self._labelled(train, valid)
        # The rows as given: ``extend_vocab`` counts their words, never the chains' repeats of them.
        given = train
        train = self._with_chains(train)
        tags = self._tags(train)
        # boundary_weight is 0 without chains (TrainConfig); chained rows record where their requests begin.
        self.boundaries = cfg.boundary_weight > 0 and any(segment_starts(ex.meta) for ex in train)
        model, tokenizer = self._model(labels, len(tags), given)
        self.tag_index = {tag: i for i, tag in enumerate(tags)} if tags else None
        clean = self._encode(tokenizer, train, labels)
        rows = self._training_rows(train, clean, labels, tokenizer, epoch=1)
        valid_enc, valid_examples = self._validation_rows(valid, labels, tokenizer)
        planned = self._plan(train, clean, rows, labels, tokenizer, rng) if cfg.consistency_weight > 0 else []
        params = [p for p in model.parameters() if p.requires_grad]
        # Grouped batches (a consistency term) are counted from the plan.
        steps = sum(len(batches) for _, batches in planned) if planned else None
        optimizer, scheduler = self._optimiser(model, params, len(rows), steps)
        average = WeightAverage(params, cfg.ema_decay) if cfg.ema_decay else None
        return _Run(model, tokenizer, labels, tags, train, clean, rows, valid_enc, valid_examples, params,
                    optimizer, scheduler, rng, generator, average, len(valid), planned)

    def _seed(self) -> tuple[random.Random, torch.Generator]:
        """Seed torch (head initialisation, dropout); return the batch-order and negative-sampling generators."""
        cfg = self.config
        torch.manual_seed(cfg.seed)
        rng = random.Random(cfg.seed)
        # Negative sampling draws on the device its logits live on.
        generator = torch.Generator(device=self.device).manual_seed(cfg.seed)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        return rng, generator

    def _validation_generator(self) -> torch.Generator:
        """Negative sampling's generator for one pass of the validation loss, seeded afresh for each: drawn
        from the training one, the validation rows' count moved every later training draw (another --valid,
        other training negatives for the same --seed), and each epoch's validation loss read other negatives.
        Seeded apart from the training one (``seed`` hashed with "valid"), on the same device."""
        seed = random.Random(f"{self.config.seed}:valid").getrandbits(63)
        return torch.Generator(device=self.device).manual_seed(seed)

    def _labelled(self, train: Sequence[Example],
                  valid: Sequence[Example]) -> tuple[list[Example], list[Example], list[str]]:
        """The rows with labels, and the label order (the configured one, or sorted from ``train``); labels that
        would train nothing, or that only the decision fit after the training would refuse, are refused."""
        # Out-of-scope rows (no label) carry no positive to learn from.
        train = [ex for ex in train if ex.labels]
        valid = [ex for ex in valid if ex.labels]
        if not train:
            raise ValueError("training data has no labelled rows")
        if not valid:  # they pick the kept epoch and fit the decision layer
            raise ValueError("validation data has no labelled rows; the validation rows pick the kept epoch and "
                             "fit the decision layer, so they need rows with labels the model learns")
        labels = list(self.config.labels) if self.config.labels else sorted({l for ex in train for l in ex.labels})
        # Refused here, before the model loads, not by the decision fit after the whole training.
        repeated = sorted(label for label, count in Counter(labels).items() if count > 1)
        if repeated:
            raise ValueError(f"the fixed label list repeats {repeated[:10]}: each label is one output of the model")
        unseen = sorted({l for ex in train for l in ex.labels} - set(labels))
        if unseen:
            raise ValueError(f"training labels missing from the fixed label list: {unseen[:10]}")
        if self.method.activation == "softmax" and len(labels) < 2:
            # A softmax over one output is 1 whatever the encoder says: the loss is 0, nothing is learnt.
            raise ValueError(f"method {self.config.method} reads a softmax over the labels, and the training rows "
                             f"have one ({labels[0]!r}): it would learn nothing; give rows of a second intent, "
                             "out-of-scope rows with --oos-rule train (a class of their own), or a sigmoid method "
                             "(--method bce)")
        if not knows_some(valid, labels):  # likewise
            given = sorted({l for ex in valid for l in ex.labels})
            raise ValueError(f"no validation row carries a label the model learns ({len(valid)} rows, labels "
                             f"{', '.join(given[:10])}{' ...' if len(given) > 10 else ''}); the validation rows "
                             "pick the kept epoch and fit the decision layer, so they need some")
        return train, valid, labels

    def _with_chains(self, train: list[Example]) -> list[Example]:
        """``train`` plus ``chain_ratio`` x N synthetic chained rows built from it (drawn once, seeded)."""
        if self.config.chain_ratio <= 0:
            return train
        from intentvcs.training.mix_builder import chained_rows

        chains = chained_rows(train, round(self.config.chain_ratio * len(train)), self.config.seed)
        log.info("chained requests: %d -> %d training rows", len(train), len(train) + len(chains))
        return train + chains

    def _tags(self, train: list[Example]) -> list[str]:
        """The entity head's tags: BIO over the span types of ``train``; none without spans or entity weight."""
        types = {span.label for ex in train for span in ex.spans}
        return tag_vocabulary(types) if types and self.config.entity_weight > 0 else []

    def _model(self, labels: list[str], num_tags: int, train: list[Example]) -> tuple[IntentModel, object]:
        """The backbone with a fresh head of ``len(labels)`` outputs (and a tagger of ``num_tags``), and its
        tokenizer (grown with ``extend_vocab`` by the unknown words of ``train``: the training rows as given,
        without the synthetic chains, which repeat their rows' words a number of times the draw decides)."""
        cfg = self.config
        backbone = cfg.resolved_backbone()
        if not Path(backbone).is_dir():  # transformers would read it as a Hub repository id and say so
            raise FileNotFoundError(f"{backbone}: no such folder (the backbone: a local Hugging Face model directory)")
        tokenizer = load_tokenizer(backbone)
        model = IntentModel.from_backbone(backbone, len(labels), dropout=cfg.dropout, num_tags=num_tags,
                                          tags_read_intents=cfg.tags_read_intents, boundaries=self.boundaries)
        if cfg.tags_read_intents and not num_tags:  # entity_weight 0 records it off (TrainConfig)
            log.warning("tags_read_intents has no effect: no entity head is trained (the training rows carry no "
                        "spans), so no tagger reads the intents")
        problem = max_length_problem(cfg.max_length, model.encoder.config)
        if problem is not None:
            raise ValueError(f"max_length: {problem}")
        if cfg.extend_vocab:
            tokenizer, _ = extend_vocabulary(tokenizer, model.encoder, [ex.text for ex in train], cfg.extend_vocab)
        if cfg.freeze_embeddings:
            model.encoder.get_input_embeddings().weight.requires_grad_(False)
        log.info("training on %s", device_name(self.device))
        return model.to(self.device), tokenizer

    def _encode(self, tokenizer, rows: Sequence[Example], labels: list[str]) -> Encoded:
        """``rows`` tokenised with their intent targets, for an entity head their tag targets (rows
        without spans take no part in the tagging loss) and for a boundary head their boundary targets."""
        encoded = encode(tokenizer, [ex.text for ex in rows], self.config.max_length, targets_matrix(rows, labels),
                         [ex.spans or None for ex in rows], self.tag_index,
                         [segment_starts(ex.meta) for ex in rows] if self.boundaries else None)
        for targets, ex in zip(encoded.boundary_targets or (), rows):
            if "augmented_from" in ex.meta:
                # A perturbed copy carries its source's segments, at offsets the perturbation may have
                # moved: it takes no part in the boundary loss.
                targets[:] = [IGNORE] * len(targets)
        return encoded

    def _validation_rows(self, valid: list[Example], labels: list[str],
                         tokenizer) -> tuple[Encoded, list[Example]]:
        """``valid`` encoded, plus one perturbed copy of each row with ``validate_perturbed`` (drawn once);
        and the rows encoded, in the same order (the copies, with their re-mapped spans, after ``valid``)."""
        cfg = self.config
        encoded = self._encode(tokenizer, valid, labels)
        if cfg.validate_perturbed and valid:
            encoded, copies = self._with_copies(valid, encoded, labels, tokenizer, 1.0, f"{cfg.seed}:valid",
                                                "validation")
            return encoded, list(valid) + copies
        return encoded, list(valid)

    def _plan(self, train: list[Example], clean: Encoded, first: Encoded, labels: list[str], tokenizer,
              rng: random.Random) -> list[tuple[Encoded, list[list[int]]]]:
        """Every epoch's rows (``first`` for epoch 1) and grouped batches, drawn now, for a consistency term.

        ``grouped_training_batches`` packs whole groups (a row and its copies), so an epoch has more batches
        than ceil(rows / batch_size), and how many depends on the group sizes (a row a perturbation cannot
        touch gets no copy, another an extra one; resampling redraws them) and on the shuffle. No cheap
        exact bound exists, so the batches themselves are drawn here: with ``rng`` in epoch order, the
        only draws it serves, they are the very batches the epochs would have drawn, and the copies are
        seeded per epoch, so only the schedule's length changes. The cost: every epoch's encoded rows
        are held from the start (one set shared by all epochs without resampling).
        """
        cfg = self.config
        planned = []
        for epoch in range(1, cfg.epochs + 1):
            if epoch == 1 or not cfg.augment_resample:
                rows = first
            else:
                rows = self._training_rows(train, clean, labels, tokenizer, epoch)
            # A copy and its source share a batch, where the consistency term compares them.
            planned.append((rows, grouped_training_batches(rows.sources, [len(x) for x in rows.input_ids],
                                                           cfg.batch_size, rng)))
        return planned

    def _optimiser(self, model: IntentModel, params: list[torch.nn.Parameter], rows: int,
                   steps: int | None = None) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
        """AdamW with a linear warm-up and decay over all the epochs' steps: ``steps`` where the batches
        were counted (``_plan``), else ceil(``rows`` / batch_size) per epoch, exactly what
        ``training_batches`` cuts (pools of a whole number of batches). The entity head's parameters
        peak at ``tagger_learning_rate`` where it is set, the others at ``learning_rate``."""
        cfg = self.config
        tagger = ({id(p) for p in model.tagger.parameters()}
                  if model.tagger is not None and cfg.tagger_learning_rate is not None else set())
        groups = [{"params": [p for p in params if id(p) not in tagger]}]
        if tagger:
            groups.append({"params": [p for p in params if id(p) in tagger], "lr": cfg.tagger_learning_rate})
        optimizer = torch.optim.AdamW(groups, lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
        total_steps = steps if steps is not None else math.ceil(rows / cfg.batch_size) * cfg.epochs
        scheduler = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup_ratio * total_steps), total_steps)
        return optimizer, scheduler

    # -- one epoch ------------------------------------------------------------------------------------------

    def _judged_weights(self, run: _Run) -> contextlib.AbstractContextManager:
        """Around an epoch's validation and keeping: the model holds the weights judged (the moving average,
        with ``ema_decay``), and its trained ones again after."""
        return run.average.applied() if run.average else contextlib.nullcontext()

    def _train_epoch(self, run: _Run, epoch: int) -> float:
        """Train one epoch (on fresh perturbed copies when resampling); return the mean training loss."""
        cfg = self.config
        run.model.train()
        if run.planned:
            # Dropped once used: the epochs still to come are all that stays held.
            run.rows, batches = run.planned[epoch - 1]
            run.planned[epoch - 1] = None
            return self._train_steps(run, epoch, batches)
        if epoch > 1 and cfg.augment_ratio > 0 and cfg.augment_resample:
            run.rows = self._training_rows(run.train, run.clean, run.labels, run.tokenizer, epoch)
        lengths = [len(x) for x in run.rows.input_ids]
        return self._train_steps(run, epoch, training_batches(len(run.rows), lengths, cfg.batch_size, run.rng))

    def _validate(self, run: _Run, epoch: int, train_loss: float, started: float) -> dict:
        """Measure the validation loss (and the entity figures); return the epoch's record (also logged)."""
        valid_loss = self._evaluate_loss(run.model, run.valid, run.tokenizer.pad_token_id, self._validation_generator())
        record = {"epoch": epoch, "train_loss": train_loss, "valid_loss": valid_loss,
                  "seconds": round(time.time() - started, 1)}
        if run.tags and any(ex.spans for ex in run.valid_examples):
            record.update(self._valid_entity_figures(run))
        log.info("epoch %d: train loss %.4f, valid loss %.4f%s, %.0f s", epoch, train_loss, valid_loss,
                 f", valid slot F1 {record['valid_slot_f1']:.4f}, overall {record['valid_overall']:.4f}"
                 if "valid_slot_f1" in record else "", record["seconds"])
        return record

    def _valid_entity_figures(self, run: _Run) -> dict:
        """The validation rows read whole by a model with an entity head: span F1 and the overall accuracy
        (top intent a gold one and the entity set exactly gold; a row without spans has no entities), the
        figure ``select_by="joint"`` keeps the best epoch by.

        With ``validate_perturbed`` both are measured, as the loss is, on the rows plus their perturbed
        copies (each copy scored on its own spans), so the kept epoch rewards robustness under every
        selection rule; the clean rows' own figures are recorded beside them (``..._clean``)."""
        from intentvcs.training.predict import infer

        examples = run.valid_examples
        outputs = infer(run.model, run.tokenizer, [ex.text for ex in examples], self.config.max_length,
                        tags=run.tags)
        gold = [span_set(ex.spans) for ex in examples]
        found = [span_set(row) for row in outputs.entities]
        top_right = [run.labels[k] in ex.labels for ex, k in zip(examples, outputs.logits.argmax(axis=1))]
        figures = {"valid_slot_f1": span_metrics(gold, found)["slot_f1"],
                   "valid_overall": overall_accuracy(gold, found, top_right)}
        n = run.clean_valid
        if len(examples) > n:
            figures.update({"valid_slot_f1_clean": span_metrics(gold[:n], found[:n])["slot_f1"],
                            "valid_overall_clean": overall_accuracy(gold[:n], found[:n], top_right[:n])})
        return figures

    def _train_steps(self, run: _Run, epoch: int, batches: list[list[int]]) -> float:
        """One pass over ``run.rows`` in ``batches`` (length-bucketed); return the mean training loss."""
        cfg = self.config
        running = 0.0
        # disable=None: a bar on a terminal, quiet in logs and CI.
        bar = tqdm(batches, desc=f"epoch {epoch}/{cfg.epochs}", unit="batch", leave=False, disable=None)
        for step, idx in enumerate(bar, start=1):
            batch = collate(run.rows, idx, run.tokenizer.pad_token_id, self.device)
            loss, logits = self._batch_loss(run.model, batch, run.generator)
            if cfg.consistency_weight > 0:
                loss = loss + cfg.consistency_weight * self._consistency(logits, idx, run.rows.sources)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(run.params, 1.0)
            run.optimizer.step()
            run.scheduler.step()
            run.optimizer.zero_grad(set_to_none=True)
            if run.average:
                run.average.update()
            running += loss.item()
            if step % 20 == 0:
                bar.set_postfix(loss=f"{running / step:.4f}")
        return running / max(len(batches), 1)

    # -- keep the best --------------------------------------------------------------------------------------

    def _keep_best(self, run: _Run, best: _Best, record: dict) -> bool:
        """Keep the weights of an epoch that improved validation; return False to stop early, after more
        than ``patience`` epochs without improvement. A loss that is no longer finite stops training with
        ``ValueError``: NaN never improves on anything, so no epoch would be kept."""
        if not math.isfinite(record["train_loss"]) or not math.isfinite(record["valid_loss"]):
            raise ValueError(f"training diverged at epoch {record['epoch']} (loss {record['train_loss']}, "
                             f"validation loss {record['valid_loss']}); lower the learning rate (--lr)")
        joint = self.config.select_by == "joint" and "valid_overall" in record
        # A tie on overall accuracy goes to the lower loss: counted as no improvement, a plateau (or the 0.0
        # of an entity head's first epochs) stopped a run whose loss still fell and kept its earliest epoch.
        score = (record["valid_overall"], -record["valid_loss"]) if joint else (-record["valid_loss"],)
        if score > best.score:
            best.score, best.epoch, best.stale = score, record["epoch"], 0
            best.state = copy.deepcopy(run.model.state_dict())
            return True
        best.stale += 1
        if best.stale > self.config.patience:
            log.info("early stop: no validation improvement for %d epoch(s)", best.stale)
            return False
        return True

    # -- pieces ---------------------------------------------------------------------------------------------

    def _batch_loss(self, model: IntentModel, batch: dict[str, torch.Tensor],
                    generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """The joint loss of one batch (intents, plus the weighted tagging and boundary losses), and the intent
        logits."""
        outputs = model.named_outputs(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        logits = outputs["logits"]
        loss = self._loss(logits, batch["targets"], generator)
        if TAG_OUTPUT in outputs:
            loss = loss + self.config.entity_weight * tag_loss(outputs[TAG_OUTPUT], batch["tag_targets"])
        if BOUNDARY_OUTPUT in outputs:
            loss = loss + self.config.boundary_weight * boundary_loss(outputs[BOUNDARY_OUTPUT],
                                                                      batch["boundary_targets"])
        return loss, logits

    def _loss(self, logits: torch.Tensor, targets: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        cfg = self.config
        if cfg.method == "negative_sampling":
            return negative_sampling_loss(logits, targets, theta=cfg.negative_theta, generator=generator)
        if cfg.method == "ls_focal":
            return self.method.loss(logits, targets, beta=cfg.focal_beta, alpha_pos=cfg.focal_alpha,
                                    alpha_neg=1.0 - cfg.focal_alpha)
        return self.method.loss(logits, targets)

    def _consistency(self, logits: torch.Tensor, idx: list[int], sources: list[int]) -> torch.Tensor:
        """The consistency term of one batch: each copy in it against its source (grouped batches hold both)."""
        position = {row: k for k, row in enumerate(idx)}
        pairs = [(k, position[sources[row]]) for k, row in enumerate(idx) if sources[row] >= 0]
        if not pairs:
            return logits.new_zeros(())
        copies, clean = zip(*pairs)
        return consistency_loss(logits[list(copies)], logits[list(clean)], self.method.activation)

    def _training_rows(self, train: list[Example], clean: Encoded, labels: list[str], tokenizer,
                       epoch: int) -> Encoded:
        """The rows of one epoch: ``train`` (already encoded as ``clean``) plus,
        when augmenting, its perturbed copies, encoded here.

        Epoch 1's copies use the plain seed, so a run without resampling is
        the same as before the option existed.
        """
        cfg = self.config
        if cfg.augment_ratio <= 0:
            return replace(clean, sources=[-1] * len(clean))
        seed = cfg.seed if epoch == 1 else f"{cfg.seed}:epoch{epoch}"
        return self._with_copies(train, clean, labels, tokenizer, cfg.augment_ratio, seed,
                                 f"training data for epoch {epoch}")[0]

    def _with_copies(self, rows: list[Example], clean: Encoded, labels: list[str], tokenizer, ratio: float,
                     seed: int | str, what: str) -> tuple[Encoded, list[Example]]:
        """``rows`` (already encoded as ``clean``) followed by ``ratio`` perturbed copies per row, drawn
        with the training mix; ``sources`` point each copy at its row (-1 for the rows themselves). And the
        copies, in that order: every operator edits through ``perturb.text``, which re-maps the spans."""
        from intentvcs.core.perturb import mix_values, perturbed_copies

        cfg = self.config
        copies = perturbed_copies(rows, ratio, cfg.augment_mix, seed=seed, values=mix_values(rows, cfg.augment_mix))
        log.info("augmented %s: %d -> %d rows", what, len(rows), len(rows) + len(copies))
        extra = self._encode(tokenizer, [copy for _, copy in copies], labels)
        return (concatenate(clean, extra, [-1] * len(clean) + [source for source, _ in copies]),
                [copy for _, copy in copies])

    @torch.inference_mode()
    def _evaluate_loss(self, model: IntentModel, encoded: Encoded, pad_id: int, generator) -> float:
        model.eval()
        total, count = 0.0, 0
        order = sorted(range(len(encoded)), key=lambda i: len(encoded.input_ids[i]))
        for start in range(0, len(order), 128):
            idx = order[start : start + 128]
            batch = collate(encoded, idx, pad_id, self.device)
            total += self._batch_loss(model, batch, generator)[0].item() * len(idx)
            count += len(idx)
        return total / max(count, 1)



def _entity_summary(run: _Run) -> dict | None:
    """What the entity head learnt from: rows with spans, spans, and how many of them the word tags reproduce
    (a span that starts or ends inside a word cannot be)."""
    if not run.tags:
        return None
    annotated = [(ex, words) for ex, words in zip(run.train, run.clean.words) if ex.spans]
    spans = sum(len(ex.spans) for ex, _ in annotated)
    return {"rows": len(run.train), "rows_with_spans": len(annotated), "spans": spans,
            "spans_aligned": sum(aligned(ex.spans, words) for ex, words in annotated)}
