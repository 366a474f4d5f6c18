"""Long sequences: the length-aware recipe, position-aware attention pooling, the memory guard, inputs of any length."""

from __future__ import annotations

import json
import logging
import os
import re

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import ECOLI_BGZ, GUE_TATA

from genolin import memory
from genolin.cli import cli
from genolin.config import CROP_MIN_BP, LONG_CROP_BP, LONG_SEQUENCE_BP, long_stride, make_config
from genolin.errors import InputError
from genolin.io.fasta import read_fasta
from genolin.io.labelled import LabelledSet, load_labelled, longest_sequence_bp, read_sequences
from genolin.model import POOL_POSITION_SCALE, Encoder, EncoderConfig, pool_groups, pool_mask
from genolin.tasks.base import WIDTH_STEPS, bucket_width
from genolin.tasks.sequence import SequenceData, crop_length

RNG = np.random.default_rng(0)


def run(*args, env=None):
    return CliRunner(env=env).invoke(cli, [*map(str, args)])


def random_dna(n: int, rng=RNG) -> str:
    return "".join(rng.choice(list("ACGT"), n))


@pytest.fixture(scope="module")
def genome() -> str:
    (rec,) = read_fasta(ECOLI_BGZ)
    return rec.seq.decode()


@pytest.fixture(scope="module")
def long_set(tmp_path_factory, genome):
    """12 training and 6 validation windows of 3-6 kbp of E. coli, labelled by a planted motif at the centre."""
    d = tmp_path_factory.mktemp("long")
    rng = np.random.default_rng(1)
    for name, n in (("train", 12), ("val", 6)):
        rows = ["id,sequence,label"]
        for i in range(n):
            length = int(rng.integers(3000, 6001))
            start = int(rng.integers(0, len(genome) - length))
            seq = genome[start:start + length]
            if i % 2:
                c = length // 2
                seq = seq[:c] + "TTGACAATTAATCATCGGCTCGTATAATGTGTGG" + seq[c + 34:]
            rows.append(f"{name}{i},{seq},{i % 2}")
        (d / f"{name}.csv").write_text("\n".join(rows) + "\n")
    return d


# -- inputs of any length ------------------------------------------------------------------------------------------

def test_a_table_row_longer_than_csvs_field_limit_is_read(tmp_path):
    """Python's csv stops at 131,072 characters a field; a 300 kbp row is read whole, labelled and unlabelled."""
    seqs = [random_dna(300_000), random_dna(80)]
    path = tmp_path / "t.csv"
    path.write_text("id,sequence,label\n" + "".join(f"s{i},{s},{i}\n" for i, s in enumerate(seqs)))
    data = load_labelled(path)
    assert [len(s) for s in data.seqs] == [300_000, 80] and data.seqs[0] == seqs[0].encode()
    assert len(read_sequences(path).seqs[0]) == 300_000
    assert longest_sequence_bp(path) == 300_000
    tsv = tmp_path / "t.tsv"
    tsv.write_text("sequence\tlabel\n" + seqs[0] + "\t1\n" + seqs[1] + "\t0\n")
    assert len(load_labelled(tsv).seqs[0]) == 300_000


def test_ten_megabase_records_are_read_from_fasta_and_tables(tmp_path):
    seq = np.frombuffer(b"ACGT", np.uint8)[RNG.integers(0, 4, 10_000_000)].tobytes()
    fa = tmp_path / "big.fa"
    fa.write_bytes(b">big label=1\n" + seq + b"\n>small label=0\nACGTACGT\n")
    table = tmp_path / "big.tsv"
    table.write_bytes(b"id\tsequence\tlabel\nbig\t" + seq + b"\t1\nsmall\tACGTACGT\t0\n")
    for path in (fa, table):
        data = load_labelled(path)
        assert data.ids == ["big", "small"] and data.seqs[0] == seq and list(data.labels) == [1, 0]
        assert longest_sequence_bp(path) == 10_000_000


def test_longest_sequence_of_fasta_and_tables(tmp_path):
    fa = tmp_path / "a.fa"
    fa.write_text(">a\nACGT\nAC\n\n>b label=1\n" + "A" * 70 + "\r\nCC\n>c\nA")
    assert longest_sequence_bp(fa) == 72
    assert longest_sequence_bp(GUE_TATA / "train.csv") == 70
    bad = tmp_path / "b.csv"
    bad.write_text("id,seq\nx,ACGT\n")  # no sequence column: not told here; the reader reports it
    assert longest_sequence_bp(bad) is None


# -- the length-aware recipe ----------------------------------------------------------------------------------------

def test_long_stride_keeps_the_longest_input_within_the_token_budget():
    assert [long_stride(n) for n in (2_000, 32_768, 32_769, 65_536, 65_537, 100_000, 10**6)] == [1, 1, 2, 2, 4, 4, 4]


