"""Opening input files: plain, gzip or bgzip, told apart by their first bytes, with read errors as InputError."""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

from genolin.errors import InputError

_MAGIC = {
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"PK\x03\x04": "zip",
}


FASTA_SUFFIXES = (".gz", ".bgz", ".bgzf", ".fa", ".fasta", ".fna", ".fas", ".faa")
DATA_SUFFIXES = (".gz", ".bgz", ".bz2", ".fa", ".fasta", ".fna", ".csv", ".tsv", ".txt")


def file_stem(path: str | os.PathLike, suffixes: tuple[str, ...] = DATA_SUFFIXES) -> str:
    """A data file's name without its extensions (each of ``suffixes`` taken off once, in order):
    ``dir/BACILLUS.fasta.gz`` -> ``BACILLUS``; the whole name where nothing would be left."""
    name = Path(path).name
    for suffix in suffixes:
        name = name.removesuffix(suffix)
    return name or Path(path).name


def unique_names(stems: list[str], given: list[str | None] | None = None) -> list[str]:
    """One unique name per item: the name given, else its stem, a stem taken already suffixed _2, _3, ... (the first
    free; names given are never taken): ["g_3", "g", "g", "g"] -> ["g_3", "g", "g_2", "g_4"]."""
    given = given or [None] * len(stems)
    taken = {g for g in given if g}
    names: list[str] = []
    for stem, own in zip(stems, given, strict=True):
        name, n = own or stem, 1
        while not own and (name in names or name in taken):
            n += 1
            name = f"{stem}_{n}"
        names.append(name)
    return names


def sniff_compression(path: str | os.PathLike) -> str:
    """Return ``"plain"``, ``"gzip"`` or ``"bgzf"`` for an existing, non-empty file; InputError otherwise."""
    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file")
    if p.is_dir():
        raise InputError(p, "is a directory, not a file")
    try:
        with open(p, "rb") as fh:
            head = fh.read(18)
    except OSError as exc:
        raise InputError(p, f"cannot read: {exc.strerror or exc}") from exc
    if not head:
        raise InputError(p, "empty file")
    if head[:2] == b"\x1f\x8b":
        # BGZF: gzip with FEXTRA (FLG bit 2) holding a 'BC' subfield (SAM/BAM specification, section 4.1).
        if len(head) >= 14 and head[3] & 4 and head[12:14] == b"BC":
            return "bgzf"
        return "gzip"
    for magic, kind in _MAGIC.items():
        if head.startswith(magic):
            raise InputError(p, f"{kind}-compressed; genolin reads plain, gzip or bgzip files")
    return "plain"


# The empty block every BGZF file ends with (SAM/BAM specification, section 4.1.2).
BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


def check_bgzf_complete(path: str | os.PathLike) -> None:
    """InputError unless a BGZF file ends with the BGZF end-of-file block. Every bgzip writer adds it; a file cut
    short lacks it, also one cut exactly between two blocks, which would otherwise decompress cleanly and shorter
    (and random access reads only the blocks it fetches)."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - len(BGZF_EOF)))
        if fh.read() != BGZF_EOF:
            raise InputError(path, "truncated bgzip file: no BGZF end-of-file block at its end (an interrupted "
                                   "download or copy?)")


def open_binary(path: str | os.PathLike):
    """Open a plain/gzip/bgzip file for reading decompressed bytes (the raw file is ``.raw`` for progress). A gzip
    stream cut short fails when read (its trailer is missing); a BGZF file must end with its end-of-file block."""
    kind = sniff_compression(path)
    if kind == "bgzf":
        check_bgzf_complete(path)
    raw = open(path, "rb")
    if kind == "plain":
        return _Stream(raw, raw)
    return _Stream(gzip.GzipFile(fileobj=raw, mode="rb"), raw)


class _Stream:
    """A decompressed byte stream that turns gzip failures into InputError and reports raw bytes consumed."""

    def __init__(self, fh, raw):
        self.fh, self.raw = fh, raw
        self.path = raw.name

    def read(self, n: int) -> bytes:
        try:
            return self.fh.read(n)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise InputError(self.path, f"corrupt or truncated gzip data ({exc})") from exc
        except OSError as exc:
            raise InputError(self.path, f"read error: {exc}") from exc

    def tell_raw(self) -> int:
        return self.raw.tell()

    def close(self) -> None:
        self.fh.close()
        self.raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_text(path: str | os.PathLike) -> str:
    """The whole (plain or gzipped) file as text; for small tables such as CSV and BED files."""
    with open_binary(path) as stream:
        chunks = []
        while block := stream.read(1 << 22):
            chunks.append(block)
    data = b"".join(chunks)
    if not data.strip():
        raise InputError(path, "empty file")
    if b"\x00" in data[:8192]:
        raise InputError(path, "binary data, not a text file")
    try:
        return data.decode("utf-8-sig")  # a byte-order mark (as spreadsheet programs write) is dropped
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(path, "not UTF-8 text (binary data?)", line) from None
