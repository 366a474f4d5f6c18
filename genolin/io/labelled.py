"""Labelled sequence sets: sequences with a class label each, for training and evaluating classifiers.

Three forms, all giving a :class:`LabelledSet`:

- CSV or TSV with a header holding ``sequence`` and ``label`` columns (the GUE / DNABERT-2 format); an ``id``
  or ``name`` column names the rows, otherwise they are named ``row<line>``;
- FASTA whose headers carry ``label=<value>`` (``>seq7 label=1``);
- FASTA plus a TSV of ``id<TAB>label`` (a header line ``id<TAB>label`` is allowed).

Labels may be integers or class names. ``classes`` lists the class names in index order and ``labels`` holds
indices into it: integer labels sort numerically, names alphabetically. Pass a training set's ``classes`` when
reading its dev/test sets so the indices agree (an unknown class is then an error).
"""

from __future__ import annotations

import codecs
import csv
import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genolin.errors import InputError
from genolin.io.fasta import normalise, read_fasta
from genolin.io.files import open_binary, read_text
from genolin.io.store import store_builder

log = logging.getLogger(__name__)

LINE_END = re.compile(r"\r\n|\r|\n")  # LF, CRLF and old Mac CR files alike
# csv's default field limit is 131,072 characters: a table cell may hold a chromosome
FIELD_LIMIT = 2**31 - 1


@dataclass
class LabelledSet:
    """``ids[i]``, ``seqs[i]`` (ACGTN bytes) and ``labels[i]`` (index into ``classes``) for each sequence. The
    readers hold ``seqs`` as one byte per base (``genolin.io.store.BaseStore``: in memory, or memory-mapped for
    a set larger than a quarter of the free memory)."""

    ids: list[str]
    seqs: Sequence[bytes]
    labels: np.ndarray  # (n,) int64
    classes: list[str]
    source: str = ""

    def __len__(self) -> int:
        return len(self.seqs)

    def class_counts(self) -> dict[str, int]:
        counts = np.bincount(self.labels, minlength=len(self.classes))
        return dict(zip(self.classes, counts.tolist(), strict=True))


def load_labelled(
    path: str | os.PathLike,
    *,
    labels: str | os.PathLike | None = None,
    classes: Sequence[str] | None = None,
    min_classes: int = 2,
) -> LabelledSet:
    """Read a labelled set in any of the three forms: FASTA (``label=`` headers, or ``labels`` TSV) or CSV/TSV.

    The form is told from the content (a first line starting with '>' is FASTA), not the file name.
    """
    if _starts_with_fasta_header(path):
        return read_labelled_fasta(path, labels=labels, classes=classes, min_classes=min_classes)
    if labels is not None:
        raise InputError(path, "a separate labels file goes with FASTA input, but this is not FASTA")
    return read_labelled_table(path, classes=classes, min_classes=min_classes)


def _starts_with_fasta_header(path) -> bool:
    """Whether the file's first character is a FASTA header's '>'; an InputError for FASTQ ('@')."""
    with open_binary(path) as stream:
        first = stream.read(1 << 12).lstrip()[:1]
    if first == b"@":
        raise InputError(path, "this looks like FASTQ ('@' header); give FASTA (lines starting with '>') or a "
                               "CSV/TSV with a 'sequence' column", 1)
    return first == b">"


def sequence_lengths(path: str | os.PathLike, sequence_column: str = "sequence") -> tuple[np.ndarray, np.ndarray]:
    """(lengths (n,) int64, where (n,) int64: each sequence's FASTA record number, 1-based, or table line) of the
    sequences of a FASTA or CSV/TSV file, read as a stream without checking them (the reader that follows does);
    empty when it cannot be told (no such column, unreadable file). ``describe_where`` words a position."""
    lengths, where = [], []
    try:
        if _starts_with_fasta_header(path):
            current, rest, records = None, b"", 0
            with open_binary(path) as stream:
                while block := stream.read(1 << 22):
                    *lines, rest = (rest + block).split(b"\n")
                    for line in lines:
                        if line.startswith(b">"):
                            if current is not None:
                                lengths.append(current)
                                where.append(records)
                            records, current = records + 1, 0
                        elif current is not None:
                            current += len(line.strip())
            if current is not None:
                if rest and not rest.startswith(b">"):
                    current += len(rest.strip())
                lengths.append(current)
                where.append(records)
        else:
            first, header, rows = _table(path)
            column = [h.lower() for h in header].index(sequence_column)
            for line, row in enumerate(rows, start=first + 2):
                if len(row) > column and row[column].strip():
                    lengths.append(len(row[column].strip()))
                    where.append(line)
    except (InputError, OSError, ValueError, StopIteration, csv.Error, EOFError):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.array(lengths, dtype=np.int64), np.array(where, dtype=np.int64)