@pytest.mark.parametrize("preset", ["tiny", "small", "base"])
def test_short_sets_keep_the_measured_recipe_and_long_ones_get_a_pooled_stem_and_a_linear_time_mixer(preset):
    short = make_config("sequence", preset, longest_bp=LONG_SEQUENCE_BP)
    assert (short.k, short.model.mixer, short.model.pooling) == (1, "synthesizer", "mean")
    assert make_config("sequence", preset) == short  # no length given: the short recipe, as before
    long = make_config("sequence", preset, longest_bp=100_000)
    assert (long.k, long.stride, long.model.stem_kernel, long.model.stem_pool) == (1, 1, 15, 4)
    assert long.model.mixer in ("linear", "hybrid", "favor") and long.model.kmer_logits == 0
    head = (long.model.pooling, long.model.pool_position_bins, long.model.pool_distance_slope)
    assert head == ("attention", 128, True)
    assert long.rc_prob > 0 and long.max_tokens <= 4 * 2**18  # a budget in bases: 4 per token after the stem
    assert make_config("sequence", preset, longest_bp=20_000).model.stem_pool == 1
    assert make_config("sequence", preset, longest_bp=10**6).model.checkpointing  # 250,000 tokens: recomputed
    # the user's settings win over the recipe, and the recipe follows them
    mine = make_config("sequence", preset, {"stride": 2, "mixer": "favor", "pooling": "mean"}, longest_bp=100_000)
    assert (mine.stride, mine.model.mixer, mine.model.pooling, mine.model.pool_position_bins) == (2, "favor", "mean", 0)
    assert not mine.model.pool_distance_slope
    kmers = make_config("sequence", preset, {"k": 3}, longest_bp=100_000)
    assert (kmers.stride, kmers.model.stem_pool) == (3, 1)  # k-mer tokens take the grouping as their stride, <= k
    assert kmers.max_tokens == long.max_tokens // 4  # ... and the budget counts tokens again
    assert make_config("sequence", preset, {"k": 6}, longest_bp=20_000).stride == 1
    assert make_config("sequence", preset, {"stem_kernel": 0}, longest_bp=100_000).model.stem_pool == 1
    assert make_config("sequence", preset, {"mlm_weight": 0.1}, longest_bp=100_000).model.stem_pool == 1
    with pytest.raises(InputError, match="mlm_weight needs model.stem_pool 1"):
        make_config("sequence", preset, {"mlm_weight": 0.1, "stem_pool": 2}, longest_bp=100_000)
    fine = make_config("sequence", preset, {"stem_pool": 1}, longest_bp=200_000)
    assert fine.model.checkpointing  # 200,000 tokens at the user's grouping: blocks recomputed
    assert not make_config("sequence", preset, {"stem_pool": 1, "checkpointing": False},
                           longest_bp=200_000).model.checkpointing


@pytest.mark.parametrize("preset", ["tiny", "small", "base"])
def test_the_long_head_starts_its_slope_at_power_1_averages_weights_and_turning_the_slope_off_takes_the_start(preset):
    cfg = make_config("sequence", preset, longest_bp=100_000)
    assert (cfg.model.pool_distance_slope, cfg.model.pool_distance_power, cfg.ema_decay) == (True, 1.0, 0.995)
    off = make_config("sequence", preset, {"model.pool_distance_slope": False}, longest_bp=100_000)
    assert (off.model.pool_distance_slope, off.model.pool_distance_power) == (False, 0.0)
    mean = make_config("sequence", preset, {"model.pooling": "mean"}, longest_bp=100_000)
    assert (mean.model.pool_distance_slope, mean.model.pool_distance_power, mean.model.pool_position_bins) == \
        (False, 0.0, 0)
    with pytest.raises(InputError, match="pool_distance_power needs pool_distance_slope"):
        make_config("sequence", preset, {"model.pool_distance_slope": False, "model.pool_distance_power": 1},
                    longest_bp=100_000)
    short = make_config("sequence", preset, longest_bp=1000)  # the short recipe: neither
    assert (short.model.pool_distance_power, short.ema_decay) == (0.0, 0.0)


def test_long_inputs_train_with_centre_crops_unless_the_user_says_otherwise():
    assert make_config("sequence", "small", longest_bp=LONG_CROP_BP).crop_min_bp == CROP_MIN_BP
    assert make_config("sequence", "small", longest_bp=LONG_CROP_BP - 1).crop_min_bp == 0
    assert make_config("sequence", "small", {"crop_min_bp": 0}, longest_bp=100_000).crop_min_bp == 0
    assert make_config("sequence", "small", {"crop_min_bp": 5000}, longest_bp=100_000).crop_min_bp == 5000


@pytest.mark.parametrize("preset,epochs", [("small", 15), ("base", 30)])
def test_small_and_base_train_cropped_inputs_for_two_epochs_unless_the_user_says_otherwise(preset, epochs):
    got = {n: make_config("sequence", preset, longest_bp=n).epochs for n in (LONG_CROP_BP - 1, LONG_CROP_BP)}
    assert got == {LONG_CROP_BP - 1: epochs, LONG_CROP_BP: 2}  # the schedule goes with the crops
    assert make_config("sequence", preset, {"crop_min_bp": 0}, longest_bp=100_000).epochs == epochs
    assert make_config("sequence", preset, {"crop_min_bp": 500}, longest_bp=5_000).epochs == 2
    assert make_config("sequence", preset, {"epochs": 5}, longest_bp=100_000).epochs == 5
    steps = make_config("sequence", preset, {"steps": 300}, longest_bp=100_000)
    assert (steps.steps, steps.crop_min_bp) == (300, CROP_MIN_BP)


