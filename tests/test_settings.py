"""The settings layer: every value typed and range-checked before any data are read, reported as file:line or as
the --set item that gave it, in one line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from genolin.cli import cli
from genolin.config import Setting, make_config, parse_settings


def train(tmp_path, *args, yaml_text=None):
    """genolin train on a CSV that does not exist: a settings error must come before any data are read."""
    extra = []
    if yaml_text is not None:
        (tmp_path / "c.yaml").write_text(yaml_text)
        extra = ["--config", str(tmp_path / "c.yaml")]
    return CliRunner().invoke(cli, ["train", "--csv", str(tmp_path / "absent.csv"), "--out", str(tmp_path / "run"),
                                    *extra, *map(str, args)])


def test_values_take_their_fields_types():
    cfg = make_config("track", "tiny", parse_settings(["lr=1e-3", "max_tokens=1_000", "model.dropout=0",
                                                       "patience=3.0", "amp=no", "pos_weight=null",
                                                       "compile=yes", "compile_memory_budget=0.13",
                                                       "compile_mode=max-autotune-no-cudagraphs", "mlm_weight=0.5"]))
    assert cfg.lr == 0.001 and cfg.max_tokens == 1000 and cfg.model.dropout == 0.0 and cfg.patience == 3
    assert cfg.compile is True and make_config("track", "tiny", []).compile is False
    assert cfg.compile_memory_budget == 0.13 and make_config("track", "tiny", []).compile_memory_budget is None
    default = make_config("track", "tiny", [])
    assert cfg.compile_mode == "max-autotune-no-cudagraphs" and default.compile_mode == "default"
    assert cfg.mlm_weight == 0.5 and default.mlm_weight == 0.0
    assert cfg.amp is False and cfg.pos_weight is None and isinstance(cfg.model.dropout, float)
    assert make_config("track", "tiny", [Setting("k", "5", "x.yaml", 2)]).k == 5
    assert make_config("track", "base", parse_settings(["genome_weights=sqrt"])).genome_weights == "sqrt"
    assert default.genome_weights == "length"


@pytest.mark.parametrize(("args", "yaml_text", "message"), [
    ([], 'd_model: "abc"\n', "c.yaml:1: setting 'd_model': expected a whole number, got 'abc'"),
    ([], "epochs: 3\nlr: -1\n", "c.yaml:2: setting 'lr': must be above 0, got -1"),
    (["--set", "lr=fast"], None, "--set lr=fast: setting 'lr': expected a number, got 'fast'"),
    (["--set", "dropout=2"], None, "--set dropout=2: setting 'dropout': must be at least 0 and below 1, got 2"),
    ([], "model:\n  n_layers: 0\n", "c.yaml:2: setting 'model.n_layers': must be 1 or more, got 0"),
    ([], "stride: 0\n", "c.yaml:1: setting 'stride': must be 1 or more, got 0"),
    ([], "epochs: 0\n", "c.yaml:1: setting 'epochs': must be 1 or more, got 0"),
    ([], "batch_size: 0\n", "c.yaml:1: setting 'batch_size': must be 1 or more, got 0"),
    ([], "tolerance_bins: -5\n", "c.yaml:1: setting 'tolerance_bins': must be 0 or more, got -5"),
    ([], "window: 0\n", "c.yaml:1: setting 'window': must be 1 or more, got 0"),
    ([], "k: 13\n", "c.yaml:1: setting 'k': must be from 1 to 12, got 13"),
    (["--set", "compile_mode=fast"], None, "--set compile_mode=fast: setting 'compile_mode': must be default or "
                                           "max-autotune-no-cudagraphs, got 'fast'"),
    (["--set", "genome_weights=size"], None, "--set genome_weights=size: setting 'genome_weights': must be length, "
                                             "equal or sqrt, got 'size'"),
    ([], "genome_weights: 2\n", "c.yaml:1: setting 'genome_weights': expected text, got 2"),
    (["--set", "mlm_prob=1"], None, "--set mlm_prob=1: setting 'mlm_prob': must be between 0 and 1 (exclusive), "
                                    "got 1"),
    (["--set", "label_smoothing=1"], None, "--set label_smoothing=1: setting 'label_smoothing': must be at least 0 "
                                           "and below 1, got 1"),
    ([], "mixer: [a, b]\n", "c.yaml:1: setting 'mixer': expected text, got ['a', 'b']"),
    ([], "lr: 0.001\n  bad indent: [\n", "c.yaml:2: not valid YAML:"),
    ([], "model: 5\n", "c.yaml:1: setting 'model': expected a mapping"),
    ([], "colour: red\n", "c.yaml:1: unknown setting 'colour'"),
    (["--set", "model.vocab_size=9"], None, "--set model.vocab_size=9: setting 'model.vocab_size' cannot be set"),
    ([], "n_heads: 5\n", "c.yaml:1: d_model 64 is not divisible by n_heads 5"),
])
def test_bad_settings_are_one_line_before_data(tmp_path, args, yaml_text, message):
    r = train(tmp_path, *args, yaml_text=yaml_text)
    errors = [line for line in r.output.splitlines() if line.startswith("genolin: error:")]
    want = f"genolin: error: {tmp_path / message}" if message.startswith("c.yaml") else f"genolin: error: {message}"
    assert r.exit_code == 1 and len(errors) == 1 and errors[0].startswith(want), r.output
    assert "absent.csv" not in r.output  # the data were never read
    assert all(line.startswith("genolin: warning: ") for line in r.output.splitlines() if line not in errors)
    assert not (tmp_path / "run").exists()


def test_bench_lengths_must_be_positive():
    r = CliRunner().invoke(cli, ["bench", "attention", "--n", "0", "--device", "cpu"])
    assert r.exit_code == 2 and "0 is not in the range x>=1" in r.output


def test_every_text_settings_default_reads_back():
    """A saved run's config.json is read through the same typing as --set: a text default such as "none"
    would read as a missing value (YAML's null) and the run could not be loaded again."""
    import dataclasses

    from genolin.config import TYPES, TrainConfig, coerce

    cfg = TrainConfig()
    for key, kind in TYPES.items():
        if kind.split("|")[0].strip() != "str":
            continue
        holder = cfg.model if key.startswith("model.") else cfg
        default = getattr(holder, key.removeprefix("model."))
        if isinstance(default, str):
            assert coerce(Setting(key, default, "test"), key) == default, key
    assert dataclasses.replace(cfg.model, positions="sinusoidal").positions == "sinusoidal"
    with pytest.raises(ValueError, match="positions"):
        dataclasses.replace(cfg.model, positions="learned")
