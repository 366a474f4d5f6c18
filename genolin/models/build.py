"""Build the bundled ``bacteria`` model: its members trained on the bacterial genomes a shipped model may learn
from, exported into this package (docs/model_card.md says what it is and how it scores).

    python -m genolin.models.build --shared ../shared/data --device cuda --work runs/ready

Each member is ``genolin train --preset P`` (with the member's settings, MEMBERS) on every genome of READY with its TSS
map, seed 0; a member with teachers (DISTIL: names of TEACHERS, runs trained the same way but not shipped, or of
other members) is distilled from their ensemble (``--teacher``). A TEACHERS run is trained first; a member teacher
teaches as it is shipped (its exported folder, bfloat16 weights), built first when this build builds it too, else
the one already in the bundle (``--member cpu`` distils from the bundled base and s1). The export keeps
config.json (training paths reduced to file names) and the best weights in bfloat16 (GPU inference runs in bfloat16
anyway, and so do CPUs with bfloat16 units; others cast them back to float32: docs/model_card.md compares the two).
GENOMES is the registry of the eleven genomes the proxy (benchmarks/bacteria_proxy.py) holds out and scores.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

from genolin.models import CARD, HERE


def _bacterium(short: str) -> tuple[str, str]:
    return f"bacteria/{short}/{short}.fasta.gz", f"bacteria/{short}/{short}.bed"


# name -> ((FASTA, TSS BED) under the shared data folder, organism, class, phylum, complete map). A complete map is
# scored by the proxy; a gene-linked subset of a published map (its unlisted positions are not sure negatives) only
# trains. Sources and licences: ../shared/data/bacteria/SOURCES*.md, docs/model_card.md
GENOMES: dict[str, tuple[tuple[str, str], str, str, str, bool]] = {
    "ecoli": (("ecoli_k12/NC_000913.3.fa.bgz", "ecoli_k12/regulondb_10.9_tss.bed"), "Escherichia coli K-12 MG1655",
              "Gammaproteobacteria", "Pseudomonadota", True),
    "bacillus": (_bacterium("BACILLUS"), "Bacillus amyloliquefaciens XH7", "Bacilli", "Bacillota", True),
    "saureus": (_bacterium("SAUREUS"), "Staphylococcus aureus JKD6009", "Bacilli", "Bacillota", True),
    "cjejuni": (_bacterium("CJEJUNI_2"), "Campylobacter jejuni NCTC 11168", "Epsilonproteobacteria",
                "Campylobacterota", True),
    "selongatus": (_bacterium("SELONGATUS"), "Synechococcus elongatus PCC 7942", "Cyanophyceae", "Cyanobacteriota",
                   True),
    "ccrescentus": (_bacterium("CCRESCENTUS"), "Caulobacter crescentus NA1000", "Alphaproteobacteria",
                    "Pseudomonadota", True),
    "mtuberculosis": (_bacterium("MTUBERCULOSIS"), "Mycobacterium tuberculosis H37Rv", "Actinomycetes",
                      "Actinomycetota", True),
    "sagalactiae": (_bacterium("SAGALACTIAE"), "Streptococcus agalactiae NEM316", "Bacilli", "Bacillota", False),
    "zmobilis": (_bacterium("ZMOBILIS"), "Zymomonas mobilis ZM4", "Alphaproteobacteria", "Pseudomonadota", False),
    "tmaritima": (_bacterium("TMARITIMA"), "Thermotoga maritima MSB8", "Thermotogae", "Thermotogota", False),
    "ctrachomatis": (_bacterium("CTRACHOMATIS"), "Chlamydia trachomatis L2b", "Chlamydiia", "Chlamydiota", False),
}
# what a shipped model learns from: every genome but E. coli, whose RegulonDB map may not be redistributed or
# used for a derived product without RegulonDB's permission (docs/model_card.md)
READY = [g for g in GENOMES if g != "ecoli"]
# member -> (preset, the device it is for, settings): on a GPU the ensemble of base and s1 (6-mers at stride 1,
# single-bin positives, no mutations; 4,500 steps), which the proxy ranks above either and above base distilled
# from it (docs/benchmarks.md); on a CPU "cpu", base narrowed to 96 x 4 layers of the hybrid mixer (linear attention
# beside local softmax; the proxy ranks it above plain linear attention at that size) and distilled from that
# ensemble (DISTIL), which predicts E. coli within a minute on 2 cores (base takes several)
MEMBERS = {"base": ("base", "cuda", ()),
           "s1": ("base", "cuda", ("stride=1", "tolerance_bins=1", "mutate_prob=0", "steps=4500")),
           "cpu": ("base", "cpu", ("model.d_model=96", "model.n_layers=4", "model.n_heads=4", "model.mixer=hybrid",
                                   "steps=18000"))}
# runs that only teach members (genolin train --teacher), trained into WORK/teachers/NAME, not shipped:
# name -> (preset, settings)
TEACHERS: dict[str, tuple[str, tuple]] = {}
# member -> the TEACHERS (or MEMBERS) it is distilled from
DISTIL: dict[str, tuple[str, ...]] = {"cpu": ("base", "s1")}
NAME = "bacteria"
SUMMARY = ("promoter track for bacterial genomes (TSS per bin and strand), trained on ten genomes of eight phyla "
           "with experimentally mapped TSSs")


def genome_files(shared: Path, names: list[str]) -> list[tuple[str, str]]:
    """(FASTA, BED) paths of ``names`` under ``shared``; exits naming what is missing."""
    pairs = [(str(shared / GENOMES[n][0][0]), str(shared / GENOMES[n][0][1])) for n in names]
    missing = [f for pair in pairs for f in pair if not Path(f).exists()]
    if missing:
        sys.exit(f"build: missing {', '.join(missing)} (the shared data folder: --shared)")
    return pairs


def train_command(pairs: list[tuple[str, str]], preset: str, settings: list[str], device: str, out: Path,
                  teachers: list[Path] = ()) -> list[str]:
    """``genolin train`` of one run on ``pairs`` (seed 0), distilled from ``teachers`` when given."""
    return [sys.executable, "-m", "genolin", "train", *[a for fa, bed in pairs for a in ("--fasta", fa, "--tss", bed)],
            "--preset", preset, *[a for s in settings for a in ("--set", s)],
            *[a for t in teachers for a in ("--teacher", str(t))], "--seed", "0", "--device", device, "--out", str(out)]


def trained(run_dir: Path, cmd: list[str]) -> Path:
    """``run_dir`` after ``cmd`` trained it: nothing run when the same arguments trained it to its end before; a run
    of other arguments there (an earlier recipe), one cut short or one without a record of its arguments ends the
    build (``genolin.checkpoint.train_once``), as exporting it would ship other weights than MEMBERS describes."""
    from genolin.checkpoint import train_once

    def train() -> None:
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)

    try:
        train_once(run_dir, cmd[1:], train)
    except ValueError as exc:  # subprocess fails with CalledProcessError, so this is the record's refusal
        sys.exit(f"build: {exc}")
    return run_dir


def teacher_runs(member: str, pairs: list[tuple[str, str]], work: Path, device: str, out: Path,
                 settings: dict[str, list[str]] | None = None, chain: tuple[str, ...] = (),
                 built: set[str] | None = None) -> list[Path]:
    """The folders ``member`` is distilled from (DISTIL): a TEACHERS name's run in WORK/teachers/NAME, trained first
    unless it is there; a member's exported folder in ``out``, built first (with its ``settings``) when ``settings``
    names it, else the one already there. A member that teaches itself, through others or not, is refused, and so is
    a member teacher neither built now nor in ``out``."""
    runs = []
    for t in DISTIL.get(member, ()):
        if t == member or t in chain:
            sys.exit(f"build: {' -> '.join([*chain, member, t])}: a member cannot be its own teacher")
        if t in TEACHERS:
            preset, own = TEACHERS[t]
            runs.append(trained(work / "teachers" / t, train_command(pairs, preset, list(own), device,
                                                                     work / "teachers" / t)))
        elif t in MEMBERS:
            if t in (settings or {}):
                build_member(t, pairs, work, device, out, settings, (*chain, member), built)
            else:
                require_exported(member, t, out)
            runs.append(out / t)
        else:
            sys.exit(f"build: {member}'s teacher {t!r} is neither in TEACHERS nor in MEMBERS")
    return runs


def build_member(member: str, pairs: list[tuple[str, str]], work: Path, device: str, out: Path,
                 settings: dict[str, list[str]], chain: tuple[str, ...] = (), built: set[str] | None = None) -> Path:
    """``member`` trained into WORK/MEMBER after its teachers (nothing run when it finished there), exported into
    OUT/MEMBER, once per ``built`` (the members this build has exported)."""
    built = set() if built is None else built
    if member not in built:
        teachers = teacher_runs(member, pairs, work, device, out, settings, chain, built)
        run_dir = trained(work / member, train_command(pairs, MEMBERS[member][0], settings[member], device,
                                                       work / member, teachers))
        export(run_dir, out / member, [f"{NAME}-{t}" if t in MEMBERS else t for t in DISTIL.get(member, ())])
        built.add(member)
    return out / member


def require_exported(member: str, teacher: str, out: Path) -> None:
    """Exits unless ``member``'s member teacher is exported in ``out``."""
    if not (out / teacher / "config.json").exists():
        sys.exit(f"build: {member}'s teacher {teacher!r} is not in {out}: build it too (--member {teacher})")