def test_tiny_keeps_its_schedule_on_cropped_inputs():
    """tiny trains on CPUs, where its 10 minutes end long before its epochs."""
    assert make_config("sequence", "tiny", longest_bp=100_000).epochs == 15


def test_crop_lengths_grow_from_the_minimum_to_the_whole():
    rng = np.random.default_rng(0)
    assert crop_length(900, 1000, 1.0, rng) == 900  # no longer than the minimum: whole
    assert {crop_length(100_000, 1000, 0.0, rng) for _ in range(5)} == {1000}  # u_max 0: the minimum
    sizes = np.array([crop_length(100_000, 1000, 1.0, rng) for _ in range(2000)])
    assert sizes.min() >= 1000 and sizes.max() <= 100_000 and sizes.max() > 80_000
    assert 0.4 < np.mean(sizes < 10_000) < 0.6  # log-uniform: about half below the geometric mean of the bounds
    assert max(crop_length(100_000, 1000, 0.5, rng) for _ in range(500)) <= 10_000  # u_max 0.5: at most that mean


def test_a_cropped_batch_holds_the_centre_of_each_sequence():
    rng = np.random.default_rng(1)
    lengths = (6001, 6000, 2500)
    seqs = [rng.choice(np.frombuffer(b"ACGT", np.uint8), n).tobytes() for n in lengths]
    data = SequenceData(LabelledSet(["a", "b", "c"], seqs, np.array([0, 1, 0]), ["0", "1"]), k=1, stride=1)
    whole = data.collate([0, 1, 2], None)
    assert whole.ids.shape == (3, 6001)
    kept_lengths = set()
    for seed in range(20):
        batch = data.collate([0, 1, 2], np.random.default_rng(seed), crop=(1000, 1.0))
        for row, n in enumerate(lengths):
            kept = int(batch.mask[row].sum())
            assert min(n, 1000) <= kept <= n
            start = (n - kept) // 2
            assert torch.equal(batch.ids[row, :kept], whole.ids[row, start:start + kept])  # the centre, in order
            kept_lengths.add(kept)
    assert len(kept_lengths) > 20  # each sequence its own length


def test_cropped_batches_take_few_widths_and_never_more_than_uncropped():
    assert [bucket_width(w) for w in (1, 15, 16, 17, 1024, 1025, 100_000)] == [1, 15, 16, 18, 1024, 1152, 106_496]
    widths = np.array([bucket_width(w) for w in range(1, 300_000)])
    assert (widths >= np.arange(1, 300_000)).all() and (widths <= np.arange(1, 300_000) * 1.125).all()
    assert len(set(widths[1000:])) <= WIDTH_STEPS * 9  # a few per octave
    rng = np.random.default_rng(2)
    seqs = [rng.choice(np.frombuffer(b"ACGT", np.uint8), n).tobytes() for n in (20_000, 19_990, 7_000)]
    data = SequenceData(LabelledSet(["a", "b", "c"], seqs, np.array([0, 1, 0]), ["0", "1"]), k=1, stride=1)
    shapes = set()
    for seed in range(200):
        batch = data.collate([0, 1, 2], np.random.default_rng(seed), crop=(500, 1.0))
        longest = int(batch.mask.sum(1).max())
        # padded to its bucket; past the uncropped 20 kbp, to the widest bucket under it (18,432) or to 20 kbp
        expected = bucket_width(longest) if bucket_width(longest) <= 20_000 else 18_432 if longest <= 18_432 else 20_000
        assert batch.ids.shape[1] == expected
        shapes.add(batch.ids.shape[1])
    assert len(shapes) <= 45 and data.collate([1, 2], None).ids.shape[1] == 19_990  # uncropped: as long as needed
    # sequences no longer than the crops' minimum are not cropped: such a batch keeps its own width
    rng = np.random.default_rng(3)
    lengths = rng.integers(300, 900, 64)
    short = SequenceData(LabelledSet([str(i) for i in range(64)], [b"A" * int(n) for n in lengths],
                                     np.zeros(64, dtype=int), ["0", "1"]), k=1, stride=1)
    for _ in range(20):
        chosen = list(rng.choice(64, 8, replace=False))
        assert short.collate(chosen, rng, crop=(1000, 1.0)).ids.shape[1] == lengths[chosen].max()


def test_k_mer_tokens_with_the_default_preset_leave_the_bag_of_k_mers_term_out(caplog):
    with caplog.at_level(logging.INFO, logger="genolin"):
        cfg = make_config("sequence", "tiny", {"k": 6, "stride": 2})
    assert (cfg.k, cfg.stride, cfg.model.kmer_logits) == (6, 2, 0)
    assert "model.kmer_logits left out" in caplog.text
    with pytest.raises(InputError, match="kmer_logits needs a sequence classifier with single-base tokens"):
        make_config("sequence", "tiny", {"k": 6, "kmer_logits": 6})  # asked for by name: refused


