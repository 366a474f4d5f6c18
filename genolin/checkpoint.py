"""Run directories: what ``genolin train`` writes (``RunDir``) and ``evaluate`` / ``predict`` / ``--resume`` read;
this module is their one reader and writer.

    RUN_DIR/config.json            the run (format 2): task, its state (classes; pos_weight of a track model),
                                   ``train`` (TrainConfig, the resolved encoder config under train.model), data
    RUN_DIR/model.safetensors      weights at the last checkpoint (FAVOR+ projections included)
    RUN_DIR/best.safetensors       weights with the best validation metric (what evaluate/predict use), with the
                                   decision threshold chosen on that validation in its metadata
    RUN_DIR/checkpoints/           model-<step>.safetensors and optimizer-<step>.safetensors of the last checkpoint
    RUN_DIR/trainer_state.json     epoch, step, batch within the epoch, early-stopping state, the names of the
                                   checkpoint files and the optimizer's scalar state and param groups
    RUN_DIR/metrics.jsonl, train.log, .lock
    RUN_DIR/command.json           written by scripts that train runs (benchmarks, genolin.models.build), not by
                                   train: the command's arguments and whether it finished (``train_once``)

A checkpoint writes its step-named files first, best.safetensors, then trainer_state.json (the commit point),
then model.safetensors (a hard link) and removes older step files: a run killed at any moment, also inside a
checkpoint, resumes from a state whose files all exist. ``.lock`` is held (flock) while a run trains, so a second
``genolin train`` on the same folder is refused; the system drops the lock when the process dies, even by SIGKILL.

Weights are safetensors and everything else JSON: nothing is unpickled. Every file is written under a temporary
name and renamed. Missing or corrupt files are InputError naming the file. config.json of earlier formats is
migrated on read (``genolin.config.migrate_run_config``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import torch

from genolin import __version__
from genolin.config import FORMAT, TASKS, DataSpec, TrainConfig, migrate_run_config
from genolin.errors import InputError
from genolin.io.atomic import atomic_path, write_json
from genolin.peaks import MAX_CALLS_PER_MBP

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
BEST = "best.safetensors"
OPTIMIZER = "optimizer.safetensors"
STATE = "trainer_state.json"


@dataclass
class RunConfig:
    """config.json of a run: the task, its state, every setting and where the data came from."""

    task: str
    train: TrainConfig  # train.model: the encoder config as built (vocabulary, head, seed filled in)
    data: DataSpec
    # "classes"; "pos_weight", "train_contigs", "circular_contigs" and "tss_per_mbp" (track), "max_train_bp" and
    # "min_train_bp" (sequence)
    task_state: dict = field(default_factory=dict)
    created: str = ""

    def to_dict(self) -> dict:
        import dataclasses

        return {"genolin": __version__, "format": FORMAT, "task": self.task, **self.task_state,
                "train": self.train.to_dict(), "data": dataclasses.asdict(self.data),
                "created": self.created or dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}


TASK_STATE_KEYS = ("classes", "pos_weight", "max_train_bp", "min_train_bp", "train_contigs", "circular_contigs",
                   "tss_per_mbp")


def read_run_config(run_dir: str | os.PathLike) -> RunConfig:
    """RUN_DIR/config.json (any format) -> RunConfig; InputError when the folder or the file is not a run's."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(run_dir, "no such run directory")
    path = run_dir / CONFIG
    saved = read_json(path)
    try:
        saved = migrate_run_config(saved)
        if saved["task"] not in TASKS:
            raise ValueError(f"unknown task {saved['task']!r}")
        task_state = {k: saved[k] for k in TASK_STATE_KEYS if k in saved}
        _check_task_state(task_state)
        train = TrainConfig.from_dict(_checked_settings(path, saved["train"]))
        _check_encoder(train, saved["task"], task_state)
        return RunConfig(task=saved["task"], train=train, data=DataSpec.from_dict(saved["data"]),
                         task_state=task_state, created=saved.get("created", ""))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(path, f"not a genolin run configuration ({type(exc).__name__}: {exc})") from None


def _checked_settings(path: Path, train: dict) -> dict:
    """The saved settings, each typed and range-checked as --config values are (InputError naming the file)."""
    from genolin.config import TYPES, Setting, coerce

    if not isinstance(train.get("model"), dict):
        raise ValueError("train.model is not a mapping")

    def check(key: str, value):
        return coerce(Setting(key, value, str(path)), key) if key in TYPES else value

    return {**{k: check(k, v) for k, v in train.items() if k != "model"},
            "model": {k: check(f"model.{k}", v) for k, v in train["model"].items()}}


