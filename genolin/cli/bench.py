"""``genolin bench``: benchmarks. ``genolin bench attention`` compares the attention variants (genolin.bench)."""

from __future__ import annotations

import click

VARIANT_HELP = ("softmax, elu, relu, exp, favor, hybrid, gla, deltanet, gated_deltanet, linformer, fnet, "
                "synthesizer")


@click.group(context_settings={"show_default": True})
def bench() -> None:
    """Benchmarks that print a table; with --out they also write JSON, markdown and a plot."""


@bench.command(context_settings={"show_default": True})
@click.option("--n", "lengths", type=click.IntRange(min=1), multiple=True,
              help="Sequence lengths (repeat the option). Default: 1K-256K on a CPU, 4K-1M on a GPU.")
@click.option("--variants", default="softmax,elu,relu,exp,favor,hybrid", help=f"Comma-separated: {VARIANT_HELP}.")
@click.option("--batch", type=click.IntRange(min=1), default=1, help="Batch size B.")
@click.option("--heads", type=click.IntRange(min=1), default=8, help="Heads H.")
@click.option("--head-dim", type=click.IntRange(min=1), default=64, help="Query/key head dimension D.")
@click.option("--value-dim", type=click.IntRange(min=1), default=None, help="Value dimension E (default: D).")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16", "float64"]), default=None,
              help="Input dtype (default: bfloat16 on a GPU, float32 on a CPU).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", help="Where to run.")
@click.option("--repeats", type=click.IntRange(min=1), default=None,
              help="Timed runs per point, median kept (default: 20 on a GPU, 3 on a CPU).")
@click.option("--favor-features", type=click.IntRange(min=1), default=128, help="FAVOR+ random features M.")
@click.option("--window", type=click.IntRange(min=1), default=128, help="Hybrid: local softmax window.")
@click.option("--chunk-size", type=click.IntRange(min=1), default=None, help="Chunk size of the linear op.")
@click.option("--softmax-max-n", type=click.IntRange(min=1), default=None,
              help="Largest N for exact softmax, the synthesizer (quadratic too) and the error columns "
                   "(default: 262144 GPU, 8192 CPU).")
@click.option("--backward/--no-backward", default=True, help="Also time forward+backward.")
@click.option("--input-scale", type=click.FloatRange(min=0, min_open=True), default=0.5,
              help="Standard deviation of q and k (moderate norms, where FAVOR+ approximates softmax).")
@click.option("--out", "out", default=None, metavar="PREFIX",
              help="Also write PREFIX.json (after each N, so a stopped run keeps what finished), PREFIX.md and "
                   "PREFIX.png. Without it the table is only printed: nothing is written.")
def attention(lengths, variants, batch, heads, head_dim, value_dim, dtype, device, repeats, favor_features, window,
              chunk_size, softmax_max_n, backward, input_scale, out) -> None:
    """Time, memory and error to softmax of each attention variant against sequence length N."""

    from genolin.bench import VARIANTS, default_lengths, format_table, run_attention_benchmark, write_result
    from genolin.device import pick_device

    device = pick_device(device).type
    gpu = device == "cuda"
    names = [v.strip() for v in variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        raise click.BadParameter(f"unknown: {', '.join(unknown)} (choose from {VARIANT_HELP})", param_hint="--variants")
    result = run_attention_benchmark(
        lengths=list(lengths) or default_lengths(device), variants=names, batch=batch, heads=heads,
        head_dim=head_dim, value_dim=value_dim, dtype=dtype or ("bfloat16" if gpu else "float32"), device=device,
        repeats=repeats or (20 if gpu else 3), favor_features=favor_features, window=window, chunk_size=chunk_size,
        softmax_max_n=softmax_max_n or (262144 if gpu else 8192), backward=backward, input_scale=input_scale,
        on_length=(lambda partial: write_result(partial, out + ".json")) if out else None)
    table = format_table(result)
    click.echo(table)
    if out:
        _write_files(result, table, out)


def _write_files(result: dict, table: str, prefix: str) -> None:
    """PREFIX.md (the table and the setting) and PREFIX.png beside the JSON the run kept up to date."""
    from genolin.bench import plot
    from genolin.io.atomic import atomic_open

    meta = result["meta"]
    with atomic_open(prefix + ".md") as fh:
        fh.write(f"# genolin attention benchmark ({meta['date']})\n\n"
                 f"{meta.get('gpu') or meta['cpu']}, torch {meta['torch']}, genolin {meta['genolin']}, "
                 f"B={meta['batch']} H={meta['heads']} D={meta['head_dim']} {meta['dtype']}, "
                 f"median of {meta['repeats']} runs\n\n"
                 f"```\n{table}\n```\n")
    try:
        plot(result, prefix + ".png")
    except ImportError:
        click.echo("matplotlib is not installed: no plot (the JSON has everything)", err=True)
        click.echo(f"wrote {prefix}.json, {prefix}.md")
        return
    click.echo(f"wrote {prefix}.json, {prefix}.md, {prefix}.png")