def test_a_length_limited_mixer_on_long_inputs_names_its_limit_and_the_alternative():
    with pytest.raises(InputError) as err:
        make_config("sequence", "tiny", {"mixer": "synthesizer"}, source="--set mixer=synthesizer",
                    longest_bp=100_000)
    text = str(err.value)
    assert text.startswith("--set mixer=synthesizer: the synthesizer mixer takes at most 8,192 tokens")
    assert "100,000 bp" in text and "(--set mixer=linear, or hybrid, favor)" in text
    with pytest.raises(InputError, match="linformer mixer takes at most 8,192 tokens"):
        make_config("sequence", "small", {"mixer": "linformer", "k": 1, "stride": 1}, longest_bp=20_000)
    with pytest.raises(InputError, match="max_len=20000: setting 'max_len': the synthesizer mixer takes at most 8,192"):
        make_config("sequence", "tiny", {"max_len": 20_000}, source="--set max_len=20000")
    EncoderConfig(mixer="synthesizer", max_len=20_000)  # a run saved with it still loads


# -- position-aware attention pooling -------------------------------------------------------------------------------

def _pool_reference(hidden, mask, score_w, score_b, position):
    """Attention pooling written out per sequence in float64: softmax over real tokens of w . h + b + p[bin], p the
    bins' scores."""
    out = []
    for h, m in zip(hidden, mask, strict=True):
        n = int(m.sum())
        bins = [min(i * len(position) // n, len(position) - 1) for i in range(n)]
        s = h[:n] @ score_w + score_b + position[bins]
        a = torch.softmax(s, 0)
        out.append((a[:, None] * h[:n]).sum(0))
    return torch.stack(out)


def test_position_pooling_equals_its_definition_forward_and_backward_in_float64():
    torch.manual_seed(0)
    cfg = EncoderConfig(vocab_size=9, d_model=12, n_layers=1, n_heads=3, pooling="attention", pool_position_bins=7,
                        pool_position_scale=3.5)
    model = Encoder(cfg).double()
    with torch.no_grad():
        model.pool_position.normal_()
    lengths = [13, 5, 29]
    hidden = torch.randn(3, 29, 12, dtype=torch.float64)
    mask = torch.arange(29)[None] < torch.tensor(lengths)[:, None]
    pooled = model.pool(hidden, mask)
    ref = _pool_reference(hidden, mask, model.pool_score.weight[0], model.pool_score.bias[0],
                          3.5 * model.pool_position)
    assert torch.linalg.norm(pooled - ref) / torch.linalg.norm(ref) < 1e-12
    g = torch.randn_like(ref)
    grads = torch.autograd.grad((pooled * g).sum(), [model.pool_position, model.pool_score.weight])
    grads_ref = torch.autograd.grad((ref * g).sum(), [model.pool_position, model.pool_score.weight])
    for a, b in zip(grads, grads_ref, strict=True):
        assert torch.linalg.norm(a - b) / torch.linalg.norm(b) < 1e-12
    assert grads[0].abs().sum() > 0  # the positions learn


def test_position_pooling_starts_as_plain_attention_pooling_and_ignores_padding():
    torch.manual_seed(1)
    base = EncoderConfig(vocab_size=9, d_model=16, n_layers=1, n_heads=4, pooling="attention", mixer="linear")
    plain, binned = Encoder(base), Encoder(EncoderConfig(**{**base.to_dict(), "pool_position_bins": 16}))
    binned.load_state_dict(plain.state_dict(), strict=False)
    ids = torch.randint(5, 9, (2, 40))
    ids[1, 25:] = 0  # padding
    assert torch.equal(binned.pool_position, torch.zeros(16))
    assert torch.allclose(plain.eval()(ids).logits, binned.eval()(ids).logits, atol=1e-6)
    with torch.no_grad():
        binned.pool_position.normal_()
    alone = binned(ids[1:, :25]).logits
    assert torch.allclose(binned(ids).logits[1:], alone, atol=1e-5)
    with pytest.raises(ValueError, match="pool_position_bins"):
        EncoderConfig(pool_position_bins=8)  # mean pooling has no scores
    assert EncoderConfig().pool_position_scale == POOL_POSITION_SCALE


# -- the pooled stem -------------------------------------------------------------------------------------------------

def test_pooled_groups_equal_their_definition_forward_and_backward_in_float64():
    torch.manual_seed(0)
    lengths, p, d = (13, 7, 1), 4, 5
    x = torch.randn(3, 13, d, dtype=torch.float64, requires_grad=True)
    mask = torch.arange(13)[None] < torch.tensor(lengths)[:, None]
    got, got_mask = pool_groups(x, mask, p)
    assert got.shape == (3, 4, d) and got_mask.tolist() == [[True] * 4, [True, True, False, False],
                                                             [True, False, False, False]]
    want = torch.zeros(3, 4, d, dtype=torch.float64)
    for b, n in enumerate(lengths):
        for g in range(-(-n // p)):
            want[b, g] = x[b, g * p:min(n, g * p + p)].mean(0)
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    w = torch.randn_like(want)
    (grad,) = torch.autograd.grad((got * w).sum(), x)
    (grad_want,) = torch.autograd.grad((want * w).sum(), x)
    assert torch.allclose(grad, grad_want, rtol=1e-12, atol=1e-12)
    assert torch.equal(pool_mask(mask, p), got_mask)


@pytest.mark.parametrize("kernel", [15, 4])
def test_the_stem_from_ids_equals_the_convolution_of_the_embeddings_forward_and_backward(kernel):
    """The stem's one-hot form (vocabulary below d) against the convolution of embed(ids), float64, odd sizes and
    padding: the same outputs and the same gradients, none for the padding row's embedding."""
    torch.manual_seed(0)
    cfg = EncoderConfig(vocab_size=9, d_model=24, n_layers=1, n_heads=4, stem_kernel=kernel)
    model = Encoder(cfg).double()
    ids = torch.randint(1, 9, (3, 37))
    ids[1, 20:] = cfg.pad_id
    weight = torch.randn(3, 37, 24, dtype=torch.float64)
    results = []
    for from_ids in (True, False):
        model.zero_grad()
        got = model.stem_conv(model.embed(ids), ids if from_ids else None)
        (got * weight).sum().backward()
        results.append((got.detach(), model.stem.weight.grad.clone(), model.embed.weight.grad.clone()))
    (fast, fast_w, fast_e), (plain, plain_w, plain_e) = results
    for a, b in ((fast, plain), (fast_w, plain_w), (fast_e, plain_e)):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)
    assert not fast_e[cfg.pad_id].any()


def test_a_pooled_stem_scores_a_sequence_alike_alone_and_in_a_padded_batch():
    torch.manual_seed(0)
    with pytest.raises(ValueError, match="stem_pool"):
        EncoderConfig(stem_pool=4, stem_kernel=3)  # narrower than its groups
    with pytest.raises(ValueError, match="stem_pool"):
        EncoderConfig(stem_pool=2, stem_kernel=15, track_channels=2)
    cfg = EncoderConfig(vocab_size=9, d_model=32, n_layers=2, n_heads=4, stem_kernel=15, stem_pool=4,
                        pooling="attention", pool_position_bins=16, chunk_tokens=64)
    model = Encoder(cfg).eval().double()
    ids = torch.randint(5, 9, (2, 301))
    ids[1, 150:] = cfg.pad_id
    with torch.no_grad():
        batch = model(ids).logits
        alone = model(ids[1:, :150]).logits
        streamed = model(ids[:1], stream=True).logits  # 76 tokens after the stem: two chunks of 64
    assert model(ids).hidden.shape == (2, 76, 32)
    assert torch.allclose(batch[1], alone[0], rtol=1e-10, atol=1e-10)
    assert torch.allclose(batch[0], streamed[0], rtol=1e-9, atol=1e-9)


def test_the_training_estimate_covers_a_pooled_stem():
    torch.manual_seed(0)
    cfg = EncoderConfig(vocab_size=9, d_model=48, n_layers=3, n_heads=4, mixer="linear", stem_kernel=15, stem_pool=4,
                        dropout=0.1, pooling="attention", pool_position_bins=16, chunk_tokens=512)
    model = Encoder(cfg).train()
    ids = torch.randint(5, 9, (2, 4001))
    needed = _saved_bytes(model, ids) + model.n_parameters() * 4 * 4
    estimate = memory.training_bytes(cfg, 2 * 4001, model.n_parameters())
    assert needed < estimate < 4 * needed


# -- the memory estimate --------------------------------------------------------------------------------------------

def _saved_bytes(model: Encoder, ids: torch.Tensor) -> int:
    """Bytes of the tensors autograd keeps for backward, each storage once."""
    seen = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(ids)
    return sum(seen.values())


@pytest.mark.parametrize(("mixer", "recompute"), [
    *((m, (False, False)) for m in ("linear", "hybrid", "favor", "softmax", "gla", "deltanet", "fnet", "synthesizer",
                                    "linformer")),
    *((m, r) for m in ("linear", "hybrid", "synthesizer") for r in ((True, False), (False, True), (True, True)))])
def test_the_training_estimate_covers_what_autograd_keeps(mixer, recompute):
    """The estimate is above the bytes saved for backward with the weights, gradients and AdamW's moments (and
    under recompute, one block's activations, rebuilt while its backward runs), and within 4x of that: neither a
    guard that lets an out-of-memory through nor one that refuses for nothing."""
    torch.manual_seed(0)
    n, layers = (383 if mixer in ("gla", "deltanet") else 1023), 3  # the scans' PyTorch form is slow on a CPU
    settings = dict(vocab_size=4101, d_model=48, n_layers=layers, n_heads=4, mixer=mixer, chunk_tokens=512,
                    max_len=n, dropout=0.1, pooling="attention", pool_position_bins=16, favor_features=32)
    cfg = EncoderConfig(**settings, checkpointing=recompute[0], checkpoint_mlp=recompute[1])
    model = Encoder(cfg).train()
    ids = torch.randint(5, 4101, (2, n))
    saved = _saved_bytes(model, ids)
    one_block = _saved_bytes(Encoder(EncoderConfig(**{**settings, "n_layers": 1})).train(), ids)
    needed = saved + model.n_parameters() * 4 * 4 + (one_block if any(recompute) else 0)
    estimate = memory.training_bytes(cfg, 2 * n, model.n_parameters())
    assert needed < estimate < 4 * needed


def test_the_estimate_scales_with_tokens_and_recompute():
    cfg = make_config("sequence", "base", longest_bp=100_000).model
    cfg = EncoderConfig(**{**cfg.to_dict(), "vocab_size": 9})
    assert cfg.checkpoint_mlp and not cfg.checkpointing and cfg.stem_pool == 4
    one = memory.training_bytes(cfg, 100_000, 10**7, amp=True)
    ten = memory.training_bytes(cfg, 1_000_000, 10**7, amp=True)
    assert 9 < (ten - 2 * 10**8) / (one - 2 * 10**8) < 11
    assert one < 2.5 * 2**30  # base, MLP recomputed: a 100 kbp sequence in about 2 GiB (measured on an H100: 1.4)
    plain = EncoderConfig(**{**cfg.to_dict(), "checkpoint_mlp": False})
    blocks = EncoderConfig(**{**cfg.to_dict(), "checkpoint_mlp": False, "checkpointing": True})
    assert memory.training_bytes(plain, 100_000, 10**7, amp=True) > one > 1.5 * memory.training_bytes(
        blocks, 100_000, 10**7, amp=True)


def test_available_memory_is_read_and_can_be_set(monkeypatch):
    assert memory.available_bytes(torch.device("cpu")) > 2**20
    monkeypatch.setenv("GENOLIN_MEMORY_GIB", "0.5")
    assert memory.available_bytes(torch.device("cpu")) == 2**29
    with pytest.raises(InputError, match=r"needs about 1.0 GiB, more than the 0.5 GiB of memory \(RAM\) available; "
                                         r"do less"):
        memory.check_fits(2**30, torch.device("cpu"), "this", "do less")


# -- the command line -----------------------------------------------------------------------------------------------

def test_train_stops_before_its_first_step_when_the_largest_batch_would_not_fit(tmp_path, long_set):
    """One line naming the longest sequence and the settings to change, exit status 1, and no run folder left."""
    out = tmp_path / "run"
    r = run("train", "--csv", long_set / "train.csv", "--val-csv", long_set / "val.csv", "--out", out,
            env={"GENOLIN_MEMORY_GIB": "0.01"})
    assert r.exit_code == 1, r.output
    line = r.output.strip().splitlines()[-1]
    assert line.startswith("genolin: error: training on a batch of") and "the longest training sequence 'train" in line
    assert re.search(r"bp, [\d,]+ tokens\) needs about [\d.]+ [MG]iB, more than the 11 MiB of memory \(RAM\) "
                     r"available; lower max_tokens \(now 32,768\)", line)
    assert "Traceback" not in r.output and not out.exists()
    (tmp_path / "mine").mkdir()  # a folder the user made stays, emptied of what the run wrote
    (tmp_path / "mine" / "notes.txt").write_text("x")
    r = run("train", "--csv", long_set / "train.csv", "--out", tmp_path / "mine", env={"GENOLIN_MEMORY_GIB": "0.01"})
    assert r.exit_code == 1 and sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]


def test_a_run_that_fails_before_its_first_checkpoint_leaves_nothing(tmp_path, long_set, monkeypatch):
    """A failure after the run folder was made (here: in the first epoch) removes what the run wrote, and the
    folder when the run made it; files that were there before stay."""
    from genolin.train import Trainer

    def fail(self):
        assert (self.out / "config.json").exists() and (self.out / ".lock").exists()
        raise RuntimeError("stopped in the first epoch")

    monkeypatch.setattr(Trainer, "fit", fail)
    out = tmp_path / "run"
    r = run("train", "--csv", long_set / "train.csv", "--out", out, "--set", "d_model=16")
    assert r.exit_code == 1 and "stopped in the first epoch" in r.output
    assert not out.exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text("{}")  # there before (a run's config.json is rewritten by the next run)
    (mine / "notes.txt").write_text("x")
    r = run("train", "--csv", long_set / "train.csv", "--out", mine, "--set", "d_model=16")
    assert r.exit_code == 1 and sorted(p.name for p in mine.iterdir()) == ["config.json", "notes.txt"]


def test_a_folder_in_use_by_another_run_is_left_alone(tmp_path, long_set):
    from genolin.checkpoint import lock_run_dir

    out = tmp_path / "busy"
    fd = lock_run_dir(out)
    (out / "config.json").write_text("the other run's")
    try:
        r = run("train", "--csv", long_set / "train.csv", "--out", out)
        assert r.exit_code == 1 and "is in use by another genolin train" in r.output
        assert (out / "config.json").read_text() == "the other run's" and (out / ".lock").exists()
    finally:
        os.close(fd)


def test_long_sequences_train_by_default_and_predict_longer_ones(tmp_path, long_set, genome):
    """The default preset on 3-6 kbp sequences: single bases through a convolution stem, linear attention,
    attention pooling over relative
    positions, the recipe in the run log; predict scores a 40 kbp sequence (longer than any in training) and a
    table row over csv's field limit."""
    out = tmp_path / "run"
    r = run("train", "--csv", long_set / "train.csv", "--val-csv", long_set / "val.csv", "--out", out, "--epochs", 2)
    assert r.exit_code == 0, r.output
    config = json.loads((out / "config.json").read_text())["train"]
    assert (config["k"], config["stride"], config["model"]["mixer"]) == (1, 1, "linear")
    assert (config["model"]["stem_kernel"], config["model"]["stem_pool"]) == (15, 1)
    assert config["model"]["pool_position_bins"] == 128 and config["model"]["kmer_logits"] == 0
    log = (out / "train.log").read_text()
    assert ("single bases, a 15-wide convolution stem; 2 x 64 linear blocks; attention pooling with 128 position "
            "bins") in log
    assert "no bag-of-k-mers term" in log
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[-2])
    assert record["items_per_s"] > 0 and record["peak_memory_gib"] > 0
    fasta = tmp_path / "new.fa"
    fasta.write_text(f">far\n{genome[:40_000]}\n>near\n{genome[50_000:54_000]}\n")
    r = run("predict", "--model", out, "--fasta", fasta, "--out", tmp_path / "p.tsv", "--shift-average", 0)
    assert r.exit_code == 0, r.output
    rows = [line.split("\t") for line in (tmp_path / "p.tsv").read_text().splitlines()]
    assert [row[:2] for row in rows[1:]] == [["far", "40000"], ["near", "4000"]]
    assert all(0 <= float(row[2]) <= 1 for row in rows[1:])
    table = tmp_path / "big.csv"
    table.write_text(f"id,sequence\nbig,{genome[:150_000]}\n")
    r = run("predict", "--model", out, "--csv", table, "--out", tmp_path / "q.tsv", "--no-rc-average",
            "--shift-average", 0)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "q.tsv").read_text().splitlines()[1].startswith("big\t150000\t")
    r = run("predict", "--model", out, "--csv", table, "--out", tmp_path / "z.tsv", env={"GENOLIN_MEMORY_GIB": "0.001"})
    assert r.exit_code == 1 and "scoring a batch of" in r.output and "'big': 150,000 bp" in r.output
    assert not (tmp_path / "z.tsv").exists()


