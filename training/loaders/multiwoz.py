"""MultiWOZ (ConvLab-2 copy) → canonical examples, one per user turn.

Input: ``{val,test}.json.zip`` (see :mod:`intentvcs.training.loaders.convlab_zip`);
each dialogue has ``log``, a list of turns; user turns are the even positions.
A turn's ``dialog_act`` is ``{"Domain-Act": [[slot, value], ...]}``.

Intent of a user turn = the set of lowercased domains of its act keys, kept
only if in ``domains`` (default: DialogVCS's attraction, hotel, restaurant,
taxi, train). Dropped on purpose:

* ``police`` and ``hospital`` — not part of DialogVCS;
* ``general-*`` (greet, thank, bye) — social acts with no task domain;
* ``Booking-*`` — the booking pseudo-domain does not say *what* is booked;
  in ConvLab-2 MultiWOZ it is a system-side act (no user turn in the shared
  val/test files has one), so dropping it loses nothing.

A turn with several kept domains gets one composite label (``hotel&taxi``,
parts sorted). A turn with no kept domain (about a quarter of user turns:
greetings, thanks, police/hospital) is **skipped**, because DialogVCS has no
out-of-scope class and an empty label would teach "no intent". Skipped turns
are counted by reason (``no_dialogue_act``, ``no_kept_domain``) into the
``skipped`` dict a caller passes, so ``convert`` and ``build-vcs`` can say so.

Entity spans: each ``[slot, value]`` of the turn's acts whose value occurs in
the text at word boundaries becomes a span (rules in
:mod:`intentvcs.training.loaders.alignment`). The span label is the bare slot,
lowercased (``area``, ``price``, ``name``, ``depart``, ``dest``, ``day``,
``people`` ...), **without** the domain: the domain is already the intent, and
``area`` or ``day`` mean the same in hotel, restaurant and attraction turns, so
one tag shared across domains gets all their examples instead of five sparse
tags (and a composite turn's "friday" is one span, not a hotel and a train one).
"""

from __future__ import annotations

import os
from pathlib import Path

from intentvcs.core.dataio import DataError, Example
from intentvcs.training.loaders.alignment import AlignmentStats, align
from intentvcs.training.loaders.convlab_zip import check_text, check_utterance, composite, read_dialogues, split_path

DIALOGVCS_DOMAINS = frozenset({"attraction", "hotel", "restaurant", "taxi", "train"})

# Values that stand for no words of the utterance: requests (``?``), slot-less
# acts (``none``), "any" (``dontcare`` and its spellings) and yes/no flags
# (``Internet=yes``: "wifi" is said, "yes" is not).
NO_SURFACE_FORM = frozenset({"", "none", "?", "dontcare", "dont care", "don't care", "do n't care", "yes", "no"})


def load_split(root: str | os.PathLike, split: str, skipped: dict[str, int] | None = None) -> list[Example]:
    """Load ``root/val.json.zip`` (``valid``) or ``root/test.json.zip`` (``test``)."""
    return load_file(split_path(root, split), skipped=skipped)


def load_file(path: str | os.PathLike, domains: frozenset[str] = DIALOGVCS_DOMAINS,
              skipped: dict[str, int] | None = None) -> list[Example]:
    """One example per user turn with a kept domain, in file order (see
    :func:`load_file_with_stats`)."""
    return load_file_with_stats(path, domains, skipped)[0]


def load_file_with_stats(
    path: str | os.PathLike, domains: frozenset[str] = DIALOGVCS_DOMAINS, skipped: dict[str, int] | None = None
) -> tuple[list[Example], AlignmentStats]:
    """The examples of :func:`load_file`, and how many act values became spans.

    Ids are ``"<dialogue id>:<turn index in log>"``; ``meta`` holds
    ``dialogue`` and ``turn`` so splits can be made by dialogue. Values of every
    act of a kept turn are aligned (a ``general`` or ``police`` act carries no
    value worth a span in practice); the stats count kept turns only.
    ``skipped``, when given, is incremented by the user turns left out, by
    reason: ``no_dialogue_act`` (none annotated), ``no_kept_domain`` (only
    ``general``, ``police``, ``hospital`` or ``booking`` acts).
    """
    path = Path(path)
    examples, stats = [], AlignmentStats()
    for dialogue_id, dialogue in read_dialogues(path).items():
        log = dialogue.get("log")
        if not isinstance(log, list):
            raise DataError(path, None, f"dialogue {dialogue_id}: 'log' is missing or not a list")
        for turn_index in range(0, len(log), 2):
            text, acts = _user_turn(path, f"dialogue {dialogue_id} turn {turn_index}", log[turn_index])
            kept = {key.partition("-")[0].lower() for key in acts} & domains
            if kept:
                pairs = [(pair[0].strip().lower(), pair[1]) for pairs in acts.values() for pair in pairs]
                spans = align(text, pairs, skip=NO_SURFACE_FORM, word_boundaries=True, stats=stats)
                examples.append(Example(
                    text=text, labels=(composite(kept),), id=f"{dialogue_id}:{turn_index}", spans=spans,
                    meta={"dialogue": dialogue_id, "turn": turn_index},
                ))
            elif skipped is not None:
                reason = "no_kept_domain" if acts else "no_dialogue_act"
                skipped[reason] = skipped.get(reason, 0) + 1
    return examples, stats


def _user_turn(path: Path, where: str, turn: object) -> tuple[str, dict[str, list]]:
    """The stripped text and the acts of one user turn; ``DataError`` when malformed."""
    if not isinstance(turn, dict):
        raise DataError(path, None, f"{where}: expected an object")
    text, acts = turn.get("text"), turn.get("dialog_act")
    check_utterance(path, where, "'text'", text)
    if not isinstance(acts, dict):
        raise DataError(path, None, f"{where}: 'dialog_act' is missing or not an object")
    for key, pairs in acts.items():
        domain, dash, act = key.partition("-")
        if not (dash and domain and act):
            raise DataError(path, None, f"{where}: dialogue act {key!r} is not 'Domain-Act'")
        if not (isinstance(pairs, list) and all(_is_pair(p) for p in pairs)):
            raise DataError(path, None, f"{where}: dialogue act {key!r} is not a list of [slot, value]")
    # A JSON escape can decode to a lone surrogate, which no later step can write or tokenize: the text, the act
    # names (their domain is the label) and the slots (span labels) are refused here, naming dialogue and turn.
    check_text(path, where, "'text'", text)
    for key, pairs in acts.items():
        check_text(path, where, f"the dialogue act name {key!r}", key)  # repr: a surrogate shown as \ud800
        for slot, _ in pairs:
            check_text(path, where, f"the slot name {slot!r} of dialogue act {key!r}", slot)
    return text.strip(), acts


def _is_pair(pair: object) -> bool:
    return isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
