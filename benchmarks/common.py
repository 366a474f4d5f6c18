"""What the benchmark scripts share: their results' meta and files (PREFIX.json, PREFIX.md), timing on a device,
genolin's commands run as children (a log, a GPU of several, a pool of runs) and the inputs of the attention kernels.

Light to import (no torch, no genolin at the top): the bigWig benchmark's writer processes import their script
again, and a process that times the interpreter's start must not pay for torch.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import queue
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GENOLIN = [sys.executable, "-m", "genolin", "-q"]  # the CLI, as a subprocess


# -- a result's meta and files ---------------------------------------------------------------------------------------
def now() -> str:
    """The UTC date and time a result is made, to the second (ISO 8601)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def command(script: str) -> str:
    """This run's command line as a result quotes it: ``python benchmarks/SCRIPT.py ARGS``."""
    return " ".join([f"python benchmarks/{script}.py", *sys.argv[1:]])


def versions(benchmark: str) -> dict:
    """The keys a result's meta starts with: the benchmark, the date, genolin's, torch's and Python's versions."""
    import torch

    from genolin import __version__

    return {"benchmark": benchmark, "date": now(), "genolin": __version__, "torch": torch.__version__,
            "python": platform.python_version()}


def device_name(device: str) -> str:
    """The GPU's name for ``cuda``, else the machine's architecture."""
    import torch

    return torch.cuda.get_device_name() if device == "cuda" else platform.machine()


def run_metadata(benchmark: str, args: dict) -> dict:
    """The JSON meta of a benchmark run: date, versions, machine, the command line and ``args``."""
    import torch

    meta = {**versions(benchmark), "cpu": platform.processor() or platform.machine(),
            "command": " ".join(["python", *sys.argv]), "args": args}
    if torch.cuda.is_available():
        meta["gpu"] = torch.cuda.get_device_name(0)
    return meta


def made_on(meta: dict) -> str:
    """The GPU (else the CPU) and the versions of torch and genolin a result was made with."""
    return f"{meta.get('gpu') or meta['cpu']}, torch {meta['torch']}, genolin {meta['genolin']}"


def heading(title: str, meta: dict, about: str) -> list[str]:
    """The lines a result's markdown starts with: the title and date, ``about`` (machine, versions, settings), the
    command."""
    return [f"# {title} ({meta['date']})", "", about, "", f"`{meta['command']}`", ""]


def write_result(prefix: str | Path, result: dict, text: str | None = None, *, indent: int = 2, **dump) -> None:
    """PREFIX.json of ``result`` and, given ``text``, PREFIX.md, their folder made. A str prefix gets the endings
    appended, a Path its suffix replaced (as each benchmark has named its files); ``dump``: more json.dumps
    arguments."""
    paths = [Path(f"{prefix}{end}") if isinstance(prefix, str) else prefix.with_suffix(end) for end in (".json", ".md")]
    paths[0].parent.mkdir(parents=True, exist_ok=True)
    paths[0].write_text(json.dumps(result, indent=indent, **dump) + "\n")
    if text is not None:
        paths[1].write_text(text)


# -- options ---------------------------------------------------------------------------------------------------------
def fill_defaults(args, defaults: dict) -> None:
    """The options the command line left unset (None) take ``defaults``' values."""
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)


def work_folder(work: str | None, prefix: str) -> Path:
    """``--work`` (made if missing), or a new temporary folder whose name starts with ``prefix``."""
    path = Path(work or tempfile.mkdtemp(prefix=prefix))
    path.mkdir(parents=True, exist_ok=True)
    return path


def cli_pairs(pairs) -> list[str]:
    """--fasta and --tss options of (FASTA, BED) pairs, in order."""
    return [a for fasta, bed in pairs for a in ("--fasta", fasta, "--tss", bed)]


def cli_sets(settings: dict) -> list[str]:
    """--set KEY=VALUE options of ``settings``."""
    return [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]


# -- timing ----------------------------------------------------------------------------------------------------------
def sync(device) -> None:
    """Wait for the work queued on a CUDA ``device`` (a torch.device or its name; a CPU or None: nothing to wait)."""
    if device is not None and str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def timed(fn, device=None) -> tuple[float, object]:
    """(wall seconds, result) of one call of ``fn``, the device synchronised before and after."""
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out


def median_time(fn, repeats: int, device=None) -> tuple[float, object]:
    """(median wall seconds of ``repeats`` calls of ``fn``, the last call's result)."""
    times, out = [], None
    for _ in range(repeats):
        seconds, out = timed(fn, device)
        times.append(seconds)
    return statistics.median(times), out


