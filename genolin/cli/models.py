"""``genolin models``: the ready models shipped with genolin, which ``--model NAME`` (predict, evaluate, explain) and
``--init NAME`` (train) take with no training."""

from __future__ import annotations

import click


@click.command(context_settings={"show_default": True})
def models() -> None:
    """List the bundled models: name, members (the device each is for), what they are."""
    import json

    from genolin.models import bundled

    found = bundled()
    if not found:
        click.echo("no bundled models in this install")
        return
    for model in found:
        card = json.loads((model.folder / "model.json").read_text())
        members = ", ".join(f"{model.name}-{m} ({'GPU' if d == 'cuda' else 'CPU'})" for m, d in model.members.items())
        click.echo(f"{model.name}: {model.summary}")
        click.echo(f"  members: {members}; '{model.name}' picks by device")
        if card.get("card"):
            click.echo(f"  model card: {card['card']}")
