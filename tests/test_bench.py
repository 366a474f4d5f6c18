"""genolin bench attention at toy sizes: rows, error columns, slopes, table, JSON and plot."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from genolin.bench import VARIANTS, fitted_slopes, format_table, run_attention_benchmark
from genolin.cli import cli


def test_benchmark_rows_and_errors():
    result = run_attention_benchmark(lengths=[64, 200], variants=VARIANTS, heads=2, head_dim=8, repeats=1,
                                     softmax_max_n=100, favor_features=16, window=32)
    rows = {(r["variant"], r["n"]): r for r in result["rows"]}
    assert ("softmax", 64) in rows and ("softmax", 200) not in rows  # softmax only up to softmax_max_n
    assert rows[("softmax", 64)]["rel_error_to_softmax"] == pytest.approx(0, abs=1e-6)
    assert rows[("softmax", 64)]["cosine_to_softmax"] == pytest.approx(1, abs=1e-6)
    for variant in VARIANTS[1:]:
        r = rows[(variant, 64)]
        assert r["forward_ms"] > 0 and r["forward_backward_ms"] > 0
        assert 0 < r["rel_error_to_softmax"] and -1 <= r["cosine_to_softmax"] <= 1
        assert "rel_error_to_softmax" not in rows[(variant, 200)]
    assert result["meta"]["head_dim"] == 8 and result["meta"]["torch"]
    table = format_table(result)
    assert "softmax" in table and "log-log slope of forward time" in table


def test_fitted_slopes_recover_power_laws():
    rows = [{"variant": "lin", "n": n, "t": 3e-3 * n} for n in (1000, 10_000, 100_000)]
    rows += [{"variant": "quad", "n": n, "t": 1e-6 * n**2} for n in (1000, 10_000, 100_000)]
    slopes = fitted_slopes(rows, "t", min_n=0)
    assert slopes["lin"] == pytest.approx(1.0) and slopes["quad"] == pytest.approx(2.0)


def test_cli_writes_json_markdown_and_plot(tmp_path):
    prefix = tmp_path / "res" / "attn"
    result = CliRunner().invoke(cli, ["-q", "bench", "attention", "--n", "32", "--n", "96", "--variants",
                                      "softmax,elu,favor", "--heads", "2", "--head-dim", "8", "--repeats", "1",
                                      "--favor-features", "8", "--device", "cpu", "--out", str(prefix)])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "res" / "attn.json").read_text())
    assert {r["variant"] for r in data["rows"]} == {"softmax", "elu", "favor"}
    assert (tmp_path / "res" / "attn.png").read_bytes()[:4] == b"\x89PNG"
    assert "genolin attention benchmark" in (tmp_path / "res" / "attn.md").read_text()
    bad = CliRunner().invoke(cli, ["bench", "attention", "--variants", "performer", "--out", str(prefix)])
    assert bad.exit_code == 2 and "performer" in bad.output
