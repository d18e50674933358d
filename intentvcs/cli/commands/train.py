"""``intentvcs train``: fit a model, fit its decision layer, write a checkpoint."""

from __future__ import annotations

import argparse
import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from intentvcs.cli.options import (STDOUT_HELP, add_option, config_from_args, floor_or_fit, given, json_object,
                                   output_file, output_folder, print_summary, share)
from intentvcs.core.dataio import Example
from intentvcs.core.team_formats import FORMATS_HELP
# Torch-free (the settings only): parsing arguments must not import torch.
from intentvcs.training.config import DecisionConfig, TrainConfig

log = logging.getLogger(__name__)
# Labels that name, in other NLU tools, what this service answers with its out-of-scope verdict.
OOS_NAMES = ("out_of_scope", "nlu_fallback")
# Fewer in-scope validation rows than this fit the out-of-scope cut on too few (a warning, not an error).
FEW_VALID_ROWS = 100


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a PU multi-label intent model and write a checkpoint",
                       description="Fine-tune an encoder on labelled rows (JSONL, Rasa YAML or CSV), calibrate "
                                   "it on validation rows and write a checkpoint directory (atomically).")
    p.add_argument("--train", required=True, type=given,
                   help=f"training rows, one observed label each: {FORMATS_HELP}")
    p.add_argument("--valid", required=True, type=given, help="validation rows, same formats (a row without a "
                   "label is out of scope: labels [] in JSONL, an empty intent in a CSV)")
    p.add_argument("--test", type=given,
                   help="optional test rows (gold label sets), same formats, evaluated after training")
    p.add_argument("--out", required=True, type=output_folder, help="checkpoint directory to write (an earlier "
                   "checkpoint there is replaced; any other non-empty folder only with --force)")
    p.add_argument("--force", action="store_true", help="replace --out even if it is not an earlier checkpoint")
    add_train_options(p)
    add_decision_options(p)
    p.add_argument("--relations", type=given, help="relations.json of known label relations, applied at inference")
    p.add_argument("--result", type=output_file, help=f"also write the training result JSON here ({STDOUT_HELP})")
    p.set_defaults(func=run)


def add_train_options(p: argparse.ArgumentParser) -> None:
    """The ``TrainConfig`` fields the command line sets (the others keep their defaults)."""
    for name in ("method", "backbone", "epochs", "batch_size"):
        add_option(p, TrainConfig, name)
    add_option(p, TrainConfig, "learning_rate", "--lr", metavar="LR")
    for name in ("max_length", "seed", "patience", "select_by", "threads", "device"):
        add_option(p, TrainConfig, name)
    add_option(p, TrainConfig, "augment_ratio", "--augment", metavar="RATIO")
    add_option(p, TrainConfig, "augment_mix", type=json_object, metavar="JSON")
    add_option(p, TrainConfig, "augment_resample")
    add_option(p, TrainConfig, "consistency_weight", "--consistency", metavar="WEIGHT")
    add_option(p, TrainConfig, "validate_perturbed")
    add_option(p, TrainConfig, "entity_weight", metavar="WEIGHT")
    add_option(p, TrainConfig, "tagger_learning_rate", "--tagger-lr", metavar="LR")
    add_option(p, TrainConfig, "tags_read_intents")
    add_option(p, TrainConfig, "chain_ratio", "--chains", metavar="RATIO")
    add_option(p, TrainConfig, "boundary_weight", metavar="WEIGHT")
    # The flag spells the setting backwards, so it says what it does itself.
    add_option(p, TrainConfig, "freeze_embeddings", "--train-embeddings", action="store_false",
               help="fine-tune the word-embedding matrix too instead of keeping it frozen")
    add_option(p, TrainConfig, "extend_vocab", metavar="N")
    add_option(p, TrainConfig, "ema_decay", metavar="DECAY")


def add_decision_options(p: argparse.ArgumentParser) -> None:
    """Every ``DecisionConfig`` field (shared with ``intentvcs refit``)."""
    add_option(p, DecisionConfig, "spelling")
    add_option(p, DecisionConfig, "oos_rule")
    add_option(p, DecisionConfig, "oos_retention", type=share, metavar="SHARE")
    add_option(p, DecisionConfig, "oos_part_retention", type=share, metavar="SHARE")
    add_option(p, DecisionConfig, "threshold_rule")
    add_option(p, DecisionConfig, "support_noise", type=float, metavar="NOISE")
    add_option(p, DecisionConfig, "discover_relations", type=float, metavar="RATE")
    add_option(p, DecisionConfig, "entity_floor", type=floor_or_fit, metavar="FLOOR")