def test_centre_crops_train_and_say_so(tmp_path, long_set):
    out = tmp_path / "run"
    r = run("train", "--csv", long_set / "train.csv", "--val-csv", long_set / "val.csv", "--out", out, "--epochs", 2,
            "--set", "crop_min_bp=1000", "--set", "crop_growth=0.5")
    assert r.exit_code == 0, r.output
    assert json.loads((out / "config.json").read_text())["train"]["crop_min_bp"] == 1000
    assert "training crops from 1,000 bp around the centre" in (out / "train.log").read_text()
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any(rec.get("epoch") == 2 and rec.get("train_loss") is not None for rec in records)


def test_k_mer_tokens_with_the_default_preset_train_on_short_sets(tmp_path):
    lines = (GUE_TATA / "train.csv").read_text().splitlines()
    (tmp_path / "t.csv").write_text("\n".join(lines[:101]) + "\n")
    r = run("train", "--csv", tmp_path / "t.csv", "--out", tmp_path / "run", "--set", "k=6", "--set", "stride=2",
            "--max-steps", 3)
    assert r.exit_code == 0, r.output
    config = json.loads((tmp_path / "run" / "config.json").read_text())["train"]
    assert (config["k"], config["stride"], config["model"]["kmer_logits"]) == (6, 2, 0)


