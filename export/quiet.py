"""Silence a chatty third-party logger for the span of one call."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def quiet_logger(name: str | None, level: int) -> Iterator[None]:
    """Raise logger ``name`` (None: the root logger) to ``level`` inside the block, then restore it."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)
