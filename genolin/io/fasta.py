"""FASTA input: a validating streaming reader and random access by region.

Files may be plain, gzip or bgzip (BGZF), hold any number of records, use LF or CRLF line endings, blank
lines and wrapped or unwrapped sequence lines. A record's name is the first word of its header line.

A record is circular when a word of its header says so (``topology=circular``, as NCBI's submission-format
headers write it, also in brackets: ``[topology=circular]``; or ``circular=true``, as assemblers such as Unicycler
write it); ``topology=linear`` and ``circular=false`` say linear, as does a header saying neither.

Sequences come out *normalised* as ``bytes`` over the alphabet ``ACGTN``: lower-case (soft-masked) bases are
upper-cased, ``U`` is read as ``T``, and the IUPAC ambiguity codes R Y S W K M B D H V N become ``N``. Anything
else (protein letters, digits, ``-``, ``*``, ``.``, control bytes) is an :class:`~genolin.errors.InputError`
naming the file, the line and the record.

- :func:`read_fasta` streams records one at a time (memory: one record), validating everything: the whole file
  is read, so it also catches empty files, FASTQ, binary data, corrupt gzip and duplicate names.
- :class:`Genome` gives random access (``fetch(name, start, end)``; ``circular``: the names of the records marked
  circular) through pyfaidx with a ``.fai`` (and ``.gzi`` for BGZF) index that is built when missing, older than
  the file or not matching it (``index_mismatch``); plain gzip or irregularly wrapped files are loaded into memory.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import logging
import os
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from genolin.errors import InputError
from genolin.io.files import open_binary, sniff_compression

log = logging.getLogger(__name__)

BLOCK_SIZE = 1 << 22  # bytes read at a time (decompressed); records are assembled from blocks
INDEX_CHECKS = 4096  # records of an index whose header and first line are read back (evenly spaced, first and last)
GAP_LIMIT = 1 << 20  # bytes allowed between records (blank lines, a header) or after the last, checking an index

# --- normalisation table: byte -> normalised base, or 0x00 for "not a nucleotide" ------------------------
_NORM = bytearray(256)
for _b in b"ACGT":
    _NORM[_b] = _NORM[_b + 32] = _b
_NORM[ord("U")] = _NORM[ord("u")] = ord("T")
for _b in b"RYSWKMBDHVN":
    _NORM[_b] = _NORM[_b + 32] = ord("N")
NORMALISE = bytes(_NORM)
WHITESPACE = b" \t\r\n\v\f"
del _b, _NORM


@dataclass(frozen=True, slots=True)
class FastaRecord:
    """One record: ``seq`` normalised to ``ACGTN`` bytes; ``line`` is the 1-based line of the header; ``circular``:
    its header marks it circular (``header_circular``)."""

    name: str
    description: str
    seq: bytes
    line: int
    circular: bool = False

    def __len__(self) -> int:
        return len(self.seq)


CIRCULAR_WORDS = {"topology=circular": True, "circular=true": True, "topology=linear": False,
                  "circular=false": False}


def header_circular(description: str) -> bool:
    """Whether a header's description (the text after the name) marks the record circular: a word
    ``topology=circular`` or ``circular=true`` (any case, bracketed or not); the last such word (or its linear
    counterpart) wins."""
    circular = False
    for word in description.split():
        mark = CIRCULAR_WORDS.get(word.strip("[];,").lower())
        if mark is not None:
            circular = mark
    return circular


def normalise(raw: bytes, *, path=None, where=None, what: str = "sequence") -> bytes:
    """Normalise one sequence (line breaks and other whitespace are dropped) to ``ACGTN`` bytes.

    Raises InputError for a character that is not a nucleotide or IUPAC code.
    """
    seq = raw.translate(NORMALISE, WHITESPACE)
    bad = seq.find(0)
    if bad >= 0:
        _, column, message = _locate_bad(raw, bad)
        raise InputError(path, f"{what} position {column + 1}: {message}", where)
    return seq


def _locate_bad(raw: bytes, bad: int) -> tuple[int, int, str]:
    """For the ``bad``-th non-whitespace byte of ``raw``: (line index, column in that line, message)."""
    count = 0
    for index, line in enumerate(raw.split(b"\n")):
        kept = line.translate(None, WHITESPACE)
        if count + len(kept) > bad:
            column = [i for i, b in enumerate(line) if b not in WHITESPACE][bad - count]
            return index, column, _describe_bad(line[column : column + 1], line)
        count += len(kept)
    raise AssertionError("bad character not found")  # unreachable: `bad` indexes a non-whitespace byte


def _describe_bad(char: bytes, context: bytes) -> str:
    shown = char.decode("latin-1")
    shown = repr(shown) if shown.isprintable() else f"byte 0x{char[0]:02x}"
    hint = ""
    if char.isalpha():
        hint = " (a protein sequence?)" if _looks_like_protein(context) else ""
    elif char == b"-":
        hint = " (alignment gaps are not accepted)"
    return f"invalid character {shown}: not a nucleotide or IUPAC code{hint}"


def _looks_like_protein(text: bytes) -> bool:
    return any(c in text.upper() for c in b"EFILPQZX*")


def read_fasta(
    path: str | os.PathLike,
    *,
    allow_empty: bool = True,
    progress: Callable[[int], None] | None = None,
) -> Iterator[FastaRecord]:
    """Stream the records of a FASTA file, validated and normalised.

    ``allow_empty=False`` makes a record without sequence an error. ``progress(n)`` is called with the number
    of *file* bytes (compressed, for gzip) consumed since the previous call, for progress bars.
    """
    seen: dict[str, int] = {}
    for line, header, parts in _raw_records(path, progress):
        body = b"".join(parts)
        parts.clear()  # the reader's frame holds this list while we work: empty it to free the raw text
        text = header.decode("utf-8", errors="replace").strip()
        name, description = (text.split(None, 1) + ["", ""])[:2]
        if not name:
            raise InputError(path, "record header has no name ('>' followed by nothing)", line)
        if name in seen:
            raise InputError(path, f"duplicate record name {name!r} (first at line {seen[name]})", line)
        seen[name] = line
        seq = body.translate(NORMALISE, WHITESPACE)
        bad = seq.find(0)
        if bad >= 0:
            offset, _, message = _locate_bad(body, bad)
            raise InputError(path, f"record {name!r}: {message}", line + 1 + offset)
        body = None  # memory: only the normalised sequence lives on while the consumer holds the record
        if not seq and not allow_empty:
            raise InputError(path, f"record {name!r} has an empty sequence", line)
        yield FastaRecord(name, description.strip(), seq, line, header_circular(description))


def _raw_records(path, progress) -> Iterator[tuple[int, bytes, list[bytes]]]:
    """Yield ``(header line number, header bytes without '>', raw body pieces with line breaks)`` per record.

    The caller joins the pieces and may clear the list (it is not used again).

    Works on blocks of decompressed bytes rather than line by line, so multi-gigabase genomes parse at
    memory speed; a record is the text between a line starting with '>' and the next one.
    """
    with open_binary(path) as stream:
        last_raw = 0

        def blocks():
            nonlocal last_raw
            while block := stream.read(BLOCK_SIZE):
                if progress is not None:
                    now = stream.tell_raw()
                    progress(now - last_raw)
                    last_raw = now
                yield block

        it = blocks()
        first = next(it, b"")
        _check_start(path, first)
        header: bytes | None = None
        header_line = 0
        parts: list[bytes] = []
        line_no = 1  # line number of the first byte not yet consumed
        at_line_start = True
        carry = b""
        for block in _chain(first, it):
            if block is None:  # end of file: what is left is a last line without a newline
                lines, carry = carry, b""
            else:
                chunk = carry + block if carry else block
                carry = b""
                cut = chunk.rfind(b"\n") + 1
                if cut == 0:
                    if header is not None and not (at_line_start and chunk[:1] == b">"):
                        parts.append(chunk)  # part of a very long sequence line
                        at_line_start = False
                    else:
                        carry = chunk
                    continue
                lines, carry = chunk[:cut], chunk[cut:]
            pos = 0
            line_start = at_line_start
            while pos < len(lines):
                if line_start and lines[pos:pos + 1] == b">":
                    h = pos
                else:
                    j = lines.find(b"\n>", pos)
                    h = len(lines) if j < 0 else j + 1
                    body = lines[pos:h]
                    if header is None:
                        if body.strip():  # text before the first header; _check_start allows only blanks
                            raise InputError(path, "text before the first FASTA header", line_no)
                    else:
                        parts.append(body)
                    line_no += body.count(b"\n")
                    if j < 0:
                        break
                e = lines.find(b"\n", h)
                e = len(lines) if e < 0 else e
                if header is not None:
                    yield header_line, header, parts
                header, header_line, parts = lines[h + 1:e].rstrip(b"\r"), line_no, []
                line_no += 1
                pos = e + 1
                line_start = True
            at_line_start = lines.endswith(b"\n")
        if header is not None:
            yield header_line, header, parts


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes | None]:
    """The blocks, then ``None`` for the end of the file."""
    yield first
    yield from rest
    yield None


def _check_start(path, head: bytes) -> None:
    """Reject empty, binary, FASTQ and header-less files from their first block."""
    if b"\x00" in head[:8192]:
        raise InputError(path, "binary data, not a FASTA text file")
    stripped = head.lstrip()
    if not stripped:
        raise InputError(path, "empty file: no FASTA records" if not head else "only blank lines: no FASTA records")
    line = head[: len(head) - len(stripped)].count(b"\n") + 1
    first = stripped[:1]
    if first == b">":
        return
    if first == b"@":
        raise InputError(path, "this looks like FASTQ ('@' header); give FASTA (lines starting with '>')", line)
    try:
        stripped[:4096].decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(path, "binary data, not a FASTA text file") from None
    raise InputError(path, "no FASTA header: the first line does not start with '>'", line)


def read_fasta_dict(path: str | os.PathLike, **kwargs) -> dict[str, bytes]:
    """All records of a (small) FASTA file as ``{name: normalised sequence}``, in file order."""
    return {rec.name: rec.seq for rec in read_fasta(path, **kwargs)}


# --- random access -------------------------------------------------------------------------------------------


class Genome:
    """Random access to the records of a FASTA genome by 0-based, half-open region.

    Plain and BGZF files are read through pyfaidx with a ``.fai`` (and ``.gzi``) index beside the file, built
    when missing, older than the file or not matching it (``index_mismatch``), in ``$XDG_CACHE_HOME/genolin/faidx``
    when the file's folder is not writable. An index is built only for a file whose every record passes the checks
    (``_check_records``; ``checked=True``: the caller has read the file through :func:`read_fasta` already), so a
    command failing on the file's content leaves none beside it. Plain gzip files and files pyfaidx cannot index
    (irregular line lengths) are read once into memory, with a warning. Fetched regions are normalised like
    :func:`read_fasta` and validated as they are read (an index genolin did not build may be of a file never
    checked).

    >>> g = Genome("genome.fa.bgz"); g.lengths["chr1"]; g.fetch("chr1", 1000, 1100)   # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike, *, checked: bool = False):
        self.path = Path(path)
        kind = sniff_compression(self.path)
        self._faidx = None
        self._memory: dict[str, bytes] | None = None
        self._memory_lock = threading.Lock()
        with open_binary(self.path) as stream:
            _check_start(self.path, stream.read(1 << 16))
        if kind == "gzip":
            log.warning("%s: plain gzip has no random access; reading it into memory (bgzip it to avoid this)",
                        self.path)
            self._load_memory()
        else:
            self._open_faidx(kind, checked)
        if self._faidx is not None:
            self.lengths = {name: len(rec) for name, rec in self._faidx.index.items()}
        else:
            self.lengths = {name: len(seq) for name, seq in self._memory.items()}
        if "" in self.lengths:
            raise InputError(self.path, "a record header has no name ('>' followed by nothing)")

    @property
    def names(self) -> list[str]:
        return list(self.lengths)

    @functools.cached_property
    def circular(self) -> frozenset[str]:
        """The names of the records whose header marks them circular (``header_circular``). Indexed files: each
        header is read where the index says its record starts (one seek per record, on first use)."""
        if self._memory is not None:
            return self._circular
        found = set()
        try:
            with self._faidx.lock:
                for name in self.lengths:
                    # the text from the previous record's end to this one's sequence: '>' name description
                    header = self._faidx.get_long_name(name).split("\n>")[-1]
                    if header_circular((header.split(None, 1) + [""])[1]):
                        found.add(name)
        except (UnicodeDecodeError, ValueError):
            # a header pyfaidx cannot decode, or cannot find: its BGZF lookup fails for a header that starts exactly
            # at a block boundary (pyfaidx 0.9, "within_block_offset ... got 65536"); the streaming reader instead
            found = {rec.name for rec in read_fasta(self.path) if rec.circular}
        except (struct.error, OSError, EOFError, zlib.error) as exc:
            raise InputError(self.path, f"corrupt or truncated, or changed since its index was built (reading the "
                                        f"record headers: {exc})") from None
        return frozenset(found)

    def _load_memory(self) -> None:
        """Every record into memory (built aside, then set: a reader thread never sees it half-filled)."""
        memory, circular = {}, set()
        for rec in read_fasta(self.path):
            memory[rec.name] = rec.seq
            if rec.circular:
                circular.add(rec.name)
        self._circular = frozenset(circular)
        self._memory = memory

    def _open_faidx(self, kind: str, checked: bool) -> None:  # a BGZF file's end was checked by open_binary
        import pyfaidx

        fai = Path(str(self.path) + ".fai")
        gzi = Path(str(self.path) + ".gzi")
        current = _current(self.path, kind, fai, gzi)
        if not current and not _writable(self.path.parent):
            fai, gzi = _cached_index(self.path, fai, gzi)
            current = _current(self.path, kind, fai, gzi)
        if not current and not checked:
            _check_records(self.path)  # before an index is made: none is left beside a file that fails
        options = {"read_long_names": False, "duplicate_action": "stop", "sequence_always_upper": False}
        try:
            if not current:
                _build_index(self.path, kind, fai, gzi, options)
            kwargs = {"gzi_indexname": str(gzi)} if kind == "bgzf" else {}
            self._faidx = pyfaidx.Faidx(str(self.path), indexname=str(fai), build_index=False, rebuild=False,
                                        **options, **kwargs)
        except pyfaidx.FastaIndexingError as exc:
            log.warning("%s: cannot index (%s); reading it into memory", self.path, exc)
            self._load_memory()
        except ValueError as exc:
            if "uplicate" in str(exc):
                # Let the streaming reader name the record and its line.
                self._load_memory()
            else:
                raise InputError(self.path, f"cannot index: {exc}") from exc
        except (struct.error, OSError, EOFError, zlib.error) as exc:  # Bio.bgzf on damaged blocks
            raise InputError(self.path, f"corrupt or truncated (cannot index: {exc})") from None
        if self._faidx is not None and not self._faidx.index:  # the file starts with a record (_check_start)
            self._faidx.close()
            raise InputError(fai, f"this index of {self.path} lists no records (an interrupted write?): delete it "
                                  "and run again")

    def fetch(self, name: str, start: int = 0, end: int | None = None) -> bytes:
        """Bases ``[start, end)`` of record ``name``, normalised to ``ACGTN``."""
        if name not in self.lengths:
            raise KeyError(f"{self.path}: no record named {name!r}")
        length = self.lengths[name]
        end = length if end is None else end
        if not 0 <= start <= end <= length:
            raise ValueError(f"region {name}:{start}-{end} outside 0-{length}")
        if self._memory is not None:
            return self._memory[name][start:end]
        try:
            raw = self._read(name, start, end)
        except ValueError as exc:
            if "within_block_offset" not in str(exc):
                raise self._changed(name, start, end, exc) from None
            # pyfaidx 0.9 cannot seek to the first byte of a BGZF block that follows a full 64 KiB one (as Bio.bgzf
            # writes them): read from the base before, whose byte lies in the previous block, and drop it
            if start == 0:  # a record's first base at such a block's start: rare; the file read into memory
                with self._memory_lock:
                    if self._memory is None:
                        log.warning("%s: record %r starts where pyfaidx cannot seek (a BGZF block after a full "
                                    "64 KiB one); reading the file into memory", self.path, name)
                        self._load_memory()
                return self.fetch(name, start, end)
            raw = self._read(name, start - 1, end)[1:]
        seq = raw.translate(NORMALISE)
        bad = seq.find(0)
        if bad >= 0:
            msg = _describe_bad(raw[bad:bad + 1], raw)
            raise InputError(self.path, f"record {name!r} position {start + bad + 1}: {msg}")
        return seq

    def _read(self, name: str, start: int, end: int) -> bytes:
        """Bases [start, end) of ``name`` through pyfaidx, as bytes; an InputError for a file changed under its
        index (pyfaidx's ValueError is the caller's)."""
        if end <= start:
            return b""
        try:
            return self._faidx.fetch(name, start + 1, end).seq.encode("ascii", errors="replace")
        except (struct.error, OSError, EOFError, zlib.error) as exc:  # a file changed under its index
            raise self._changed(name, start, end, exc) from None

    def _changed(self, name: str, start: int, end: int, exc: Exception) -> InputError:
        return InputError(self.path, f"corrupt or truncated, or changed since its index was built (record "
                                     f"{name!r}:{start}-{end}: {exc})")

    def close(self) -> None:
        if self._faidx is not None:
            self._faidx.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _check_records(path: Path) -> None:
    """Every record's bases checked as :meth:`Genome.fetch` checks them (an InputError naming the record and the
    position) and its name as :func:`read_fasta` checks it, holding one record's raw text at a time."""
    seen: set[str] = set()
    for _, header, parts in _raw_records(path, None):
        text = header.decode("utf-8", errors="replace").strip()
        name = text.split(None, 1)[0] if text else ""
        if not name or name in seen:
            for _ in read_fasta(path):  # its InputError names the line
                pass
        seen.add(name)
        done = 0
        for part in parts:
            seq = part.translate(NORMALISE, WHITESPACE)
            bad = seq.find(0)
            if bad >= 0:
                message = _locate_bad(part, bad)[2]
                raise InputError(path, f"record {name!r} position {done + bad + 1}: {message}")
            done += len(seq)
        parts.clear()


