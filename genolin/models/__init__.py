"""Ready models shipped inside the package, and what a ``--model`` / ``--init`` argument names.

    resolve_model("runs/ecoli") -> Path("runs/ecoli")            a run directory of that name always wins
    resolve_model("bacteria", "cuda") -> .../models/bacteria/base   a bundled model: its member for the device
    resolve_model("bacteria-tiny") -> .../models/bacteria/tiny      one member by name
    bundled() -> [BundledModel, ...]                                  what ships (``genolin models``)

A bundled model is a folder here holding ``model.json`` (what it is, its members, the device each is for) and one
run folder per member (config.json, best.safetensors: a run directory ``load_run`` reads like any other). Members
differ in size: on a CPU the small member, on a GPU the large one, each chosen where it predicts a genome within a
minute (docs/model_card.md).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from genolin.errors import InputError

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
CARD = "model.json"


@dataclass(frozen=True)
class BundledModel:
    """A model shipped with genolin: ``name``, one-line ``summary``, ``members`` (member name -> the device it is
    for: "cuda" or "cpu"), ``folder`` (this package's folder of it)."""

    name: str
    summary: str
    members: dict[str, str]
    folder: Path

    def member_for(self, device_type: str) -> str:
        """The member for a device type ("cuda" or "cpu"): the one made for it, else the first."""
        return next((m for m, d in self.members.items() if d == device_type), next(iter(self.members)))


def bundled() -> list[BundledModel]:
    """The models shipped in this package, by name (a folder with a model.json whose members' weights are there)."""
    models = []
    for card in sorted(HERE.glob(f"*/{CARD}")):
        meta = json.loads(card.read_text())
        members = {m: d for m, d in meta["members"].items() if (card.parent / m / "best.safetensors").exists()}
        if members:
            models.append(BundledModel(card.parent.name, meta["summary"], members, card.parent))
    return models


def resolve_model(ref: str | Path, device_type: str | None = None) -> Path:
    """The run directory a ``--model``/``--init`` argument names: ``ref`` itself when it is a directory (or looks
    like a path), else a bundled model ("bacteria": its member for ``device_type``, the machine's when None;
    "bacteria-tiny": that member). Anything else is returned as given, for ``read_run_config`` to report."""
    path = Path(ref)
    if path.is_dir() or len(path.parts) > 1 or str(ref).startswith("."):
        return path
    name, _, member = str(ref).partition("-")
    model = next((m for m in bundled() if m.name == name), None)
    if model is None:
        return path
    if member:
        if member not in model.members:
            raise InputError("--model", f"{ref}: {name} has the members {', '.join(model.members)} "
                                        f"({', '.join(f'{name}-{m}' for m in model.members)})")
    else:
        if device_type is None:
            import torch

            device_type = "cuda" if torch.cuda.is_available() else "cpu"
        member = model.member_for(device_type)
        log.info("bundled model %s: its %s member, made for %s (%s names a member)", name, member,
                 "GPUs" if model.members[member] == "cuda" else "CPUs",
                 " or ".join(f"{name}-{m}" for m in model.members))
    return model.folder / member
