"""Pictures of evaluation results (matplotlib; training side only)."""

from __future__ import annotations

import io
from typing import Sequence

import numpy as np


def cooccurrence_png(counts: Sequence[Sequence[int]], labels: Sequence[str],
                     title: str = "Label co-occurrence of predictions") -> bytes:
    """Row-normalised co-occurrence (P(column predicted | row predicted)) as PNG bytes.

    Entangled labels (versions, splits, composites) show up as bright
    off-diagonal blocks. Bytes, not a file: the caller writes them with its
    other outputs, all or none (``intentvcs.core.atomic.write_files``).
    """
    # A figure of its own on the Agg canvas, not pyplot's: matplotlib.use("Agg") switched the whole process's
    # backend, and a caller's own figures (a notebook's inline ones) stopped showing.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    counts = np.asarray(counts, dtype=float)
    diag = np.diag(counts)
    conditional = np.divide(counts, diag[:, None], out=np.zeros_like(counts), where=diag[:, None] > 0)
    size = max(6.0, 0.28 * len(labels) + 2)
    fig = Figure(figsize=(size, size))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    image = ax.imshow(conditional, cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="P(column | row)")
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=120)
    return png.getvalue()
