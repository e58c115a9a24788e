"""Writing the files a person can see: atomically, so a crash never leaves half a file."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from charlie.errors import CharlieError, DiskError, DiskFull

# A file write that failed because of the disk, not because of Charlie: told to the person.
DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS}


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_of(path: Path) -> str:
    """The sha256 of a file's bytes, read a megabyte at a time (model files are large)."""
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class FileChanged(Exception):
    """The file changed (a person saved it) while Charlie was about to replace it."""


ANY = "*"  # `write_atomic(replaces=ANY)`: replace whatever the file holds


def text_sha(path: Path) -> str | None:
    """The sha256 of the file's text as Charlie reads it, or None when it does not exist."""
    try:
        return sha256_text(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        return "(not UTF-8)"


def write_atomic(path: Path, text: str, *, replaces: str | None = ANY) -> str:
    """Write `text` to `path` via a temp file in the same folder, fsync, rename.

    With `replaces` (the sha256 of the text Charlie read), the rename happens only if the
    file still holds that text, checked after the slow fsync and right before the rename: a
    person's save in the meantime raises `FileChanged` and is kept. With `replaces=None` the
    file must not exist: the temp file is linked into place (`os.link` never replaces a
    file), so a file of that name made meanwhile, by a person or another write, raises
    `FileChanged` and is kept.
    Returns the sha256 of what was written, so callers can later tell a hand edit apart.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if replaces is None:
            if not link_new(Path(tmp), path):
                raise FileChanged(path)
        else:
            if replaces != ANY and text_sha(path) != replaces:
                raise FileChanged(path)
            os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    fsync_folder(path.parent)
    return sha256_text(text)


# `os.link` failing for want of hard links on the file system (FAT, some network shares)
NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS}


def link_new(tmp: Path, path: Path) -> bool:
    """Give the written temp file `tmp` the name `path`, or return False if that name is
    taken (`os.link` never replaces a file). Without hard links, the file is created only
    if absent, then copied into: never replacing one, but a crash in between can leave it
    short."""
    try:
        os.link(tmp, path, follow_symlinks=False)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in NO_HARD_LINKS:
            raise
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as out, open(tmp, "rb") as data:
        shutil.copyfileobj(data, out, 1024 * 1024)
        out.flush()
        os.fsync(out.fileno())
    return True


def fsync_folder(folder: Path) -> None:
    """Make a rename or a new name in `folder` survive a crash."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def not_written(exc: OSError, path: Path) -> CharlieError:
    """What to tell the person when `path` could not be written."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(
            f"The disk holding {path} is full, so it was not saved: free some space and try "
            "again. Nothing already saved was lost."
        )
    return DiskError(
        f"{path} could not be written ({exc.strerror or exc}). Check that its folder is "
        "writable and the disk healthy, then try again. Nothing already saved was lost."
    )


@contextlib.contextmanager
def locked(path: Path | str, *, wait: bool = True) -> Iterator[bool]:
    """Hold an exclusive lock on the file `path` (made if missing), across the threads and
    processes of this machine: yields True once held, or False at once when another holds it
    and `wait` is false. A killed holder's lock ends with its process."""
    with open(path, "a+b") as handle:  # one open file each: threads too
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
