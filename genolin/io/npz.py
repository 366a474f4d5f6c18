"""Streaming ``.npz`` writer: arrays are added one at a time, so a genome's tokens never sit in memory at once.

The archive is what ``numpy.savez`` writes (a zip of ``<key>.npy`` members, zip64 for large members) and
``numpy.load`` reads it. It is written under a temporary name and renamed on success (see ``atomic``).
"""

from __future__ import annotations

import os
import zipfile

import numpy as np

from genolin.io.atomic import atomic_path


class NpzWriter:
    """``with NpzWriter(path) as npz: npz.write("chr1", array)``; the file appears only if the block succeeds."""

    def __init__(self, path: str | os.PathLike, *, compress: bool = False):
        self.path = path
        self.compression = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
        self._keys: set[str] = set()

    def __enter__(self) -> NpzWriter:
        self._atomic = atomic_path(self.path)
        tmp = self._atomic.__enter__()
        self._zip = zipfile.ZipFile(tmp, mode="w", compression=self.compression, allowZip64=True)
        return self

    def write(self, key: str, array: np.ndarray) -> None:
        if key in self._keys:
            raise ValueError(f"duplicate key {key!r} in {self.path}")
        self._keys.add(key)
        with self._zip.open(key + ".npy", mode="w", force_zip64=True) as member:
            np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)

    def __exit__(self, *exc) -> None:
        try:
            self._zip.close()
        finally:
            self._atomic.__exit__(*exc)