def _check_encoder(train: TrainConfig, task: str, state: dict) -> None:
    """The encoder's derived fields agree with the tokenizer and the task's heads (ValueError otherwise)."""
    from genolin.tasks import get_task
    from genolin.tokenize import vocab_size

    model = train.model
    if model.vocab_size != vocab_size(train.k) or not 0 <= model.pad_id < model.vocab_size:
        raise ValueError(f"model.vocab_size {model.vocab_size} does not fit k = {train.k}")
    heads = get_task(task, train, state).head()
    head = (heads["n_classes"], heads["track_channels"])
    if (model.n_classes, model.track_channels) != head:
        raise ValueError(f"the model's heads ({model.n_classes} classes, {model.track_channels} track channels) do "
                         f"not fit a {task} task with classes {state.get('classes')}")


def _check_task_state(state: dict) -> None:
    """ValueError unless classes are names, pos_weight / max_train_bp positive numbers and tss_per_mbp a number
    from 0 to MAX_CALLS_PER_MBP (or absent / null),
    train_contigs [name, length, bp trained from its start] triples and circular_contigs [name, length] pairs (each
    or absent / null)."""
    classes = state.get("classes", [])
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        raise ValueError(f"classes is {classes!r}")
    for key in ("pos_weight", "max_train_bp", "min_train_bp"):
        value = state.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or not value > 0):
            raise ValueError(f"{key} is {value!r}")
    density = state.get("tss_per_mbp")  # 0: training genomes without TSSs
    if density is not None and (isinstance(density, bool) or not isinstance(density, int | float)
                                or not 0 <= density <= MAX_CALLS_PER_MBP):
        raise ValueError(f"tss_per_mbp is {density!r}")
    contigs = state.get("train_contigs") or []
    if not isinstance(contigs, list) or not all(_contig_triple(c) for c in contigs):
        raise ValueError(f"train_contigs is {contigs!r:.200}")
    circles = state.get("circular_contigs") or []
    if not isinstance(circles, list) or not all(_contig_pair(c) for c in circles):
        raise ValueError(f"circular_contigs is {circles!r:.200}")


def _contig_pair(item) -> bool:
    return (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], int)
            and not isinstance(item[1], bool) and item[1] > 0)


def _contig_triple(item) -> bool:
    return (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
            and all(isinstance(n, int) and not isinstance(n, bool) for n in item[1:]) and 0 < item[2] <= item[1])


def write_run_config(run_dir: str | os.PathLike, config: RunConfig) -> None:
    write_json(Path(run_dir) / CONFIG, config.to_dict())


CHECKPOINTS = "checkpoints"
LOCK = ".lock"


