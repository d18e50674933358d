"""Silence a chatty third-party logger for the span of one call."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def quiet_logger(name: str | None, level: int) -> Iterator[None]:
    """Raise logger ``name`` (None: the root logger) to ``level`` inside the block, then restore it.

    Never lowers it: a logger that its caller (or a parent's level) had made quieter than ``level`` stays as
    quiet, so that a warning silenced outside the export is not let through inside it."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(max(level, logger.getEffectiveLevel()))
    try:
        yield
    finally:
        logger.setLevel(before)
