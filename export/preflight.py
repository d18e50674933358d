"""What an export refuses before it loads anything heavy.

Torch-free, so ``intentvcs export`` runs it before it imports the exporter
(torch, onnx and Optimum take seconds to import, which a typo in
``--checkpoint`` or ``--out`` used to wait for); ``export_bundle`` runs it
first too, so that a library caller gets the same refusals.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from intentvcs.core import atomic
from intentvcs.core.decision import Decision
from intentvcs.core.manifest import BUNDLE_OUTPUT
from intentvcs.core.team_formats import iter_numbered
from intentvcs.training.checkpoint import META_FILE, read_checkpoint_meta

# The opsets an export may ask for (measured with torch 2.13 on a BERT-family backbone): the encoder's
# attention needs 14 (13 fails inside the exporter); torch's TorchScript exporter, the one Optimum runs,
# supports up to 20 (it writes 21-23 with a warning that they are unsupported, and refuses 24).
MIN_OPSET, MAX_OPSET = 14, 20


def check_export(checkpoint_dir: str | os.PathLike, out_dir: str | os.PathLike, *,
                 parity_data: str | os.PathLike | None = None, result_file: str | os.PathLike | None = None,
                 opset: int | None = None, force: bool = False) -> tuple[dict[str, Any], Decision]:
    """The checkpoint's ``checkpoint.json`` and decision, once the export's arguments pass every check that
    needs no model: the opset, the checkpoint, that ``parity_data`` is a file (its rows are read and checked
    by ``intentvcs.export.parity.held_out_rows``), and the outputs (none replaces an input, none lies inside
    the checkpoint, ``out_dir`` is an earlier bundle, empty, or ``force``). ``ValueError``,
    ``FileNotFoundError``, ``FileExistsError`` or ``DataError`` otherwise."""
    check_opset(opset)
    checkpoint_dir, out_dir = Path(checkpoint_dir), Path(out_dir)
    meta = read_checkpoint_meta(checkpoint_dir)
    decision = checkpoint_decision(meta, checkpoint_dir / META_FILE)
    if parity_data is not None:
        iter_numbered(parity_data)  # refuses a missing file at once; the rows are read after the imports
    atomic.check_targets([result_file], inputs=(checkpoint_dir, parity_data))
    atomic.check_folder_target(out_dir, inputs=(checkpoint_dir, parity_data), outputs=[result_file])
    atomic.check_outside(checkpoint_dir, [out_dir, result_file])  # the checkpoint is read whole
    atomic.check_replaceable(out_dir, BUNDLE_OUTPUT, force)
    return meta, decision


def check_opset(opset: int | None) -> None:
    """Refuse an opset outside ``MIN_OPSET``..``MAX_OPSET`` (None: Optimum's choice) before any work."""
    if opset is not None and not MIN_OPSET <= opset <= MAX_OPSET:
        raise ValueError(f"--opset {opset} is not one this export can write: give {MIN_OPSET} to {MAX_OPSET}, "
                         "or leave it out for Optimum's choice for the backbone")


def checkpoint_decision(meta: dict[str, Any], meta_path: Path) -> Decision:
    """The checkpoint's decision, which must cover exactly its labels."""
    try:
        decision = Decision.from_dict(meta.get("decision"))
    except ValueError as exc:
        raise ValueError(f"{meta_path}: decision: {exc}") from None
    if list(decision.labels) != meta.get("labels"):
        raise ValueError(f"{meta_path}: the decision's labels differ from 'labels'")
    return decision
