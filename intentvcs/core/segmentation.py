"""Chained requests: split an utterance where a user joins requests, decide each part, answer them all.

Users chain requests ("play some jazz and turn off the lights", "remind me to
call mom and also whats the weather"). A model trained on single-intent rows
(the usual case) gives such a text one intent, or calls it out of scope, since
it has never seen two requests in one row. So every text is cut at its
connectors (``CONNECTOR``: "and", "and then", "and also", "also", "then",
"after that", "plus", a comma or semicolon) and, for a model trained with
chains, where its boundary head reads a further request beginning without one
("play some jazz turn off the lights", ``intentvcs.core.boundaries``); the parts
are read by the same model in one more graph run, and the parts decide:

1. A part is *confident* when the decision layer accepts an intent in it on
   its own merits (above its threshold; no top-intent fallback) with a
   confidence within ``REQUEST_MARGIN`` of the whole text's top one, *out of
   scope* when the OOS rule says so and it has ``OOS_PART_MIN_WORDS`` words
   (a request of its own, not a fragment such as "from denver"), else a
   *fragment*. Parts of a text the OOS rule rejects as a whole are judged
   against its stricter part cut (``OOSRule.part_threshold``): a piece of an
   out-of-scope request often lands just inside some intent ("check the
   nanny cam and send the feed to my phone"). A part whose every word lies
   inside an entity the model finds in it, or joins two ("and", a comma), is
   a fragment too: it names something ("washington dc and boston", "delta
   and united airlines", "apples and grapes"), it asks nothing; so is a short
   part acting on a pronoun ("... and play it"): it continues the request
   before it.
2. Adjacent parts are grouped: a fragment joins its neighbour, and a confident
   part that shares an accepted intent with the group before it continues
   that group ("flights to boston and from boston to denver" is one request).
3. With two or more groups that say something (two requests, or one request
   and an out-of-scope part), the answer is the union of the groups' intents,
   each group naming its character span; otherwise the whole text's answer
   stands, as one part spanning it.

``benchmarks/mix_bench.py`` measured the rule on MixATIS / MixSNIPS (chained)
and on single-intent SNIPS, ATIS and CLINC150 (nothing to split), docs/RESULTS.md.
Pure numpy: the engine and ``intentvcs evaluate`` both call ``decide_segmented``, so the
figures are the service's.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from intentvcs.core.decision import Decision, DecisionResult
from intentvcs.core.entities import Entity
from intentvcs.core.outputs import GraphOutputs

# Blanks: white space (any Unicode space: "jazz\u00a0and") and the invisible spaces that text pasted from chat
# apps and phones carries beside it, which the tokenizer drops: a zero-width space (U+200B), a word joiner
# (U+2060), a BOM / zero-width no-break space (U+FEFF). "jazz and\u200b turn off" cuts as "jazz and turn off"
# does (it was one part). Not the zero-width (non-)joiners U+200C / U+200D, which join within a word or emoji.
_INVISIBLE = "\u200b\u2060\ufeff"
_BLANK = rf"[\s{_INVISIBLE}]"
_NOT_BLANK = rf"[^\s{_INVISIBLE}]"
# The characters of _BLANK, for str.strip (every Unicode space lies below U+3001).
_BLANK_CHARS = "".join(chr(code) for code in range(0x3001) if chr(code).isspace()) + _INVISIBLE
# Compatibility forms of a character (full-width letters typed with an East Asian input method,
# "ｐｌａｙ\u3000ｊａｚｚ\u3000ａｎｄ ...", mathematical letters pasted from styled text) are read as their plain
# character, one for one: connectors and the other words below are found in ``_plain(text)`` at the offsets of
# ``text``. The spelling normaliser has the model read such text in plain letters (NFKC, ``spelling._folded``);
# here "ａｎｄ" and "，" cut nothing, and a chained request in full-width letters was answered with one intent.
# A word: a run of what is not blank ("rock\u200broll" is two words, as "rock roll" is).
_WORD = re.compile(rf"{_NOT_BLANK}+")
# Where a user joins two requests: a run of conjunctions (whole words, between blanks or marks) and commas or
# semicolons, all of it taken out of both parts ("jazz, and, turn off", "jazz and and turn off", "jazz,,, turn").
# Not the comma of a number ("the top 1,000 songs", "1,5 hours"), which cut "play the top 1" | "000 songs".
# The words of "after that" may have any blanks between them ("after  that" was no connector).
# "plus" joins only where a request follows it: it ends names ("disney plus", "apple tv plus"), and one before
# another connector or at the end of the text is that word ("play the mandalorian on disney plus and turn off
# the lights" was answered for "play the mandalorian on disney").
_PLUS = (rf"plus(?={_BLANK}*[^\s{_INVISIBLE},;])"
         rf"(?!{_BLANK}*(?:and|then|also|after{_BLANK}+that|plus)(?![^\s{_INVISIBLE},;]))")


def _joiner(plus: str) -> str:
    """The pattern of one joiner (above), with ``plus`` the pattern its "plus" takes."""
    return (rf"(?:;|(?<!\d),|,(?!\d)|(?<![^\s{_INVISIBLE},;])"
            rf"(?:and{_BLANK}+then|and{_BLANK}+also|after{_BLANK}+that|and|then|also|{plus})(?![^\s{_INVISIBLE},;]))")


_JOINER = _joiner(_PLUS)
# Starts where the blanks before it start: a search tried from every blank of a long run of them, each
# scanning the rest of the run, was quadratic (1,000 spaces: 25 ms a text, 6.6 s for a /predict of 256).
CONNECTOR = re.compile(rf"(?<!{_BLANK}){_BLANK}*{_JOINER}(?:{_BLANK}*{_JOINER})*{_BLANK}*", re.IGNORECASE)
# The words of a connector, each read alone: a part made of entities and these only names things ("apples and
# grapes", "the beatles plus queen": here "plus" joins names whatever follows it).
_JOINER_WORD = re.compile(rf"^{_joiner('plus')}+$", re.IGNORECASE)
# Stretches that hold one value, so that no connector inside them cuts (``_held``), protected as the entities
# the model finds are: the model tags each end of a range as an entity of its own ("between boston and denver",
# "between 4 and 5 pm": ATIS has some 400 such rows, cut "flights between 4" | "5 pm"), and may not tag a number
# or a quotation at all ("transfer two hundred" | "fifty dollars", 'remind me to "call mom' | 'pay the rent"').
# Double quotation marks only: a single one is as often an apostrophe ("rock ’n’ roll", "what’s").
_QUOTED = re.compile(r'"[^"]*"|“[^”]*”|„[^“”]*[“”]|«[^»]*»|「[^」]*」|『[^』]*』')
_RANGE = re.compile(r"\bbetween\b", re.IGNORECASE)  # its first bare "and" closes the range
_SCALE = re.compile(r"\b(?:hundred|thousand|million|billion)$", re.IGNORECASE)  # "two hundred" and ...
_NUMBER = re.compile(r"(?:\d|(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
                     r"|(?:thir|four|fif|six|seven|eigh|nine)teen|(?:twen|thir|for|fif|six|seven|eigh|nine)ty)\b)",
                     re.IGNORECASE)  # ... "fifty", "20"
_FRACTION = re.compile(rf"a{_BLANK}+(?:half|quarter)\b", re.IGNORECASE)  # "3 and a half", "7 weeks and a half"
# A word without the marks before and after it (None: a word of marks only, "-", "&", which joins names).
_WORD_CORE = re.compile(r"\w(?:\S*\w)?")
# A self-repair ("turn off the lamps, sorry the lights", "please play, i mean transfer $75 to Alex"): what
# follows corrects what came before, so the connector before it cuts nothing and the two read as one request.
# Only phrases that correct: "wait" and "actually" also start requests ("... and wait ten minutes").
REPAIR = re.compile(r"(?:(?:uh|um|er)\s+)?(?:sorry|i mean|no wait|or rather|scratch that)\b", re.IGNORECASE)
MIN_WORDS = 2  # a part shorter than this is never cut off ("rock and roll" stays whole)
# "Find me a comedy podcast and play it": a part this short ending in one of these acts on the part before.
PRONOUNS = frozenset({"it", "that", "this", "them", "those", "these"})
REFERS_BACK_WORDS = 3
OOS_PART_MIN_WORDS = 3  # an out-of-scope part this long is a request of its own, shorter is a fragment
# A part answers on its own only when the model is about as sure of it as of the whole text's best reading:
# a follow-up such as "..., do you know how" maps to some intent, less surely. Chosen on the validation
# splits (docs/RESULTS.md, multi-intent) as the margin with the best MixSNIPS / MixATIS accuracy that keeps
# single-intent SNIPS and ATIS within 0.3 points of deciding each text whole: 0.02 (no margin costs ATIS
# 0.6 points and CLINC150 1.9; 0.05 costs ATIS 0.4).
REQUEST_MARGIN = 0.02
MAX_PARTS = 4  # cut points after the third are not used
# A part that only names entities is a fragment (rule 1). Checked first on the validation splits with the
# seed 0-1 ATIS and seed-0 SNIPS chains bundles: MixATIS +0.3 / +0.3 (hard +0.8 / +0.9), single-intent ATIS
# +0.2 / +0.2, SNIPS unchanged (docs/RESULTS.md, multi-intent). A switch only so that it can be measured.
NAMES_ARE_FRAGMENTS = True
# Words that frame a name without asking anything: a part made of entities and these names things too ("the
# living room" after "turn on the lights in the kitchen and", "the beatles please"). Articles, possessive and
# demonstrative determiners, "please"; not prepositions: "dallas to baltimore" and "rental cars in washington
# dc" are requests of ATIS's own (docs/RESULTS.md, multi-intent). Without them "the living room" (3 words) was
# a request of its own, answered as a part out of scope.
FRAMING_WORDS = frozenset({"a", "an", "the", "my", "your", "our", "his", "her", "their", "its", "this", "that",
                           "these", "those", "please"})
# Served, evaluated and reported this way unless turned off (INTENTVCS_SEGMENT=0, --no-segment):
# benchmarks/mix_bench.py measured what it costs single-intent traffic.
DEFAULT_SEGMENT = True


@dataclass(frozen=True)
class Part:
    """A character span ``[start, end)`` of a text and what was decided there.

    ``accepted`` label indices (closed under relations, most confident first);
    ``out_of_scope`` when the part is a request the model does not know.
    """

    start: int
    end: int
    accepted: tuple[int, ...]
    out_of_scope: bool

    def to_dict(self, text: str, labels: Sequence[str]) -> dict:
        return {"start": self.start, "end": self.end, "text": text[self.start:self.end],
                "accepted": [labels[j] for j in self.accepted], "out_of_scope": self.out_of_scope}


@dataclass(frozen=True)
class SegmentedResult:
    """``decide_segmented``'s answer: the joined decision (as ``Decision.apply`` gives it) and each text's parts."""

    result: DecisionResult
    parts: list[tuple[Part, ...]]


def cut(text: str, protected: Sequence[tuple[int, int]] = (), starts: Sequence[int] = ()) -> list[tuple[int, int]]:
    """The parts of ``text`` between connectors, and before the request ``starts`` (character offsets of
    words a boundary head reads as beginning a request), as ``(start, end)`` spans with surrounding blanks
    (``_BLANK``: white space and the invisible spaces U+200B, U+2060, U+FEFF) trimmed.

    No connector strictly inside a ``protected`` span cuts (an entity: "são
    tomé and príncipe", "neva alice and maggie parker"; a span that only
    starts or ends at the connector, as a tagger reading a chained text can
    give, does not protect it) or a stretch that holds one value (``_held``:
    a quotation, "between 4 and 5 pm", "two hundred and fifty", "3 and a
    half"), nor a start inside one, in a connector or at
    the word right after one: the connector cuts there, under the same rules
    (a start there once cut where the connector was refused, leaving parts
    such as "dallas and also"); nor one before a self-repair (``REPAIR``). A piece of fewer than ``MIN_WORDS`` words is
    not cut off: it stays with the piece before it, the first with the one
    after ("add bread and butter and turn off the lights": "add bread and
    butter" | "turn off the lights"; the remainder's words were counted to the
    end of the text, which cut "butter" away from its list). At most
    ``MAX_PARTS`` parts, the last holding the rest. A connector that opens or
    closes the text is in no span, nor a word of the piece beside it ("and
    turn off the lights and play some jazz": "turn off the lights" | "play
    some jazz"; "and jazz" was two words). One span, the text (less
    such a connector and its blanks), when nothing cuts.
    """
    text = _plain(text)  # same length: the spans index the text as sent
    connectors = [(match.start(), match.end()) for match in CONNECTOR.finditer(text)]
    protected = [*protected, *_held(text, connectors)]
    # A start is a cut of no width: the text before it is one part, the text from it the next.
    points = sorted(connectors + [(start, start) for start in starts
                                  if not any(a <= start <= b for a, b in connectors)])
    pieces: list[list[int]] = []
    begin = 0
    for left, right in points:
        if left >= begin and not any(a < left and right < b for a, b in protected) \
                and not REPAIR.match(text, right):
            pieces.append([begin, left])
            begin = right
    pieces.append([begin, len(text)])
    # A piece without a word lies before a connector that opens the text or after one that closes it ("and
    # turn off the lights and ...", "..., turn off the lights,"): it goes, and its connector with it. Joined to
    # its neighbour like any short piece, it left the connector in that part's span and in the text read.
    pieces = [piece for piece in pieces if _words(text, *piece)] or [[0, len(text)]]
    kept: list[list[int]] = []
    for piece in pieces:
        if kept and _words(text, *piece) < MIN_WORDS:
            kept[-1][1] = piece[1]
        else:
            kept.append(piece)
    if len(kept) > 1 and _words(text, *kept[0]) < MIN_WORDS:
        first = kept.pop(0)
        kept[0][0] = first[0]
    if len(kept) > MAX_PARTS:
        kept[MAX_PARTS - 1][1] = kept[-1][1]
        del kept[MAX_PARTS:]
    return [_trim(text, start, end) for start, end in kept]


def _held(text: str, connectors: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The stretches of ``text`` that hold one value (a quotation, a range, a number), as ``(start, end)`` spans
    with the connector that lies inside each strictly inside it; ``connectors``: the connectors' spans."""
    held = [match.span() for match in _QUOTED.finditer(text)]
    previous = 0  # where the stretch before this connector begins: the end of the connector before it
    for left, right in connectors:
        after = _WORD.match(text, right)  # the word after the connector (None: it closes the text)
        if after and text[left:right].strip(_BLANK_CHARS).lower() == "and":
            before = text[previous:left]
            opened = _RANGE.search(before)
            if opened:
                held.append((previous + opened.start(), after.end()))
            elif left > previous and (_FRACTION.match(text, right)
                                      or (_SCALE.search(before) and _NUMBER.match(text, right))):
                # From the last character of the word before the "and" (a connector starts after no blank) to
                # the end of the word after it: a learnt request start elsewhere in the stretch still cuts.
                held.append((left - 1, after.end()))
        previous = right
    return held


def _plain(text: str) -> str:
    """``text`` with each character that has a plain form of one character (NFKC) in that form, character for
    character, so that offsets into it are offsets into ``text``."""
    return text if text.isascii() else "".join(map(_plain_character, text))


@functools.lru_cache(maxsize=4096)
def _plain_character(character: str) -> str:
    plain = unicodedata.normalize("NFKC", character)
    return plain if len(plain) == 1 else character


def _words(text: str, start: int, end: int) -> int:
    return sum(1 for _ in _WORD.finditer(text, start, end))


def _names_only(part: str, entities: Sequence[Entity]) -> bool:
    """Whether every word of ``part`` lies inside one of ``entities`` (found in ``part``, offsets into it),
    joins them ("apples and grapes", "delta, united": a connector inside a part that did not cut there) or
    frames them (``FRAMING_WORDS``: "the living room", "washington dc please")."""
    spans = [(e.start, e.end) for e in entities]
    part = _plain(part)
    # A word is read without the marks around it ("boston.", "\"washington dc\""): a full stop is no request.
    cores = [(word.start() + core.start(), word.start() + core.end()) if core else None
             for word in _WORD.finditer(part) if not _JOINER_WORD.match(word.group())
             for core in [_WORD_CORE.search(word.group())]
             if not (core and core.group().lower() in FRAMING_WORDS)]
    return bool(spans) and all(core is None or any(a <= core[0] and core[1] <= b for a, b in spans)
                               for core in cores)


def _refers_back(part: str) -> bool:
    """A short part whose object is a pronoun ("... and play it", "... then book that") acts on what the part
    before it named: it continues that request rather than making one of its own."""
    words = _WORD.findall(_plain(part).lower())
    return 0 < len(words) <= REFERS_BACK_WORDS and words[-1].strip(".,!?;:") in PRONOUNS


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` without the blanks (``_BLANK``) at either end; a span of blanks only is empty at its
    start (it was ``(end, start)``, backwards)."""
    piece = text[start:end]
    stripped = piece.lstrip(_BLANK_CHARS)
    if not stripped:
        return start, start
    return start + len(piece) - len(stripped), start + len(piece.rstrip(_BLANK_CHARS))


def decide_segmented(decision: Decision, infer: Callable[[list[str]], GraphOutputs], texts: Sequence[str],
                     segment: bool = DEFAULT_SEGMENT, margin: float = REQUEST_MARGIN,
                     outputs: GraphOutputs | None = None,
                     names_are_fragments: bool = NAMES_ARE_FRAGMENTS) -> tuple[GraphOutputs, SegmentedResult]:
    """The texts' graph outputs and their decision, chained requests answered part by part.

    The texts are read first (their entities protect the connectors inside
    them), then, in one more ``infer`` call, the parts of the texts that cut.
    Where a text is answered part by part, its entities are the parts' (read
    in the short texts the model was trained on), at offsets into the text; a
    part joined from several pieces is read once more as it stands (its pieces'
    entities were read apart: "remind me to buy salt" | "black pepper" gave
    "buy salt" and two items, the part as a whole one reminder).
    ``segment=False`` decides every text whole; ``margin``: ``REQUEST_MARGIN``;
    ``outputs``: the texts' graph outputs when the caller has read them already
    (``infer`` then reads the parts alone); ``names_are_fragments``: whether a
    part that is all entity is a fragment (``NAMES_ARE_FRAGMENTS``).
    """
    texts = list(texts)
    infer = _answered_entities(decision, infer)
    outputs = infer(texts) if outputs is None else outputs._replace(entities=decision.kept_entities(outputs.entities))
    whole = decision.apply(*outputs.scores)
    pieces = []
    if segment:
        for row, text in enumerate(texts):
            found = () if outputs.entities is None else [(e.start, e.end) for e in outputs.entities[row]]
            spans = cut(text, found, () if outputs.starts is None else outputs.starts[row])
            pieces += [(row, span) for span in spans] if len(spans) > 1 else []
    if not pieces:
        return outputs, SegmentedResult(whole, [_whole_part(whole, row, len(text)) for row, text in enumerate(texts)])
    part_outputs = infer([texts[row][a:b] for row, (a, b) in pieces])
    strict = _strict_parts(decision, part_outputs, whole.out_of_scope[[row for row, _ in pieces]])
    groups_by_row: dict[int, list[_Group]] = {}
    whole_top = whole.confidences.max(axis=1)
    for index, (row, (a, b)) in enumerate(pieces):
        names = (names_are_fragments and part_outputs.entities is not None
                 and _names_only(texts[row][a:b], part_outputs.entities[index]))
        # A text's first part has nothing before it to refer back to ("play it and turn off the lights").
        refers_back = row in groups_by_row and _refers_back(texts[row][a:b])
        groups_by_row.setdefault(row, []).append(
            _Group.of_part(strict, index, a, b, texts[row], whole_top[row] - margin, names or refers_back))
    segmented = _join(whole, strict, groups_by_row, [len(t) for t in texts])
    return _with_part_entities(outputs, part_outputs, pieces, segmented, infer, texts), segmented


def _answered_entities(decision: Decision, infer: Callable[[list[str]], GraphOutputs]
                       ) -> Callable[[list[str]], GraphOutputs]:
    """``infer`` keeping only the entities the decision answers (``Decision.kept_entities``): a part's cut and
    whether it only names things read the entities the answer will show."""
    def answered(texts: list[str]) -> GraphOutputs:
        outputs = infer(texts)
        return outputs._replace(entities=decision.kept_entities(outputs.entities))
    return answered if decision.entity_floor else infer


def _strict_parts(decision: Decision, part_outputs: GraphOutputs, whole_out_of_scope: np.ndarray) -> DecisionResult:
    """The parts' decisions without the top-intent fallback; a part of a text out of scope as a whole
    (``whole_out_of_scope``, per part) is out of scope above the OOS rule's part cut."""
    strict = decision.apply(*part_outputs.scores, top_fallback=False)
    doubtful = whole_out_of_scope & decision.oos.part_out_of_scope(strict.oos_score)
    if not doubtful.any():
        return strict
    accepted = strict.accepted.copy()
    accepted[doubtful] = False
    return replace(strict, accepted=accepted, out_of_scope=strict.out_of_scope | doubtful)


def _with_part_entities(outputs: GraphOutputs, part_outputs: GraphOutputs, pieces: list,
                        segmented: SegmentedResult, infer: Callable[[list[str]], GraphOutputs],
                        texts: Sequence[str]) -> GraphOutputs:
    """``outputs`` with the entities of each text answered part by part taken from its parts: a part of one
    piece as that piece was read, a part joined from several read again as a whole (one more ``infer``)."""
    if outputs.entities is None:
        return outputs
    pieces_of: dict[int, list[tuple[int, int, int]]] = {}
    for index, (row, (start, end)) in enumerate(pieces):
        pieces_of.setdefault(row, []).append((index, start, end))
    found: dict[int, list[Entity]] = {}
    joined: list[tuple[int, int, int]] = []  # (row, start, end) of the parts read again
    for row, parts in enumerate(segmented.parts):
        if len(parts) < 2:
            continue
        for part in parts:
            inside = [(index, start) for index, start, end in pieces_of[row] if part.start <= start and end <= part.end]
            if len(inside) == 1:
                index, start = inside[0]
                found.setdefault(row, []).extend(_shifted(part_outputs.entities[index], start))
            else:
                joined.append((row, part.start, part.end))
    if joined:
        again = infer([texts[row][start:end] for row, start, end in joined])
        for k, (row, start, _) in enumerate(joined):
            found.setdefault(row, []).extend(_shifted(again.entities[k], start))
    entities = outputs.entities.copy()
    for row, row_entities in found.items():
        entities[row] = tuple(sorted(row_entities, key=lambda entity: entity.start))
    return outputs._replace(entities=entities)


def _shifted(entities: Sequence[Entity], offset: int) -> list[Entity]:
    """Entities found in a part, at offsets into its text (the part begins at ``offset``)."""
    return [replace(entity, start=entity.start + offset, end=entity.end + offset) for entity in entities]


@dataclass
class _Group:
    """Adjacent parts read as one request: their span, accepted labels, verdict and part rows."""

    start: int
    end: int
    accepted: list[int]
    out_of_scope: bool
    members: list[int]
    speakers: list[int]  # the members that accepted an intent themselves (a fragment's confidences are noise)

    @property
    def fragment(self) -> bool:
        """Neither a request nor an out-of-scope one: it joins a neighbour."""
        return not self.accepted and not self.out_of_scope

    @classmethod
    def of_part(cls, strict: DecisionResult, index: int, start: int, end: int, text: str,
                least: float, asks_nothing: bool = False) -> "_Group":
        """One part; it accepts its intents only when its top confidence reaches ``least``, and none
        when it asks nothing of its own (``asks_nothing``: it only names entities, or acts on a pronoun)."""
        if asks_nothing:
            return cls(start, end, [], False, [index], [])
        order = np.argsort(-strict.ranking[index], kind="stable")  # as the answer ranks (ties at 1 broken)
        accepted = [int(j) for j in order if strict.accepted[index, j]]
        if accepted and strict.confidences[index, accepted[0]] < least:
            accepted = []  # less sure than the whole text's reading: a follow-up ("..., can you help me")
        out_of_scope = bool(strict.out_of_scope[index]) and _words(text, start, end) >= OOS_PART_MIN_WORDS
        return cls(start, end, accepted, out_of_scope, [index], [index] if accepted else [])

    def absorb(self, other: "_Group") -> None:
        """Take in ``other`` (a fragment, or a request sharing an intent): a fragment changes no verdict."""
        self.start, self.end = min(self.start, other.start), max(self.end, other.end)
        self.accepted += [j for j in other.accepted if j not in self.accepted]
        self.out_of_scope = not self.accepted and (self.out_of_scope or other.out_of_scope)
        self.members += other.members
        self.speakers += other.speakers


def _grouped(parts: list[_Group]) -> list[_Group]:
    """Fragments join a neighbour; a part sharing an accepted intent with the group before it continues it."""
    groups: list[_Group] = []
    for part in parts:
        previous = groups[-1] if groups else None
        if previous is not None and (part.fragment or previous.fragment
                                     or set(part.accepted) & set(previous.accepted)):
            previous.absorb(part)
        else:
            groups.append(part)
    return [group for group in groups if not group.fragment]


def _join(whole: DecisionResult, strict: DecisionResult, groups_by_row: dict[int, list[_Group]],
          lengths: list[int]) -> SegmentedResult:
    """Per text: its groups' union where two or more groups speak, else the whole text's answer."""
    confidences, accepted, ranking = whole.confidences.copy(), whole.accepted.copy(), whole.ranking.copy()
    out_of_scope, oos_score = whole.out_of_scope.copy(), whole.oos_score.copy()
    parts: list[tuple[Part, ...]] = []
    for row, length in enumerate(lengths):
        groups = _grouped(groups_by_row.get(row, []))
        requests = [group for group in groups if group.accepted]
        if not requests or len(groups) < 2:
            parts.append(_whole_part(whole, row, length))
            continue
        # The requests' own pieces: a greeting absorbed into a request ("hi there, ...") lent it its
        # confidences, above a threshold for an intent nobody accepted.
        speakers = [m for group in requests for m in group.speakers]
        accepted[row] = False
        for group in requests:
            accepted[row, group.accepted] = True
        confidences[row] = np.maximum(confidences[row], strict.confidences[speakers].max(axis=0))
        ranking[row] = np.maximum(ranking[row], strict.ranking[speakers].max(axis=0))
        out_of_scope[row] = False
        oos_score[row] = float(strict.oos_score[speakers].min())
        parts.append(tuple(Part(g.start, g.end, tuple(g.accepted), g.out_of_scope) for g in groups))
    joined = DecisionResult(confidences, accepted, out_of_scope, oos_score, whole.oos_rule, ranking)
    return SegmentedResult(joined, parts)


def _whole_part(whole: DecisionResult, row: int, length: int) -> tuple[Part, ...]:
    """The whole text (``length`` characters) as its one part, with the whole text's answer."""
    order = np.argsort(-whole.ranking[row], kind="stable")
    return (Part(0, length, tuple(int(j) for j in order if whole.accepted[row, j]), bool(whole.out_of_scope[row])),)