def check_build(chosen: list[str], sets: list[str], out: Path) -> None:
    """Exits, before any training, on a --set of a member not built now and on a member teacher (DISTIL, through
    the members built now) that is neither built now nor in ``out``."""
    for s in sets:
        if ":" not in s or s.split(":", 1)[0] not in chosen:
            sys.exit(f"build: --set {s}: MEMBER:KEY=VALUE for a member built now ({', '.join(chosen)}); "
                     f"to change another, build it too (--member)")
    for m in chosen:
        for t in DISTIL.get(m, ()):
            if t in MEMBERS and t not in chosen:
                require_exported(m, t, out)


def export(run_dir: Path, out: Path, teachers: list[str] | None = None) -> None:
    """A trained run's config.json (training paths as file names; ``teachers``: the names its teachers are recorded
    by, as models a user can name) and best weights (in bfloat16) into ``out``."""
    import torch

    from genolin.checkpoint import load_tensors, save_weights

    out.mkdir(parents=True, exist_ok=True)
    config = json.loads((run_dir / "config.json").read_text())
    for key, value in config["data"].items():
        if isinstance(value, list):
            config["data"][key] = [Path(v).name for v in value]
        elif isinstance(value, str) and "/" in value:
            config["data"][key] = Path(value).name
    if teachers is not None:
        config["data"]["teacher"] = teachers
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tensors, meta = load_tensors(run_dir / "best.safetensors")
    save_weights(out / "best.safetensors",
                 {k: t.to(torch.bfloat16) if t.is_floating_point() else t for k, t in tensors.items()}, meta)