def profile_table(fn, device, rows: int, width: int = 60) -> str:
    """torch.profiler's table of one call of ``fn``: the ``rows`` ops of most self time (CUDA time on a GPU)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = str(device).startswith("cuda")
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        fn()
        sync(device)
    key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=rows, max_name_column_width=width)


# -- children --------------------------------------------------------------------------------------------------------
# a command's last line when it ran out of memory: the allocator's error as genolin reports it, or the memory guard's
# refusal (genolin.memory.check_fits) because other runs hold the GPU's memory
OUT_OF_MEMORY = ("out of memory", "of GPU memory available")


def run(cmd: list[str], log: Path, env: dict | None = None, oom_retries: int = 0, oom_wait_s: float = 60.0) -> float:
    """Run ``cmd`` (in ``env``, default this process's) with its output appended to ``log``; its wall seconds. A
    failure's error ends with the last line the command wrote, so a result file says why without its log. A command
    that ran out of memory is run again up to ``oom_retries`` times, ``oom_wait_s`` apart (runs beside it on the
    same GPU may have finished by then)."""
    for attempt in range(max(oom_retries, 0) + 1):
        with open(log, "a") as fh:
            fh.write("$ " + " ".join(cmd) + "\n")
            fh.flush()
            start, t0 = fh.tell(), time.monotonic()
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
        if not proc.returncode:
            return time.monotonic() - t0
        with open(log, "rb") as fh:
            fh.seek(start)
            said = [line for line in fh.read().decode(errors="replace").splitlines() if line.strip()]
        if attempt < oom_retries and said and any(m in said[-1] for m in OUT_OF_MEMORY):
            with open(log, "a") as fh:
                fh.write(f"# out of memory: again in {oom_wait_s:.0f} s ({attempt + 1} of {oom_retries})\n")
            time.sleep(oom_wait_s)
            continue
        raise RuntimeError(f"failed ({proc.returncode}): {' '.join(cmd)}; see {log}"
                           + (f": {said[-1].strip()[:300]}" if said else ""))
    raise AssertionError("unreachable")


def train_once(cmd: list[str], run_dir: Path, log: Path, env: dict | None = None) -> float | None:
    """Run the training ``cmd`` (its ``--out`` is ``run_dir``) unless the same arguments trained ``run_dir`` to its
    end; its seconds, None when that run is reused. The arguments (the interpreter aside, paths resolved) are
    recorded in the run's command.json before and after (``genolin.checkpoint.train_once``): a run of other
    arguments, one cut short, or one without the record is a RuntimeError, as a failed command is (reusing it would
    table another training's figures under this one's name)."""
    from genolin import checkpoint

    try:
        return checkpoint.train_once(run_dir, cmd[1:], lambda: run(cmd, log, env))
    except ValueError as exc:  # run() fails with RuntimeError, so this is the record's refusal
        raise RuntimeError(str(exc)) from None


def run_child(cmd: list[str], env: dict, cwd: Path | None = None) -> tuple[float, str, str, float]:
    """Run ``cmd`` to its end, its output captured: (wall seconds, stdout, stderr, its peak RSS in MiB from wait4).
    A failure raises a RuntimeError that ends with the end of its stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode:
        raise RuntimeError(f"failed ({proc.returncode}): {' '.join(cmd)[:200]}: {stderr[-2000:]}")
    return wall, stdout, stderr, usage.ru_maxrss / 1024


def run_env(threads: int, gpu: int | None) -> dict:
    """This process's environment for a run of several at once: ``threads`` CPU threads (OMP_NUM_THREADS, its share
    of the host's cores: a dozen runs of torch's default, a thread per core each, left a 64-core host at a load of 250
    and their schedules following the clock) and only GPU ``gpu`` of this process's (the ``gpu``-th of a
    CUDA_VISIBLE_DEVICES list given to this process, so that a benchmark can be confined to some GPUs; None: all)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    if gpu is not None:
        visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        env["CUDA_VISIBLE_DEVICES"] = visible[gpu] if gpu < len(visible) else str(gpu)
    return env


class GpuSlots:
    """A GPU index per concurrent run (round robin over ``gpus``; None: every run sees every GPU), taken while a
    run holds it: ``slots.run(fn, *args)`` calls ``fn(*args, gpu=index)``."""

    def __init__(self, parallel: int, gpus: int):
        self.free: queue.Queue = queue.Queue()
        for i in range(parallel):
            self.free.put(i % gpus if gpus > 0 else None)

    def run(self, fn, *args) -> dict:
        gpu = self.free.get()
        try:
            return fn(*args, gpu=gpu)
        finally:
            self.free.put(gpu)


def collect(future, label: list, rows: list[dict], failed: list[dict], key: str = "run") -> None:
    """A finished run's row into ``rows``, or its failure (a benchmark command's RuntimeError) into ``failed`` under
    ``key``: ``label``, and on stderr."""
    try:
        rows.append(future.result())
    except RuntimeError as exc:
        failed.append({key: label, "error": str(exc)})
        print(exc, file=sys.stderr, flush=True)


# -- attention kernels on a GPU --------------------------------------------------------------------------------------
def attention_options(ap, n: list[int]) -> None:
    """The shapes (--n, --b, --h, --d: q, k, v of (B, N, H, D)) and the feature maps."""
    ap.add_argument("--n", type=int, nargs="+", default=n)
    ap.add_argument("--b", type=int, default=1)
    ap.add_argument("--h", type=int, default=8)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--maps", nargs="+", default=["elu", "favor"])


def attention_inputs(shape: tuple, seed: int):
    """q, k, v, do: CUDA bf16 tensors of ``shape`` drawn from N(0, 0.25) with ``seed``; q, k, v require gradients."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v, do = (torch.randn(shape, device="cuda", generator=g).mul(0.5).bfloat16() for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_()
    return q, k, v, do


def copy_bandwidth() -> float:
    """Bytes per second of a device-to-device copy (read + write), 4 GiB moved."""
    import torch
    import triton

    x = torch.empty(2**29, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    ms = triton.testing.do_bench(lambda: y.copy_(x), warmup=25, rep=200, return_mode="median")
    return 2 * x.numel() * 4 / (ms / 1e3)
