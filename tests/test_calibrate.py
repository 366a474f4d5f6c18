"""Calibration of track probabilities (genolin.calibrate): the evidence evaluate gathers against brute force, the
isotonic fit against the min-max formula, the calibrated calls' figures against a direct count, and the whole
path on a small genome with the bundled model."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import ecoli_slice

from genolin.calibrate import (
    NEAR_BP,
    Calibration,
    CalibrationData,
    calls_at,
    calls_top,
    ece,
    fit_isotonic,
    fit_platt,
    load_data,
    logit_bin,
    pav,
    reliability,
    save_data,
)
from genolin.cli import cli


def minmax_isotonic(v, w):
    """The isotonic regression by its closed form: fit_i = max over a <= i of min over b >= i of mean(a..b)."""
    n = len(v)
    out = np.empty(n)
    for i in range(n):
        out[i] = max(min(np.dot(v[a:b + 1], w[a:b + 1]) / w[a:b + 1].sum() for b in range(i, n))
                     for a in range(i + 1))
    return out


@pytest.mark.parametrize("n", [1, 2, 7, 31])
def test_pav_is_the_isotonic_regression(n):
    rng = np.random.default_rng(n)
    v, w = rng.random(n), rng.integers(1, 20, n).astype(float)
    ends, vals = pav(v, w)
    fit = np.repeat(vals, np.diff(np.concatenate([[0], ends])))
    np.testing.assert_allclose(fit, minmax_isotonic(v, w), rtol=1e-12)


def brute_data(first, probs, stride, tss):
    """Per strand and model bin: near (a TSS within NEAR_BP of one of its bases), by a loop."""
    near = np.zeros(probs.shape, dtype=bool)
    for strand in range(2):
        for j in range(len(probs)):
            s = (first + j) * stride
            near[j, strand] = any(s - NEAR_BP <= t < s + stride + NEAR_BP for t in tss[strand])
    return near


@pytest.mark.parametrize("stride", [1, 3, 4])
def test_bins_near_a_tss_are_counted_as_a_loop_counts_them(stride):
    rng = np.random.default_rng(stride)
    tss = [np.sort(rng.choice(5_000, 23, replace=False)), np.sort(rng.choice(5_000, 17, replace=False))]
    data = CalibrationData()
    pieces = [(0, rng.random((301, 2))), (301, rng.random((97, 2)) ** 8), (398, rng.random((5, 2)))]
    for first, probs in pieces:
        data.add_bins(first, probs, stride, tss)
    near = np.concatenate([brute_data(f, p, stride, tss) for f, p in pieces])
    probs = np.concatenate([p for _, p in pieces])
    bins = logit_bin(probs)
    assert data.total.sum() == probs.size and data.near.sum() == near.sum()
    np.testing.assert_array_equal(data.near, np.bincount(bins[near], minlength=len(data.near)))
    np.testing.assert_allclose(data.sum_p, np.bincount(bins.ravel(), weights=probs.ravel(),
                                                       minlength=len(data.sum_p)), rtol=1e-12)


def test_calls_figures_match_a_direct_count():
    """Peaks matched to TSSs by index ranges: precision and recall at a threshold and at a density equal a loop over
    positions."""
    rng = np.random.default_rng(5)
    stride = 4
    tss = [np.sort(rng.choice(20_000, 40, replace=False)), np.sort(rng.choice(20_000, 30, replace=False))]
    calls = [(int(b), float(rng.random()), s) for s in "+-" for b in rng.choice(5_000, 60, replace=False)]
    data = CalibrationData(bp=20_000)
    data.add_peaks(calls, stride, tss)
    cal = Calibration(np.array([0.1, 0.9]), np.array([0.0, 1.0]))
    for figures, chosen in ((calls_at(data, None, 0.6), [c for c in calls if c[1] >= 0.6]),
                            (calls_at(data, cal, 0.5), [c for c in calls if cal.apply(c[1]) >= 0.5]),
                            (calls_top(data, 1_000), sorted(calls, key=lambda c: -c[1])[:20])):
        centre = {c: c[0] * stride + stride // 2 for c in chosen}
        hit = [any(abs(centre[c] - t) <= NEAR_BP for t in tss["+-".index(c[2])]) for c in chosen]
        found = sum(any(abs(centre[c] - t) <= NEAR_BP for c in chosen if c[2] == s) for i, s in enumerate("+-")
                    for t in tss[i])
        assert figures["calls"] == len(chosen) and figures["precision"] == pytest.approx(np.mean(hit))
        assert figures["recall"] == pytest.approx(found / 70)


def test_isotonic_calibration_is_calibrated_on_its_own_data_and_platt_close(tmp_path):
    """Bins whose true rate is a known monotone function of the raw value: after the isotonic fit the ECE on the
    data it was fitted on is ~0, the reliability rows lie on the diagonal, the file round-trips, and Platt scaling
    (the right family here) is close."""
    rng = np.random.default_rng(0)
    p = rng.random(200_000) ** 4
    truth = 1 / (1 + np.exp(-(1.5 * np.log(p / (1 - p)) + 1.0)))
    near = rng.random(len(p)) < truth
    data = CalibrationData()
    bins = logit_bin(p)
    data.total += np.bincount(bins, minlength=len(data.total))
    data.near += np.bincount(bins[near], minlength=len(data.near))
    data.sum_p += np.bincount(bins, weights=p, minlength=len(data.sum_p))
    iso, platt = fit_isotonic([data]), fit_platt([data])
    assert ece(data) > 0.05 and ece(data, iso) < 1e-3 and ece(data, platt) < 0.01
    for value, rate, _ in reliability(data, iso):
        assert abs(value - rate) < 0.01
    assert np.all(np.diff(iso.y) >= 0) and np.all(np.diff(iso.x) > 0)
    again = Calibration.from_json(iso.to_json())
    np.testing.assert_allclose(again.apply(p[:100]), iso.apply(p[:100]))
    save_data(tmp_path / "c.npz", {"g": data})
    back = load_data(tmp_path / "c.npz")["g"]
    np.testing.assert_array_equal(back.near, data.near)
    with pytest.raises(ValueError, match="non-decreasing"):
        Calibration.from_json({"x": [0.1, 0.2], "y": [0.5, 0.4]})


def test_evaluate_writes_the_evidence_predict_agrees_with(tmp_path):
    """evaluate on a 40 kbp genome with the bundled model: calibration.npz counts every model bin of both strands,
    its bins near a TSS are those a loop finds, and its peaks are predict's calls at the same density."""
    lo, hi = 300_000, 340_000
    starts = ecoli_slice(tmp_path / "g.fa", tmp_path / "g.bed", "g1", lo, hi)
    r = CliRunner().invoke(cli, ["-q", "evaluate", "--model", "bacteria", "--device", "cpu", "--fasta",
                                 str(tmp_path / "g.fa"), "--tss", str(tmp_path / "g.bed"), "--rc-average", "--out",
                                 str(tmp_path / "ev")])
    assert r.exit_code == 0, r.output
    (data,) = load_data(tmp_path / "ev" / "calibration.npz").values()
    stride = 4  # the CPU member's
    n_bins = -(-(hi - lo) // stride)
    assert data.total.sum() == 2 * n_bins and data.bp == hi - lo
    tss = [np.array(sorted(p for p, s in starts if s == x)) for x in "+-"]
    assert data.n_tss == sum(map(len, tss))
    assert data.near.sum() == brute_data(0, np.zeros((n_bins, 2)), stride, tss).sum()
    r = CliRunner().invoke(cli, ["-q", "predict", "--model", "bacteria", "--device", "cpu", "--fasta",
                                 str(tmp_path / "g.fa"), "--rc-average", "--calls-per-mbp", "2000", "--out",
                                 str(tmp_path / "pred")])
    assert r.exit_code == 0, r.output
    called = sorted(float(line.split("\t")[4]) for line in (tmp_path / "pred.peaks.bed").read_text().splitlines()
                    if not line.startswith(("track", "#")))
    assert len(called) == len(data.peak_p) == 80
    np.testing.assert_allclose(np.sort(data.peak_p) * 1000, called, atol=0.51)  # the BED's score: p x 1000


def test_the_proxy_calibration_fits_each_genome_on_the_other_folds_only(tmp_path):
    """benchmarks/calibration.py on a work folder of seven held-out genomes: each genome is scored with the map fitted
    on the genomes of the other folds (its fold-mate's data, made to disagree, changes nothing), and a seed missing
    a genome is still reported from those present."""
    import importlib.util

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("calibration", REPO / "benchmarks" / "calibration.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rng = np.random.default_rng(3)

    def genome(rate_scale):
        p = rng.random(20_000) ** 3
        near = rng.random(len(p)) < np.clip(p * rate_scale, 0, 1)
        d = CalibrationData(bp=20_000)
        bins = logit_bin(p)
        d.total += np.bincount(bins, minlength=len(d.total))
        d.near += np.bincount(bins[near], minlength=len(d.near))
        d.sum_p += np.bincount(bins, weights=p, minlength=len(d.sum_p))
        return d

    datas = {g: genome(0.2 if g == "ccrescentus" else 1.0) for gs in bench.FOLDS.values() for g in gs}
    for fold, gs in bench.FOLDS.items():
        for g in gs:
            save_data(tmp_path / "r" / f"fold{fold}_seed0" / f"eval_{g}" / "calibration.npz", {g: datas[g]})
    found = bench.find_evals(tmp_path, "r")
    result = bench.one_seed(found[0], [0.3], "isotonic")
    others = fit_isotonic([datas[g] for g in ("bacillus", "cjejuni", "selongatus", "saureus", "mtuberculosis")])
    assert result["genomes"]["ecoli"]["ece"] == pytest.approx(ece(datas["ecoli"], others))
    # E. coli's fold-mate (rates a fifth of the others') is never fitted on for E. coli, but scored badly itself
    assert result["genomes"]["ccrescentus"]["ece"] > 5 * result["genomes"]["ecoli"]["ece"]
    del found[0]["mtuberculosis"]
    partial = bench.one_seed(found[0], [0.3], "isotonic")
    assert set(partial["genomes"]) == set(datas) - {"mtuberculosis"}


def test_fits_without_data_or_with_values_that_do_not_rank_are_refused():
    with pytest.raises(ValueError, match="no model bins"):
        fit_isotonic([CalibrationData()])
    with pytest.raises(ValueError, match="no model bins"):
        fit_platt([CalibrationData()])
    d = CalibrationData()  # the higher the value, the fewer bins near a TSS
    for p, rate in ((0.01, 0.5), (0.1, 0.2), (0.5, 0.01)):
        i = logit_bin(np.array([p]))[0]
        d.total[i], d.near[i], d.sum_p[i] = 1000, int(1000 * rate), 1000 * p
    with pytest.raises(ValueError, match="no rising fit"):
        fit_platt([d])
    assert np.ptp(fit_isotonic([d], least=1).y) == 0  # isotonic: one flat block
