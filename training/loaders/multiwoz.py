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
out-of-scope class and an empty label would teach "no intent".
"""

from __future__ import annotations

import os
from pathlib import Path

from intentvcs.core.dataio import DataError, Example
from intentvcs.training.loaders.convlab_zip import composite, read_dialogues, split_path

DIALOGVCS_DOMAINS = frozenset({"attraction", "hotel", "restaurant", "taxi", "train"})


def load_split(root: str | os.PathLike, split: str) -> list[Example]:
    """Load ``root/val.json.zip`` (``valid``) or ``root/test.json.zip`` (``test``)."""
    return load_file(split_path(root, split))


def load_file(path: str | os.PathLike, domains: frozenset[str] = DIALOGVCS_DOMAINS) -> list[Example]:
    """One example per user turn with a kept domain, in file order.

    Ids are ``"<dialogue id>:<turn index in log>"``; ``meta`` holds
    ``dialogue`` and ``turn`` so splits can be made by dialogue.
    """
    path = Path(path)
    examples = []
    for dialogue_id, dialogue in read_dialogues(path).items():
        log = dialogue.get("log")
        if not isinstance(log, list):
            raise DataError(path, None, f"dialogue {dialogue_id}: 'log' is missing or not a list")
        for turn_index in range(0, len(log), 2):
            turn = log[turn_index]
            where = f"dialogue {dialogue_id} turn {turn_index}"
            if not isinstance(turn, dict):
                raise DataError(path, None, f"{where}: expected an object")
            text, acts = turn.get("text"), turn.get("dialog_act")
            if not isinstance(text, str) or not text.strip():
                raise DataError(path, None, f"{where}: 'text' is missing or empty")
            if not isinstance(acts, dict):
                raise DataError(path, None, f"{where}: 'dialog_act' is missing or not an object")
            kept = set()
            for key in acts:
                domain, dash, act = key.partition("-")
                if not (dash and domain and act):
                    raise DataError(path, None, f"{where}: dialogue act {key!r} is not 'Domain-Act'")
                if domain.lower() in domains:
                    kept.add(domain.lower())
            if kept:
                examples.append(Example(
                    text=text.strip(), labels=(composite(kept),), id=f"{dialogue_id}:{turn_index}",
                    meta={"dialogue": dialogue_id, "turn": turn_index},
                ))
    return examples