def run(args: argparse.Namespace) -> int:
    from intentvcs.core import atomic
    from intentvcs.training.checkpoint import CHECKPOINT_OUTPUT

    # The backbone is read too: an --out that is or holds it (MODELS/tiny into MODELS, an earlier
    # checkpoint's encoder into that checkpoint) would delete or overwrite the weights it starts from.
    inputs = [args.train, args.valid, args.test, args.relations, args.backbone]
    atomic.check_targets((args.result,), inputs=inputs)
    atomic.check_folder_target(args.out, inputs=inputs, outputs=[args.result])
    # A folder this command did not write, refused before torch loads (train_pipeline checks it again).
    atomic.check_replaceable(args.out, CHECKPOINT_OUTPUT, args.force)
    config, decision = config_from_args(TrainConfig, args), config_from_args(DecisionConfig, args)  # options first
    # Given: a value other than the default (a default given says nothing the fit would not do anyway).
    defaults = DecisionConfig()
    settings_given = [f.name for f in dataclasses.fields(DecisionConfig)
                      if getattr(decision, f.name) != getattr(defaults, f.name)]
    check_read_settings(decision, settings_given)
    train, valid, test = read_splits(args.train, args.valid, args.test, decision.oos_rule)
    check_augment_mix(config, train, valid)
    check_entity_settings(config, decision, train, settings_given)
    from intentvcs.training.pipeline import train_pipeline  # torch: seconds to import, after the data's checks

    result = train_pipeline(
        train=train,
        valid=valid,
        test=test,
        config=config,
        decision=decision,
        out=Path(args.out),
        relations_path=args.relations,
        force=args.force,
        result_path=args.result,
    )
    valid_figures = result["metrics"].get("valid") or {}
    if valid_figures.get("slot_f1") == 0.0 and any(ex.spans for ex in valid):
        log.warning("the entity head found no entity of %s: with few training rows it takes more steps than the "
                    "intents; train longer (--epochs) or give it its own rate (--tagger-lr 1e-2, the demo's)",
                    args.valid)
    summary = {k: result[k] for k in ("checkpoint", "method", "best_epoch", "train_seconds")}
    summary.update({f"{split}_{k}": v for split in ("valid", "test") for k, v in
                    (result["metrics"].get(split) or {}).items() if not isinstance(v, (dict, list))})
    print_summary(summary, args.result)
    return 0


def check_read_settings(decision: DecisionConfig, given: Iterable[str]) -> None:
    """Refuse a decision setting ``given`` (field names) that ``decision`` does not read (``train`` and
    ``refit``, before any work): a retention of an OOS rule without that cut, a threshold rule under support
    decoding. Accepted, it was recorded as a setting the decision was fitted with, and changed nothing."""
    rule = decision.oos_rule
    unread = {}
    if rule != "distance":
        unread["oos_retention"] = f"the OOS rule distance alone reads it (its cut), and oos_rule is {rule}"
    if rule not in ("distance", "threshold"):
        unread["oos_part_retention"] = (f"the OOS rules distance and threshold alone read it (their cut for the "
                                        f"parts of a chained request), and oos_rule is {rule}")
    if decision.support_noise and decision.threshold_rule != "global":
        unread["threshold_rule"] = (f"support_noise {decision.support_noise} accepts the most likely support "
                                    "instead of the labels above their thresholds, so no threshold is read")
    for name in given:
        if name in unread:
            raise ValueError(f"{name} {getattr(decision, name)} would change nothing: {unread[name]}; leave "
                             f"{name} out, or choose what reads it")


