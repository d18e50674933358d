"""MixATIS and MixSNIPS: multi-intent utterances made of single-intent ones (Qin et al. 2020, AGIF).

The standard construction (docs/RESEARCH.md section 5; the issue that asked
for it measured the segment order and connector shares on AGIF's released
files): each utterance joins 1, 2 or 3 single-intent
utterances of one split (30 / 50 / 20 %) whose intents are distinct; two
segments are joined by a connector, three as ``s1 , s2 <connector> s3``;
the connector is ``and``, ``and then`` or ``and also`` (a third each); the
segments stand in alphabetical order of their intents; the label is the
intents joined by ``#`` (here: the row's ``labels``, in that order, and
``meta.mix_label``); slot spans are carried over, connectors carry none.
Sizes: train 18,000 / dev 1,000 / test 1,000 (MixATIS), 45,000 / 2,500 /
2,500 (MixSNIPS).

The ``hard`` variant keeps the intents and sizes but not the regularities a
model can learn from the standard files: segments in random order, more
connectors (``also``, ``then``, ``after that``, a comma alone, none) and
casing and punctuation as people type them (a capital first letter, a final
``.`` or ``?`` on some utterances).

Every row's ``meta.segments`` gives each segment's character span and intent,
so an answer that names where each intent sits can be scored. Rows are seeded
(``seed``) and the build is written atomically with an ``info.json`` data card.
Beside ``valid.jsonl`` and ``test.jsonl`` it writes ``valid-known.jsonl`` and
``test-known.jsonl``, the same rows without the spans of types the training
split never shows: what ``intentvcs train`` accepts as validation and test
data, and ``intentvcs evaluate`` as test data, for a model trained on the Mix
training split (the standard protocol), since they refuse a type the model
cannot learn (MixATIS test has such types). ``test.jsonl`` stays as built:
the benchmark scores it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from intentvcs.core import atomic
from intentvcs.core.dataio import MAX_TEXT_CHARS, DataError, Example, Span, known_spans_only, write_jsonl
from intentvcs.core.manifest import file_digest
from intentvcs.core.oos import OOS_LABEL
from intentvcs.training.vcs_builder import check_earlier_build

INFO_FILE = "info.json"
SPLITS = ("train", "valid", "test")
KNOWN_VALID_FILE = "valid-known.jsonl"
KNOWN_TEST_FILE = "test-known.jsonl"
KNOWN_FILES = {"valid": KNOWN_VALID_FILE, "test": KNOWN_TEST_FILE}  # split -> its rows with known span types only
# What a Mix directory holds, and nothing else: the names a build writes (no pattern: a file of the user's
# there, say predictions, is not ours and is replaced only with --force). Earlier versions wrote a subset
# (no known-span files at first, then no test-known.jsonl), so their builds are replaced too.
MIX_HOLDS = (INFO_FILE, *(f"{split}.jsonl" for split in SPLITS), *KNOWN_FILES.values())
VARIANTS = ("standard", "hard")
INTENT_COUNTS = (1, 2, 3)
INTENT_SHARES = (0.3, 0.5, 0.2)
CHAIN_SHARES = (0.0, 0.5, 0.2)  # synthetic training chains: the Mix sets' shares without single rows
STANDARD_CONNECTORS = ("and", "and then", "and also")
HARD_CONNECTORS = ("and", "and then", "and also", "also", "then", "after that", ",", "")
SIZES = {"atis": {"train": 18_000, "valid": 1_000, "test": 1_000},
         "snips": {"train": 45_000, "valid": 2_500, "test": 2_500}}
NAMES = {"atis": "MixATIS", "snips": "MixSNIPS"}
OOS_CHAIN_KINDS = ("request+oos", "oos+oos", "request+request")  # oos_chains' kinds of two-part utterance
# The most rows a split may be asked for. Every row is built in memory before the files are written, about
# 3.5 kB each (measured: a 200,000-row test split peaked at 770 MB, 0.1 ms a row on one core): at this cap a
# split takes about 3.5 GB and two minutes, 22 times the largest released split; 10,000,000 rows would take
# some 35 GB and half an hour, and most machines would kill the build without a word first.
MAX_ROWS = 1_000_000
HARD_CAPITAL = 0.5  # share of hard rows typed with a capital first letter
HARD_FINAL = {".": 0.15, "?": 0.15}  # shares of hard rows ending in each mark


@dataclass(frozen=True)
class Piece:
    """A part of a mixed utterance: text, and its intent and spans when it is a segment."""

    text: str
    intent: str | None = None
    spans: tuple[Span, ...] = ()
    out_of_scope: bool = False  # a segment that is an out-of-scope request (no intent)


def single_intent_rows(rows: Sequence[Example]) -> dict[str, list[Example]]:
    """The split's rows with exactly one intent, by intent (multi-intent source rows are not segments)."""
    by_intent: dict[str, list[Example]] = {}
    for row in rows:
        if len(row.labels) == 1:
            by_intent.setdefault(row.labels[0], []).append(row)
    return by_intent


