"""Prediction over the processes of a torchrun launch: genome windows shared out over the ranks, and output files
written in shares by the ranks.

    region_probs_shared(windows, data, regions, ...) -> rank 0 yields every piece; the other ranks compute
    region_probs_everywhere(windows, data, regions, ...) -> every rank yields every piece
    write_shares(dist, device, prefix, shares, write, files) -> the files one process writes, written by several

Batch i of the one-process plan runs on rank i % world, so the values are the one process's, bit for bit.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from genolin.device import Dist, peers_alive
from genolin.inference.genome import ON_HOST, GenomeWindows, copied_back
from genolin.inference.pipeline import CUDA_QUEUE_DEPTH, pipelined
from genolin.inference.windows import Piece, kept_rows
from genolin.progress import progress_bar
from genolin.tasks import TrackData

log = logging.getLogger(__name__)


def region_probs_everywhere(windows: GenomeWindows, dist: Dist, data: TrackData, regions, rc_average: bool,
                            progress) -> Iterator[Piece]:
    """Every rank yields the pieces of every region in order: each round (one batch per rank) the kept bins of the
    round's batches, padded to a batch's most, (world, batch_size x window bins, 2) float32, are all-gathered (NCCL
    on CUDA, gloo on a CPU). The callers write a share each (``write_shares``): no rank appends another's output.
    On CUDA, ``CUDA_QUEUE_DEPTH`` rounds run (forward, gather, copy to pinned memory) while the oldest becomes
    pieces."""
    import torch.distributed as tdist

    rank, world = dist.rank, dist.world
    device = windows.predictor.device
    cuda = device.type == "cuda"
    plan = list(windows.plan(data, regions))
    rounds = [plan[i: i + world] for i in range(0, len(plan), world)]
    size = windows.predictor.batch_size * windows.window_bins(data)[0]  # a batch's kept bins, at most
    comm = device if cuda else torch.device("cpu")

    def made(batches):  # on a reader thread: this rank's tokens, the bases of every batch (N bins)
        mine = windows.tokens(data, batches[rank], rc_average) if rank < len(batches) else None
        bases = [mine[1] if r == rank else [data.bases(w) for w, _, _ in b] for r, b in enumerate(batches)]
        return batches, mine, bases

    def launch(prepared):
        batches, mine, bases = prepared
        kept = torch.zeros((size, 2), dtype=torch.float32, device=comm)
        if mine is not None:
            batch, _, codes, nbins = mine
            probs = windows.window_probs(codes, nbins, rc_average)
            rows = torch.from_numpy(kept_rows(data, batch, probs.shape[1]))
            rows = rows.pin_memory().to(comm, non_blocking=True) if cuda else rows
            kept[: len(rows)] = probs.reshape(-1, probs.shape[-1]).index_select(0, rows)
        every = [torch.empty_like(kept) for _ in range(world)]
        with peers_alive():
            tdist.all_gather(every, kept)
        if not cuda:
            return batches, bases, [(t.numpy(), ON_HOST) for t in every]
        host, done = copied_back(every)
        return batches, bases, [(h, done) for h in host]

    def finish(launched) -> Iterator[Piece]:
        batches, bases, kept = launched
        for r, batch in enumerate(batches):
            yield from windows.pieces(data, batch, bases[r], kept[r], bar)

    depth = CUDA_QUEUE_DEPTH if cuda else 0
    with progress_bar(total=sum(b - a for _, a, b in regions), unit="bp", desc="predict",
                      enabled=progress if rank == 0 else False) as bar, ThreadPoolExecutor(1) as pool:
        yield from pipelined(rounds, made, launch, finish, pool=pool, ahead=depth + 1, depth=depth)


def region_probs_shared(windows: GenomeWindows, dist: Dist, data: TrackData, regions, rc_average: bool,
                        progress) -> Iterator[Piece]:
    """Rank 0 yields the pieces of every region in order, the other ranks compute their share and yield nothing:
    each round the ranks' probabilities (padded to one shape) are gathered on rank 0. Pipelined: the next round's
    tokens are made on a background thread and its forward and gather are launched before rank 0 turns the last
    round into pieces, so the ranks do not wait for rank 0's writing."""
    import torch.distributed as tdist

    rank, world = dist.rank, dist.world
    device = windows.predictor.device
    plan = list(windows.plan(data, regions))
    log.info("%d batches of windows shared over %d processes", len(plan), world)
    shape = (windows.predictor.batch_size, windows.window_bins(data)[0], 2)
    comm = device if device.type == "cuda" else torch.device("cpu")

    def tokens(first: int):
        return first, windows.tokens(data, plan[first + rank], rc_average) if first + rank < len(plan) else None

    def launch(prepared):
        first, made = prepared
        mine = torch.zeros(shape, dtype=torch.float32, device=comm)
        if made is not None:
            probs = windows.window_probs(made[2], made[3], rc_average)
            mine[: probs.shape[0], : probs.shape[1]] = probs
        every = [torch.empty_like(mine) for _ in range(world)] if rank == 0 else None
        with peers_alive():
            return first, mine, every, tdist.gather(mine, every, dst=0, async_op=True)

    def finish(launched) -> Iterator[Piece]:
        first, _, every, work = launched
        with peers_alive():
            work.wait()
        if rank == 0:
            for r, probs in enumerate(every[: len(plan) - first]):
                batch = plan[first + r]
                bases = [data.bases(w) for w, _, _ in batch]
                yield from windows.pieces(data, batch, bases, (probs.cpu().numpy(), None), bar)

    with progress_bar(total=sum(b - a for _, a, b in regions), unit="bp", desc="predict",
                      enabled=progress if rank == 0 else False) as bar, ThreadPoolExecutor(1) as pool:
        yield from pipelined(range(0, len(plan), world), tokens, launch, finish, pool=pool, ahead=1, depth=1)


def write_shares(dist: Dist, device: torch.device, prefix: str, shares: int,
                 write: Callable[[int | None, Path | None], str], files: Callable[[int, Path], list[Path]]) -> str:
    """The files one process writes for ``prefix``, written by the ranks of a torchrun launch, each computing every
    piece (``region_probs(everywhere=True)``): rank r < ``shares`` runs ``write(r, folder)`` for its share of
    the files, rank 0 into their places (folder None), the others into a hidden folder beside them; ranks past the
    last share run ``write(None, folder)`` and only compute. After a barrier rank 0 moves the other shares' files
    (``files(share, folder)``) into place. The files are one process's byte for byte, and no rank appends
    another's output (appending a 1 Gbp genome's other strand after the barrier cost seconds). Returns what
    ``write`` returned."""
    rank = dist.rank
    parts = Path(prefix).parent / f".{Path(prefix).name}.genolin-parts"
    share = rank if rank < shares else None
    t0 = time.perf_counter()
    try:
        if rank > 0 and share is not None:
            parts.mkdir(parents=True, exist_ok=True)
        summary = write(share, None if rank == 0 else parts)
        t1 = time.perf_counter()
        dist.barrier(device)
        if rank == 0:
            for other in range(1, min(shares, dist.world)):
                for path in files(other, parts):
                    os.replace(path, Path(prefix).parent / path.name)
        log.debug("rank %d: predicted and wrote its share in %.2f s, then %.2f s at the barrier%s", rank, t1 - t0,
                  time.perf_counter() - t1, " and moving the others' into place" if rank == 0 else "")
    finally:
        if rank == 0:
            shutil.rmtree(parts, ignore_errors=True)
    return summary
