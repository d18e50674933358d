"""CrossWOZ (Chinese; ConvLab-2 copy) → canonical examples, one per user message.

Input: ``{val,test}.json.zip`` (see :mod:`intentvcs.training.loaders.convlab_zip`);
each dialogue has ``messages``; user messages have ``role == "usr"``,
``content`` and ``dialog_act``, a list of ``[act, domain, slot, value]``.

Intent of a user message = its set of act types (``General``, ``Inform``,
``Request``, ``Select``); several distinct types give one composite label
(``Inform&Request``, parts sorted). A user message with no dialogue act (about
0.4 %) is **skipped**: there is no intent to learn from it.
"""

from __future__ import annotations

import os
from pathlib import Path

from intentvcs.core.dataio import DataError, Example
from intentvcs.training.loaders.convlab_zip import composite, read_dialogues, split_path



def load_split(root: str | os.PathLike, split: str) -> list[Example]:
    """Load ``root/val.json.zip`` (``valid``) or ``root/test.json.zip`` (``test``)."""
    return load_file(split_path(root, split))


def load_file(path: str | os.PathLike) -> list[Example]:
    """One example per user message with at least one act, in file order.

    Ids are ``"<dialogue id>:<message index>"``; ``meta`` holds ``dialogue``
    and ``turn`` (the message index) so splits can be made by dialogue.
    """
    path = Path(path)
    examples = []
    for dialogue_id, dialogue in read_dialogues(path).items():
        messages = dialogue.get("messages")
        if not isinstance(messages, list):
            raise DataError(path, None, f"dialogue {dialogue_id}: 'messages' is missing or not a list")
        for index, message in enumerate(messages):
            where = f"dialogue {dialogue_id} message {index}"
            if not isinstance(message, dict):
                raise DataError(path, None, f"{where}: expected an object")
            if message.get("role") != "usr":
                continue
            text, acts = message.get("content"), message.get("dialog_act")
            if not isinstance(text, str) or not text.strip():
                raise DataError(path, None, f"{where}: 'content' is missing or empty")
            if not isinstance(acts, list):
                raise DataError(path, None, f"{where}: 'dialog_act' is missing or not a list")
            types = set()
            for act in acts:
                if not (isinstance(act, list) and len(act) == 4 and isinstance(act[0], str) and act[0]):
                    raise DataError(path, None, f"{where}: dialogue act {act!r} is not [act, domain, slot, value]")
                types.add(act[0])
            if types:
                examples.append(Example(
                    text=text.strip(), labels=(composite(types),), id=f"{dialogue_id}:{index}",
                    meta={"dialogue": dialogue_id, "turn": index},
                ))
    return examples