def skipped_source_rows(rows: Sequence[Example]) -> dict[str, int]:
    """The source rows ``single_intent_rows`` leaves out, counted by reason (only reasons that occur)."""
    counts = {"multi_intent": sum(len(row.labels) > 1 for row in rows),
              "no_intent": sum(not row.labels for row in rows)}
    return {reason: n for reason, n in counts.items() if n}


def labels_missing_from_train(files: dict[str, list[Example]]) -> dict[str, dict[str, int]]:
    """For valid and test: the intents their rows carry that no train row does, with the rows carrying each.

    The draw is uniform over the intents each split has (``draw_segments``, as AGIF's construction), so an
    intent that only valid or test has single-intent rows of fills its share of their rows while the train
    split never shows it: rows a model trained on the train split cannot answer (a ceiling, not noise).
    """
    seen = {label for row in files["train"] for label in row.labels}
    out: dict[str, dict[str, int]] = {}
    for split in ("valid", "test"):
        counts: dict[str, int] = {}
        for row in files[split]:
            for label in set(row.labels) - seen:
                counts[label] = counts.get(label, 0) + 1
        out[split] = dict(sorted(counts.items()))
    return out


def mix_row(segments: Sequence[Example], connectors: Sequence[str], row_id: str,
            typed_comma: bool = False) -> Example:
    """One utterance of ``segments`` (in the given order) joined by ``connectors`` (one per gap)."""
    pieces: list[Piece] = []
    for index, segment in enumerate(segments):
        if index:
            pieces.append(Piece(_gap(connectors[index - 1], typed_comma)))
        pieces.append(Piece(segment.text, segment.labels[0], segment.spans))
    return assemble(pieces, row_id)


def _gap(connector: str, typed_comma: bool) -> str:
    """The text between two segments: `` and `` for ``and``; a comma spaced as AGIF's tokens
    (`` , ``) or as typed (``, ``); a space alone for no connector."""
    if connector == "," and typed_comma:
        return ", "
    return f" {connector} " if connector else " "


def assemble(pieces: Sequence[Piece], row_id: str) -> Example:
    """Concatenate ``pieces``, moving each segment's spans to its new offset."""
    text, spans, segments, labels = "", [], [], []
    for piece in pieces:
        start = len(text)
        text += piece.text
        if piece.intent is not None:
            spans += [Span(s.start + start, s.end + start, s.label) for s in piece.spans]
            segments.append({"start": start, "end": len(text), "intent": piece.intent})
            labels.append(piece.intent)
        elif piece.out_of_scope:
            segments.append({"start": start, "end": len(text), "intent": None})
    return Example(text, tuple(labels), row_id, tuple(spans),
                   {"mix_label": "#".join(labels), "segments": segments})


def draw_segments(by_intent: dict[str, list[Example]], count: int, rng: random.Random) -> list[Example]:
    """``count`` source rows of distinct intents, intents uniform over those the split has."""
    intents = rng.sample(sorted(by_intent), count)
    return [rng.choice(by_intent[intent]) for intent in intents]