def _current(path: Path, kind: str, fai: Path, gzi: Path) -> bool:
    """The .fai (and a BGZF file's .gzi) there, no older than the FASTA (pyfaidx's own test of staleness) and
    matching it (``index_mismatch``: an index copied, or kept over an edit that kept the FASTA's time)."""
    try:
        if any(p.stat().st_mtime < path.stat().st_mtime for p in ([fai, gzi] if kind == "bgzf" else [fai])):
            return False
    except FileNotFoundError:
        return False
    problem = index_mismatch(path, kind, fai, gzi)
    if problem is not None:
        log.warning("%s: not an index of %s as it is now (%s); indexing it again", fai, path, problem)
    return problem is None


def index_mismatch(path: Path, kind: str, fai: Path, gzi: Path | None = None) -> str | None:
    """Why ``fai`` (with ``gzi``, for a BGZF file) does not describe the FASTA ``path`` as it is now, or None.

    Checked: every line of the .fai (name, length, offset, bases and bytes a line); records in file order, each
    starting after the one before and its header; the last ending where the file does (blank lines aside); the
    .gzi's blocks; and for up to INDEX_CHECKS records (all, or evenly spaced with the first and the last) the text
    between the record and the one before: blank lines and a header line naming the record, followed by a first
    line of the indexed length. An edit that moves any record shows at every later one; what is left unseen is a
    header renamed to one of the same length in a record not read back, with the file's time kept.
    """
    try:
        names, numbers = _read_fai(fai)
        with _FileBytes(path, kind, gzi) as data:
            return _layout_mismatch(names, numbers, data)
    except _Mismatch as exc:
        return str(exc)
    except (OSError, ValueError, EOFError, struct.error, zlib.error) as exc:
        return f"cannot read the file through it: {exc}"


