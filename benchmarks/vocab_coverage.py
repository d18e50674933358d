"""How much of each DialogVCS set the default backbone's vocabulary can read.

MiniLM-L6 (all-MiniLM-L6-v2) tokenizes with BERT's English uncased word
pieces. Each CJK character is its own token (the normaliser's
``handle_chinese_chars``), so a Chinese character the vocabulary lacks
becomes ``[UNK]`` and the model sees nothing of it. Per set: the training
rows' word pieces and the share that are ``[UNK]``; for CJK text, the distinct
characters and their occurrences that are unknown.

    python -m benchmarks.vocab_coverage --sets multiwoz=runs/bench/woz/multiwoz-vcs crosswoz=runs/bench/woz/crosswoz-vcs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.common import write_results


def is_cjk(text: str) -> bool:
    return len(text) == 1 and "\u4e00" <= text <= "\u9fff"


def coverage(name: str, folder: Path) -> dict:
    """Word-piece and CJK-character coverage of ``folder/train.jsonl`` by the default backbone's tokenizer."""
    from tokenizers import Tokenizer

    from intentvcs.core.dataio import read_jsonl
    from intentvcs.training.model import DEFAULT_BACKBONE_NAME, default_backbone

    tokenizer = Tokenizer.from_file(str(Path(default_backbone()) / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    unknown = tokenizer.token_to_id("[UNK]")
    rows = read_jsonl(folder / "train.jsonl")
    pieces = unknown_pieces = cjk_seen = cjk_unknown = 0
    characters: set[str] = set()
    unknown_characters: set[str] = set()
    for row in rows:
        encoding = tokenizer.encode(row.text, add_special_tokens=False)
        pieces += len(encoding.ids)
        unknown_pieces += sum(i == unknown for i in encoding.ids)
        for piece, (start, end) in zip(encoding.ids, encoding.offsets):
            if is_cjk(row.text[start:end]):
                characters.add(row.text[start:end])
                cjk_seen += 1
                if piece == unknown:
                    unknown_characters.add(row.text[start:end])
                    cjk_unknown += 1
    record = {"set": name, "backbone": DEFAULT_BACKBONE_NAME, "rows": len(rows), "word_pieces": pieces,
              "unknown_pieces": unknown_pieces, "unknown_piece_share": round(100 * unknown_pieces / pieces, 2)}
    if characters:
        record.update({"cjk_characters": len(characters), "cjk_characters_unknown": len(unknown_characters),
                       "cjk_occurrences": cjk_seen, "cjk_occurrences_unknown": cjk_unknown,
                       "cjk_occurrence_unknown_share": round(100 * cjk_unknown / cjk_seen, 2)})
    return record


def render(records: list[dict]) -> str:
    lines = ["| set | training rows | word pieces | [UNK] share | CJK characters unknown | CJK occurrences unknown |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in records:
        cjk = (f"{r['cjk_characters_unknown']} of {r['cjk_characters']}",
               f"{r['cjk_occurrence_unknown_share']:.1f}%") if "cjk_characters" in r else ("–", "–")
        lines.append(f"| {r['set']} | {r['rows']:,} | {r['word_pieces']:,} | {r['unknown_piece_share']:.2f}% | "
                     f"{cjk[0]} | {cjk[1]} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", required=True, metavar="NAME=DIR",
                        help="built DialogVCS sets (intentvcs build-vcs --out DIR)")
    args = parser.parse_args(argv)
    records = []
    for spec in args.sets:
        name, _, folder = spec.partition("=")
        if not folder:
            parser.error(f"--sets {spec!r}: expected NAME=DIR")
        records.append(coverage(name, Path(folder)))
    write_results("vocab_coverage", records, render(records))
    print(render(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