def build_split(rows: Sequence[Example], size: int, variant: str, rng: random.Random,
                prefix: str, shares: Sequence[float] = INTENT_SHARES) -> list[Example]:
    """``size`` mixed rows from one source split; ``shares`` of 1, 2 and 3 intents per row."""
    by_intent = single_intent_rows(rows)
    if not by_intent:  # every row would be an empty text, which no reader of the product accepts
        raise ValueError(f"no single-intent row to build mixed rows from (the {prefix} rows)")
    most = min(max(INTENT_COUNTS), len(by_intent))
    out = []
    for index in range(size):
        count = min(rng.choices(INTENT_COUNTS, weights=shares)[0], most)
        segments = draw_segments(by_intent, count, rng)
        if variant == "standard":
            segments.sort(key=lambda ex: ex.labels[0])
            connectors = [","] * max(0, count - 2) + [rng.choice(STANDARD_CONNECTORS)] * (count > 1)
        else:
            rng.shuffle(segments)
            connectors = [rng.choice(HARD_CONNECTORS) for _ in range(count - 1)]
        row = mix_row(segments, connectors, f"{prefix}:{index}", typed_comma=variant == "hard")
        out.append(typed(row, rng) if variant == "hard" else row)
    return out


def chained_rows(rows: Sequence[Example], count: int, seed: int | str) -> list[Example]:
    """``count`` training rows that chain 2 or 3 of ``rows`` (distinct intents, 5 : 2 as in the Mix sets)
    the way the hard variant does (any order, any connector or none, typed casing), carrying all their
    intents: what ``TrainConfig.chain_ratio`` adds to a single-intent training set. Empty when ``rows``
    have fewer than two intents.

    Rows of the out-of-scope class (``OOS_LABEL``, the "train" OOS rule's) are no request: chained, they
    would teach the model that a text can be out of scope and carry an intent at once. What a served text
    with an out-of-scope part answers is decided part by part (``intentvcs.core.segmentation``)."""
    requests = [row for row in rows if OOS_LABEL not in row.labels]
    if len(single_intent_rows(requests)) < 2:
        return []
    return build_split(requests, count, "hard", random.Random(f"chains-{seed}"), "chain", shares=CHAIN_SHARES)


def oos_chains(rows: Sequence[Example], size: int, seed: int | str = 0) -> dict[str, list[Example]]:
    """Two-part utterances from a split with out-of-scope rows (CLINC150's), ``size`` of each kind
    (``OOS_CHAIN_KINDS``): a request and an out-of-scope utterance in either order, two out-of-scope
    utterances, two requests of distinct intents; joined by a standard connector (a third each).

    What a served model must answer (issue 19): the request and the out-of-scope part named, out of
    scope as a whole, both requests. A row's ``labels`` are its requests' intents (none: out of
    scope); ``meta.segments`` gives each part's span and intent (``None`` for an out-of-scope part).
    Seeded; requests drawn with intents uniform, as in the Mix sets.
    """
    requests = single_intent_rows(rows)
    unknown = [row for row in rows if not row.labels]
    if len(requests) < 2 or len(unknown) < 2:
        raise ValueError(f"need two intents and two out-of-scope rows, got {len(requests)} and {len(unknown)}")
    rng = random.Random(f"oos-chains-{seed}")
    out: dict[str, list[Example]] = {}
    for kind in OOS_CHAIN_KINDS:
        out[kind] = []
        for index in range(size):
            if kind == "request+oos":
                parts = [*draw_segments(requests, 1, rng), rng.choice(unknown)]
                rng.shuffle(parts)
            elif kind == "oos+oos":
                parts = rng.sample(unknown, 2)
            else:
                parts = draw_segments(requests, 2, rng)
            connector = Piece(_gap(rng.choice(STANDARD_CONNECTORS), False))
            out[kind].append(assemble([_segment(parts[0]), connector, _segment(parts[1])], f"{kind}:{index}"))
    return out


def _segment(row: Example) -> Piece:
    """A single-intent row as a segment, with its intent and spans; an out-of-scope row as an out-of-scope one."""
    return Piece(row.text, row.labels[0], row.spans) if row.labels else Piece(row.text, out_of_scope=True)


def typed(row: Example, rng: random.Random) -> Example:
    """``row`` with casing and punctuation as typed: maybe a capital first letter, maybe a final mark
    (neither moves an offset: the capital replaces one character, the mark comes after every span)."""
    text = row.text
    if text and rng.random() < HARD_CAPITAL:
        text = capitalised(text)
    mark = rng.choices([*HARD_FINAL, ""], weights=[*HARD_FINAL.values(), 1 - sum(HARD_FINAL.values())])[0]
    return Example(text + mark, row.labels, row.id, row.spans, row.meta)