class _Mismatch(Exception):
    """An index that does not describe its FASTA (the message says how)."""


def _read_fai(fai: Path):
    """The names of a .fai and its numbers, (n, 4) int64: length, offset, bases a line, bytes a line."""
    import numpy as np

    lines = fai.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise _Mismatch("it lists no records (an interrupted write?)")
    for n, line in enumerate(lines, start=1):
        if line.count("\t") != 4 or line.startswith("\t"):
            raise _Mismatch(f"line {n} is not name, length, offset, bases and bytes a line")
    fields = "\t".join(lines).split("\t")
    names = fields[0::5]
    del fields[0::5]
    try:
        numbers = np.array(list(map(int, fields)), dtype=np.int64).reshape(-1, 4)
    except (ValueError, OverflowError):
        raise _Mismatch("a length, offset or line length that is not a whole number") from None
    return names, numbers


def _layout_mismatch(names: list[str], numbers, data: _FileBytes) -> str | None:
    """``index_mismatch`` past reading the files: arithmetic over every record, then records read back."""
    import numpy as np

    length, offset, bases, width = numbers.T
    ends = offset + length // np.maximum(bases, 1) * width  # where each record's text ends, as pyfaidx counts
    rest = length % np.maximum(bases, 1)
    ends += np.where(rest > 0, rest + width - bases, 0)
    befores = np.concatenate([[0], ends[:-1]])  # where the text before each record's sequence starts
    header = np.array([len(name.encode()) + 1 for name in names])  # '>' and the name at least
    for bad, why in (((numbers < 0).any(axis=1), "a negative number"),
                     ((length > 0) & ~((bases > 0) & (bases <= width)), "impossible line lengths"),
                     ((length > bases) & (width - bases != 1) & (width - bases != 2), "lines not ending LF or CRLF"),
                     (offset < befores + header, "a start inside the record before or its header")):
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return f"line {i + 1} (record {names[i]!r}): {why}"
    if len(set(names)) < len(names):
        seen: set[str] = set()
        twice = next(name for name in names if name in seen or seen.add(name))
        return f"it lists {twice!r} twice"
    end = int(ends[-1])
    slack = int(width[-1] - bases[-1]) if length[-1] else 0  # the last line's newline may be missing at the end
    if not end - slack <= data.size <= end + GAP_LIMIT:
        return f"its records end at byte {end}, the file at {data.size}"
    if data.size > end and data.read(end, data.size).strip(WHITESPACE):
        return f"text after its last record, from byte {end}"
    n = len(names)
    picks = range(n) if n <= INDEX_CHECKS else sorted({i * (n - 1) // (INDEX_CHECKS - 1) for i in range(INDEX_CHECKS)})
    for i in picks:
        name, before, start = names[i], int(befores[i]), int(offset[i])
        if start - before > GAP_LIMIT:
            return f"over {GAP_LIMIT:,} bytes before record {name!r}"
        first = int(min(length[i], bases[i]))
        text = data.read(before, start + min(first, 4096))  # the header, and the first line's start
        head, line = text[:start - before].lstrip(WHITESPACE), text[start - before:]
        if start == data.size and not head.endswith(b"\n"):
            head += b"\n"  # an empty last record whose header ends the file without a newline
        if not head.startswith(b">") or head.find(b"\n") != len(head) - 1:
            return f"no header line of record {name!r} just before byte {start}"
        words = head[1:].decode("utf-8", errors="replace").split()
        if not words or words[0] != name:
            return f"the header before byte {start} names {(words or [''])[0]!r}, not {name!r}"
        if first and (b"\n" in line or b"\r" in line or b">" in line
                      or data.read(start + first, start + first + 1) not in (b"", b"\r", b"\n")):
            return f"the first line of record {name!r} is not {first} bases"
    return None


class _FileBytes:
    """Bytes ``[start, end)`` of a FASTA as its index counts them (``size`` in all): a plain file's own, a BGZF
    file's decompressed ones. A BGZF file's blocks are walked from header to header (two small reads a block) and
    its .gzi must list each one that holds data, where it is; a block is decompressed only to be read (the last one
    kept)."""

    def __init__(self, path: Path, kind: str, gzi: Path | None):
        self.fh = open(path, "rb")  # noqa: SIM115 - closed by __exit__
        self.fd = self.fh.fileno()
        self.size = self.file_size = os.fstat(self.fd).st_size
        self.bgzf = kind == "bgzf"
        self._last: tuple[int, bytes] | None = None  # (file offset, data) of the block read last
        if not self.bgzf:
            return
        try:
            self.starts, self.ustarts, self.bsizes, self.size = self._walk()
            self._check_gzi(gzi)
        except BaseException:
            self.fh.close()
            raise

    def _walk(self) -> tuple[list[int], list[int], list[int], int]:
        """Each block's file offset, decompressed offset and size in the file; the decompressed size."""
        starts, ustarts, bsizes = [], [], []
        c = u = 0
        while c < self.file_size:
            head = os.pread(self.fd, 18, c)
            if len(head) < 18 or head[:4] != b"\x1f\x8b\x08\x04":
                raise _Mismatch(f"no BGZF block at byte {c} of the file")
            xlen = struct.unpack_from("<H", head, 10)[0]
            extra = head[12:18] if xlen == 6 else os.pread(self.fd, xlen, c + 12)
            bsize, at = None, 0
            while at + 4 <= len(extra):  # subfields: SI1 SI2 SLEN data; 'BC' holds the block's size less one
                slen = struct.unpack_from("<H", extra, at + 2)[0]
                if extra[at:at + 2] == b"BC" and slen == 2:
                    bsize = struct.unpack_from("<H", extra, at + 4)[0] + 1
                at += 4 + slen
            if bsize is None or c + bsize > self.file_size:
                raise _Mismatch(f"the BGZF block at byte {c} of the file is damaged or cut short")
            starts.append(c)
            ustarts.append(u)
            bsizes.append(bsize)
            u += struct.unpack("<I", os.pread(self.fd, 4, c + bsize - 4))[0]  # the block's decompressed size
            c += bsize
        return starts, ustarts, bsizes, u

    def _check_gzi(self, gzi: Path) -> None:
        """The .gzi: a count, then (file offset, decompressed offset) of each block but the first (htslib's
        format); every block holding data listed, where the walk found it."""
        raw = gzi.read_bytes()
        if len(raw) < 8 or len(raw) != 8 + 16 * struct.unpack_from("<Q", raw)[0]:
            raise _Mismatch(f"{gzi.name} is not a .gzi index of this size")
        listed = {(0, 0), *struct.iter_unpack("<QQ", raw[8:])}
        blocks = set(zip(self.starts, self.ustarts, strict=True))
        wrong = sorted(listed - blocks)
        if wrong:
            raise _Mismatch(f"{gzi.name} puts a block at byte {wrong[0][0]} of the file, decompressed "
                            f"{wrong[0][1]}, where the file has none")
        ends = [*self.ustarts[1:], self.size]
        for c, u, u_end in zip(self.starts, self.ustarts, ends, strict=True):
            if u_end > u and (c, u) not in listed:  # a block holding data
                raise _Mismatch(f"{gzi.name} leaves out the block at byte {c} of the file")

    def _block(self, i: int) -> bytes:
        """The decompressed data of block i."""
        c = self.starts[i]
        if self._last is not None and self._last[0] == c:
            return self._last[1]
        raw = os.pread(self.fd, self.bsizes[i], c)
        xlen = struct.unpack_from("<H", raw, 10)[0]
        data = zlib.decompress(raw[12 + xlen:-8], wbits=-15)
        if len(data) != struct.unpack_from("<I", raw, len(raw) - 4)[0]:
            raise _Mismatch(f"the BGZF block at byte {c} of the file is damaged")
        self._last = (c, data)
        return data

    def read(self, start: int, end: int) -> bytes:
        if not self.bgzf:
            return os.pread(self.fd, end - start, start)
        i = bisect.bisect_right(self.ustarts, start) - 1
        out = []
        while 0 <= i < len(self.starts) and self.ustarts[i] < end:
            u = self.ustarts[i]
            out.append(self._block(i)[max(0, start - u):end - u])
            i += 1
        return b"".join(out)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()


def _build_index(path: Path, kind: str, fai: Path, gzi: Path, options: dict) -> None:
    """Build ``fai`` (and ``gzi`` for BGZF) under temporary names, check them against the file (pyfaidx indexes
    some irregular layouts wrongly: a FastaIndexingError, as for those it refuses) and rename them into place, .gzi
    first: a process that opens the genome meanwhile (torchrun's other ranks, parallel workflow jobs) finds no
    index or a whole one, never a half-written one (pyfaidx writes in place)."""
    import pyfaidx

    tag = f".{os.getpid()}.{os.urandom(4).hex()}.tmp"
    tmp_fai, tmp_gzi = Path(str(fai) + tag), Path(str(gzi) + tag)
    kwargs = {"gzi_indexname": str(tmp_gzi)} if kind == "bgzf" else {}
    try:
        try:
            open(tmp_fai, "xb").close()  # noqa: SIM115 - a write test: pyfaidx reports any failure as an IOError
            tmp_fai.unlink()
        except OSError as exc:
            raise _unwritable(path, fai, exc) from None
        try:
            pyfaidx.Faidx(str(path), indexname=str(tmp_fai), **options, **kwargs).close()
        except RuntimeError as exc:  # pyfaidx 0.9 on some runs of blank lines ("Unhandled exception ... indexing")
            raise pyfaidx.FastaIndexingError(str(exc).split("Please report")[0]) from None
        problem = index_mismatch(path, kind, tmp_fai, tmp_gzi)
        if problem is not None:
            raise pyfaidx.FastaIndexingError(f"its index would not match it: {problem}")
        try:
            if kind == "bgzf":
                os.replace(tmp_gzi, gzi)
            os.replace(tmp_fai, fai)
        except OSError as exc:
            raise _unwritable(path, fai, exc) from None
    finally:
        for p in (tmp_fai, tmp_gzi):
            p.unlink(missing_ok=True)


def _unwritable(path: Path, fai: Path, exc: OSError) -> InputError:
    if fai.exists():
        return InputError(fai, f"out of date or not an index of {path}, and cannot be replaced "
                               f"({exc.strerror or exc}): delete it and run again")
    return InputError(fai, f"cannot write this index of {path} ({exc.strerror or exc}): make the folder writable "
                           "and run again")


def _cached_index(path: Path, fai: Path, gzi: Path) -> tuple[Path, Path]:
    """Where the index of a FASTA in a read-only folder goes (``_cache_dir``); an InputError when it cannot."""
    try:
        cache = _cache_dir(path)
    except OSError as exc:
        why = f"its folder is read-only and the cache folder cannot be made ({exc.strerror or exc})"
        if fai.exists():
            raise InputError(fai, f"out of date or not an index of {path}; {why}: delete it, or set XDG_CACHE_HOME "
                                  "to a writable folder, and run again") from None
        raise InputError(path, f"no index beside it; {why}: set XDG_CACHE_HOME to a writable folder") from None
    return cache / fai.name, cache / gzi.name


def _writable(folder: Path) -> bool:
    """Writable and not marked read-only (root may write anywhere, but a folder without write bits is data)."""
    return os.access(folder, os.W_OK) and bool(folder.stat().st_mode & 0o222)


def _cache_dir(path: Path) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "genolin" / "faidx"
    key = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
    d = base / key
    d.mkdir(parents=True, exist_ok=True)
    return d