def lock_run_dir(run_dir: str | os.PathLike) -> int:
    """An exclusive flock on RUN_DIR/.lock for this process (the folder is created); InputError when another
    process holds it. Returns the descriptor: the lock lasts while it is open (until exit at the latest)."""
    import fcntl

    run_dir = Path(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise InputError(run_dir, f"cannot use as a run directory: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise InputError(run_dir, f"is in use by another genolin train (pid {holder}); wait for it or choose "
                                  f"another --out") from None
    try:  # the holder before removes the file when it ends: a lock on a file no longer there holds nothing
        same = os.fstat(fd).st_ino == os.stat(run_dir / LOCK).st_ino
    except FileNotFoundError:
        same = False
    if not same:
        os.close(fd)
        return lock_run_dir(run_dir)
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def save_checkpoint(run_dir: str | os.PathLike, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    state: dict, *, meta: dict[str, str], best_meta: dict[str, str] | None = None,
                    best_weights: dict[str, torch.Tensor] | None = None) -> None:
    """The crash-safe checkpoint described above; ``best_meta`` (metadata) also writes best.safetensors, of
    ``best_weights`` (a state dict: averaged weights) or else the model's."""
    run_dir = Path(run_dir)
    step = int(state["step"])
    names = {"weights": f"{CHECKPOINTS}/model-{step:08d}.safetensors",
             "optimizer": f"{CHECKPOINTS}/optimizer-{step:08d}.safetensors"}
    save_weights(run_dir / names["weights"], model, meta)
    rest = save_optimizer(run_dir / names["optimizer"], optimizer)
    if best_meta is not None:
        save_weights(run_dir / BEST, model if best_weights is None else best_weights, best_meta)
    write_json(run_dir / STATE, {**state, "optimizer": rest, "files": names})  # the commit point
    with atomic_path(run_dir / WEIGHTS) as tmp:
        tmp.unlink()
        try:
            os.link(run_dir / names["weights"], tmp)
        except OSError:  # a file system without hard links
            import shutil

            shutil.copyfile(run_dir / names["weights"], tmp)
    keep = {Path(n).name for n in names.values()}
    for old in (run_dir / CHECKPOINTS).iterdir():
        if old.name not in keep and not old.name.startswith("."):
            old.unlink(missing_ok=True)


def load_checkpoint(run_dir: str | os.PathLike, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """The trainer state of the last complete checkpoint, with its weights and optimizer loaded."""
    run_dir = Path(run_dir)
    state = read_json(run_dir / STATE)
    _check_state(run_dir / STATE, state)
    files = state.pop("files", {"weights": WEIGHTS, "optimizer": OPTIMIZER})  # runs before step-named files
    load_weights(run_dir / files["weights"], model)
    load_optimizer(run_dir / files["optimizer"], optimizer, state.pop("optimizer"))
    return state


# trainer_state.json: key -> the types its value may have ("progress" and "files" are absent in older runs)
_STATE_TYPES = {"epoch": (int,), "batch": (int,), "step": (int,), "best": (int, float, type(None)),
                "best_epoch": (int, type(None)), "bad_epochs": (int,), "done": (bool,), "progress": (int, float),
                "files": (dict,), "optimizer": (dict,)}


def _check_state(path: Path, state: dict) -> None:
    for key, kinds in _STATE_TYPES.items():
        if key not in state:
            if key in ("progress", "files"):
                continue
            raise InputError(path, f"corrupt trainer state: {key!r} is missing")
        value = state[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise InputError(path, f"corrupt trainer state: {key!r} is {value!r}")
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            raise InputError(path, f"corrupt trainer state: {key!r} is {value!r}")
    rest = state["optimizer"]  # save_optimizer's JSON part: a dict per parameter group, the scalars by name
    groups, scalars = rest.get("param_groups"), rest.get("scalars", {})
    if not (isinstance(groups, list) and groups and all(isinstance(g, dict) for g in groups)
            and isinstance(scalars, dict)):
        raise InputError(path, f"corrupt trainer state: 'optimizer' is {rest!r}"[:300])
    files = state.get("files")
    if files is not None and not all(isinstance(files.get(k), str) and ".." not in files[k]
                                     for k in ("weights", "optimizer")):
        raise InputError(path, f"corrupt trainer state: 'files' is {files!r}")


METRICS = "metrics.jsonl"
LOG = "train.log"
RUN_FILES = (CONFIG, LOG, METRICS, BEST, WEIGHTS, LOCK, CHECKPOINTS)  # what a training run writes in its folder


def check_new_run(path: str | os.PathLike) -> None:
    """InputError where ``path`` holds a run already: a new run may not start there (checked again when it starts,
    and first before its data and any teacher are read)."""
    if (Path(path) / STATE).exists():
        raise InputError(path, "holds a run already: continue it with --resume, or choose another --out")


class RunDir:
    """The folder of a run while it trains. Only the process that ``writes`` (rank 0 under torchrun) locks it
    (``lock_run_dir``, until ``close``) and writes in it; the other ranks of the run only read its checkpoint."""

    def __init__(self, path: str | os.PathLike, *, writes: bool):
        self.path, self.writes = Path(path), writes
        self._lock = lock_run_dir(self.path) if writes else None

    def start(self, config: RunConfig) -> None:
        """A new run's config.json; InputError where the folder holds a run already."""
        if not self.writes:
            return
        check_new_run(self.path)
        write_run_config(self.path, config)

    def resume(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        """The trainer state of the last checkpoint, its weights and optimizer state loaded (every rank)."""
        return load_checkpoint(self.path, model, optimizer)

    def checkpoint(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict, *,
                   best: bool = False, metrics: dict | None = None,
                   best_weights: dict[str, torch.Tensor] | None = None) -> None:
        """A crash-safe checkpoint at the trainer's ``state``; with ``best`` also best.safetensors (of
        ``best_weights`` where given, else the model's), carrying the decision threshold chosen on ``metrics``,
        the validation that made these weights the best."""
        if not self.writes:
            return
        meta = {"step": str(state["step"]), "epoch": str(state["epoch"])}
        best_meta = None
        if best:
            chosen = (metrics or {}).get("best_threshold")
            best_meta = dict(meta)
            if chosen:  # tracks: max F1; classifiers: max MCC (the metric is stored beside the value)
                rule = "f1" if "f1" in chosen else "mcc"
                best_meta.update({"threshold": repr(chosen["value"]), f"threshold_{rule}": repr(chosen[rule])})
        save_checkpoint(self.path, model, optimizer, state, meta=meta, best_meta=best_meta, best_weights=best_weights)

    def log_metrics(self, record: dict) -> None:
        """One line of metrics.jsonl."""
        if self.writes:
            with open(self.path / METRICS, "a") as fh:
                fh.write(json.dumps(record) + "\n")

    def close(self) -> None:
        """Release the lock, and remove its file: a finished run's folder holds only its run files."""
        if self._lock is not None:
            (self.path / LOCK).unlink(missing_ok=True)  # while still held: no other process is between
            os.close(self._lock)
            self._lock = None


COMMAND = "command.json"
T = TypeVar("T")


def command_key(args: list[str]) -> list[str]:
    """A ``genolin train`` command's arguments (the interpreter left out) as two trainings are compared: --out's
    value left out (it is the folder itself), values naming an existing file or folder resolved (a relative and an
    absolute spelling of one path are the same)."""
    key, skip = [], False
    for a in args:
        if skip or a == "--out":
            skip = not skip
            continue
        key.append(str(Path(a).resolve()) if os.sep in a and Path(a).exists() else a)
    return key


def scripted_run(run_dir: str | os.PathLike, args: list[str]) -> bool:
    """Whether a script may reuse ``run_dir`` for a training of ``args``: True where those arguments trained it to
    its end (COMMAND says so), False where no training of them finished or started there (train it, with
    ``record_command`` before and after). ValueError where a run of other arguments is there, where one of these
    was cut short after a checkpoint (``--resume`` continues it), or where a run has no record of its arguments:
    reusing any of them would present another training's results as this one's."""
    run_dir = Path(run_dir)
    record, state = run_dir / COMMAND, (run_dir / STATE).exists()
    if record.exists():
        found = json.loads(record.read_text())
        was, now = found["args"], command_key(args)
        if was != now:
            at = next((i for i, (a, b) in enumerate(zip(was, now, strict=False)) if a != b), min(len(was), len(now)))
            at -= at > 0 and was[at - 1].startswith("-")  # the option with its value: "--seed 0"
            raise ValueError(f"{run_dir}: trained with other arguments ({' '.join(was[at:at + 2]) or 'nothing'!r}, "
                             f"now {' '.join(now[at:at + 2]) or 'nothing'!r}); use another folder or remove that run")
        if found["finished"]:
            return True
        if state:
            raise ValueError(f"{run_dir}: its training was cut short; `genolin train --resume {run_dir}` continues "
                             "it, or remove it")
        return False
    if state:
        raise ValueError(f"{run_dir}: holds a run with no record of the arguments that trained it ({COMMAND}); "
                         "use another folder or remove that run")
    return False


def record_command(run_dir: str | os.PathLike, args: list[str], finished: bool) -> None:
    """COMMAND in ``run_dir`` (made if missing): ``args`` as ``command_key`` compares them, and whether their
    training finished."""
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    write_json(Path(run_dir) / COMMAND, {"args": command_key(args), "finished": finished})


def train_once(run_dir: str | os.PathLike, args: list[str], train: Callable[[], T]) -> T | None:
    """``train()`` (a script's ``genolin train`` of ``args`` into ``run_dir``) with COMMAND recorded before and
    after, unless ``scripted_run`` finds those arguments trained the run to its end (None then; its ValueError
    passes on)."""
    if scripted_run(run_dir, args):
        return None
    record_command(run_dir, args, finished=False)
    result = train()
    record_command(run_dir, args, finished=True)
    return result


def remove_unfinished_run(run_dir: str | os.PathLike, before: set[str], created: bool) -> None:
    """A new run that stopped before its first checkpoint leaves nothing behind: the run files it wrote (not those
    in ``before``, which were there already), and the folder when it made it and nothing else is in it."""
    import contextlib
    import shutil

    run_dir = Path(run_dir)
    if not run_dir.is_dir() or (run_dir / STATE).exists():
        return
    for name in set(RUN_FILES) - before:
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    if created:
        with contextlib.suppress(OSError):
            run_dir.rmdir()  # only when empty


def weights_for_inference(run_dir: str | os.PathLike) -> Path:
    """best.safetensors if training validated, else model.safetensors (the last checkpoint)."""
    run_dir = Path(run_dir)
    return run_dir / BEST if (run_dir / BEST).exists() else run_dir / WEIGHTS


def read_json(path: str | os.PathLike) -> dict:
    path = Path(path)
    if not path.exists():
        raise InputError(path, "missing (not a complete genolin run directory?)")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(path, f"corrupt JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(path, "corrupt: expected a JSON object")
    return data


def save_weights(path: str | os.PathLike, weights: torch.nn.Module | dict[str, torch.Tensor],
                 metadata: dict[str, str] | None = None) -> None:
    from safetensors.torch import save_file

    state = weights.state_dict() if isinstance(weights, torch.nn.Module) else weights
    tensors = {k: v.detach().contiguous().cpu() for k, v in state.items()}
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata=metadata or {})


def load_tensors(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    from safetensors import safe_open

    path = Path(path)
    if not path.exists():
        raise InputError(path, "missing (not a complete genolin run directory?)")
    try:
        with safe_open(str(path), framework="pt") as fh:
            return {k: fh.get_tensor(k) for k in fh.keys()}, dict(fh.metadata() or {})
    except Exception as exc:  # noqa: BLE001 - safetensors raises several types for a damaged file
        raise InputError(path, f"corrupt or unreadable safetensors file ({exc})") from None


def stored_bf16(path: str | os.PathLike) -> bool:
    """Whether a safetensors file holds its floating-point tensors in bfloat16 (read from its header)."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        kinds = {fh.get_slice(k).get_dtype() for k in fh.keys()}
    floats = kinds & {"F64", "F32", "F16", "BF16"}
    return floats == {"BF16"}


def load_weights(path: str | os.PathLike, module: torch.nn.Module) -> dict[str, str]:
    tensors, metadata = load_tensors(path)
    for name, tensor in tensors.items():  # a damaged (or diverged) file would give NaN predictions, not an error
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise InputError(path, f"tensor {name!r} holds NaN or infinite values (a damaged or diverged model)")
    try:
        module.load_state_dict(tensors, strict=True)
    except RuntimeError as exc:
        first = str(exc).splitlines()[0]
        raise InputError(path, f"weights do not fit the model in config.json ({first})") from None
    return metadata


def save_optimizer(path: str | os.PathLike, optimizer: torch.optim.Optimizer) -> dict:
    """Tensors of the optimizer state to safetensors; returns the JSON-able rest (param groups, scalars)."""
    from safetensors.torch import save_file

    sd = optimizer.state_dict()
    tensors, scalars = {}, {}
    for index, state in sd["state"].items():
        for key, value in state.items():
            if torch.is_tensor(value):
                tensors[f"{index}.{key}"] = value.detach().contiguous().cpu()
            else:
                scalars[f"{index}.{key}"] = value
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp))
    # a learning rate held as a tensor (a graphed step's: genolin.train_graph) is kept as the number it holds
    groups = [{k: v.item() if torch.is_tensor(v) else v for k, v in g.items()} for g in sd["param_groups"]]
    return {"param_groups": groups, "scalars": scalars}


IMPLEMENTATION = ("fused", "foreach", "capturable", "differentiable")  # an optimizer's flags of how, not what


def load_optimizer(path: str | os.PathLike, optimizer: torch.optim.Optimizer, rest: dict) -> None:
    tensors, _ = load_tensors(path)
    state: dict[int, dict] = {}
    for name, value in list(tensors.items()) + list(rest.get("scalars", {}).items()):
        index, _, key = name.partition(".")
        if not (index.isdigit() and key):
            raise InputError(path, f"corrupt optimizer state: an entry named {name!r} (expected INDEX.KEY)")
        state.setdefault(int(index), {})[key] = value
    # how the running optimizer steps (fused on CUDA, foreach elsewhere) is its own, not the saving run's: a run
    # checkpointed on a CPU or before fused AdamW resumes fused, its step counts moved to the device
    groups = [{**saved, **{k: now[k] for k in IMPLEMENTATION if k in now}}
              for saved, now in zip(rest["param_groups"], optimizer.param_groups, strict=False)]
    try:
        optimizer.load_state_dict({"state": state, "param_groups": groups})
    except (KeyError, ValueError, RuntimeError) as exc:
        raise InputError(path, f"optimizer state does not fit the model ({exc})") from None
