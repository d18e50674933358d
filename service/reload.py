"""Swap the served bundle without a restart and without dropping a request.

``intentvcs export --out DIR`` replaces a bundle folder atomically (the new
folder is renamed over the old one), so ``DIR``'s files change inode at one
instant. Each worker's ``BundleWatcher`` notices that (a ``stat`` of each file
every ``interval_s``: cheaper than reading a manifest that may hold megabytes
of neighbour bank), loads and warms the new bundle beside the old one, then
swaps the reference the API methods read. Requests in flight finish on the
engine they started with; the next ones get the new engine. A bundle that
fails to load (corrupt, incompatible, or copied in file by file and not yet
whole) is logged and counted, and the old one goes on serving: a bad export
never takes the service down. It is tried again as soon as any of its files
changes again, so a copy that completes later is picked up. A load during which
the folder changed again is neither served nor counted (its files, read one by
one, may come from two bundles): it is loaded again the next round. Meanwhile the
gauge ``intentvcs_model_reload_failing`` is 1 (``report_failing``), back to 0
once a bundle loads: the alert ``IntentvcsModelReloadFailed`` fires for as long
as the broken bundle stays, not only for the minutes after the failure.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Callable, Generic, TypeVar

from intentvcs.core.manifest import MANIFEST_FILE

log = logging.getLogger(__name__)
Model = TypeVar("Model")


def report_failing(failing: bool) -> None:
    """Publish whether the served path holds a bundle that cannot be loaded (this worker's metric)."""
    from intentvcs.service import prometheus_metrics

    prometheus_metrics.get().record_reload_failing(failing)


class BundleWatcher(Generic[Model]):
    """Call ``load()`` when any file of ``directory`` changes, then ``swap(model)``; ``failed(exc)`` if it fails.

    ``start()`` runs the watch on a daemon thread; ``check()`` is one round of
    it (what the thread does every ``interval_s`` seconds). ``failing(True)``
    follows a failed load and ``failing(False)`` a swap (default: ``report_failing``).
    """

    def __init__(self, directory: str | os.PathLike, load: Callable[[], Model], swap: Callable[[Model], None],
                 failed: Callable[[Exception], None], interval_s: float,
                 failing: Callable[[bool], None] = report_failing):
        self.manifest = Path(directory) / MANIFEST_FILE
        self.load, self.swap, self.failed, self.failing = load, swap, failed, failing
        self.interval_s = interval_s
        self._seen = self._stamp()
        self._stop = threading.Event()

    def _stamp(self) -> tuple[tuple[str, int, int, int], ...] | None:
        """What changes when the folder is replaced or any file of it is written: each file's name, inode,
        size and modification time (None while the folder cannot be listed). A folder without its manifest
        is a stamp too, so it is loaded, and fails as the broken bundle it is (counted, ``failing``): taken
        for "between two renames", it was never reported, and the gauge stayed 0 for as long as it stayed."""
        try:
            stats = [(path.name, _stat(path)) for path in sorted(self.manifest.parent.iterdir())]
        except OSError:  # between the two renames of a replacement (no folder), or a file gone: next round
            return None
        return tuple((name, stat.st_ino, stat.st_size, stat.st_mtime_ns) for name, stat in stats)

    def check(self) -> bool:
        """Load and swap in a replaced bundle; return whether a swap happened. A bundle that failed to
        load is not tried again until one of its files changes (one error, not one per round)."""
        stamp = self._stamp()
        if stamp is None or stamp == self._seen:
            return False
        self._seen = stamp
        try:
            model = self.load()
        except Exception as exc:  # any load failure keeps the old model serving
            if self._changed_since(stamp):
                return False  # the folder changed meanwhile (a copy under way, another export): judge it still
            self._failed(exc)
            return False
        if self._changed_since(stamp):
            # Its files are read one by one, by path: the manifest of one bundle may have gone with the
            # graph of the next. Not served; loaded again next round, once the folder holds still.
            log.info("the bundle at %s changed while it was loaded; loading it again", self.manifest.parent)
            return False
        try:
            self.swap(model)
        except Exception as exc:  # the old model goes on serving, as after a failed load
            # Counted and reported as a failed load is (and, as one, tried again once a file changes): it went
            # unserved with one log line from the watch's thread, the gauge and its alert quiet.
            self._failed(exc)
            return False
        self.failing(False)
        return True

    def _failed(self, exc: Exception) -> None:
        log.error("the bundle at %s changed but cannot be served; still serving the previous one: %s",
                  self.manifest.parent, exc)
        self.failed(exc)
        self.failing(True)

    def _changed_since(self, stamp: tuple) -> bool:
        """Whether the folder changed since ``stamp`` (then the next round loads it again, whatever it holds)."""
        if self._stamp() == stamp:
            return False
        self._seen = None
        return True

    def start(self) -> None:
        threading.Thread(target=self._run, name="bundle-watcher", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.check()
            except Exception:  # a swap or a report that fails must not end the watch for good
                # The thread would end with it, and every later export would go unserved without a word.
                log.exception("the bundle watch of %s failed this round; watching on", self.manifest.parent)


def _stat(path: Path) -> os.stat_result:
    """``path``'s stat, a link's own where it leads nowhere: a broken link in the folder (an editor's lock
    file) failed the stat of every round, and no export was noticed for as long as it stayed."""
    try:
        return path.stat()
    except OSError:  # also a link to itself (ELOOP) and one through a file (NotADirectoryError)
        if not path.is_symlink():
            raise
        return path.lstat()
