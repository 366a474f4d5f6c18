"""Atomic output files: write to a temporary name in the destination folder, rename on success.

A failed or interrupted run leaves no partial output behind (the temporary file is removed). An output that is a
symbolic link is written through it to its target; one that is not a regular file (a device, a pipe) is refused, so
a rename never replaces /dev/null or /dev/stdout.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from genolin.errors import InputError

# every output this process has renamed into place, in order: what a command interrupted (Ctrl-C) had finished
WRITTEN: list[Path] = []
STREAMED: list[str] = []  # outputs written as they are made ("standard output"): an interrupt cuts them short


def output_target(path: str | os.PathLike) -> Path:
    """The file an output named ``path`` is written to: ``path``, or the file a symbolic link there points to (the
    link stays a link). An InputError for a folder, for something that is not a regular file (a device such as
    /dev/null or /dev/stdout, a pipe, a socket), which a rename would replace, and for "-", which is standard output
    only where a command says so."""
    given = Path(path)
    if str(path) == "-":
        raise InputError("-", "standard output is not an output here (the output is more than one text stream); give "
                              "a file name")
    try:
        mode = os.stat(given).st_mode  # through links: /dev/stdout -> /proc/self/fd/1 -> a terminal or pipe
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise InputError(given, "is a folder; give a file name for the output")
    if mode is not None and not stat.S_ISREG(mode):
        raise InputError(given, "is not a regular file (a device, pipe or socket); give a file name for the output")
    return Path(os.path.realpath(given)) if given.is_symlink() else given


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on a clean exit it is renamed to ``path``.

    The caller writes the temporary path however it likes (a writer that wants to open it itself, e.g.
    ``zipfile``). Parent folders are created. On any exception the temporary file is deleted.
    """
    final = output_target(path)
    tmp_path: Path | None = None
    try:
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            while tmp_path is None:
                # named before it is made: an interrupt (Ctrl-C) from here on finds it to remove
                tmp_path = final.parent / f".{final.name}.{os.urandom(6).hex()}.tmp"
                try:
                    os.close(os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                except OSError as exc:  # not made: nothing to remove (FileExistsError: another's file, another name)
                    tmp_path = None
                    if not isinstance(exc, FileExistsError):
                        raise
        except OSError as exc:  # named after the output the user gave, not the temporary file
            raise InputError(final, f"cannot write here: {exc.strerror or exc}") from None
        yield tmp_path
        # made 0600 (as mkstemp makes them); the result gets the usual permissions of a new file
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)
        try:
            os.replace(tmp_path, final)
        except OSError as exc:
            raise InputError(final, f"cannot write: {exc.strerror or exc}") from None
        WRITTEN.append(final)
    except BaseException:
        if tmp_path is not None:
            with contextlib.suppress(OSError):  # the error that brought us here is the one to report
                tmp_path.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs) -> Iterator:
    """``open()`` for writing through :func:`atomic_path`: the file appears only when the block succeeds."""
    if not any(c in mode for c in "wx"):
        raise ValueError("atomic_open is for writing ('w' modes)")
    with atomic_path(path) as tmp, open(tmp, mode.replace("x", "w"), **kwargs) as fh:
        yield fh


def write_json(path: str | os.PathLike, data) -> None:
    """``data`` as indented JSON (plus a newline) through :func:`atomic_open`."""
    import json

    with atomic_open(path) as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")


@contextlib.contextmanager
def output_text(path: str | os.PathLike) -> Iterator:
    """A text output of one stream: standard output for "-", else ``atomic_open``."""
    if str(path) == "-":
        import sys

        STREAMED.append("standard output")
        yield sys.stdout
        sys.stdout.flush()
        return
    with atomic_open(path) as fh:
        yield fh
