"""genolin bench attention at toy sizes: rows, error columns, slopes, table, JSON and plot."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

from genolin.bench import (
    APPROXIMATES_SOFTMAX,
    LINFORMER_ROWS,
    VARIANTS,
    fitted_slopes,
    format_table,
    run_attention_benchmark,
)
from genolin.cli import cli
from genolin.ops import favor_projection, naive_linear_attention


def test_benchmark_rows_and_errors():
    result = run_attention_benchmark(lengths=[64, 200], variants=VARIANTS, heads=2, head_dim=8, repeats=1,
                                     softmax_max_n=100, favor_features=16, window=32)
    rows = {(r["variant"], r["n"]): r for r in result["rows"]}
    assert ("softmax", 64) in rows and ("softmax", 200) not in rows  # softmax only up to softmax_max_n
    assert rows[("softmax", 64)]["rel_error_to_softmax"] == pytest.approx(0, abs=1e-6)
    assert rows[("softmax", 64)]["cosine_to_softmax"] == pytest.approx(1, abs=1e-6)
    # the error columns, recomputed from the same inputs with the explicit formulas (float64)
    g = torch.Generator().manual_seed(0 + 64)
    q, k = (torch.randn(1, 64, 2, 8, generator=g).mul(0.5).double() for _ in range(2))
    v = torch.randn(1, 64, 2, 8, generator=g).double()
    scores = torch.einsum("bnhd,bmhd->bhnm", q, k) / 8**0.5
    exact = torch.einsum("bhnm,bmhe->bnhe", scores.softmax(-1), v)
    same_window = (torch.arange(64)[:, None] // 32) == (torch.arange(64)[None, :] // 32)
    local = torch.einsum("bhnm,bmhe->bnhe", scores.masked_fill(~same_window, float("-inf")).softmax(-1), v)
    expected = {fm: naive_linear_attention(q, k, v, feature_map=fm) for fm in ("elu", "relu", "exp")}
    expected["favor"] = naive_linear_attention(q, k, v, feature_map="favor",
                                               projection=favor_projection(16, 8, seed=0).double())
    expected["hybrid"] = 0.5 * (local + expected["elu"])
    draws = torch.Generator().manual_seed(64)  # the linformer row's projections, drawn as the benchmark does
    e, f = (torch.randn(LINFORMER_ROWS, 64, generator=draws).double() / 8 for _ in range(2))  # / sqrt(N)
    kp, vp = torch.einsum("pn,bnhd->bphd", e, k), torch.einsum("pn,bnhd->bphd", f, v)
    expected["linformer"] = torch.einsum("bhnp,bphe->bnhe",
                                         (torch.einsum("bnhd,bphd->bhnp", q, kp) / 8**0.5).softmax(-1), vp)
    for variant in VARIANTS[1:]:
        r = rows[(variant, 64)]
        assert r["forward_ms"] > 0 and r["forward_backward_ms"] > 0
        if variant not in APPROXIMATES_SOFTMAX:  # gla, the delta rules, fnet, synthesizer: no error column
            assert "rel_error_to_softmax" not in r
            continue
        o = expected[variant]
        assert r["rel_error_to_softmax"] == pytest.approx(((o - exact).norm() / exact.norm()).item(), rel=1e-4)
        cosine = torch.nn.functional.cosine_similarity(o.flatten(), exact.flatten(), dim=0).item()
        assert r["cosine_to_softmax"] == pytest.approx(cosine, abs=1e-6)
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
    names = "softmax,elu,favor,gla,deltanet,gated_deltanet,linformer,fnet,synthesizer"
    result = CliRunner().invoke(cli, ["-q", "bench", "attention", "--n", "32", "--n", "96", "--variants", names,
                                      "--heads", "2", "--head-dim", "8", "--repeats", "1",
                                      "--favor-features", "8", "--device", "cpu", "--out", str(prefix)])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "res" / "attn.json").read_text())
    assert {(r["variant"], r["n"]) for r in data["rows"]} == {(v, n) for v in names.split(",") for n in (32, 96)}
    assert (tmp_path / "res" / "attn.png").read_bytes()[:4] == b"\x89PNG"
    assert "genolin attention benchmark" in (tmp_path / "res" / "attn.md").read_text()
    bad = CliRunner().invoke(cli, ["bench", "attention", "--variants", "performer", "--out", str(prefix)])
    assert bad.exit_code == 2 and "performer" in bad.output


def test_partial_results_after_each_length():
    seen = []
    result = run_attention_benchmark(lengths=[16, 24, 40], variants=["elu", "gla", "gated_deltanet"], heads=1,
                                     head_dim=4, repeats=1, backward=False,
                                     on_length=lambda r: seen.append((r["meta"]["complete"], len(r["rows"]))))
    assert seen == [(False, 3), (False, 6), (True, 9)]  # a time limit would keep the rows of the lengths done
    scans = [r for r in result["rows"] if r["variant"] != "elu"]
    assert all(r["backend"] == "reference" == r["backward_backend"] for r in scans)  # CPU: the PyTorch form
    assert "backend" not in result["rows"][0]  # elu: linear attention has its own dispatch


def test_cli_without_out_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an empty folder, as a new user's
    result = CliRunner().invoke(cli, ["-q", "bench", "attention", "--n", "32", "--variants", "elu", "--heads", "1",
                                      "--head-dim", "4", "--repeats", "1", "--device", "cpu", "--no-backward"])
    assert result.exit_code == 0, result.output
    assert "elu" in result.output and "wrote" not in result.output
    assert list(tmp_path.iterdir()) == []  # no benchmarks/results/ and no files