def test_running_out_of_memory_all_the_same_is_one_line(tmp_path, monkeypatch):
    """The estimate is not exact: an allocator's out-of-memory in a training step or while scoring still stops
    with one line naming what ran out and what to change."""
    from genolin.inference import Predictor
    from genolin.train import Trainer

    lines = (GUE_TATA / "train.csv").read_text().splitlines()
    (tmp_path / "t.csv").write_text("\n".join(lines[:41]) + "\n")

    def no_memory(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:119] DefaultCPUAllocator: can't allocate memory")

    with monkeypatch.context() as m:
        m.setattr(Trainer, "_micro_step", no_memory)
        r = run("train", "--csv", tmp_path / "t.csv", "--out", tmp_path / "oom", "--set", "d_model=16")
    assert r.exit_code == 1 and "genolin: error: out of memory training on a batch of" in r.output
    assert "the longest training sequence" in r.output and not (tmp_path / "oom").exists()
    r = run("train", "--csv", tmp_path / "t.csv", "--out", tmp_path / "ok", "--set", "d_model=16", "--max-steps", 1)
    assert r.exit_code == 0, r.output
    monkeypatch.setattr(Predictor, "probabilities", no_memory)
    r = run("predict", "--model", tmp_path / "ok", "--csv", tmp_path / "t.csv", "--out", tmp_path / "p.tsv")
    assert r.exit_code == 1 and "t.csv: out of memory scoring a batch of" in r.output and "--batch-size" in r.output
    assert "Traceback" not in r.output and not (tmp_path / "p.tsv").exists()
    r = run("predict", "--model", tmp_path / "ok", "--csv", tmp_path / "t.csv", "--out", tmp_path / "p.tsv",
            env={"GENOLIN_MEMORY_GIB": "lots"})
    assert r.exit_code == 1 and "GENOLIN_MEMORY_GIB: expected a number of GiB above 0, got 'lots'" in r.output


