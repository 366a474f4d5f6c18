"""Join the per-contig predictions of one genome (``genolin predict --contig``, run in parallel) into the files one
whole-genome ``genolin predict`` writes: OUT.plus.bedGraph, OUT.minus.bedGraph, OUT.peaks.bed.

    python gather_predictions.py OUT PART_PREFIX...      # parts in the genome's contig order

bedGraph: the first part's header (with the track renamed after OUT), then every part's lines. Peaks: one header,
the calls renumbered promoter_1, promoter_2, ... in order, as a whole-genome run numbers them. Each output is
written under a temporary name and renamed when complete. Also runs as a Snakemake ``script:`` (which prepends
its own code, so no ``from __future__`` import here).
"""

import os
import sys
import tempfile
from pathlib import Path

from genolin.io.bed import renumber_calls


def _atomic_write(path: Path, lines) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.writelines(lines)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _header(line: str, part: str, out: str) -> str:
    return line.replace(f'name="{part} ', f'name="{out} ', 1)


def gather(out: str, parts: list[str]) -> None:
    if not parts:
        raise SystemExit("gather_predictions: no parts to join")
    name = Path(out).name
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    for strand in ("plus", "minus"):
        def lines(strand=strand):
            for i, part in enumerate(parts):
                with open(f"{part}.{strand}.bedGraph") as fh:
                    header = fh.readline()
                    if i == 0:
                        yield _header(header, Path(part).name, name)
                    yield from fh

        _atomic_write(Path(f"{out}.{strand}.bedGraph"), lines())

    def peaks():
        n = 0
        for i, part in enumerate(parts):
            with open(f"{part}.peaks.bed") as fh:
                header = fh.readline()
                if i == 0:
                    yield _header(header, Path(part).name, name)
                calls = list(renumber_calls(fh, n))
            n += len(calls)
            yield from calls

    _atomic_write(Path(f"{out}.peaks.bed"), peaks())


if __name__ == "__main__" and "snakemake" not in globals():
    gather(sys.argv[1], sys.argv[2:])
elif "snakemake" in globals():
    sm = globals()["snakemake"]
    gather(sm.params.prefix, list(sm.params.parts))
