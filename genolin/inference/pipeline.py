"""The background pipeline of genome prediction: batches prepared on reader threads, launched while earlier ones
are still running, finished in order; and the threads it runs on.

    pipelined(items, prepare, launch, finish, pool, ahead=, depth=) -> finish(launch(prepare(item))) for each item,
        in order, overlapped: the one loop of one process's batches and of the torchrun rounds
    computed_ahead(items, device, depth) -> items drawn on a background thread, up to ``depth`` ahead
    cpu_model_threads(), intra_op_threads(n): how a CPU's cores are shared out among model threads
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import torch

# genome windows on a CPU: batches run on this many model threads at once (at most), the cores shared out among
# them: a small model's operations are too short to keep several cores busy each. Batches of 2**15 tokens: smaller
# ones lose more to the threads' turns at the GIL, larger ones to cache misses (docs/benchmarks.md, prediction speed)
CPU_MODEL_THREADS = 4
# CUDA: batches in the GPU's queue while the main thread writes an earlier one
CUDA_QUEUE_DEPTH = 2
# CUDA: pieces computed ahead of the writers and peak callers (``region_probs(ahead=True)``), on a thread of their
# own: with the forward replayed from CUDA graphs, peak calling and the writers' dispatch held up the launches when
# they shared one thread
PIECES_AHEAD = 4
# CUDA: threads reading genome windows ahead of the GPU. With the k-mer ids made on the GPU (``window_ids``) the
# host only joins base codes, and one thread keeps up (more only wait on the GIL)
CUDA_TOKEN_THREADS = 1

_END = object()


def pipelined(items: Iterable, prepare: Callable, launch: Callable, finish: Callable[..., Iterator], *,
              pool: ThreadPoolExecutor, ahead: int, depth: int) -> Iterator:
    """What ``finish(launch(prepare(item)))`` yields for each item, in the items' order, overlapped:
    ``prepare`` (reading and tokenizing) runs on ``pool``'s threads, up to ``ahead`` items submitted before the
    first is taken; ``launch`` (the forward, queued on the GPU or handed to a model thread) runs on the caller's
    thread, and up to ``depth`` launched items run while the oldest is finished (copied back, made into pieces,
    written by the caller)."""
    items = iter(items)
    ready = deque(pool.submit(prepare, item) for item in itertools.islice(items, ahead))
    running: deque = deque()
    while ready:
        made = ready.popleft().result()
        following = next(items, _END)
        if following is not _END:
            ready.append(pool.submit(prepare, following))
        running.append(launch(made))
        if len(running) > depth:  # the oldest is finished while the others run
            yield from finish(running.popleft())
    while running:
        yield from finish(running.popleft())


def computed_ahead(items: Iterator, device: torch.device, depth: int) -> Iterator:
    """``items`` drawn on a background thread (CUDA calls there on ``device``), up to ``depth`` ahead of the
    caller: the GPU's batches launched and made into pieces while the caller writes earlier ones and calls their
    peaks (numpy's passes and the waits for the GPU release the GIL). The thread's exception comes out of the
    iteration; when the caller stops early (an exception, a ``break``), the thread closes ``items`` and ends."""
    box: queue.Queue = queue.Queue(depth)
    stop = threading.Event()

    def put(kind: str, value) -> bool:
        while not stop.is_set():
            try:
                box.put((kind, value), timeout=0.05)
                return True
            except queue.Full:
                pass
        return False

    def produce() -> None:
        if device.type == "cuda":
            torch.cuda.set_device(device)  # the current device (events, streams) is per thread
        try:
            for item in items:
                if not put("item", item):
                    break
            else:
                put("end", None)
        except BaseException as exc:  # handed to the caller's thread, raised there
            put("error", exc)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name="genolin-pieces", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = box.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        thread.join()


def cpu_model_threads(cores: int | None = None) -> tuple[int, int]:
    """(model threads, torch threads each) for genome windows on a CPU: up to ``CPU_MODEL_THREADS`` threads, each
    running its batches with an even share of torch's intra-op threads (at least one)."""
    cores = cores or torch.get_num_threads()
    workers = max(1, min(CPU_MODEL_THREADS, cores))
    return workers, max(1, cores // workers)


@contextlib.contextmanager
def intra_op_threads(n: int | None):
    """torch's intra-op threads set to ``n`` inside the block (None: unchanged), then restored."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n is not None:
            torch.set_num_threads(before)
