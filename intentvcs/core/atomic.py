"""Write files and directories so that a reader never sees half of them.

Everything lands in a temporary sibling first and is renamed into place, which
is atomic on POSIX within one file system. A file is written as ``open`` would
write it: through a symbolic link, onto the file it names, and keeping an
existing file's permissions.

An output path that exists, itself or through a link, as a stream rather than a
file (a FIFO, or a character device: /dev/null, /dev/stdout, a terminal) is
written to as ``open`` would write it, and never replaced or removed: a stream
cannot be swapped for another, so there is no atomicity there, and a failure
leaves what was written. So is a regular file that one of this process's own descriptors is open on,
when the path names the descriptor (/dev/stdout redirected to a file): written through the descriptor, so
that ``>>`` appends. A block device or a socket is refused (``ValueError``).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import json
import os
import re
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Mapping, NamedTuple


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


def write_files(contents: Mapping[str | os.PathLike, str | bytes | None]) -> list[Path]:
    """Write several files, all or none: the outputs of one command (``staged`` around nothing)."""
    with staged(contents) as targets:
        pass
    return targets


@contextlib.contextmanager
def staged(contents: Mapping[str | os.PathLike, str | bytes | None]) -> Iterator[list[Path]]:
    """Write several files, all or none, committed when the block ends without an error.

    On entry each content (text is written as UTF-8) goes to a uniquely named
    temporary sibling of its target; when the block ends, they are renamed
    into place and each target whose content is None is removed (a file the
    new outputs no longer have). A target that is a directory, a failure while
    writing, or an error in the block leaves no target changed and no
    temporary file behind. ``directory`` nested inside commits its folder
    first, then these files (a command's folder and the files that describe it;
    ``directory``'s ``also`` does the same for files known only at its end).
    The commit itself is renames only, each atomic, one after another: a
    process killed between two of them (no data is written then) leaves the
    earlier ones done; a rename that fails leaves no temporary file behind.
    A target that is a stream (``_is_stream``: a FIFO, a character device) is no
    file of ours: its content is written to it on entry, after the temporary
    files, before the block runs (a stream write that fails, say a reader gone,
    changes no file and publishes no folder of a ``directory`` nested inside;
    written at the end, it failed after that folder was published), and it is
    never removed. A stream has no atomicity: a block that fails after it was
    written leaves what it read.
    """
    targets = check_targets(contents, probe=False)
    streams = {target for target in targets if _is_stream(target)}
    written: list[tuple[str, Path]] = []
    to_streams: list[tuple[Path, bytes]] = []
    try:
        for target, content in zip(targets, contents.values()):
            if content is None:
                continue
            if target in streams:
                to_streams.append((target, content.encode("utf-8") if isinstance(content, str) else content))
                continue
            destination, mode = _destination(target)
            destination.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".tmp", dir=destination.parent)
            written.append((tmp, destination))
            os.chmod(tmp, mode)
            with os.fdopen(fd, "wb") as handle:
                handle.write(content.encode("utf-8") if isinstance(content, str) else content)
                handle.flush()
                os.fsync(handle.fileno())
        for target, data in to_streams:
            with _open_stream(target) as handle:
                handle.write(data)
        yield targets
    except BaseException:
        for tmp, _ in written:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise
    try:
        for tmp, target in written:
            os.replace(tmp, target)
    except BaseException:
        for tmp, _ in written:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)  # those not yet renamed
        raise
    for target, content in zip(targets, contents.values()):
        if content is None and target not in streams:
            target.unlink(missing_ok=True)


@contextlib.contextmanager
def streamed(path: str | os.PathLike) -> Iterator[IO[bytes]]:
    """A binary handle whose content replaces ``path`` only if the block ends without an exception.

    The streaming counterpart of ``write_files``, for outputs too large to
    hold in memory: a uniquely named temporary sibling, flushed to disk and
    renamed into place; on any failure it is removed and ``path`` is left as
    it was. A ``path`` that is a stream (``_is_stream``: a FIFO, a character
    device such as /dev/stdout or /dev/null) is written to directly, as the
    block writes, with no atomicity: a failure leaves what was written.
    """
    target = check_targets([path], probe=False)[0]
    if _is_stream(target):
        with _open_stream(target) as handle:
            yield handle
        return
    target, mode = _destination(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.chmod(tmp, mode)
        with os.fdopen(fd, "wb", buffering=1 << 20) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _is_stream(target: Path) -> bool:
    """Whether ``target`` exists, itself or through symbolic links, as a stream that an output is written to
    rather than replaced: a FIFO or a character device. ``ValueError`` for a block device or a socket.

    Renaming a file onto such a path replaced it: as root ``--out /dev/null`` deleted the system's
    /dev/null, a FIFO's reader waited forever for a writer that never came, and ``--out /dev/stdout`` (a
    pipe: /proc's link "pipe:[N]" resolves to no path) failed naming a temporary file in /proc. Written to
    as ``open`` writes it instead: ``--out /dev/stdout | jq``, ``--out /dev/null`` (a timing run) and a FIFO
    are what the user asks for, and what any program does with them; there is no atomicity to keep for a
    stream, whose reader takes the bytes as they come. A block device is refused: it is a disk, and an
    output written onto it destroys what the disk holds (no command's output is meant for one); a socket
    cannot be opened as a file at all (``open`` fails with "No such device or address").

    The kernel follows the links (``os.stat``): ``Path.resolve`` cannot follow /proc's links to pipes.
    One of this process's own descriptors named by path (``_own_descriptor``: /dev/stdout, /dev/fd/N) is a
    stream whatever it is open on, a regular file included (``>`` or ``>>`` on the command line).
    """
    try:
        mode = os.stat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False
    if stat.S_ISREG(mode) and _own_descriptor(target) is not None:
        return True
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return False
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return True
    kind = ("a block device (a disk)" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")
    raise ValueError(f"{target} is {kind}; an output is written to a file, a FIFO or a character device "
                     "(/dev/stdout, /dev/null): give another path")


def _own_descriptor(target: Path) -> int | None:
    """The descriptor of this process that ``target`` names through /proc (/dev/stdout, /dev/stderr, /dev/fd/N,
    /proc/self/fd/N, or a link to one of them), else None. Read link by link: the last link, /proc's, leads
    to what the descriptor is open on, which may be any file."""
    path = Path(os.path.abspath(target))
    for _ in range(_MAX_LINKS):
        where = Path(os.path.realpath(path.parent)) / path.name  # /proc/self (a link) reads as /proc/<pid>
        found = _PROC_FD.fullmatch(str(where))
        if found is not None and int(found[1]) == os.getpid():
            return int(found[2])
        if not where.is_symlink():
            return None
        path = Path(os.path.abspath(os.path.join(where.parent, os.readlink(where))))
    return None


_PROC_FD = re.compile(r"/proc/(\d+)/fd/(\d+)")
_MAX_LINKS = 40  # as the kernel follows at most 40 links in one path


def _open_stream(target: Path) -> IO[bytes]:
    """A binary handle writing to the stream ``target``: through this process's own descriptor where it names
    one, else opened as ``open`` opens it.

    Opened by its path, /dev/stdout redirected to a file (``--out /dev/stdout >> answers.jsonl``) was that
    file opened anew for writing: truncated, the user's earlier lines gone, and written from its start. The
    descriptor keeps what the shell opened: its offset, and ``>>``'s appending."""
    descriptor = _own_descriptor(target)
    if descriptor is None:
        return open(target, "wb")  # through a link, as open() follows it (a FIFO, /dev/null)
    if descriptor == 1:
        sys.stdout.flush()  # what Python printed before comes first
    elif descriptor == 2:
        sys.stderr.flush()
    return os.fdopen(os.dup(descriptor), "wb")


def writes_to(path: str | os.PathLike, stream: IO) -> bool:
    """Whether ``path`` is what ``stream`` writes to: the same file, pipe or terminal (``/dev/stdout``, or the
    file that standard output is redirected to, for ``sys.stdout``). False for a path that does not exist yet
    and for a stream on no descriptor (a test's capture)."""
    try:
        return os.path.samestat(os.stat(path), os.fstat(stream.fileno()))
    except (OSError, ValueError, AttributeError):
        return False


def _is_character_device(target: Path) -> bool:
    """Whether ``target`` exists, itself or through links, as a character device (/dev/null, a terminal)."""
    try:
        return stat.S_ISCHR(os.stat(target).st_mode)
    except OSError:
        return False


def _destination(target: Path) -> tuple[Path, int]:
    """The file a new content of ``target`` is renamed onto, and the permissions it gets: what a plain
    ``open(target, "w")`` would write. Through a symbolic link, the file it names (renaming onto the link
    replaced the user's link with a file and left the file it points to as it was); an existing file keeps
    its permissions (a file the user made private stayed so no longer), a new one gets ``_FILE_MODE``."""
    if target.is_symlink():
        resolved = _resolve(target)
        if not resolved.parent.is_dir():  # open() would not create the folders a link points into either
            raise FileNotFoundError(f"{target} is a symbolic link to {resolved}, in a folder that does not exist")
        target = resolved
    try:
        return target, stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        return target, _FILE_MODE


def _resolve(path: Path) -> Path:
    """``path.resolve()``, a loop of symbolic links an ``OSError`` as ``open`` raises it (Python 3.11 raises
    ``RuntimeError``, which the command line takes for a bug)."""
    try:
        return path.resolve()
    except RuntimeError:
        raise OSError(errno.ELOOP, f"{path}: a loop of symbolic links") from None


def check_targets(paths: Iterable[str | os.PathLike | None],
                  inputs: Iterable[str | os.PathLike | None] = (), probe: bool = True) -> list[Path]:
    """The output file paths (None skipped), refusing one that is a directory, two that name the
    same file (one output would silently replace the other) and one that is one of the command's
    ``inputs`` (the output would replace the data it was computed from), one in a folder that takes
    no new file, and one that is a block device or a socket (``_is_stream``; a FIFO or a character
    device is written to as it is, and must open for writing; a character device is no file the two
    first checks protect).

    Commands call it before their long work, so a bad output path fails in
    a second instead of after the model has run. ``probe=False`` leaves out the
    writability probe (a file created and removed): for the writers below, whose
    own temporary file is the same test, made at once.
    """
    targets = [Path(path) for path in paths if path is not None]
    seen: dict[Path, Path] = {}
    for target in targets:
        if _is_character_device(target):
            # A device replaces nothing: two outputs on /dev/null, or /dev/stdin read and /dev/stdout written on
            # one terminal, are what the user asks for (a FIFO stays checked: written as its own input, it waits).
            continue
        resolved = _resolve(target)
        if resolved in seen:
            raise ValueError(f"two outputs name the same file, {seen[resolved]} and {target}; give each its own")
        seen[resolved] = target
    for source in (Path(path) for path in inputs if path is not None):
        if source.resolve() in seen:
            raise ValueError(f"the output {seen[source.resolve()]} is the input {source}; write it elsewhere")
    for target in targets:
        if target.is_dir():
            raise IsADirectoryError(f"{target} is a directory; give a file path")
        if _is_stream(target):
            # Written to as it is: no file is made in its folder; whether it opens for writing is what
            # counts (asked without opening it: opening a FIFO waits for its reader).
            if probe and not os.access(target, os.W_OK):
                raise PermissionError(f"cannot write {target}: permission denied")
            continue
        folder = next(parent for parent in target.parents if parent.exists())  # "/" always exists
        if not folder.is_dir():
            raise NotADirectoryError(f"cannot write {target}: {folder} is a file, not a folder")
        if probe:
            _check_writable(target, folder)
    return targets


def check_folder_target(folder: str | os.PathLike, inputs: Iterable[str | os.PathLike | None] = (),
                        outputs: Iterable[str | os.PathLike | None] = ()) -> Path:
    """The output folder's path, refusing one that is or holds one of the command's ``inputs`` (replacing
    it would delete them, ``--force`` or not), one that is or holds another of its ``outputs`` (the
    replacement would delete that file, or that file would make the next run refuse the folder as not
    ours), one below a file, and one whose parent takes no new folder. Commands call it before their long
    work, beside ``check_targets``.
    """
    folder = _named(folder)
    resolved = folder.resolve()

    for source in (Path(path) for path in inputs if path is not None):
        if _within(source, folder):
            raise ValueError(f"the output folder {folder} {'is' if source.resolve() == resolved else 'holds'} the "
                             f"input {source}: replacing the folder would delete it; write elsewhere")
    for target in (Path(path) for path in outputs if path is not None):
        if _within(target, folder):
            raise ValueError(f"the output {target} {'is' if target.resolve() == resolved else 'lies in'} the output "
                             f"folder {folder}; write it elsewhere")
    whole = folder.absolute()
    existing = next(path for path in (whole, *whole.parents) if path.exists())  # "/" always exists
    if existing != whole and not existing.is_dir():
        raise NotADirectoryError(f"cannot write {folder}: {existing} is a file, not a folder")
    # The new folder is made beside the old one, so it is the parent that must take it.
    _check_writable(folder, existing if existing != whole else whole.parent)
    return folder


def _check_writable(target: Path, folder: Path) -> None:
    """Refuse ``target`` when ``folder``, the nearest folder of it that exists, takes no new file, so that this
    fails before the long work and names the user's path rather than a temporary file's. Found by creating a
    file (unnamed where the system allows, and closed at once): root passes any mode check, a read-only mount
    or an ACL does not, and only the attempt tells."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise PermissionError(f"cannot write {target}: {folder} is not writable ({exc.strerror or exc})") from None


def check_outside(folder: str | os.PathLike, outputs: Iterable[str | os.PathLike | None]) -> None:
    """Refuse an output (file or folder; None skipped) that is or lies in ``folder``, an input folder the
    command reads whole (a checkpoint): writing it would change or destroy that input. Commands call it
    before their long work, beside ``check_targets`` and ``check_folder_target``."""
    for target in (Path(path) for path in outputs if path is not None):
        if _within(target, folder):
            where = "is" if target.resolve() == Path(folder).resolve() else "lies in"
            raise ValueError(f"the output {target} {where} the input folder {folder}: writing it would change "
                             "that input; write it elsewhere")


def _within(path: str | os.PathLike, folder: str | os.PathLike) -> bool:
    """Whether ``path`` is ``folder`` or lies inside it, links and ``..`` followed (False when ``folder`` is a
    file other than ``path``)."""
    path, folder = Path(path).resolve(), Path(folder).resolve()
    return path == folder or folder in path.parents


def json_text(obj: Any) -> str:
    """``obj`` as the indented UTF-8 JSON text every intentvcs output uses."""
    return json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


class OutputKind(NamedTuple):
    """What makes a folder an earlier output of one command, which a new one may replace
    (``check_replaceable``): its ``marker`` file (``manifest.json`` of a bundle, ``checkpoint.json`` of a
    checkpoint), the name patterns of everything else such a folder ``holds``, and the ``format`` its
    marker declares (checked when given); ``named_by`` (a key of the marker, the values an output of the
    command has there) where the marker says what it is otherwise: a builder's ``info.json`` names its
    ``benchmark``, and an ``info.json`` beside ``*.jsonl`` files is no proof of one (another command's build,
    a user's own data folder)."""

    marker: str
    holds: tuple[str, ...] = ()
    format: str | None = None
    named_by: tuple[str, frozenset[str]] | None = None


def check_replaceable(final: str | os.PathLike, kind: OutputKind, force: bool = False) -> None:
    """Raise ``FileExistsError`` unless ``final`` may be replaced by a new output directory.

    Free to replace: nothing, an empty directory, or an earlier output of the
    same ``kind``: a directory holding its marker and nothing but what such an
    output holds (names matching its patterns; the marker always), the marker
    a JSON object whose ``format`` is the kind's when it names one. Any
    other directory holds what the user did not create with us (``--out .``
    would be the working folder; a web app's ``manifest.json`` is no bundle's),
    so it is replaced only with ``force``; a file never is. Commands call this
    before their long work, so a refusal costs nothing, and ``directory`` calls
    it again before it replaces. A path without a name of its own (``.``, ``..``,
    ``/``) is refused (``ValueError``).
    """
    final = _named(final)
    if not final.exists() and not final.is_symlink():
        return
    if final.is_symlink():
        # Renaming onto the link would swap the link itself for a folder, leaving its target as it was.
        raise FileExistsError(f"{final} is a symbolic link (to {os.readlink(final)}); refusing to replace it (give "
                              "the folder it points to, or choose another --out)")
    if not final.is_dir():
        raise FileExistsError(f"{final} exists and is not a directory; refusing to replace it (choose another --out)")
    entries = sorted(entry.name for entry in final.iterdir())
    if force or not entries:
        return
    advice = "choose another --out, or pass --force to replace it"
    marker, marker_format = kind.marker, kind.format
    if not (final / marker).is_file():
        raise FileExistsError(f"{final} exists and holds no {marker}, so it is not an earlier output of this "
                              f"command; refusing to replace it ({advice})")
    if marker_format is not None and _field_of(final / marker, "format") != marker_format:
        raise FileExistsError(f"{final / marker} is not the {marker} of an earlier output of this command (no "
                              f"format {marker_format!r}); refusing to replace {final} ({advice})")
    if kind.named_by is not None:
        key, names = kind.named_by
        name = _field_of(final / marker, key)
        if name not in names:
            raise FileExistsError(f"{final / marker} is not the {marker} of an earlier output of this command (its "
                                  f"{key} is {name!r}, not one of {', '.join(sorted(names))}); refusing to replace "
                                  f"{final} ({advice})")
    foreign = [name for name in entries
               if name != marker and not any(fnmatch.fnmatchcase(name, p) for p in kind.holds)]
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise FileExistsError(f"{final} holds what this command does not write ({shown}); refusing to replace it "
                              f"and lose them ({advice})")


def _named(folder: str | os.PathLike) -> Path:
    """``folder`` as a path, refused (``ValueError``) when it names no folder of its own (``.``, ``..``, ``/``):
    an output folder is replaced through a sibling, and such a path has none."""
    folder = Path(folder)
    if folder.name in ("", ".", ".."):
        raise ValueError(f"{str(folder)!r} names no folder of its own; refusing to replace it (give the path of "
                         "a new folder)")
    return folder


def _field_of(path: Path, key: str) -> Any:
    """``key`` of the JSON object in ``path``; None when it is no such object or has no such key."""
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return body.get(key) if isinstance(body, dict) else None


@contextlib.contextmanager
def directory(final: str | os.PathLike, kind: OutputKind, force: bool = False,
              also: Mapping[str | os.PathLike, str | bytes | None] | None = None) -> Iterator[Path]:
    """Yield a fresh temporary directory that replaces ``final`` on success.

    On an exception, in the block or in the commit, the temporary directory is
    removed and ``final`` is left as it was, so a failed export or training run
    never leaves a loadable but broken artifact behind. ``final`` is replaced
    only when ``check_replaceable(final, kind, force)``
    allows it (``FileExistsError``, ``ValueError``).

    ``also``: more files of the same command (``staged``'s contents), committed
    with the folder, all or none. It is read when the block ends, so the block
    may fill it in (a result that describes the folder): the files are written
    before the folder is renamed (a file that cannot be written publishes
    nothing) and renamed after it.
    """
    final = Path(final)
    check_replaceable(final, kind, force)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    os.chmod(tmp, _DIR_MODE)
    try:
        yield tmp
        with staged(also or {}):
            _replace_folder(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already when only the files' renames failed
        raise


def _replace_folder(tmp: Path, final: Path) -> None:
    """Rename ``tmp`` to ``final``; an existing ``final`` is moved aside first and deleted after, and put
    back when the rename fails."""
    if not final.exists():
        os.replace(tmp, final)
        return
    # A name of its own (an empty placeholder, which the rename replaces): a fixed one, such as the pid's,
    # may be taken by a crashed run's leftover or by one whose deletion failed.
    old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old-", suffix=".tmp", dir=final.parent))
    try:
        os.replace(final, old)
    except BaseException:
        old.rmdir()
        raise
    try:
        os.replace(tmp, final)
    except BaseException:
        os.replace(old, final)
        raise
    shutil.rmtree(old, ignore_errors=True)