def capitalised(text: str) -> str:
    """``text`` with a capital first letter where that is one character: ``ß`` (``SS``) or ``ﬁ`` (``FI``)
    stay as they are, since a longer capital would move every span and segment offset after it."""
    first = text[:1].upper()
    return first + text[1:] if len(first) == 1 else text


def build(dataset: str, data_root: str | Path, out: str | Path, *, seed: int = 0, variant: str = "standard",
          sizes: dict[str, int] | None = None, force: bool = False) -> dict[str, Any]:
    """Build Mix``dataset`` (``atis`` or ``snips``) from ``data_root`` into ``out`` (atomically); return
    ``info.json``'s content. ``sizes`` overrides the released sizes per split.

    The splits are drawn in turn (train, valid, test) from one generator seeded by dataset, variant and
    ``seed``: another train size draws other valid and test rows too, so valid and test are the recorded
    ones only at the released train size. (Kept so: a generator per split would change every build.)

    ``info.json`` also records what the build cannot show: ``source_rows_skipped`` (per split, the source
    rows that are not segments, by reason: ATIS's multi-intent rows), ``labels_missing_from_train``
    (the intents of valid and test that the train split never shows, with their row counts) and, for
    ``valid-known.jsonl`` and ``test-known.jsonl`` (``KNOWN_FILES``), what they leave out of valid and test:
    ``<split>_known_spans_dropped`` (spans of types the train split never shows) and
    ``<split>_known_rows_changed`` (the rows that lost one; every row is kept)."""
    from intentvcs.training.loaders import slot_folder

    if dataset not in SIZES:
        raise ValueError(f"unknown dataset {dataset!r}; choose from {', '.join(SIZES)}")
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
    check_sizes(dataset, sizes or {})
    # An info.json of this command's, not a DialogVCS benchmark's or a user's own.
    kind = atomic.OutputKind(INFO_FILE, MIX_HOLDS, named_by=(
        "benchmark", frozenset(f"{name}{suffix}" for name in NAMES.values() for suffix in ("", "-hard"))))
    check_earlier_build(out, kind, force)
    sizes = {**SIZES[dataset], **(sizes or {})}
    root = Path(data_root) / dataset
    rng = random.Random(f"{dataset}-{variant}-{seed}")
    sources = {split: slot_folder.load_split(root, split) for split in SPLITS}
    for split, rows in sources.items():
        if not single_intent_rows(rows):  # build_split refuses it too, without naming the files
            raise DataError(root / split, None, f"no single-intent row to build mixed rows from "
                                                f"({len(rows)} rows in {', '.join(slot_folder.FILES)})")
    # One generator, drawn split after split: the order is part of every recorded build.
    files = {split: build_split(rows, sizes[split], variant, rng, split) for split, rows in sources.items()}
    for split, rows in files.items():
        check_lengths(rows, sources[split], root / split, split)
    info = data_card(dataset, variant, seed, files, [root / split / name for split in files
                                                      for name in slot_folder.FILES])
    info["source_rows_skipped"] = {split: skipped_source_rows(rows) for split, rows in sources.items()}
    info["labels_missing_from_train"] = labels_missing_from_train(files)
    known = {}
    trained_types = {span.label for row in files["train"] for span in row.spans}
    for split in KNOWN_FILES:
        known[split], dropped = known_split(files[split], trained_types)
        info[f"{split}_known_spans_dropped"] = dropped["spans"]
        info[f"{split}_known_rows_changed"] = dropped["rows"]
    with atomic.directory(out, kind, force) as tmp:
        for split, rows in files.items():
            write_jsonl(tmp / f"{split}.jsonl", rows)
        for split, name in KNOWN_FILES.items():
            write_jsonl(tmp / name, known[split])
        atomic.write_json(tmp / INFO_FILE, info)
    return info


