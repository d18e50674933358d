"""Tokenise once, then pad each chunk of texts only to its own longest member.

The chunks come from ``intentvcs.core.length_buckets`` (texts of similar token
length together). Only ``tokenizers`` and numpy: this runs in the torch-free serving path.
"""

from __future__ import annotations

import json
import os
import unicodedata
from typing import Sequence

import numpy as np
from tokenizers import Encoding, Tokenizer

from intentvcs.core.entities import Word, words
from intentvcs.core.manifest import BundleError

# The graph inputs this module can feed (BERT-family encoders take all three).
SUPPORTED_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class BundleTokenizer:
    """The bundle's ``tokenizer.json``, checked against the manifest's ``max_length``.

    The export writes truncation (the checkpoint's ``max_length``) and padding
    (the pad token) into tokenizer.json; padding is read here and then turned
    off, because padding the whole request to its longest text is exactly the
    waste bucketing avoids.
    """

    def __init__(self, path: str | os.PathLike, max_length: int):
        try:
            self._tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises bare Exception on parse errors
            raise BundleError(path, f"not a valid tokenizers file: {exc}") from None
        truncation = self._tokenizer.truncation
        if truncation is None or truncation["max_length"] != max_length:
            found = None if truncation is None else truncation["max_length"]
            raise BundleError(path, f"truncation max_length is {found}, the manifest says {max_length}")
        padding = self._tokenizer.padding
        if padding is None:
            raise BundleError(path, "no padding configured, so the pad token id is unknown")
        self.pad_id: int = padding["pad_id"]
        self._tokenizer.no_padding()
        # The same tokenizer, truncating nothing: where the words a truncated reading cuts end in the text.
        self._whole = Tokenizer.from_str(self._tokenizer.to_str())
        self._whole.no_truncation()
        processor = self._tokenizer.post_processor
        # A text of at most this many characters in decomposed form (NFD) cannot be cut, for a BERT tokenizer
        # (its normaliser, WordPiece): every word piece covers at least one of them (an [UNK] a whole word),
        # and the special tokens take the rest. Checked over every code point for the default backbone's.
        # Byte-level BPE or a Unigram model after NFKC can make more pieces than characters ("🙂" is 4
        # bytes): for those, every text may be cut.
        self._uncut_chars = max_length - (processor.num_special_tokens_to_add(False) if processor else 0)
        spec = json.loads(self._tokenizer.to_str())
        self._pieces_bounded = (spec.get("model") or {}).get("type") == "WordPiece" and \
            (spec.get("normalizer") or {}).get("type") == "BertNormalizer"

    def encode(self, texts: Sequence[str]) -> list[Encoding]:
        """Token encodings (special tokens added, truncated, unpadded), in input order."""
        return self._tokenizer.encode_batch(list(texts))

    def may_be_cut(self, text: str) -> bool:
        """Whether ``max_length`` may cut ``text`` (False: it surely does not; no tokenisation needed)."""
        return (not self._pieces_bounded or len(text) > self._uncut_chars  # NFD never shortens a text
                or len(unicodedata.normalize("NFD", text)) > self._uncut_chars)

    def words(self, texts: Sequence[str]) -> list[list[Word]]:
        """Each text's words (``intentvcs.core.entities.words``) over the whole text, as if ``max_length`` cut
        nothing: the extent of a word the graph read only the first pieces of (``entities.whole_words``)."""
        return [words(encoding.word_ids, encoding.offsets) for encoding in self._whole.encode_batch(list(texts))]


def pad_chunk(encodings: Sequence[Encoding], input_names: Sequence[str], pad_id: int) -> dict[str, np.ndarray]:
    """The graph feed for one chunk: int64 ``[B, T]`` arrays, ``T`` = longest in the chunk.

    ``input_names`` are the graph's inputs, a subset of ``SUPPORTED_INPUTS``.
    """
    width = max(len(e.ids) for e in encodings)
    ids = np.full((len(encodings), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    types = np.zeros((len(encodings), width), dtype=np.int64)
    for row, encoding in enumerate(encodings):
        n = len(encoding.ids)
        ids[row, :n] = encoding.ids
        mask[row, :n] = 1
        types[row, :n] = encoding.type_ids
    available = dict(zip(SUPPORTED_INPUTS, (ids, mask, types)))
    return {name: available[name] for name in input_names}
