"""``intentvcs convert``, ``build-vcs`` and ``build-mix``: public data sets → canonical JSONL.

convert    one split of a source data set → one JSONL file.
build-vcs  a DialogVCS benchmark directory (see ``intentvcs.training.vcs_builder``).
build-mix  MixATIS / MixSNIPS, standard or hard (see ``intentvcs.training.mix_builder``).
Both print a JSON summary on stdout; errors in the data exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from intentvcs.cli.options import STDOUT_HELP, given, output_file, output_folder, print_summary
# The loaders and the builder import numpy, not torch: cheap enough to offer their names as choices.
from intentvcs.training.loaders import DATA_ENV, DEFAULT_DATA_ROOT, FORMATS, data_root
from intentvcs.training.mix_builder import SIZES as MIX_SIZES
from intentvcs.training.mix_builder import VARIANTS as MIX_VARIANTS
from intentvcs.training.vcs_builder import DIFFICULTIES, GROUPS, SPECS

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "convert", help="convert one split of a public data set to canonical JSONL",
        description="Read CLINC150 (a data_*.json file), SNIPS/ATIS (the data set folder) or "
                    "MultiWOZ/CrossWOZ (the folder with val.json.zip and test.json.zip) and write "
                    "one split as canonical JSONL.",
    )
    p.add_argument("--format", required=True, choices=FORMATS, help="the source data set's format")
    p.add_argument("--input", required=True, type=given, help="data_*.json for clinc150, else the data set folder")
    p.add_argument("--split", required=True,
                   help="train, valid or test (multiwoz/crosswoz: valid or test)")
    p.add_argument("--no-oos", action="store_true", help="clinc150: leave out the out-of-scope rows")
    p.add_argument("--out", required=True, type=output_file,
                   help=f"JSONL file to write (atomically; {STDOUT_HELP})")
    p.set_defaults(func=run_convert)

    p = sub.add_parser(
        "build-vcs", help="build a DialogVCS benchmark (versions, splits, composites)",
        description="Build SNIPS-/ATIS-/MultiWOZ-/CrossWOZ-VCS into a directory with train.jsonl, "
                    "train_gold.jsonl, valid.jsonl, valid_gold.jsonl, test.jsonl, relations.json "
                    "and info.json (written atomically).",
    )
    p.add_argument("--dataset", required=True, choices=tuple(SPECS))
    add_data_root(p, "snips/, atis/, ...")
    p.add_argument("--out", required=True, type=output_folder,
                   help="benchmark directory to write (an earlier benchmark there, one "
                   "whose info.json names a DialogVCS benchmark and that holds nothing but the files above, is "
                   "replaced; any other non-empty folder only with --force; never, even with --force, a folder the "
                   "build reads or one holding it)")
    p.add_argument("--force", action="store_true", help="replace --out even if it is not an earlier benchmark")
    p.add_argument("--seed", type=int, default=0, help="seed of the builder's draws (default: 0, the recorded one)")
    p.add_argument("--difficulty", default=DIFFICULTIES[0], choices=DIFFICULTIES,
                   help="full: every family as in the paper; easy k: k families get versions; "
                        "hard k: k families get split/composite + versions")
    p.add_argument("--groups", type=int, choices=GROUPS, help="k for easy/hard")
    p.set_defaults(func=run_build_vcs)

    p = sub.add_parser(
        "build-mix", help="build MixATIS or MixSNIPS (multi-intent utterances), standard or hard",
        description="Join 1-3 single-intent ATIS or SNIPS utterances of one split (30/50/20 per cent, distinct "
                    "intents) into multi-intent rows, as AGIF's MixATIS and MixSNIPS do, or as the hard "
                    "variant does (random order, more connectors, typed casing and punctuation); writes "
                    "train.jsonl, valid.jsonl, test.jsonl, valid-known.jsonl, test-known.jsonl and info.json (a "
                    "data card) atomically. valid-known.jsonl and test-known.jsonl are valid.jsonl and test.jsonl "
                    "without the spans of types the train split never shows (every row kept; info.json counts "
                    "what they dropped): what train --valid / --test and evaluate accept for a model trained on "
                    "train.jsonl, which refuse such types (MixATIS test has some).",
    )
    p.add_argument("--dataset", required=True, choices=tuple(MIX_SIZES))
    p.add_argument("--variant", default=MIX_VARIANTS[0], choices=MIX_VARIANTS)
    add_data_root(p, "snips/ and atis/")
    p.add_argument("--out", required=True, type=output_folder,
                   help="directory to write (an earlier build there, one whose "
                   "info.json names MixATIS or MixSNIPS and that holds nothing but the files above, is replaced; "
                   "any other non-empty folder only with --force; never, even with --force, a folder the build reads "
                   "or one holding it)")
    p.add_argument("--force", action="store_true", help="replace --out even if it is not an earlier build")
    p.add_argument("--seed", type=int, default=0, help="seed of the builder's draws (default: 0, the recorded one)")
    for split in ("train", "valid", "test"):
        p.add_argument(f"--{split}-rows", type=int, metavar="N",
                       help=f"rows of {split}.jsonl (default: the released size); the splits are drawn in "
                            "turn from one generator: another --train-rows draws other valid and test rows "
                            "too" + (", another --valid-rows other test rows" if split == "valid" else ""))
    p.set_defaults(func=run_build_mix)


def add_data_root(p: argparse.ArgumentParser, holding: str) -> None:
    """``--data-root``, the folder of the public data sets (``loaders.data_root``)."""
    p.add_argument("--data-root", default=data_root(), type=given,
                   help=f"folder holding {holding} (default: ${DATA_ENV} if set, else {DEFAULT_DATA_ROOT} from the "
                        "working folder)")


def dataset_folder(args: argparse.Namespace) -> Path:
    """``--data-root``'s folder of ``--dataset`` (asked after the outputs are checked); ``DataError`` (exit 2)
    saying where the root came from and how to give another when it has none (the default is relative to the
    working folder)."""
    from intentvcs.core.dataio import DataError

    folder = Path(args.data_root) / args.dataset
    if not folder.is_dir():
        origin = ("--data-root" if args.data_root != data_root() else
                  f"${DATA_ENV}" if os.environ.get(DATA_ENV) else f"the default, {DEFAULT_DATA_ROOT} from the working "
                  "folder")
        raise DataError(folder, None, f"no {args.dataset} folder in the data root {args.data_root} ({origin}); give "
                                      f"--data-root FOLDER holding {args.dataset}/, or set {DATA_ENV}")
    return folder


def run_convert(args: argparse.Namespace) -> int:
    from intentvcs.core import atomic
    from intentvcs.core.dataio import label_inventory, write_jsonl
    from intentvcs.training import loaders

    if args.no_oos and args.format != "clinc150":
        raise ValueError("--no-oos only applies to --format clinc150")
    atomic.check_targets([args.out], inputs=[args.input])
    if Path(args.input).is_dir() and Path(args.out).is_file():
        # A file of the data set folder (snips/train/label): check_targets compares --out with the folder
        # only, and the loader reads the file before it is replaced, so the source was lost without a word.
        # A new file there destroys nothing.
        atomic.check_outside(args.input, [args.out])
    skipped: dict[str, int] = {}
    examples = loaders.load(args.format, args.input, args.split, include_oos=not args.no_oos, skipped=skipped)
    write_jsonl(args.out, examples)
    summary = {
        "out": args.out, "format": args.format, "split": args.split, "rows": len(examples),
        "labels": len(label_inventory(examples)),
        "out_of_scope": sum(ex.is_out_of_scope for ex in examples),
        # Source rows left out, by reason (MultiWOZ/CrossWOZ user turns without an intent).
        "skipped": dict(sorted(skipped.items())),
    }
    # Not after the rows on standard output when --out is it (`--out /dev/stdout | jq`): one more "row".
    print_summary(summary, args.out)
    return 0


def run_build_vcs(args: argparse.Namespace) -> int:
    from intentvcs.core import atomic
    from intentvcs.training import vcs_builder as vcs

    # What the build reads (a split folder, an archive), not only the data set folder: an --out that is
    # data-root/snips/train holds no data set folder, and replacing it deleted that split.
    atomic.check_folder_target(args.out, inputs=vcs.source_paths(args.dataset, args.data_root))
    dataset_folder(args)
    info = vcs.build(args.dataset, args.data_root, args.out, seed=args.seed,
                     difficulty=args.difficulty, groups=args.groups, force=args.force)
    summary = {"out": args.out, "info": f"{args.out}/{vcs.INFO_FILE}"}
    summary.update({k: info[k] for k in ("benchmark", "labels", "paper_labels", "counts", "selected_families",
                                         "source_rows_skipped")})
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0


def run_build_mix(args: argparse.Namespace) -> int:
    from intentvcs.core import atomic
    from intentvcs.training import mix_builder as mix

    atomic.check_folder_target(args.out, inputs=mix.source_paths(args.dataset, args.data_root))
    dataset_folder(args)
    # The sizes are checked by the builder before it reads anything (mix_builder.check_sizes); its messages
    # name test_rows and so on, which main() words as the options, --test-rows.
    sizes = {split: getattr(args, f"{split}_rows") for split in ("train", "valid", "test")}
    info = mix.build(args.dataset, args.data_root, args.out, seed=args.seed, variant=args.variant,
                     sizes={k: v for k, v in sizes.items() if v is not None}, force=args.force)
    for split, missing in info["labels_missing_from_train"].items():
        if missing:
            log.warning("%s: %s.jsonl has %d intent(s) the train split never shows, %s: a model trained on "
                        "train.jsonl cannot answer those rows (a ceiling on its %s score)", args.out, split,
                        len(missing), ", ".join(f"{label} ({n} rows)" for label, n in missing.items()), split)
    summary = {"out": args.out, "info": f"{args.out}/{mix.INFO_FILE}"}
    summary.update({k: info[k] for k in ("benchmark", "intents", "counts", "intents_per_row_train",
                                         "connectors_train", "labels_missing_from_train", "source_rows_skipped")})
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0