def check_lengths(rows: Sequence[Example], source: Sequence[Example], folder: Path, split: str) -> None:
    """``DataError`` on the first built row longer than ``MAX_TEXT_CHARS``, naming the ``seq.in`` line of its
    longest segment: each source utterance is within the limit (the loader refuses longer ones), but two or
    three joined may not be, and written, such a row made every reader of the product refuse the file."""
    for number, row in enumerate(rows, start=1):
        if len(row.text) <= MAX_TEXT_CHARS:
            continue
        parts = [row.text[s["start"]:s["end"]] for s in row.meta["segments"]]
        lines = [next(int(ex.id.rpartition(":")[2]) for ex in source if part in (ex.text, capitalised(ex.text)))
                 for part in parts]
        longest = max(range(len(parts)), key=lambda i: len(parts[i]))
        raise DataError(folder / "seq.in", lines[longest],
                        f"row {number} of {split}.jsonl joins lines {', '.join(map(str, lines))} into "
                        f"{len(row.text):,} characters, over the limit of {MAX_TEXT_CHARS:,} every reader of "
                        f"the product holds to; this line has {len(parts[longest]):,}: shorten or remove it")


def source_paths(dataset: str, data_root: str | Path) -> list[Path]:
    """The split folders of ``dataset`` under ``data_root`` that a build reads: the inputs an output folder
    must neither be nor hold (``atomic.check_folder_target``), since replacing it would delete them."""
    return [Path(data_root) / dataset / split for split in SPLITS]


def known_split(rows: Sequence[Example], trained_types: set[str]) -> tuple[list[Example], dict[str, int]]:
    """``rows`` (valid or test) without the spans of types no training row has (``trained_types``), every row
    kept (``known_spans_only``), and what that dropped: ``spans`` and ``rows`` (the rows that lost a span)."""
    known = known_spans_only(rows, trained_types)
    changed = [len(before.spans) - len(after.spans) for before, after in zip(rows, known)]
    return known, {"spans": sum(changed), "rows": sum(n > 0 for n in changed)}


def check_sizes(dataset: str, sizes: dict[str, int]) -> None:
    """Refuse split sizes the build cannot make as asked, before it reads anything: a split that is not one,
    fewer than one row, more than ``MAX_ROWS``. The errors name the size as ``<split>_rows``, the field of
    ``intentvcs build-mix``'s ``--<split>-rows`` option (which the command line names instead)."""
    for split, rows in sizes.items():
        if split not in SIZES[dataset]:
            raise ValueError(f"unknown split {split!r}; choose from {', '.join(SIZES[dataset])}")
        if rows < 1:
            raise ValueError(f"{split}_rows must be at least 1, got {rows}")
        if rows > MAX_ROWS:
            raise ValueError(f"{split}_rows must be at most {MAX_ROWS:,}, got {rows:,}: every row is built in "
                             f"memory before the files are written (about 3.5 kB a row: {rows:,} would take "
                             f"{rows * 3.5e3 / 1e9:,.0f} GB); the released {NAMES[dataset]} {split} split has "
                             f"{SIZES[dataset][split]:,} rows")


def data_card(dataset: str, variant: str, seed: int, files: dict[str, list[Example]],
              sources: Sequence[Path]) -> dict[str, Any]:
    """What was built, measured on the rows themselves: counts, intents per row, connectors, sources."""
    def shares(values: list) -> dict[str, float]:
        counts: dict[str, int] = {}
        for value in values:
            counts[str(value)] = counts.get(str(value), 0) + 1
        return {key: round(n / len(values), 4) for key, n in sorted(counts.items())}

    train = files["train"]
    gaps = [row.text[a["end"]:b["start"]].strip(" .?") for row in train
            for a, b in zip(row.meta["segments"], row.meta["segments"][1:])]
    return {
        "benchmark": f"{NAMES[dataset]}{'-hard' if variant == 'hard' else ''}", "dataset": dataset,
        "variant": variant, "seed": seed, "counts": {split: len(rows) for split, rows in files.items()},
        "intents": len({label for rows in files.values() for row in rows for label in row.labels}),
        "intents_per_row_train": shares([len(row.labels) for row in train]),
        "connectors_train": shares(gaps),
        # The standard paragraph of the module docstring, and for ``hard`` the paragraph of what it changes.
        "construction": " ".join(__doc__.split("\n\n")[1:3 if variant == "hard" else 2]).replace("\n", " "),
        "sources": [{"path": str(path.resolve()),
                     "sha256": file_digest(path)} for path in sources],
    }
