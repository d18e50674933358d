"""The settings of a training job: ``TrainConfig`` (the model and how it is
trained) and ``DecisionConfig`` (what is fitted on the trained model: OOS
rule, thresholds, spelling normaliser; ``intentvcs refit`` changes these alone).

Each setting is written once, here: its default, its help text
(``metadata["help"]``) and, for a closed vocabulary, its ``choices``, taken
from the module that owns the vocabulary. The command line derives its
options from these fields (``intentvcs.cli.options``). The comments say why a
default is what it is; the figures behind them are in ``benchmarks/results``.

Torch-free, so that parsing the command line never loads torch.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from intentvcs.core import oos, support, thresholds


# The training objectives: name -> (its loss function in intentvcs.training.losses,
# how the decision layer reads the logits). The table lives here, torch-free,
# so that a typo in --method is refused before torch loads; losses.py builds
# its METHODS from it. pu is the method this project exists for; the others
# are the DialogVCS baselines (docs/RESEARCH.md section 1.5).
METHOD_TABLE = {
    "bce": ("bce_loss", "sigmoid"),
    "negative_sampling": ("negative_sampling_loss", "sigmoid"),
    "ls_focal": ("ls_focal_loss", "sigmoid"),
    "mlce": ("mlce_loss", "sigmoid"),
    "upper_bound": ("bce_loss", "sigmoid"),  # BCE trained on the gold label sets
    "pu": ("observed_softmax_loss", "softmax"),
}
METHOD_NAMES = tuple(METHOD_TABLE)

# What picks the kept epoch (and counts the epochs without improvement):
# loss, the validation loss; joint, the validation rows' overall accuracy
# (top intent right and the entity set exactly gold), which falls back to the
# loss where no entity head is trained or the validation rows carry no spans.
SELECTION_RULES = ("loss", "joint")
# Where training runs; ``intentvcs.training.trainer.training_device`` resolves ``auto``.
DEVICES = ("auto", "cpu", "cuda")


def setting(default: Any, help: str, choices: tuple[str, ...] | None = None) -> Any:
    """A dataclass field with its command-line help text and, for a vocabulary, its choices."""
    return field(default=default, metadata={"help": help, **({"choices": choices} if choices else {})})


MIN_LENGTH = 3  # tokens: [CLS], one word piece, [SEP]


def _check_finite(config: Any) -> None:
    """Refuse a float setting that is NaN or infinite: every comparison with NaN is false, so the range
    checks let it through and it would be recorded, and half applied, as given."""
    for spec in fields(config):
        value = getattr(config, spec.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{spec.name} must be a finite number, got {value}")


def _check_integers(config: Any) -> None:
    """Refuse a fraction or a bool in a setting declared an integer: ``range`` and slicing refuse them only after
    the backbone has loaded and the rows are encoded (epochs 1.5, batch_size 2.5), and ``True`` would read as 1."""
    for spec in fields(config):
        value = getattr(config, spec.name)
        if spec.type in ("int", "int | None") and value is not None \
                and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
            raise ValueError(f"{spec.name} must be an integer, got {value!r}")


# torch's seeds (``torch.manual_seed``, ``torch.Generator.manual_seed``) are unsigned 64-bit integers.
SEED_LIMIT = 2**64


def _check_choices(config: Any) -> None:
    for spec in fields(config):
        choices = spec.metadata.get("choices")
        if choices and getattr(config, spec.name) not in choices:
            raise ValueError(f"unknown {spec.name.replace('_', ' ')} {getattr(config, spec.name)!r}; "
                             f"choose from {sorted(choices)}")


def _check_augment_mix(mix: Any) -> None:
    """Refuse an ``augment_mix`` the perturbation registry would refuse when it draws the copies (after the
    backbone has loaded): a weight that is no number, an unknown operator or family, a negative weight, no
    positive one. The registry's own check, with every operator usable: which value operators the rows can
    feed (they need entity values) only the rows tell, and training checks that again."""
    if not isinstance(mix, dict):
        raise ValueError(f"augment_mix: expected an object of operator or family names to weights, got {mix!r}")
    # Imported here: the operators' modules are a fifth of a second, and only a mix needs them.
    from intentvcs.core.dataio import Example, Span
    from intentvcs.core.perturb import EntityValues
    from intentvcs.core.perturb.registry import check_mix

    check_mix(mix, EntityValues.build([Example("value", (), spans=(Span(0, 5, "type"),))]))  # every operator usable


# What runs recorded before a setting existed did: copies were drawn once, no
# entity head was trained, and the validation loss picked the epoch.
LEGACY_SETTINGS = {"augment_resample": False, "entity_weight": 0.0, "chain_ratio": 0.0, "select_by": "loss",
                   "tags_read_intents": False, "boundary_weight": 0.0}


@dataclass
class TrainConfig:
    backbone: str | None = setting(None, "local Hugging Face model directory (default: the packaged "
                                         "all-MiniLM-L6-v2)")
    # pu: the method this project exists for; the others are the DialogVCS baselines.
    method: str = setting("pu", "training objective (intentvcs.training.losses)", METHOD_NAMES)
    epochs: int = setting(4, "training epochs; the epoch best on the validation rows is kept")
    batch_size: int = setting(32, "training rows per optimiser step")
    learning_rate: float = setting(1e-4, "AdamW peak learning rate (linear warm-up, then linear decay)")
    weight_decay: float = setting(0.01, "AdamW weight decay")
    warmup_ratio: float = setting(0.1, "share of the steps over which the learning rate warms up")
    max_length: int = setting(64, "tokens kept per text")
    dropout: float = setting(0.1, "dropout before the classification head")
    seed: int = setting(0, "seeds the head's initialisation, the batch order and the perturbed copies")
    patience: int = setting(1, "epochs without validation improvement before stopping")
    # joint: the validation loss is dominated by intents, which converge first; slot
    # filling keeps improving after it has turned (SNIPS seed 0: the loss kept epoch 3
    # at validation slot F1 93.5, slot F1 reached 95.0 at epoch 5). Without spans the
    # two rules are the same.
    select_by: str = setting("joint", "what picks the kept epoch and stops early: loss (validation loss) or "
                                      "joint (validation overall accuracy: top intent right and the entity set "
                                      "exactly gold, a tie going to the lower loss; the loss where no entity "
                                      "head is trained)", SELECTION_RULES)
    # The word-embedding matrix is half of MiniLM's weights; freezing it costs
    # no accuracy on intent data and makes every CPU step markedly cheaper.
    freeze_embeddings: bool = setting(True, "keep the word-embedding matrix frozen")
    negative_theta: float = setting(0.1, "negative_sampling: theta x L sampled negatives per row")
    focal_beta: float = setting(0.2, "ls_focal: label-smoothing beta")
    threads: int | None = setting(None, "torch intra-op threads (default: all cores)")
    # Where the steps run, not what they compute (a GPU's arithmetic differs in the last bits):
    # the checkpoint also records the device the setting resolved to (``trained_on``).
    device: str = setting("auto", "where training runs: auto (a CUDA GPU when torch sees one, else the CPU), "
                                  "cpu or cuda", DEVICES)
    # Off: copies multiply the training time, and plain training is the
    # baseline that robust training is measured against.
    augment_ratio: float = setting(0.0, "robust training: add RATIO x N perturbed copies of the training "
                                        "rows (intentvcs.core.perturb)")
    augment_mix: dict[str, float] | None = setting(
        None, 'weights of the copies\' operators or families ("nature", "laug", "raddle"), e.g. '
              '{"nature": 2, "raddle": 1} (default: uniform over all operators)')
    # Fresh copies every epoch: a fixed set is learnt by heart within a few
    # epochs and stops teaching robustness (README "Robustness"). Runs recorded
    # before the setting existed drew their copies once (LEGACY_SETTINGS).
    augment_resample: bool = setting(True, "draw fresh perturbed copies every epoch; off reuses the first "
                                           "epoch's")
    # Off: on CLINC150 it did not lower the robustness drop and lengthened
    # training (benchmarks/results/robustness_recipes.md).
    consistency_weight: float = setting(0.0, "weight of a KL term pulling each perturbed copy's prediction "
                                             "towards its clean source's (needs augmentation; 0: off)")
    # Off: it changes which epoch is kept, and the recorded SNIPS and ATIS
    # commands, which meet their targets without it, must still reproduce;
    # CLINC150's main-table recipe turns it on
    # (benchmarks/results/robustness_validate_perturbed.md).
    validate_perturbed: bool = setting(False, "validate on the validation rows plus one perturbed copy of each, "
                                              "so that early stopping and the kept epoch reward robustness, not "
                                              "clean loss alone (needs augmentation)")
    labels: list[str] | None = setting(None, "fixed label order (default: sorted from the training data)")
    # Equal weight, as JointBERT (Chen et al. 2019) sums its two losses. Rows
    # without spans train the intent head only, so data without any trains no
    # entity head at all and is trained exactly as before entities existed.
    entity_weight: float = setting(1.0, "weight of the entity (BIO tagging) loss beside the intent loss, for "
                                        "training rows that carry spans; 0 trains no entity head")
    # Off until measured as a default: benchmarks/mix_bench.py compares it with serving-time segmentation alone.
    chain_ratio: float = setting(0.0, "add RATIO x N synthetic chained rows (2 or 3 training rows of distinct "
                                      "intents joined as users chain requests, with or without a connector), "
                                      "which carry all their intents (intentvcs.training.mix_builder)")
    # Off: on SNIPS it gained nothing measurable (benchmarks/results/entities.md, variant "intents").
    tags_read_intents: bool = setting(False, "the entity head also reads the sentence's intent distribution (a "
                                             "learnt per-intent prior over the tags, intentvcs.training.model."
                                             "Tagger); needs an entity head")
    # The DialogVCS paper's alpha_pos = 0.99999 (alpha_neg = 1 - alpha_pos); at that weighting the loss's
    # optimum puts every label above 0.5 (benchmarks/baseline_optima.py), so the reading is a setting.
    focal_alpha: float = setting(0.99999, "ls_focal: class weight of the positive part of each label's loss; "
                                          "the negative part gets 1 - alpha")
    # Off: the default backbone reads English, where nearly every word of the data sets has word pieces.
    extend_vocab: int = setting(0, "add every word of the training rows that the tokenizer reads as [UNK] and "
                                   "that occurs at least N times as a token of its own, with a trained embedding "
                                   "row (intentvcs.training.vocabulary; needs trained embeddings); 0: off")
    # Off: it changes which weights are kept, and the recorded commands must still reproduce; the SNIPS
    # entity recipe measures it (benchmarks/results/entities.md, variant "averaged").
    ema_decay: float = setting(0.0, "judge and keep an exponential moving average of the trained weights, folding "
                                    "each step's weights in with weight 1 - DECAY (intentvcs.training.averaging; "
                                    "0: off, the raw weights)")
    # Equal weight, as for entities. Only chained rows show where a request begins, so
    # without chains no boundary head is trained.
    boundary_weight: float = setting(1.0, "weight of the request-boundary loss (a head that learns at which word "
                                          "a chained row's next request begins, so requests chained without a "
                                          "connector are answered part by part; intentvcs.core.boundaries), "
                                          "trained with --chains; 0 trains no boundary head")
    # Off (the encoder's rate): the entity head is freshly initialised, and on a small data set the few
    # steps at the encoder's rate leave it half learnt; `intentvcs demo` sets it (its module says why).
    tagger_learning_rate: float | None = setting(None, "peak learning rate of the entity head, which starts "
                                                       "from random weights; unset, the encoder's")

    def __post_init__(self) -> None:
        _check_choices(self)
        _check_finite(self)
        _check_integers(self)
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        # The two special tokens and a word; the backbone's own limit is checked when it loads (Trainer).
        if self.max_length < MIN_LENGTH:
            raise ValueError(f"max_length must be >= {MIN_LENGTH} (the two special tokens and one word), "
                             f"got {self.max_length}")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.weight_decay < 0 or not 0.0 <= self.warmup_ratio <= 1.0 or not 0.0 <= self.dropout < 1.0:
            raise ValueError("weight_decay must be >= 0, warmup_ratio in [0, 1] and dropout in [0, 1)")
        if self.patience < 0:
            raise ValueError(f"patience must be >= 0, got {self.patience}")
        # torch refuses a seed outside the range only when training sets up, and random.Random takes a negative
        # seed's absolute value: seed -3 would shuffle the batches exactly as seed 3 does.
        if not 0 <= self.seed < SEED_LIMIT:
            raise ValueError(f"seed must lie in [0, 2**64) (the seeds torch takes), got {self.seed}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1 (or unset: every core), got {self.threads}")
        if self.augment_ratio < 0:
            raise ValueError(f"augment_ratio must be >= 0, got {self.augment_ratio}")
        # Every range first: the rewrites below record a setting that does nothing as off, and would let a value
        # out of range through unseen (a negative boundary_weight without chains read 0.0).
        if self.chain_ratio < 0:
            raise ValueError("chain_ratio must be >= 0")
        if self.extend_vocab < 0:
            raise ValueError("extend_vocab must be >= 0")
        if not 0.0 < self.focal_alpha < 1.0:
            raise ValueError("focal_alpha must be in (0, 1)")
        # At beta 1 every target is smoothed to 1/L (nothing tells the labels apart), above it the gold labels'
        # targets fall below the others', below 0 the other labels' fall below zero.
        if not 0.0 <= self.focal_beta < 1.0:
            raise ValueError(f"focal_beta must lie in [0, 1), got {self.focal_beta}")
        # A share of the labels: at 0 or below the loss still draws one negative per row, above 1 no more than
        # all of them (intentvcs.training.losses.negative_sampling_loss).
        if not 0.0 < self.negative_theta <= 1.0:
            raise ValueError(f"negative_theta must lie in (0, 1], got {self.negative_theta}")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must lie in [0, 1) (0: off), got {self.ema_decay}")
        if self.boundary_weight < 0:
            raise ValueError("boundary_weight must be >= 0")
        if self.entity_weight < 0:
            raise ValueError("entity_weight must be >= 0")
        if self.tagger_learning_rate is not None and self.tagger_learning_rate <= 0:
            raise ValueError(f"tagger_learning_rate must be > 0 (or unset: the learning rate), "
                             f"got {self.tagger_learning_rate}")
        if self.consistency_weight < 0:
            raise ValueError("consistency_weight must be >= 0")
        if self.augment_mix is not None:
            _check_augment_mix(self.augment_mix)
        if self.extend_vocab and self.freeze_embeddings:
            raise ValueError("extend_vocab needs trained embeddings (freeze_embeddings off): the new rows must "
                             "be learnt")
        if self.consistency_weight > 0 and self.augment_ratio <= 0:
            raise ValueError("consistency_weight needs augment_ratio > 0: it compares rows with their perturbed copies")
        if self.augment_mix is not None and self.augment_ratio <= 0:
            raise ValueError("augment_mix needs augment_ratio > 0: it weighs the operators of the perturbed copies")
        if self.validate_perturbed and self.augment_ratio <= 0:
            raise ValueError("validate_perturbed needs augment_ratio > 0: it validates on the training mix's copies")
        if not self.augment_ratio:
            # Nothing to draw: recorded as off, so runs without augmentation
            # compare equal whatever the resampling default was when they ran.
            self.augment_resample = False
        if not self.chain_ratio:
            # No chains, no boundaries to learn: recorded as off, likewise.
            self.boundary_weight = 0.0
        if not self.entity_weight:
            # No entity head, no tagger to read the intents: recorded as off, likewise.
            self.tags_read_intents = False

    @classmethod
    def from_stored(cls, stored: dict) -> "TrainConfig":
        """The configuration a checkpoint recorded (``checkpoint.json``'s ``train_config``).

        Keys this version does not know are dropped; settings added after the
        checkpoint was written take the value that run had, not today's default.
        """
        known = {f.name for f in fields(cls)}
        return cls(**{**LEGACY_SETTINGS, **{k: v for k, v in stored.items() if k in known}})

    def resolved_backbone(self) -> str:
        """Where the backbone's weights are: the ``backbone`` given, or the default's package."""
        from intentvcs.training.model import default_backbone  # imports torch

        return self.backbone or default_backbone()

    def backbone_name(self) -> str:
        """How the checkpoint names its backbone: as given, or the default's model name."""
        from intentvcs.training.model import DEFAULT_BACKBONE_NAME  # imports torch

        return self.backbone or DEFAULT_BACKBONE_NAME

    def to_dict(self) -> dict:
        """What ``checkpoint.json`` records as ``train_config``."""
        return asdict(self)


@dataclass(frozen=True)
class DecisionConfig:
    # The distance rule needs no out-of-scope rows and ranks them best on
    # CLINC150 and the default data (benchmarks/results/oos.md).
    oos_rule: str = setting(
        "distance",
        "how out-of-scope is decided, stored in the checkpoint and served as is: distance needs no OOS rows, its cut "
        "keeps the retention share of the in-scope validation rows; threshold cuts the calibrated confidence where "
        "validation accuracy with OOS as a class is best when the validation data has OOS rows, else keeps "
        f"{oos.RETENTION:.0%} of in-scope rows; train makes OOS rows a class of their own (the training data needs "
        f"some); none for data without out-of-scope traffic. With fewer than {oos.MIN_CUT_ROWS} in-scope validation "
        "rows the distance and threshold cuts keep all of them, with a warning",
        tuple(oos.RULES))
    oos_retention: float = setting(
        oos.DISTANCE_RETENTION,
        "distance rule's operating point: the least share of in-scope validation rows kept in scope (lower rejects more "
        "out-of-scope queries and more in-scope ones)")
    oos_part_retention: float = setting(
        oos.PART_RETENTION,
        "the stricter cut for the parts of a chained request the OOS rule rejects as a whole (threshold and "
        "distance rules): the share of in-scope validation rows it keeps in scope; a part above it is out of scope")
    # global: PU validation rows show one label each, and tuning per-label
    # cuts on them would destroy the multi-label recall (intentvcs.core.thresholds).
    threshold_rule: str = setting(
        "global",
        f"how the per-label acceptance thresholds are chosen: global accepts at confidence "
        f"{thresholds.DEFAULT_THRESHOLD}; per_label_f1 tunes each label's on the validation rows, which must then "
        "carry full gold label sets; observed_quantile lowers a label's to the confidence that keeps "
        f"{1 - thresholds.OBSERVED_QUANTILE:.0%} of the validation rows it is written on accepted (PU data, for labels "
        "written less often on utterances that carry other labels too)",
        thresholds.RULES)
    # Off: thresholds on the PU-rescaled confidence are what every model of the
    # project was measured with; support decoding wins on CrossWOZ-VCS and
    # SNIPS-VCS, loses on MultiWOZ-VCS and ATIS-VCS (benchmarks/results/vcs_support.md).
    support_noise: float = setting(
        0.0,
        "accept, instead of the labels above their thresholds, the most likely support of the written-label "
        "distribution (a softmax model's, e.g. PU): the labels that share its mass about evenly, each label outside "
        f"priced at this probability (smaller keeps more; {support.DEFAULT_NOISE} was chosen on CrossWOZ-VCS; 0: "
        "off; intentvcs.core.support); labels that are duplicates (--relations, --discover-relations) are decided "
        "together, as names of one intent")
    # On: it undoes most keyboard typos and barely changes clean texts
    # (benchmarks/results/spelling_effect.md, spelling_cost.md).
    spelling: bool = setting(
        True,
        "build the spelling normaliser from the training texts: at inference a word in neither the training "
        "vocabulary nor an English word list is replaced by the closest training word, so keyboard typos read as "
        "what was meant (stored in the checkpoint and the bundle)")

    # Off: it changes answers wherever labels co-occur, and data without
    # versions or splits has nothing to discover; the DialogVCS benchmark turns
    # it on (benchmarks/results/vcs.md).
    discover_relations: float = setting(
        0.0,
        "close answers under relations read off the validation rows: label a implies b when b is accepted on at "
        "least this share of the rows observed as a (duplicates both ways, subsets one way; merged with "
        "--relations; under --support-noise a duplicate must also keep a constant probability ratio; 0: off; "
        "intentvcs.core.relation_discovery)")

    # Fitted: on the embedded default, ATIS and SNIPS the fitted floor raised test slot F1 and kept overall
    # accuracy (docs/RESULTS.md, "The entity floor").
    entity_floor: float | str = setting(
        "fit",
        "the confidence under which a decoded entity is not answered: fit picks, of 0, 0.1, ... 0.9, the one with "
        "the best slot F1 on the validation rows that leaves as many of them with their entity set exact, give or "
        "take one row (intentvcs.core.entity_floor); a number in [0, 1) sets it (0 answers every entity the head "
        "decodes)")

    def __post_init__(self) -> None:
        _check_choices(self)
        _check_finite(self)
        if self.entity_floor != "fit" and (isinstance(self.entity_floor, (str, bool))
                                           or not 0.0 <= self.entity_floor < 1.0):
            raise ValueError(f"entity_floor must be 'fit' or a number in [0, 1), got {self.entity_floor!r}")
        for name in ("oos_retention", "oos_part_retention"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ValueError(f"{name} must lie strictly between 0 and 1, got {getattr(self, name)}")
        if not 0.0 <= self.support_noise < 1.0:
            raise ValueError(f"support_noise must lie in [0, 1) (0: off), got {self.support_noise}")
        if not 0.0 <= self.discover_relations <= 1.0:
            raise ValueError(f"discover_relations must lie in [0, 1] (0: off), got {self.discover_relations}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "DecisionConfig":
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"decision config: unknown key(s) {unknown}")
        return cls(**d)
