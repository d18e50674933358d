"""CrossWOZ (Chinese; ConvLab-2 copy) → canonical examples, one per user message.

Input: ``{val,test}.json.zip`` (see :mod:`intentvcs.training.loaders.convlab_zip`);
each dialogue has ``messages``; user messages have ``role == "usr"``,
``content`` and ``dialog_act``, a list of ``[act, domain, slot, value]``.

Intent of a user message = its set of act types (``General``, ``Inform``,
``Request``, ``Select``); several distinct types give one composite label
(``Inform&Request``, parts sorted). A user message with no dialogue act (about
0.4 %) is **skipped**: there is no intent to learn from it; skipped messages are
counted (``no_dialogue_act``) into the ``skipped`` dict a caller passes.

Entity spans: each act value found in the text as a substring (Chinese has no
spaces, so no word boundaries) becomes a span (rules in
:mod:`intentvcs.training.loaders.alignment`). The span label is the slot as
written (``名称``, ``评分``, ``人均消费``, ``出发地`` ...), without the domain,
for the same reason as MultiWOZ: the slot means the same across domains, and
sharing one tag pools its examples.
"""

from __future__ import annotations

import os
from pathlib import Path

from intentvcs.core.dataio import DataError, Example
from intentvcs.training.loaders.alignment import AlignmentStats, align
from intentvcs.training.loaders.convlab_zip import check_text, check_utterance, composite, read_dialogues, split_path

# Values that stand for no words of the message: ``none`` (General acts) and
# the yes/no flags of hotel facilities (``酒店设施-早餐服务=是``). A substring
# match of 是 would hit the copula of almost any question, so it must not align.
NO_SURFACE_FORM = frozenset({"", "none", "是", "否"})


def load_split(root: str | os.PathLike, split: str, skipped: dict[str, int] | None = None) -> list[Example]:
    """Load ``root/val.json.zip`` (``valid``) or ``root/test.json.zip`` (``test``)."""
    return load_file(split_path(root, split), skipped)


def load_file(path: str | os.PathLike, skipped: dict[str, int] | None = None) -> list[Example]:
    """One example per user message with at least one act, in file order (see
    :func:`load_file_with_stats`)."""
    return load_file_with_stats(path, skipped)[0]


def load_file_with_stats(
    path: str | os.PathLike, skipped: dict[str, int] | None = None
) -> tuple[list[Example], AlignmentStats]:
    """The examples of :func:`load_file`, and how many act values became spans.

    Ids are ``"<dialogue id>:<message index>"``; ``meta`` holds ``dialogue``
    and ``turn`` (the message index) so splits can be made by dialogue.
    ``skipped``, when given, is incremented by the user messages left out
    (``no_dialogue_act``).
    """
    path = Path(path)
    examples, stats = [], AlignmentStats()
    for dialogue_id, dialogue in read_dialogues(path).items():
        messages = dialogue.get("messages")
        if not isinstance(messages, list):
            raise DataError(path, None, f"dialogue {dialogue_id}: 'messages' is missing or not a list")
        for index, message in enumerate(messages):
            parsed = _user_message(path, f"dialogue {dialogue_id} message {index}", message)
            if parsed is None:  # another role's message: not a row to keep or skip
                continue
            if not parsed[1]:
                if skipped is not None:
                    skipped["no_dialogue_act"] = skipped.get("no_dialogue_act", 0) + 1
                continue
            text, acts = parsed
            spans = align(text, [(slot, value) for _, _, slot, value in acts],
                          skip=NO_SURFACE_FORM, word_boundaries=False, stats=stats)
            examples.append(Example(
                text=text, labels=(composite({act[0] for act in acts}),), id=f"{dialogue_id}:{index}",
                spans=spans, meta={"dialogue": dialogue_id, "turn": index},
            ))
    return examples, stats


def _user_message(path: Path, where: str, message: object) -> tuple[str, list[list]] | None:
    """The stripped text and the acts of a user message, ``None`` for another
    role; ``DataError`` when malformed."""
    if not isinstance(message, dict):
        raise DataError(path, None, f"{where}: expected an object")
    if message.get("role") != "usr":
        return None
    text, acts = message.get("content"), message.get("dialog_act")
    check_utterance(path, where, "'content'", text)
    if not isinstance(acts, list):
        raise DataError(path, None, f"{where}: 'dialog_act' is missing or not a list")
    for act in acts:
        if not (isinstance(act, list) and len(act) == 4 and isinstance(act[0], str) and act[0]):
            raise DataError(path, None, f"{where}: dialogue act {act!r} is not [act, domain, slot, value]")
        if act[0] != act[0].strip():  # the act type is the intent: "Inform " would be one of its own
            raise DataError(path, None, f"{where}: act type {act[0]!r} has leading or trailing whitespace")
        if isinstance(act[2], str) and act[2] != act[2].strip():
            # The slot is the span label: "名称 " was written as an entity type beside "名称", which every reader
            # of the product refuses, naming the converted file's line instead of this dialogue.
            raise DataError(path, None, f"{where}: slot name {act[2]!r} has leading or trailing whitespace")
    # A JSON escape can decode to a lone surrogate, which no later step can write or tokenize: the text, the act
    # types (the label) and the slots (span labels) are refused here, naming the dialogue and the message.
    check_text(path, where, "'content'", text)
    for act in acts:
        check_text(path, where, f"the act type {act[0]!r}", act[0])  # repr: a surrogate shown as \ud800
        if isinstance(act[2], str):  # a slot that is no string is no span label (align passes it over)
            check_text(path, where, f"the slot name {act[2]!r}", act[2])
    return text.strip(), acts