@pytest.mark.slow
def test_the_long_context_benchmark_runs_end_to_end(tmp_path):
    """benchmarks/long_context.py on a sliver of its data: windows of two lengths from the shared genomes, one held
    out, one seed, the regression beside, the tables and JSON written."""
    import subprocess
    import sys

    from conftest import REPO, shared_file

    shared_file("bacteria/CJEJUNI_2/CJEJUNI_2.fasta.gz")
    shared_file("ecoli_k12/regulondb_10.9_tss.bed")
    out = tmp_path / "lc"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "long_context.py"), "--lengths", "1000,2000",
                           "--max-per-genome", "12", "--seeds", "0", "--held-out", "CJEJUNI_2", "--max-minutes", "0.2",
                           "--set", "d_model=16", "--data-dir", str(tmp_path / "data"), "--work", str(tmp_path / "w"),
                           "--score-lengths", "1000", "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.with_suffix(".json").read_text())
    rows = [r for r in result["rows"] if r.get("held_out") == "CJEJUNI_2"]
    assert {r.get("length") for r in rows} >= {1000, 2000}
    (long_run,) = next(r for r in rows if r["length"] == 2000)["genolin"]  # the 2 kb model scored on 1 kb too
    assert 0 <= long_run["test_at"]["1000"]["auroc"] <= 1
    assert "test_at" not in next(r for r in rows if r["length"] == 1000)["genolin"][0]
    assert isinstance(long_run["pool_slope"], float)  # the long recipe's learned slope, read from its weights
    assert isinstance(long_run["best_epoch"], int) and isinstance(long_run["memorising"], bool)  # the kept weights
    table = out.with_suffix(".md").read_text()
    assert "| best (memorising) |" in table and f"| {long_run['best_epoch']} (" in table
    assert "scored at (bp)" in table
    assert "design document 000" in table.lower()


