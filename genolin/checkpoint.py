"""Run directories: what ``genolin train`` writes and ``evaluate`` / ``predict`` / ``--resume`` read.

    RUN_DIR/config.json            the run: task, classes, tokenizer, window, model and training settings, data
    RUN_DIR/model.safetensors      weights at the last checkpoint (FAVOR+ projections included)
    RUN_DIR/best.safetensors       weights with the best validation metric (what evaluate/predict use)
    RUN_DIR/optimizer.safetensors  optimizer tensors; its scalar state and param groups are in trainer_state.json
    RUN_DIR/trainer_state.json     epoch, step, batch within the epoch, early-stopping state; written last, so a
                                   checkpoint is complete when this file names its step
    RUN_DIR/metrics.jsonl, train.log

Weights are safetensors and everything else JSON: nothing is unpickled. Every file is written under a temporary
name and renamed. Missing or corrupt files are InputError naming the file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from genolin.errors import InputError
from genolin.io.atomic import atomic_open, atomic_path

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
BEST = "best.safetensors"
OPTIMIZER = "optimizer.safetensors"
STATE = "trainer_state.json"


def write_json(path: str | os.PathLike, data: dict) -> None:
    with atomic_open(path) as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")


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


def save_weights(path: str | os.PathLike, module: torch.nn.Module, metadata: dict[str, str] | None = None) -> None:
    from safetensors.torch import save_file

    tensors = {k: v.detach().contiguous().cpu() for k, v in module.state_dict().items()}
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


def load_weights(path: str | os.PathLike, module: torch.nn.Module) -> dict[str, str]:
    tensors, metadata = load_tensors(path)
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
    return {"param_groups": sd["param_groups"], "scalars": scalars}


def load_optimizer(path: str | os.PathLike, optimizer: torch.optim.Optimizer, rest: dict) -> None:
    tensors, _ = load_tensors(path)
    state: dict[int, dict] = {}
    for name, value in list(tensors.items()) + list(rest.get("scalars", {}).items()):
        index, key = name.split(".", 1)
        state.setdefault(int(index), {})[key] = value
    try:
        optimizer.load_state_dict({"state": state, "param_groups": rest["param_groups"]})
    except (KeyError, ValueError, RuntimeError) as exc:
        raise InputError(path, f"optimizer state does not fit the model ({exc})") from None
