"""Options that ``predict`` and ``evaluate`` share: how a run's probabilities are averaged over views of each input,
and the genome windows a track model reads; and, with ``train``, which contigs of a genome are circular; the check
of every command's --out, and the bundled models' names for the --model help of predict, evaluate and explain."""

from __future__ import annotations

import click


def averaging_options(command):
    """``--rc-average/--no-rc-average`` and ``--shift-average N``; both default to None, which ``Run.rc_average``
    and ``load_run`` resolve from the run (on for sequence classifiers trained with reverse complements)."""
    command = click.option(
        "--shift-average", type=click.IntRange(0, 50), default=None, metavar="N",
        help="Sequence classifier: also average over the sequences with 1..N leading bases dropped (and their "
             "reverse complements' with --rc-average): test-time augmentation [default: the run's training shifts, "
             "max_shift_bp (3), for classifiers trained with reverse complements (small, base), else 0].")(command)
    return click.option(
        "--rc-average/--no-rc-average", default=None,
        help="Average forward and reverse-complement predictions [default: on for sequence classifiers trained "
             "with reverse complements (the small and base presets), else off].")(command)


def _names(ctx, param, value: tuple[str, ...]) -> tuple[str, ...]:
    """Repeated and comma-separated names -> one tuple of names."""
    return tuple(name.strip() for v in value for name in v.split(",") if name.strip())


def circular_option(command):
    """``--circular NAMES`` (repeatable, comma-separated) -> a tuple of contig names, or ("all",)
    (``DataSpec.circular``)."""
    return click.option(
        "--circular", multiple=True, metavar="NAMES", callback=_names, show_default=True,
        help="Track: read these contigs as circular (comma-separated contig names, or all): windows run on across "
             "the origin, so a promoter near position 0 sees its real upstream context; outputs stay in the "
             "contig's coordinates. Contigs whose FASTA header says topology=circular or circular=true are "
             "circular anyway [default: those only].")(command)


def window_option(command):
    """``--window-bp N`` (track models; None: the run's training window, resolved by ``load_run``) and
    ``--offset-average N`` (track models: N tilings of the windows averaged)."""
    command = click.option(
        "--offset-average", "window_offsets", type=click.IntRange(1, 16), default=1, metavar="N",
        help="Track: average N passes over the genome whose windows start at N offsets spread over a window's step, "
             "so a bin's value does not depend on where the windows fall (N times the work; one process).")(command)
    return click.option(
        "--window-bp", type=click.IntRange(min=1), default=None, metavar="BP",
        help="Track: read the genome in windows of this many bp (a multiple of the stride, at least the training "
             "window). Windows overlap by a quarter of the training window whatever their length, so longer ones "
             "read fewer bases twice (1.33x at the training window, 1.07x at 4x it) [default: the training "
             "window].")(command)


PRECISIONS = {"auto": None, "float32": False, "bfloat16": True}


def precision_option(command):
    """``--precision auto|float32|bfloat16`` -> ``load_run``'s ``bf16_weights`` (None, False, True)."""
    return click.option(
        "--precision", type=click.Choice(list(PRECISIONS)), default="auto", show_default=True,
        callback=lambda ctx, param, value: PRECISIONS[value],
        help="The arithmetic of the model's pass. auto: bfloat16 on a GPU for track runs that trained under bf16 "
             "autocast, and on a CPU with bfloat16 matrix units (AVX512-BF16, AMX) for track runs whose weights "
             "are stored in bfloat16 (the bundled models; about 1.4x faster); float32 elsewhere. A bin's "
             "probability differs between the two by at most about 0.003 (the bundled CPU student), so a few "
             "near-tied calls move. On a GPU, float32 keeps float32 weights while the run's bf16 autocast "
             "stays.")(command)


def _density(ctx, param, value: float | None) -> float | None:
    """At most one call per base (``genolin.peaks.MAX_CALLS_PER_MBP``); imported here, when the option is given,
    so that parsing the command line does not load numpy."""
    if value is not None:
        from genolin.peaks import MAX_CALLS_PER_MBP

        if value > MAX_CALLS_PER_MBP:
            raise click.BadParameter(f"{value:g} is above {MAX_CALLS_PER_MBP:g}, a call at every base")
    return value


def calls_option(command):
    """``--calls-per-mbp N`` (None: the run's training TSS density, or its threshold; ``Run.call_density``)."""
    return click.option(
        "--calls-per-mbp", type=click.FloatRange(min=0, min_open=True), default=None, metavar="N", callback=_density,
        help="Track: call each contig's N x Mbp most probable local maxima [default: the training genomes' TSSs "
             "per Mbp, 100 bp apart, as the run kept it; runs from before it was kept: the local maxima at or "
             "above their threshold chosen on validation (max F1)].")(command)


def check_calls(threshold: float | None, calls_per_mbp: float | None) -> None:
    """A usage error for --threshold with --calls-per-mbp: two rules for the same calls."""
    if threshold is not None and calls_per_mbp is not None:
        raise click.UsageError("give --threshold or --calls-per-mbp, not both")


def check_out(ctx, param, value: str | None) -> str | None:
    """--out: None where the option is optional; an empty or blank name is refused (as a track prefix, '' would
    write hidden .plus.bedGraph, .minus.bedGraph and .peaks.bed files into the working folder)."""
    if value is not None and not value.strip():
        raise click.BadParameter(f"{value!r} is {'blank' if value else 'empty'}; give a name", ctx, param)
    return value


class ModelOption(click.Option):
    """--model: its help's ``{bundled}`` becomes the bundled models' names (``bundled_models``) when the help is
    shown, not when the command is imported (a command that runs never reads the model cards for it)."""

    def get_help_record(self, ctx):
        template = self.help
        self.help = template.replace("{bundled}", bundled_models())
        try:
            return super().get_help_record(ctx)
        finally:
            self.help = template


def bundled_models() -> str:
    """The bundled models for a --model help text: their names, read from ``genolin.models`` (the package's model
    cards), and where to see their members."""
    from genolin.models import bundled

    try:
        names = [m.name for m in bundled()]
    except (OSError, ValueError, KeyError):  # a damaged model card: the help still shows
        names = []
    if not names:
        return "a bundled model's name (genolin models lists them; none in this install)"
    return f"a bundled model's name ({', '.join(names)}; genolin models lists them and their members)"
