"""The one exception type for bad user input.

``InputError(path, message, where=None)`` renders as ``<path>[:<where>]: <message>``; the CLI prints it as
``genolin: error: <that>`` and exits with status 1, without a traceback unless ``-v`` was given.
"""

from __future__ import annotations

import os


class InputError(Exception):
    """Bad input named by file and, where it helps, the line or record (``where``)."""

    def __init__(self, path: str | os.PathLike | None, message: str, where: str | int | None = None):
        self.path = None if path is None else os.fspath(path)
        self.message = message
        self.where = where
        super().__init__(str(self))

    def __str__(self) -> str:
        parts = [p for p in (self.path, None if self.where is None else str(self.where)) if p]
        return ":".join(parts) + (": " if parts else "") + self.message