def check_entity_settings(config: TrainConfig, decision: DecisionConfig, train: Sequence[Example],
                          given: Iterable[str]) -> None:
    """Refuse, before the model loads, an entity setting no entity head reads: the training rows carry no span
    (or ``entity_weight`` is 0), so none is trained, yet ``tagger_learning_rate`` or the ``entity_floor`` given
    (``given``: the decision settings given) was recorded as used and changed nothing."""
    if config.entity_weight and any(ex.spans for ex in train):
        return
    if config.tagger_learning_rate is not None:
        name, value = "tagger_learning_rate", config.tagger_learning_rate
    elif "entity_floor" in given:
        name, value = "entity_floor", decision.entity_floor
    else:
        return
    why = "entity_weight is 0" if not config.entity_weight else "no training row carries an entity span"
    raise ValueError(f"{name} {value} would change nothing: no entity head is trained ({why}); leave {name} out, "
                     "or give rows with spans")


def read_splits(train_path: str, valid_path: str, test_path: str | None, oos_rule: str,
                check_train: Callable[[list], None] = lambda rows: None,
                oos_is_intent: bool = False) -> tuple[list, list, list | None]:
    """The training, validation and (optional) test rows of ``train`` and ``refit``, checked before any model
    loads: held out from each other (``check_held_out``), the training rows by ``check_train`` (``refit``: the
    checkpoint's labels, before anything is judged against them), span types the training rows show (a type
    they never show cannot be learnt, only missed; data without spans trains no entity head, and its spans
    are not read), some validation row of a trained label; then ``warn_about_data``. Rows labelled "oos"
    alone are out-of-scope rows (``out_of_scope_as_such``), unless ``oos_is_intent``: ``refit`` of a
    checkpoint trained before that, whose "oos" is one of its intents (its rows must be its own)."""
    from intentvcs.core.evaluation import check_known_labels
    from intentvcs.core.oos import DistanceRule
    from intentvcs.core.team_formats import check_span_types, out_of_scope_as_such, read_numbered

    check_held_out(train_path, valid_path, test_path)
    def read(path: str) -> list:
        rows = read_numbered(path)
        return rows if oos_is_intent else out_of_scope_as_such(path, rows, oos_rule)

    train = [example for _, example in read(train_path)]
    check_train(train)
    held_out = {path: read(path) for path in (valid_path, test_path) if path}
    types = {span.label for ex in train for span in ex.spans}
    for path, rows in held_out.items() if types else ():
        check_span_types(path, types, rows)
    valid = [example for _, example in held_out[valid_path]]
    test = [example for _, example in held_out[test_path]] if test_path else None
    learnt = {label for ex in train for label in ex.labels}
    in_scope = sum(1 for ex in valid if learnt.intersection(ex.labels))
    if not in_scope:  # refused now, not after the training
        raise ValueError(f"{valid_path}: no row carries a label of the training rows; the validation rows pick "
                         "the kept epoch and fit the decision layer, so they need some")
    if in_scope < 2 and oos_rule == DistanceRule.name:  # likewise: the rule's fit refused it after the training
        raise ValueError(f"{valid_path}: one row carries a label of the training rows; the OOS rule distance "
                         "standardises its two terms on the validation rows, so it needs at least two")
    if test is not None:  # as evaluate refuses them: every test figure would read 0, after the training
        check_known_labels(test_path, test, sorted(learnt))
    warn_about_data(train, valid, train_path, valid_path, oos_rule, test, test_path)
    return train, valid, test


def _repeated(rows: Sequence, of: Sequence) -> int:
    """How many of ``rows`` are rows of ``of`` (the same text and labels)."""
    seen = {(ex.text, tuple(ex.labels)) for ex in of}
    return sum((ex.text, tuple(ex.labels)) in seen for ex in rows)


def check_augment_mix(config: TrainConfig, train: Sequence[Example], valid: Sequence[Example]) -> None:
    """Refuse, before the model loads, an ``augment_mix`` the rows cannot feed: its own weights were checked
    with the settings (``TrainConfig``), with every operator usable; the value operators (slot value
    replacement, unseen entities) draw only from the rows' entity values, and a mix of them alone over rows
    without any draws nothing. The validation rows are drawn from too with ``validate_perturbed``."""
    if config.augment_mix is None or config.augment_ratio <= 0:
        return
    from intentvcs.core.perturb import mix_values
    from intentvcs.core.perturb.registry import check_mix

    for rows in (train, valid) if config.validate_perturbed else (train,):
        check_mix(config.augment_mix, mix_values(rows, config.augment_mix))