def test_distance_slope_pooling_equals_its_definition_forward_and_backward_in_float64():
    """pool_distance_slope: each token's pooling score gains scale x slope x log2(1 + |i - (n - 1) / 2|) / 16 (n its
    sequence's real tokens); the slope starts at 0 (plain pooling) and learns."""
    torch.manual_seed(2)
    cfg = EncoderConfig(vocab_size=9, d_model=12, n_layers=1, n_heads=3, pooling="attention", pool_position_bins=5,
                        pool_position_scale=2.5, pool_distance_slope=True)
    model = Encoder(cfg).double()
    lengths = [13, 6, 29]
    hidden = torch.randn(3, 29, 12, dtype=torch.float64)
    mask = torch.arange(29)[None] < torch.tensor(lengths)[:, None]
    plain = _pool_reference(hidden, mask, model.pool_score.weight[0], model.pool_score.bias[0],
                            2.5 * model.pool_position)
    assert torch.allclose(model.pool(hidden, mask), plain, atol=1e-12)  # slope 0: the bins alone
    with torch.no_grad():
        model.pool_slope.fill_(-0.7)
        model.pool_position.normal_()
    out = []
    for b, n in enumerate(lengths):
        bins = [min(i * 5 // n, 4) for i in range(n)]
        far = torch.log2(1 + (torch.arange(n, dtype=torch.float64) - (n - 1) / 2).abs()) / 16
        s = hidden[b, :n] @ model.pool_score.weight[0] + model.pool_score.bias[0] + 2.5 * model.pool_position[bins] \
            + 2.5 * model.pool_slope * far
        out.append((torch.softmax(s, 0)[:, None] * hidden[b, :n]).sum(0))
    ref = torch.stack(out)
    pooled = model.pool(hidden, mask)
    assert torch.linalg.norm(pooled - ref) / torch.linalg.norm(ref) < 1e-12
    g = torch.randn_like(ref)
    (a,), (b,) = (torch.autograd.grad((x * g).sum(), [model.pool_slope]) for x in (pooled, ref))
    assert abs(a - b) <= 1e-12 * abs(b) and b != 0
    with pytest.raises(ValueError, match="pool_distance_slope"):
        EncoderConfig(pool_distance_slope=True)  # mean pooling


def test_distance_slope_starts_at_its_power_and_power_1_weighs_tokens_by_one_over_distance():
    """pool_distance_power p: before training each token's pooling weight is (1 + distance)^-p, normalised (all
    tokens alike otherwise), at any position scale, odd and even lengths; hidden = the identity, so the pooled
    vector is the weight vector itself. To 1e-6: the starting slope is a float32."""
    for n in (31, 24):
        d = (torch.arange(n, dtype=torch.float64) - (n - 1) / 2).abs()
        for power, scale in ((1.0, 32.0), (1.0, 2.5), (2.5, 32.0), (0.0, 32.0)):
            cfg = EncoderConfig(vocab_size=9, d_model=32, n_layers=1, n_heads=2, pooling="attention",
                                pool_distance_slope=True, pool_distance_power=power, pool_position_scale=scale)
            model = Encoder(cfg).double()
            with torch.no_grad():
                model.pool_score.weight.zero_()
            hidden = torch.eye(n, 32, dtype=torch.float64)[None]  # (1, n, 32): token i is unit vector i
            weights = model.pool(hidden, torch.ones(1, n, dtype=torch.bool))[0, :n]
            w = (1 + d) ** -power
            assert torch.allclose(weights, w / w.sum(), rtol=1e-6, atol=0)