def describe_where(path: str | os.PathLike, where: int) -> str:
    """A ``sequence_lengths`` position in words: "record N" (FASTA) or "line N" (tables)."""
    try:
        fasta = _starts_with_fasta_header(path)
    except InputError:
        fasta = False
    return f"record {where}" if fasta else f"line {where}"


def longest_sequence_bp(path: str | os.PathLike, sequence_column: str = "sequence") -> int | None:
    """The length of the longest sequence in a FASTA or CSV/TSV file (``sequence_lengths``); None when it cannot
    be told."""
    lengths, _ = sequence_lengths(path, sequence_column)
    return int(lengths.max()) if len(lengths) else None


def read_sequences(path: str | os.PathLike) -> LabelledSet:
    """Sequences to predict, labels not needed: FASTA records, or CSV/TSV rows with a ``sequence`` column (any
    ``label`` column is ignored). Every sequence gets label 0 of the one class ``"?"``."""
    if _starts_with_fasta_header(path):
        ids, seqs = [], store_builder(path)
        try:
            for rec in read_fasta(path, allow_empty=False):
                ids.append(rec.name)
                seqs.append(rec.seq)
        except BaseException:
            seqs.abandon()
            raise
        return LabelledSet(ids, seqs.finish(), np.zeros(len(ids), dtype=np.int64), ["?"], str(Path(path)))
    return read_labelled_table(path, label_column=None)


