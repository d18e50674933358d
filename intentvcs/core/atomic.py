"""Write files and directories so that a reader never sees half of them.

Everything lands in a temporary sibling first and is renamed into place, which
is atomic on POSIX within one file system.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Mapping


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp/mkdtemp create private (0600/0700) entries; published files should
# get the permissions a plain open()/mkdir() would give them.
_FILE_MODE = 0o666 & ~_umask()
_DIR_MODE = 0o777 & ~_umask()


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file and ``os.replace``."""
    return write_files({path: text})[0]


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as indented UTF-8 JSON, atomically."""
    return write_text(path, json_text(obj))


def write_files(contents: Mapping[str | os.PathLike, str | bytes]) -> list[Path]:
    """Write several files, all or none: the outputs of one command.

    Each content (text is written as UTF-8) goes to a uniquely named temporary
    sibling of its target first; only when every one is written are they
    renamed into place. A target that is a directory, or any failure while
    writing, leaves no target changed and no temporary file behind.
    """
    targets = check_targets(contents)
    written: list[tuple[str, Path]] = []
    try:
        for target, content in zip(targets, contents.values()):
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            written.append((tmp, target))
            os.chmod(tmp, _FILE_MODE)
            with os.fdopen(fd, "wb") as handle:
                handle.write(content.encode("utf-8") if isinstance(content, str) else content)
                handle.flush()
                os.fsync(handle.fileno())
    except BaseException:
        for tmp, _ in written:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise
    for tmp, target in written:
        os.replace(tmp, target)
    return targets


@contextlib.contextmanager
def streamed(path: str | os.PathLike) -> Iterator[IO[bytes]]:
    """A binary handle whose content replaces ``path`` only if the block ends without an exception.

    The streaming counterpart of ``write_files``, for outputs too large to
    hold in memory: a uniquely named temporary sibling, flushed to disk and
    renamed into place; on any failure it is removed and ``path`` is left as
    it was.
    """
    target = check_targets([path])[0]
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.chmod(tmp, _FILE_MODE)
        with os.fdopen(fd, "wb", buffering=1 << 20) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def check_targets(paths: Iterable[str | os.PathLike | None]) -> list[Path]:
    """The output file paths (None skipped), refusing one that is a directory.

    Commands call it before their long work, so a bad output path fails in
    a second instead of after the model has run.
    """
    targets = [Path(path) for path in paths if path is not None]
    for target in targets:
        if target.is_dir():
            raise IsADirectoryError(f"{target} is a directory; give a file path")
        folder = next(parent for parent in target.parents if parent.exists())  # "/" always exists
        if not folder.is_dir():
            raise NotADirectoryError(f"cannot write {target}: {folder} is a file, not a folder")
    return targets


def json_text(obj: Any) -> str:
    """``obj`` as the indented UTF-8 JSON text every intentvcs output uses."""
    return json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def check_replaceable(final: str | os.PathLike, marker: str, force: bool = False) -> None:
    """Raise ``FileExistsError`` unless ``final`` may be replaced by a new output directory.

    Free to replace: nothing, an empty directory, or a directory holding
    ``marker``, the file that marks an earlier output of the same kind
    (``manifest.json`` of a bundle, ``checkpoint.json`` of a checkpoint). Any
    other directory holds what the user did not create with us (``--out .``
    would be the working folder), so it is replaced only with ``force``; a
    file never is. Commands call this before their long work, so a refusal
    costs nothing, and ``directory`` calls it again before it replaces.
    """
    final = Path(final)
    if not final.exists() and not final.is_symlink():
        return
    if not final.is_dir() or final.is_symlink():
        raise FileExistsError(f"{final} exists and is not a directory; refusing to replace it (choose another --out)")
    if force or (final / marker).is_file() or not any(final.iterdir()):
        return
    raise FileExistsError(f"{final} exists and holds no {marker}, so it is not an earlier output of this command; "
                          "refusing to replace it (choose another --out, or pass --force to replace it)")


@contextlib.contextmanager
def directory(final: str | os.PathLike, marker: str, force: bool = False) -> Iterator[Path]:
    """Yield a fresh temporary directory that replaces ``final`` on success.

    On an exception the temporary directory is removed and ``final`` is left as
    it was, so a failed export or training run never leaves a loadable but
    broken artifact behind. ``final`` is replaced only when
    ``check_replaceable(final, marker, force)`` allows it (``FileExistsError``).
    """
    final = Path(final)
    check_replaceable(final, marker, force)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    os.chmod(tmp, _DIR_MODE)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if final.exists():
        old = final.with_name(f".{final.name}.old-{os.getpid()}")
        os.replace(final, old)
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