def check_held_out(train_path: str, valid_path: str, test_path: str | None = None) -> None:
    """Refuse validation rows that are the training file, and test rows that are either (``train`` and ``refit``)."""
    if Path(valid_path).resolve() == Path(train_path).resolve():
        raise ValueError(f"--valid {valid_path} is the --train file; give held-out rows: the decision layer (its "
                         "temperature, thresholds and out-of-scope cut) is fitted on them, and on the training rows "
                         "it would be fitted to what the model has memorised")
    for option, other in (("--valid", valid_path), ("--train", train_path)):
        if test_path and Path(test_path).resolve() == Path(other).resolve():
            raise ValueError(f"--test {test_path} is the {option} file; the test figures must come from rows the "
                             "model and its decision layer were not fitted on")


def warn_about_data(train: Sequence, valid: Sequence, train_path: str, valid_path: str, oos_rule: str,
                    test: Sequence | None = None, test_path: str | None = None) -> None:
    """Warn, before training, about data that trains but not as a team would expect (one line each)."""
    labels = {label for ex in train for label in ex.labels}
    unlabelled = sum(1 for ex in train if ex.is_out_of_scope)
    if unlabelled and oos_rule != "train":
        log.warning("%s: %d row(s) carry no label: the OOS rule %s does not learn from them (only the spelling "
                    "vocabulary reads their words); --oos-rule train learns them as out-of-scope requests",
                    train_path, unlabelled, oos_rule)
    named = sorted(labels.intersection(OOS_NAMES))
    if named:
        log.warning("%s: %s is trained as an intent of its own; the service answers what it does not know with "
                    "\"out_of_scope\": true, learnt from rows without a label (labels [] in JSONL, an empty intent "
                    "in a CSV)", train_path, " and ".join(repr(name) for name in named))
    if any(ex.spans for ex in train) and not any(ex.spans for ex in valid):
        log.warning("%s: no row carries an entity span, so the entity head is trained but never judged: the kept "
                    "epoch and the int8 gate see no entity (a CSV carries none; give validation rows with spans "
                    "in JSONL or Rasa YAML)", valid_path)
    # Warned of, not refused: a smoke run or a test may validate on training rows on purpose (the same file
    # is refused, check_held_out). Another file of them drove the temperature to its floor without a word.
    repeated = _repeated(valid, train)
    if repeated:
        log.warning("%s: %s of %d row(s) are also training rows (%s): on those the decision layer (temperature, "
                    "thresholds, out-of-scope cut) is fitted to what the model has memorised; give held-out rows",
                    valid_path, "all" if repeated == len(valid) else repeated, len(valid), train_path)
    # The test rows likewise (only the same file was refused): a copy of either set scores what was fitted on it.
    # Out-of-scope rows count where something reads them: the rule train learns them, the rule threshold cuts on
    # the validation ones.
    learnt = [ex for ex in train if ex.labels or oos_rule == "train"]
    fitted_on = [ex for ex in valid if ex.labels or oos_rule in ("train", "threshold")]
    held = ((learnt, train_path, "the model was trained on"),
            (fitted_on, valid_path, "the decision layer was fitted on"))
    for rows, path, fitted in held if test else ():
        repeated = _repeated(test, rows)
        if repeated:
            log.warning("%s: %s of %d row(s) are also rows %s (%s): the test figures count them as unseen; give "
                        "held-out rows", test_path, "all" if repeated == len(test) else repeated, len(test), fitted,
                        path)
    unseen = sorted(labels - {label for ex in valid for label in ex.labels})
    if unseen:
        log.warning("%s: %d intent(s) have no validation row (%s%s): their acceptance thresholds and the kept "
                    "epoch are judged without rows of their own", valid_path, len(unseen), ", ".join(unseen[:5]),
                    ", ..." if len(unseen) > 5 else "")
    in_scope = sum(1 for ex in valid if not ex.is_out_of_scope)
    if in_scope < FEW_VALID_ROWS:
        log.warning("%s: %d in-scope row(s) fit the out-of-scope cut (it keeps a share of them in scope); with "
                    "fewer than %d, in-scope requests near the cut are refused more often than that share says",
                    valid_path, in_scope, FEW_VALID_ROWS)