def text_lines(path: str | os.PathLike) -> Iterator[str]:
    """The lines of a (plain or gzipped) UTF-8 text file, read as a stream (a byte-order mark dropped, line ends
    stripped): an InputError for an empty file, binary data or text that is not UTF-8 (naming its line)."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    rest, line_no, any_text = "", 0, False
    with open_binary(path) as stream:
        first = True
        while True:
            block = stream.read(1 << 22)
            if first and b"\x00" in block[:8192]:
                raise InputError(path, "binary data, not a text file")
            first = False
            try:
                text = decoder.decode(block, final=not block)
            except UnicodeDecodeError as exc:
                done = block[:max(exc.start, 0)].count(b"\n")
                raise InputError(path, "not UTF-8 text (binary data?)", line_no + rest.count("\n") + done + 1) \
                    from None
            buffer = rest + text
            held = "\r" if block and buffer.endswith("\r") else ""  # perhaps the first half of a CRLF
            *lines, rest = LINE_END.split(buffer[:len(buffer) - len(held)])
            rest += held
            for line in lines:
                line_no += 1
                any_text = any_text or bool(line.strip())
                yield line
            if not block:
                break
    if rest.rstrip("\r"):
        any_text = any_text or bool(rest.strip())
        yield rest.rstrip("\r")
    if not any_text:
        raise InputError(path, "empty file")


def _table(path: str | os.PathLike):
    """(index of the header line, its stripped cells, a csv reader over the rows after it) of a CSV/TSV file read
    as a stream, whose first non-blank line is the header (delimiter: tab if the header has one, else comma)."""
    lines = text_lines(path)
    first, header = next((i, line) for i, line in enumerate(lines) if line.strip())
    csv.field_size_limit(FIELD_LIMIT)
    delimiter = "\t" if "\t" in header else ","
    rows = csv.reader(lines, delimiter=delimiter)
    return first, [h.strip() for h in next(csv.reader([header], delimiter=delimiter))], rows


def read_labelled_table(
    path: str | os.PathLike,
    *,
    sequence_column: str = "sequence",
    label_column: str | None = "label",
    classes: Sequence[str] | None = None,
    min_classes: int = 2,
) -> LabelledSet:
    """CSV/TSV with a header (delimiter: tab if the header has one, else comma); gzip is fine. Without a
    ``label_column`` the rows are unlabelled (label 0 of the one class ``"?"``)."""
    first, header, rows = _table(path)
    lower = [h.lower() for h in header]
    wanted = [c for c in (sequence_column, label_column) if c is not None]
    missing = [c for c in wanted if c.lower() not in lower]
    if missing:
        raise InputError(path, f"header has no {' or '.join(repr(m) for m in missing)} column "
                               f"(columns: {', '.join(header)})", first + 1)
    i_seq = lower.index(sequence_column.lower())
    i_lab = lower.index(label_column.lower()) if label_column is not None else None
    i_id = next((lower.index(c) for c in ("id", "name") if c in lower), None)
    ids, raw_labels, where = [], [], []
    seqs = store_builder(path)
    try:
        _table_rows(path, rows, first, header, (i_seq, i_lab, i_id), ids, seqs, raw_labels, where)
    except BaseException:
        seqs.abandon()
        raise
    seqs = seqs.finish()
    if not len(seqs):
        raise InputError(path, "no data rows under the header")
    _check_unique(path, ids, where)
    if i_lab is None:
        return LabelledSet(ids, seqs, np.zeros(len(ids), dtype=np.int64), ["?"], str(Path(path)))
    return _finish(path, ids, seqs, raw_labels, where, classes, min_classes)


def _table_rows(path, rows, first: int, header: list[str], columns: tuple, ids: list, seqs, raw_labels: list,
                where: list) -> None:
    """The rows of a table into ``ids``, ``seqs`` (a StoreBuilder), ``raw_labels`` and ``where`` (line numbers),
    each checked."""
    i_seq, i_lab, i_id = columns
    try:
        _checked_rows(path, rows, first, header, columns, ids, seqs, raw_labels, where)
    except csv.Error as exc:  # a quote left open, a NUL: the csv module's own complaint, with its line
        raise InputError(path, f"not a readable CSV/TSV table ({exc})", first + 1 + rows.line_num) from None


def _checked_rows(path, rows, first: int, header: list[str], columns: tuple, ids: list, seqs, raw_labels: list,
                  where: list) -> None:
    i_seq, i_lab, i_id = columns
    for offset, row in enumerate(rows, start=first + 2):
        if not row or not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise InputError(path, f"{len(row)} columns where the header has {len(header)}", offset)
        seq, label = row[i_seq].strip(), row[i_lab].strip() if i_lab is not None else "?"
        if not seq:
            raise InputError(path, "empty sequence", offset)
        if any(c in seq for c in " \t"):  # FASTA lines may wrap; a table cell holds one unbroken sequence
            column = next(i for i, c in enumerate(row[i_seq]) if c in " \t" and row[i_seq][:i].strip()) + 1
            raise InputError(path, f"a space inside the sequence (column {header[i_seq]!r}, character "
                                   f"{column})", offset)
        if not label:
            raise InputError(path, "missing label", offset)
        ids.append(row[i_id].strip() if i_id is not None else f"row{offset}")
        seqs.append(normalise(seq.encode("ascii", errors="replace"), path=path, where=offset))
        raw_labels.append(label)
        where.append(offset)


def read_labelled_fasta(
    path: str | os.PathLike,
    *,
    labels: str | os.PathLike | None = None,
    classes: Sequence[str] | None = None,
    min_classes: int = 2,
) -> LabelledSet:
    """FASTA with ``label=<value>`` in each header, or labels from a separate ``id<TAB>label`` file."""
    table = read_label_tsv(labels) if labels is not None else None
    ids, raw_labels, where = [], [], []
    seqs = store_builder(path)
    try:
        _fasta_records(path, labels, table, ids, seqs, raw_labels, where)
    except BaseException:
        seqs.abandon()
        raise
    if table is not None and len(table) > len(ids):
        log.warning("%s: %d labelled ids are not in %s", labels, len(table) - len(ids), path)
    return _finish(path, ids, seqs.finish(), raw_labels, where, classes, min_classes)


def _fasta_records(path, labels, table: dict | None, ids: list, seqs, raw_labels: list, where: list) -> None:
    """The records of a labelled FASTA into ``ids``, ``seqs`` (a StoreBuilder), ``raw_labels`` and ``where``."""
    for rec in read_fasta(path, allow_empty=False):
        if table is not None:
            if rec.name not in table:
                raise InputError(labels, f"no label for FASTA record {rec.name!r} (of {path})")
            label = table[rec.name]
        else:
            label = next((w[6:] for w in rec.description.split() if w.startswith("label=")), None)
            if not label:
                raise InputError(path, f"record {rec.name!r} has no 'label=<value>' in its header", rec.line)
        ids.append(rec.name)
        seqs.append(rec.seq)
        raw_labels.append(label)
        where.append(f"record {rec.name}")


def read_label_tsv(path: str | os.PathLike) -> dict[str, str]:
    """``id<TAB>label`` lines (blank and '#' lines skipped; an ``id<TAB>label`` header allowed) -> dict."""
    table: dict[str, str] = {}
    first_line: dict[str, int] = {}
    header_possible = True
    for n, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise InputError(path, "expected 'id<TAB>label'", n)
        key, label = fields[0].strip(), fields[1].strip()
        if header_possible and label.lower() == "label":
            header_possible = False
            continue
        header_possible = False
        if not key or not label:
            raise InputError(path, "missing id" if not key else f"missing label for {key!r}", n)
        if key in table:
            raise InputError(path, f"duplicate id {key!r} (first at line {first_line[key]})", n)
        table[key], first_line[key] = label, n
    if not table:
        raise InputError(path, "no labels in file")
    return table


def _check_unique(path, ids: list[str], where: list) -> None:
    seen: dict[str, object] = {}
    for key, w in zip(ids, where, strict=True):
        if key in seen:
            raise InputError(path, f"duplicate id {key!r} (first at line {seen[key]})", w)
        seen[key] = w


def _finish(path, ids, seqs, raw_labels, where, classes, min_classes) -> LabelledSet:
    if classes is None:
        names = sorted(set(raw_labels), key=_class_sort_key)
        if len(names) < min_classes:
            raise InputError(path, f"only one class ({names[0]!r}) in a labelled set; a classifier needs "
                                   f"at least {min_classes}")
    else:
        names = list(classes)
    index = {name: i for i, name in enumerate(names)}
    labels = np.empty(len(raw_labels), dtype=np.int64)
    for i, (label, w) in enumerate(zip(raw_labels, where, strict=True)):
        if label not in index:
            raise InputError(path, f"label {label!r} is not one of the classes {names}", w)
        labels[i] = index[label]
    return LabelledSet(ids, seqs, labels, names, str(Path(path)))


def _class_sort_key(name: str):
    try:
        return (0, int(name), "")
    except ValueError:
        return (1, 0, name)


def split_labelled(dataset: LabelledSet, dev_fraction: float, test_fraction: float, seed: int = 0
                   ) -> dict[str, LabelledSet]:
    """Stratified train/dev/test split: each class is shuffled and cut by the fractions."""
    rng = np.random.default_rng(seed)
    parts: dict[str, list[int]] = {"train": [], "dev": [], "test": []}
    for c in range(len(dataset.classes)):
        idx = rng.permutation(np.flatnonzero(dataset.labels == c))
        n_test, n_dev = round(len(idx) * test_fraction), round(len(idx) * dev_fraction)
        parts["test"] += idx[:n_test].tolist()
        parts["dev"] += idx[n_test:n_test + n_dev].tolist()
        parts["train"] += idx[n_test + n_dev:].tolist()
    return {name: _subset(dataset, sorted(idx)) for name, idx in parts.items()}


def _subset(dataset: LabelledSet, idx: list[int]) -> LabelledSet:
    return LabelledSet([dataset.ids[i] for i in idx], [dataset.seqs[i] for i in idx], dataset.labels[idx],
                       dataset.classes, dataset.source)


def write_labelled_tsv(parts: dict[str, LabelledSet], out_dir: str | os.PathLike) -> dict:
    """Write ``<name>.tsv`` (id, sequence, label) per part and summary.json; returns the summary."""
    from genolin.io.atomic import atomic_open, write_json

    out = Path(out_dir)
    summary = {}
    for name, part in parts.items():
        with atomic_open(out / f"{name}.tsv") as fh:
            fh.write("id\tsequence\tlabel\n")
            for key, seq, label in zip(part.ids, part.seqs, part.labels.tolist(), strict=True):
                fh.write(f"{key}\t{seq.decode()}\t{part.classes[label]}\n")
        summary[name] = {"n": len(part), "classes": part.class_counts(), "source": part.source}
    write_json(out / "summary.json", summary)
    return summary
