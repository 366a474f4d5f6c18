"""Ready models shipped inside the package, and what a ``--model`` / ``--init`` argument names.

    resolve_models("runs/ecoli") -> [Path("runs/ecoli")]             a run directory of that name always wins
    resolve_models("bacteria", "cuda") -> [.../bacteria/base, .../bacteria/s1]   its members for the device
    resolve_models("bacteria-cpu") -> [.../models/bacteria/cpu]        one member by name
    resolve_model("bacteria", "cuda") -> .../models/bacteria/base      one run (``--init``): the first of them
    resolve_models("bacterial") -> InputError: ... did you mean 'bacteria'? the bundled models are ...
    bundled() -> [BundledModel, ...]                                   what ships (``genolin models``)

A bundled model is a folder here holding ``model.json`` (what it is, its members, the device each is for) and one
run folder per member (config.json, best.safetensors: a run directory ``load_run`` reads like any other). Members
are made for a device: on a CPU the small member, on a GPU the large ones, each chosen where it predicts a genome
within a minute (docs/model_card.md). Several members for one device are an ensemble: ``load_run`` averages them
(members of other strides too), as it does several --model runs.
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

    def members_for(self, device_type: str) -> list[str]:
        """The members for a device type ("cuda" or "cpu"): those made for it (an ensemble when several), else the
        first member."""
        return [m for m, d in self.members.items() if d == device_type] or [next(iter(self.members))]


def bundled() -> list[BundledModel]:
    """The models shipped in this package, by name (a folder with a model.json whose members' weights are there)."""
    models = []
    for card in sorted(HERE.glob(f"*/{CARD}")):
        meta = json.loads(card.read_text())
        members = {m: d for m, d in meta["members"].items() if (card.parent / m / "best.safetensors").exists()}
        if members:
            models.append(BundledModel(card.parent.name, meta["summary"], members, card.parent))
    return models


def resolve_models(ref: str | Path, device_type: str | None = None, *, use: str | None = None) -> list[Path]:
    """The run directories a ``--model`` argument names: ``[ref]`` when it is a directory (or looks like a path),
    else a bundled model's ("bacteria": its members for ``device_type``, the machine's when None; "bacteria-cpu":
    that member). A path (a folder, or a name with a folder in it) is returned as given, for
    ``read_run_config`` to report; any other name is an InputError listing the bundled models
    (``unknown_model``). ``use``: only one run is wanted, for this (a log line's words): a bundled ensemble gives
    its first member."""
    path = Path(ref)
    if path.is_dir() or len(path.parts) > 1 or str(ref).startswith("."):
        return [path]
    name, dash, member = str(ref).partition("-")
    model = next((m for m in bundled() if m.name == name), None)
    if model is None:
        raise InputError(ref, unknown_model(str(ref)))
    if member or dash:
        if member not in model.members:
            raise InputError("--model", f"{ref}: {name} has the members {', '.join(model.members)} "
                                        f"({', '.join(f'{name}-{m}' for m in model.members)})")
        return [model.folder / member]
    if device_type is None:
        import torch

        device_type = "cuda" if torch.cuda.is_available() else "cpu"
    chosen = model.members_for(device_type)
    others = " or ".join(f"{name}-{m}" for m in model.members)
    if use is not None:
        log.info("bundled model %s: %s its member %s (%s names a member)", name, use, chosen[0], others)
        return [model.folder / chosen[0]]
    log.info("bundled model %s: %s %s, made for %s (%s names a member)", name,
             "the ensemble of its members" if len(chosen) > 1 else "its member", " + ".join(chosen),
             "GPUs" if model.members[chosen[0]] == "cuda" else "CPUs", others)
    return [model.folder / m for m in chosen]


def unknown_model(ref: str) -> str:
    """What to say of a --model (--init, --teacher) name that is no folder and no bundled model: the bundled
    models' names, the closest name when one is close (``difflib``), and ``genolin models``."""
    import difflib

    models = bundled()
    if not models:
        return "no such run directory, and this install has no bundled models (genolin models)"
    names = [n for m in models for n in (m.name, *(f"{m.name}-{member}" for member in m.members))]
    close = difflib.get_close_matches(ref, names, n=1)
    guess = f"did you mean {close[0]!r}? " if close else ""
    return (f"no such run directory, nor a bundled model; {guess}the bundled models are "
            f"{', '.join(m.name for m in models)} (genolin models lists them and their members)")


def resolve_model(ref: str | Path, device_type: str | None = None, *, use: str = "fine-tuning starts from") -> Path:
    """The one run directory a ``--init`` (or explain's ``--model``) argument names (``resolve_models`` with
    ``use``: of a bundled ensemble, its first member)."""
    return resolve_models(ref, device_type, use=use)[0]
