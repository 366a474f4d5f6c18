"""Our bigWig writer against libBigWig (pyBigWig): the same values and intervals read back, the header's summary
and the zoom levels' statistics; many contigs (a B+ tree of several levels), many blocks (an R tree of several
levels), pieces of every size with a gap, short last bins."""

from __future__ import annotations

import numpy as np
import pytest

pyBigWig = pytest.importorskip("pyBigWig", reason="pyBigWig reads the files back")

from genolin.io.bedgraph import DECIMALS  # noqa: E402
from genolin.io.bigwig import BIGWIG_MAGIC, BigWigWriter  # noqa: E402


def reference(path, lengths, pieces):
    """libBigWig writing the same pieces (the writer genolin used before its own)."""
    bw = pyBigWig.open(str(path), "w")
    bw.addHeader([(c, n) for c, n in lengths.items()], maxZooms=10)
    for contig, first, values, stride in pieces:
        values = np.round(values, DECIMALS)
        n, start = lengths[contig], first * stride
        full = min(len(values), max(0, (n - start) // stride))
        if full:
            bw.addEntries(contig, start, values=values[:full], span=stride, step=stride)
        if full < len(values) and start + full * stride < n:
            bw.addEntries([contig], [start + full * stride], ends=[n], values=[float(values[full])])
    bw.close()


def genome(seed, contigs, stride=4, longest=40_000, gap=True):
    """(lengths in a shuffled name order, pieces (contig, first bin, values, stride) of random sizes covering every
    bin but, with ``gap``, a run of bins of the first contig)."""
    g = np.random.default_rng(seed)
    names = [f"c{i}" if i % 3 else f"scaffold_{i:04d}" for i in range(contigs)]
    g.shuffle(names)
    lengths = {c: int(g.integers(1, longest)) if contigs > 1 else longest - 1 for c in names}
    pieces = []
    for k, (c, n) in enumerate(lengths.items()):
        bins, i, j = -(-n // stride), 0, 0
        while i < bins:
            m = min(int(g.integers(1, 3000)), bins - i)
            j += 1
            if not (gap and k == 0 and j == 2):  # the first contig's second piece: a gap
                pieces.append((c, i, g.random(m) * (0.2 if g.random() < 0.5 else 1.0), stride))
            i += m
    return lengths, pieces


def write(path, lengths, pieces):
    with BigWigWriter(path, lengths) as w:
        last = None
        for contig, first, values, stride in pieces:
            if last is not None and contig != last:
                w.flush()
            w.add(contig, first, values, stride, lengths[contig])
            last = contig


@pytest.mark.parametrize(("seed", "contigs", "longest"), [(0, 3, 40_000), (1, 300, 3_000), (2, 1, 2_000_000)])
def test_values_intervals_and_summaries_equal_libbigwigs(tmp_path, monkeypatch, seed, contigs, longest):
    import genolin.io.bigwig

    monkeypatch.setattr(genolin.io.bigwig, "ITEMS_PER_BLOCK", 512)  # the long contig: over 256 blocks
    lengths, pieces = genome(seed, contigs, longest=longest)
    write(tmp_path / "ours.bw", lengths, pieces)
    reference(tmp_path / "ref.bw", lengths, pieces)
    ours, ref = pyBigWig.open(str(tmp_path / "ours.bw")), pyBigWig.open(str(tmp_path / "ref.bw"))
    assert ours.isBigWig() and ours.chroms() == lengths
    for contig, n in lengths.items():
        want = np.array(ref.values(contig, 0, n))
        got = np.array(ours.values(contig, 0, n))
        assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~np.isnan(got)],
                                                                                  want[~np.isnan(want)])
        assert ours.intervals(contig) == ref.intervals(contig)
        if np.isfinite(want).any():  # the zoom levels: whole-contig statistics from the summaries
            for kind in ("mean", "max", "min", "coverage"):
                assert ours.stats(contig, type=kind)[0] == pytest.approx(ours.stats(contig, type=kind, exact=True)[0],
                                                                          rel=1e-5, abs=1e-6), (contig, kind)
    h, r = ours.header(), ref.header()
    assert h["nBasesCovered"] == r["nBasesCovered"] and h["nLevels"] >= 1
    for key in ("sumData", "sumSquared", "minVal", "maxVal"):
        assert h[key] == pytest.approx(r[key], rel=1e-6, abs=1)  # pyBigWig reports them as integers
    if contigs == 1:  # over 256 blocks: the R tree has two levels
        assert sum(len(v) for _, _, v, _ in pieces) > 256 * genolin.io.bigwig.ITEMS_PER_BLOCK
        c = next(iter(lengths))
        for a in (0, 123_457, 1_999_000):  # lookups that go through the tree
            assert ours.values(c, a, a + 500) == ref.values(c, a, a + 500)


def test_zoom_levels_hold_the_bins_in_their_windows(tmp_path):
    """A zoom level's summaries: a window of 64 bp (16 bins at stride 4) read back from the coarsest level that
    still resolves it equals the bins' own statistics."""
    lengths = {"chrA": 10_000}
    values = np.random.default_rng(3).random(2500)
    write(tmp_path / "z.bw", lengths, [("chrA", 0, values, 4)])
    bw = pyBigWig.open(str(tmp_path / "z.bw"))
    stored = np.round(values, DECIMALS).astype(np.float32).astype(np.float64)
    for w in (0, 17, 155):
        window = stored[16 * w:16 * (w + 1)]
        a = 64 * w
        assert bw.stats("chrA", a, a + 64, type="max")[0] == pytest.approx(window.max(), abs=1e-7)
        assert bw.stats("chrA", a, a + 64, type="min")[0] == pytest.approx(window.min(), abs=1e-7)
        assert bw.stats("chrA", a, a + 64, type="mean")[0] == pytest.approx(window.mean(), rel=1e-6)
    with open(tmp_path / "z.bw", "rb") as f:
        data = f.read()
    assert int.from_bytes(data[:4], "little") == BIGWIG_MAGIC == int.from_bytes(data[-4:], "little")


def test_bins_out_of_order_or_another_stride_are_refused(tmp_path):
    lengths = {"a": 100, "b": 100}
    with pytest.raises(ValueError, match="genome order"), BigWigWriter(tmp_path / "x.bw", lengths) as w:
        w.add("b", 0, np.ones(5), 4, 100)
        w.add("a", 0, np.ones(5), 4, 100)
    with pytest.raises(ValueError, match="stride"), BigWigWriter(tmp_path / "y.bw", lengths) as w:
        w.add("a", 0, np.ones(5), 4, 100)
        w.add("a", 5, np.ones(5), 2, 100)
    assert not list(tmp_path.iterdir())  # a failed writer leaves nothing


def test_a_second_reader_reads_the_same(tmp_path):
    """bigtools (pybigtools: an implementation of its own, in Rust) reads the contigs (a B+ tree of two levels), the
    values and the whole-file summary as pyBigWig does."""
    pybigtools = pytest.importorskip("pybigtools", reason="pybigtools (the dev extra) is a second reader")
    lengths, pieces = genome(4, 300, longest=5_000)
    write(tmp_path / "t.bw", lengths, pieces)
    other, ours = pybigtools.open(str(tmp_path / "t.bw")), pyBigWig.open(str(tmp_path / "t.bw"))
    assert other.chroms() == lengths
    for contig, n in list(lengths.items())[::7]:
        got = np.asarray(other.values(contig, 0, n, fillna=None), dtype=np.float64)
        want = np.array(ours.values(contig, 0, n))
        np.testing.assert_array_equal(got, want)
    summary = other.info()["summary"]
    assert summary["basesCovered"] == ours.header()["nBasesCovered"]
    assert summary["sum"] == pytest.approx(ours.header()["sumData"], abs=1)


def test_a_failure_while_closing_leaves_no_file(tmp_path, monkeypatch):
    """An error while the index and zoom levels are written (a full disk, an interrupt) drops the temporary file: no
    truncated file appears under the final name."""
    import genolin.io.bigwig

    def fail(self, spill):
        raise KeyboardInterrupt

    monkeypatch.setattr(genolin.io.bigwig.BigWigWriter, "_zoom_level", fail)
    with pytest.raises(KeyboardInterrupt), BigWigWriter(tmp_path / "y.bw", {"a": 1000}) as w:
        w.add("a", 0, np.ones(250), 4, 1000)
    assert not list(tmp_path.iterdir())


def test_the_summary_sits_where_kents_writer_puts_it(tmp_path):
    """The total summary right after the header and the ten zoom headers (offset 304), before the contig tree: some
    readers fetch the header and summary in one read of fixed size."""
    lengths, pieces = genome(5, 150, longest=2_000)
    write(tmp_path / "s.bw", lengths, pieces)
    data = (tmp_path / "s.bw").read_bytes()
    assert int.from_bytes(data[44:52], "little") == 64 + 24 * 10
    assert int.from_bytes(data[8:16], "little") == 64 + 24 * 10 + 40  # the contig tree after it
    assert pyBigWig.open(str(tmp_path / "s.bw")).chroms() == lengths


WRITER_DIES = """
import sys
import numpy as np
from genolin.io.bigwig import BackgroundBigWigWriter
try:
    with BackgroundBigWigWriter(sys.argv[1], {"a": 10**7}, queue_pieces=2) as w:
        for i in range(0, 2_500_000, 65536):
            w.add("a", i, np.random.rand(65536), 4, 10**7)
except Exception as exc:
    print("raised", type(exc).__name__, flush=True)
"""


def test_a_dead_writer_process_neither_hangs_the_parent_nor_its_exit(tmp_path):
    """The child cannot write its file (its folder is a file) and stops while the parent still sends stretches:
    the parent raises one error and the interpreter exits (queued stretches nobody reads used to hold the exit)."""
    import subprocess
    import sys

    (tmp_path / "blocker").write_text("")
    proc = subprocess.run([sys.executable, "-c", WRITER_DIES, str(tmp_path / "blocker" / "x.bw")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "raised InputError" in proc.stdout, proc.stdout + proc.stderr


def test_the_background_writer_leaves_the_resource_tracker_nothing(tmp_path, monkeypatch):
    """The child process takes its stretches down a plain pipe: no named semaphore (a multiprocessing.Queue's locks)
    is registered with the resource tracker, which could otherwise warn of one below a Ctrl-C's line after exit. The
    file is still whole."""
    import multiprocessing.resource_tracker as tracker

    from genolin.io.bigwig import BackgroundBigWigWriter

    registered = []
    monkeypatch.setattr(tracker, "register", lambda name, rtype: registered.append((name, rtype)))
    lengths = {"a": 300_000, "b": 1_001}
    values = np.random.default_rng(0).random(75_000).astype(np.float32)  # a model's values
    with BackgroundBigWigWriter(tmp_path / "t.bw", lengths, queue_pieces=2, batch_bins=5_000) as w:
        for first in range(0, 75_000, 7_000):
            w.add("a", first, values[first:first + 7_000], 4, 300_000)
        w.flush()
        w.add("b", 0, np.ones(251, np.float32), 4, 1_001)
    assert registered == []
    bw = pyBigWig.open(str(tmp_path / "t.bw"))
    expected = np.round(values.astype(np.float64), DECIMALS).astype(np.float32)
    assert np.array_equal(np.array(bw.values("a", 0, 300_000)[::4], np.float32), expected)
    assert bw.values("b", 1_000, 1_001) == [1.0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.bw"]


PARENT_KILLED = """
import os, signal, sys
import numpy as np
from genolin.io.bigwig import BackgroundBigWigWriter
with BackgroundBigWigWriter(sys.argv[1], {"a": 10**7}) as w:
    for i in range(0, 500_000, 65536):
        w.add("a", i, np.random.rand(65536), 4, 10**7)
    print(w.proc.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_writer_whose_parent_is_killed_ends_and_leaves_no_file(tmp_path):
    """The parent dies without a word (SIGKILL) while its child writes: the child sees the pipe close, drops its
    temporary file and ends."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    proc = subprocess.run([sys.executable, "-c", PARENT_KILLED, str(tmp_path / "x.bw")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    child = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # ended: gone, or a zombie its new parent has yet to reap
        try:
            if Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
        except (FileNotFoundError, ProcessLookupError):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the writer process {child} outlived its parent by a minute")
    assert list(tmp_path.iterdir()) == []


SENDER_FAILS = """
import errno, sys
import numpy as np
from genolin.io.bigwig import BackgroundBigWigWriter
try:
    with BackgroundBigWigWriter(sys.argv[1], {"a": 4000}) as w:
        if sys.argv[2] == "enobufs":  # the second send fails, the child alive and waiting
            send, sent = w.conn.send, []
            def failing(item):
                sent.append(item)
                if len(sent) == 2:
                    raise OSError(errno.ENOBUFS, "No buffer space available")
                send(item)
            w.conn.send = failing
        w.add("a", 0, np.ones(10, np.float32), 4, 4000)
        w.flush()
        w._send(("a", 10, lambda: None, 4, 4000) if sys.argv[2] == "pickle" else ("a", 10, np.ones(10), 4, 4000))
        for first in range(20, 1000, 10):
            w.add("a", first, np.ones(10, np.float32), 4, 4000)
except RuntimeError as exc:
    print("raised", exc, flush=True)
"""


@pytest.mark.parametrize("failure", ["pickle", "enobufs"])
def test_a_stretch_the_sender_cannot_send_stops_the_writer_with_its_reason(tmp_path, failure):
    """A failure in the sender thread other than a closed pipe (an item pickle refuses; a send error while the
    child lives) stops the child and is the parent's error, in time; no file is left."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", SENDER_FAILS, str(tmp_path / "t.bw"), failure], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("raised writing ") and ("pickle" in proc.stdout.lower() if failure == "pickle"
                                                           else "No buffer space" in proc.stdout), proc.stdout
    assert list(tmp_path.iterdir()) == []