def write_card(out: Path, members: dict[str, tuple[str, str, tuple]], settings: dict[str, list[str]]) -> None:
    """``model.json``: what the model is, its members and how they were made (members built before, and not now,
    kept as the card had them; in MEMBERS' order)."""
    old = json.loads((out / CARD).read_text()) if (out / CARD).exists() else {}
    dropped = [m for m in old.get("members", {}) if m not in MEMBERS]
    if dropped:
        print(f"build: {', '.join(dropped)} left out of {out / CARD} (no longer in MEMBERS; remove their folders)")
    kept = [m for m in MEMBERS if m not in members and m in old.get("members", {})]
    order = [m for m in MEMBERS if m in members or m in kept]

    def taught(m: str) -> dict | None:  # a member's teachers as built now (--set too) or as the bundle holds them
        if m not in members:
            return old.get("teachers", {}).get(m)

        def one(t: str) -> dict:
            spec = TEACHERS.get(t) or MEMBERS[t]
            preset, own = spec[0], list(spec[-1])
            if t in settings or t in TEACHERS:
                return {"preset": preset, "settings": settings.get(t, own)}
            return {"preset": old.get("presets", {}).get(t, preset), "settings": old.get("settings", {}).get(t, own)}

        return {t: one(t) for t in DISTIL.get(m, ())}

    card = {"name": NAME, "summary": SUMMARY, "card": "docs/model_card.md",
            "members": {m: members[m][1] if m in members else old["members"][m] for m in order},
            "presets": {m: members[m][0] if m in members else old.get("presets", {}).get(m, MEMBERS[m][0])
                        for m in order},
            "settings": {m: settings[m] if m in members else old.get("settings", {}).get(m, list(MEMBERS[m][2]))
                         for m in order},
            "teachers": {m: t for m in order if (t := taught(m))},
            "training_genomes": {g: GENOMES[g][1] for g in READY},
            "built": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    (out / CARD).write_text(json.dumps(card, indent=2) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shared", default="../shared/data", help="the shared data folder")
    p.add_argument("--device", default="cuda", help="where to train")
    p.add_argument("--work", default="runs/ready", help="folder for the training runs")
    p.add_argument("--out", default=str(HERE / NAME), help="the bundled model's folder")
    p.add_argument("--member", action="append", default=None, choices=list(MEMBERS),
                   help="build only these members (default all)")
    p.add_argument("--set", action="append", default=[], metavar="MEMBER:KEY=VALUE",
                   help="a setting for one member's training, after its MEMBERS settings")
    args = p.parse_args()
    pairs = genome_files(Path(args.shared), READY)
    chosen = {m: MEMBERS[m] for m in args.member or MEMBERS}
    settings = {m: [*own, *(s.split(":", 1)[1] for s in args.set if s.split(":", 1)[0] == m)]
                for m, (_, _, own) in chosen.items()}
    check_build(list(chosen), args.set, Path(args.out))
    built: set[str] = set()
    for member in chosen:
        build_member(member, pairs, Path(args.work), args.device, Path(args.out), settings, built=built)
    write_card(Path(args.out), chosen, settings)
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
