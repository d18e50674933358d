"""Growing the backbone's vocabulary with the words of the training data that it cannot read.

MiniLM-L6 reads BERT's English uncased word pieces. A word none of them can
spell (a Chinese character outside the 161 it knows, an emoji) becomes
``[UNK]``, and every such word looks the same to the model: on CrossWOZ-VCS
73% of the character occurrences do (``benchmarks/vocab_coverage.py``). With
``TrainConfig.extend_vocab = N`` every such word that occurs at least N times
in the training rows becomes a token of its own, with a fresh embedding row
(transformers' mean-and-covariance initialisation) that training learns; the
grown tokenizer and encoder are saved in the checkpoint, so export and serving
read texts the same way without knowing about it.

The words join the WordPiece vocabulary itself (``tokenizer.json``'s model and
``vocab.txt``), not the tokenizer's "added tokens": WordPiece then treats them
as it treats its own words, and the ``tokenizers`` library that serving uses
splits texts exactly as training's transformers tokenizer does (added tokens
are matched before normalisation and by other rules in the two libraries).
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections import Counter
from pathlib import Path
from typing import Iterable

import torch
from transformers.utils import logging as hf_logging

from intentvcs.training.model import load_tokenizer

log = logging.getLogger(__name__)


def unknown_words(tokenizer, texts: Iterable[str]) -> Counter:
    """How often each word of ``texts`` (as the tokenizer normalises and splits them) is read as ``[UNK]``."""
    backend = tokenizer.backend_tokenizer
    unknown = tokenizer.unk_token
    found: Counter = Counter()
    for text in texts:
        normalised = backend.normalizer.normalize_str(text) if backend.normalizer else text
        words = backend.pre_tokenizer.pre_tokenize_str(normalised) if backend.pre_tokenizer else [(normalised, None)]
        for word, _ in words:
            if [token.value for token in backend.model.tokenize(word)] == [unknown]:
                found[word] += 1
    return found


def extend_vocabulary(tokenizer, encoder, texts: Iterable[str], min_count: int) -> tuple[object, list[str]]:
    """``tokenizer`` grown by each word of ``texts`` read as ``[UNK]`` at least ``min_count`` times, and those
    words (most frequent first); ``encoder`` gains one embedding row per word."""
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    counts = unknown_words(tokenizer, texts)
    words = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
    log.info("vocabulary: %d of %d unknown words added (%d of %d unknown occurrences now read)", len(words),
             len(counts), sum(counts[w] for w in words), sum(counts.values()))
    if not words:
        return tokenizer, []
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save_pretrained(folder)
        spec_path = Path(folder) / "tokenizer.json"
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
        vocab = spec["model"]["vocab"]
        # Added tokens outside the vocabulary (a backbone's own) follow it: the tokenizers library numbers
        # them after it when it loads, so the new words move them up by len(words) ids.
        moved = {token["content"]: token["id"] for token in spec.get("added_tokens", [])
                 if token["content"] not in vocab}
        first = len(vocab)
        vocab.update({word: first + k for k, word in enumerate(words)})
        spec_path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
        vocab_file = Path(folder) / "vocab.txt"
        if vocab_file.is_file():  # the slow tokenizer's copy, kept in step with the fast one
            with vocab_file.open("a", encoding="utf-8") as handle:
                handle.write("".join(word + "\n" for word in words))
        grown = load_tokenizer(folder)
    previous = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its notice on how new rows are initialised is said here, not at run time
    try:
        encoder.resize_token_embeddings(len(grown))
    finally:
        hf_logging.set_verbosity(previous)
    if moved:  # their rows go with them; the new words take the freshly initialised ones
        _move_rows(encoder.get_input_embeddings().weight, len(tokenizer),
                   {old: grown.convert_tokens_to_ids(token) for token, old in moved.items()},
                   grown.convert_tokens_to_ids(words))
    return grown, words


@torch.no_grad()
def _move_rows(weight: torch.Tensor, read: int, moves: dict[int, int], targets: list[int]) -> None:
    """In the resized embedding ``weight``: each row ``old`` of ``moves`` to its new id, and the rows no token
    read before (``read`` on: the fresh ones) to the new words' ids ``targets``."""
    fresh = weight[read:read + len(targets)].clone()
    rows = {new: weight[old].clone() for old, new in moves.items()}
    for new, row in rows.items():
        weight[new] = row
    weight[targets] = fresh
