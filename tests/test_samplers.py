"""trainer.sampler: which examples make a training batch (appzoo/data/sampler.py).

Per sampler: determinism by (seed, epoch), coverage of the examples in an
epoch, batch composition and the data-parallel split; the classes and
duplicate keys each reader gives; the config errors; and an exact resume and
an in-batch run through the CLI.
"""
import os
from collections import Counter

import numpy as np
import pytest

from appzoo.data.sampler import SAMPLERS, check_class_count, choose_sampler, train_batches
from appzoo.errors import ConfigError
from appzoo.run.plan import validate
from appzoo.run.trainer import Trainer
from conftest import cli, crash_after_step, read_jsonl
from test_plan_checks import load
from tasks.sequence_labeling.reader import SequenceLabelingReader
from tasks.text_classification.reader import ClassificationReader
from tasks.text_matching.reader import MatchingReader
from tasks.text_matching.siamese import PairwiseMatchingReader

N = 103
LENGTHS = [int(x) for x in np.random.RandomState(0).randint(1, 60, N)]
CLASSES = [0] * 60 + [1] * 30 + [2] * 10 + [3] * 3  # imbalanced: 60 / 30 / 10 / 3
# pairs with repeated queries and positives: query i % 17, positive 100 + i % 41
KEYS = [(i % 17, 100 + i % 41) for i in range(N)]


def batches(sampler, epoch=0, seed=7, n=N, batch_size=8, **kwargs):
    return train_batches(n, batch_size, seed=seed, epoch=epoch, sampler=sampler, lengths=LENGTHS[:n],
                         classes=CLASSES[:n], keys=KEYS[:n], **kwargs)


# ---- every sampler -------------------------------------------------------------------
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_same_seed_and_epoch_same_batches_other_epoch_or_seed_other_order(sampler):
    assert batches(sampler) == batches(sampler)
    assert batches(sampler, epoch=1) != batches(sampler)
    assert batches(sampler, seed=8) != batches(sampler)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_data_parallel_ranks_slice_one_global_batch(sampler):
    alone = batches(sampler, batch_size=8)
    ranks = [batches(sampler, batch_size=4, rank=r, world_size=2) for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1])  # every rank runs the same steps
    for a, b in zip(*ranks):
        assert len(a) == len(b) == 4
        assert sampler in ("balanced", "m_per_class") or not set(a) & set(b)  # a small class may repeat
    if sampler in ("random", "no_duplicates"):  # the same global batches, full ones only
        assert [sorted(a + b) for a, b in zip(*ranks)] == [sorted(x) for x in alone if len(x) == 8]


# ---- coverage -------------------------------------------------------------------------
@pytest.mark.parametrize("sampler", ["random", "by_length"])
def test_every_example_once_per_epoch(sampler):
    for epoch in range(3):
        out = batches(sampler, epoch=epoch)
        assert sorted(i for b in out for i in b) == list(range(N))
        assert sorted(len(b) for b in out) == [N % 8] + [8] * (N // 8)


@pytest.mark.parametrize("sampler", ["balanced", "m_per_class"])
def test_every_example_of_a_class_is_drawn_before_any_is_drawn_twice(sampler):
    out = batches(sampler, power=0.0, m=2)
    assert [len(b) for b in out] == [8] * (N // 8)  # as many batches as random, all full
    drawn = Counter()
    for b in out:  # after each batch, every example of a class is drawn k or k + 1 times
        drawn.update(b)
        for c in set(CLASSES):
            counts = [drawn[i] for i in range(N) if CLASSES[i] == c]
            assert max(counts) - min(counts) <= 1
    assert min(drawn[i] for i in range(N) if CLASSES[i] == 3) >= 2  # the rare class did cycle


# ---- composition ----------------------------------------------------------------------
def test_by_length_sorts_within_mega_batches_and_shuffles_batch_order():
    out = batches("by_length", mega_batches=3, n=96)  # 4 mega-batches of 3 batches
    assert all(sorted(b, key=lambda i: LENGTHS[i]) == b for b in out)
    spans = [max(LENGTHS[i] for i in b) - min(LENGTHS[i] for i in b) for b in out]
    assert np.mean(spans) < 0.5 * np.mean([max(LENGTHS[i] for i in b) - min(LENGTHS[i] for i in b)
                                           for b in batches("random", n=96)])


@pytest.mark.parametrize("power,expected", [(0.0, [0.25] * 4), (1.0, [60 / N, 30 / N, 10 / N, 3 / N]),
                                            (0.5, np.sqrt([60, 30, 10, 3]) / np.sqrt([60, 30, 10, 3]).sum())])
def test_balanced_draws_classes_by_a_power_of_their_count(power, expected):
    drawn = Counter(CLASSES[i] for epoch in range(60) for b in batches("balanced", epoch=epoch, power=power)
                    for i in b)
    share = np.array([drawn[c] for c in range(4)]) / sum(drawn.values())
    np.testing.assert_allclose(share, expected, atol=0.02)


@pytest.mark.parametrize("m,batch_size,world_size", [(2, 8, 1), (4, 8, 1), (2, 4, 2)])
def test_m_per_class_takes_m_of_each_of_batch_size_over_m_classes(m, batch_size, world_size):
    for rank in range(world_size):
        for b in batches("m_per_class", m=m, batch_size=batch_size, rank=rank, world_size=world_size):
            counts = Counter(CLASSES[i] for i in b)
            assert len(counts) == batch_size // m and set(counts.values()) == {m}


def test_no_duplicates_keeps_batches_full_and_free_of_repeats():
    for epoch in range(3):
        out = batches("no_duplicates", epoch=epoch)
        sizes = [len(b) for b in out]
        short = next(k for k, size in enumerate(sizes) if size < 8)
        assert sizes[:short] == [8] * short and all(1 < s < 8 for s in sizes[short:])  # short ones end the epoch
        used = [i for b in out for i in b]
        assert len(used) == len(set(used)) and len(used) >= N - 2  # at most a lone pair or two wait
        for b in out:
            keys = [k for i in b for k in KEYS[i]]
            assert len(keys) == len(set(keys))
    distinct = [(i, 1000 + i) for i in range(N)]  # nothing to defer: every pair once, as random
    out = train_batches(N, 8, seed=7, epoch=0, sampler="no_duplicates", keys=distinct)
    assert sorted(i for b in out for i in b) == list(range(N)) and [len(b) for b in out] == [8] * 12 + [7]


def test_no_duplicates_defers_what_cannot_fill_a_batch_and_drops_a_lone_pair():
    keys = [(0, 1)] * 5 + [(i, 100 + i) for i in range(2, 9)]  # five copies of one pair, seven distinct ones
    for epoch in range(5):
        out = train_batches(len(keys), 4, seed=0, epoch=epoch, sampler="no_duplicates", keys=keys)
        assert [len(b) for b in out[:2]] == [4, 4] and all(len(b) > 1 for b in out)
        assert all(sum(1 for i in b if i < 5) <= 1 for b in out)  # never two copies in a batch
        used = [i for b in out for i in b]
        assert len(used) == len(set(used)) and set(range(5, 12)) <= set(used)  # only copies wait


def test_choose_sampler_and_group_by_length():
    assert choose_sampler(None, None, in_batch=False) == "by_length"
    assert choose_sampler(None, None, in_batch=True) == "no_duplicates"
    assert choose_sampler(None, True, in_batch=True) == "by_length"
    assert choose_sampler(None, False, in_batch=False) == "random"
    assert choose_sampler(None, False, in_batch=True) == "no_duplicates"
    assert choose_sampler("balanced", False, in_batch=False) == "balanced"


# ---- what each reader gives the sampler -----------------------------------------------
def test_classification_classes_are_the_label_or_the_rarest_label():
    assert ClassificationReader().sampling_classes([{"labels": 2}, {"labels": 0}]) == [2, 0]
    multi = [np.array(v, dtype="float32") for v in ([1, 1, 0], [1, 0, 0], [1, 0, 1], [0, 0, 0], [1, 1, 1])]
    # label counts 4, 2, 2: the rarest of [0, 1] is 1; of [0, 2] is 2; a tie 1/2 takes the first
    classes = ClassificationReader(multi_label=True).sampling_classes([{"labels": v} for v in multi])
    assert classes == [1, 0, 2, -1, 1]


def test_tagging_classes_are_the_rarest_tag_and_o_alone_is_its_own():
    O, B, I, C = 0, 1, 2, 3  # noqa: E741 - tag ids, counted 8, 2, 1, 1
    features = [{"labels": [O, O, O]}, {"labels": [O, B, I, O]}, {"labels": [B, O, C]}, {"labels": [O, O]}]
    assert SequenceLabelingReader().sampling_classes(features) == [O, I, C, O]


def test_matching_classes_and_duplicate_keys():
    assert MatchingReader().sampling_classes([{"labels": 1}, {"labels": 0}]) == [1, 0]
    assert PairwiseMatchingReader().sampling_classes([]) is None
    assert PairwiseMatchingReader(negatives="labelled").duplicate_keys([]) is None
    pair = {"query_input_ids": [1, 5, 2], "positive_input_ids": [1, 7, 2]}
    assert PairwiseMatchingReader(negatives="in_batch").duplicate_keys([pair]) == [((1, 5, 2), (1, 7, 2))]
    for reader in (ClassificationReader(), SequenceLabelingReader(), MatchingReader()):
        assert reader.sampling_classes([]) == [] and reader.duplicate_keys([]) is None


def test_the_collate_safety_net_counts_what_it_drops():
    reader = PairwiseMatchingReader(negatives="in_batch")
    pairs = [{"query_input_ids": [1, q, 2], "positive_input_ids": [1, p, 2]} for q, p in ((5, 7), (5, 8), (6, 9))]
    assert len(reader.collate(pairs, 0)["query_input_ids"]) == 2 and reader.dropped_duplicates == 1


# ---- config errors --------------------------------------------------------------------
CLS = "examples/cls_ernie_fc_ch.json"
INFONCE = "examples/mtch_ernie_siamese_infonce.json"
SIMNET = "examples/mtch_ernie_pairwise_simnet_with_circle_loss.json"


@pytest.mark.parametrize("path,overrides,match", [
    (CLS, ["trainer.sampler=random", "trainer.group_by_length=true"],
     r"trainer\.group_by_length: true contradicts trainer\.sampler 'random'"),
    (CLS, ["trainer.sampler=by_length", "trainer.group_by_length=false"],
     r"trainer\.group_by_length: false contradicts trainer\.sampler 'by_length'"),
    (CLS, ["trainer.sampler=m_per_class", "trainer.sampler_m=3", "trainer.batch_size=16"],
     r"trainer\.sampler_m: .*batch_size 16 and sampler_m 3"),
    (CLS, ["trainer.sampler_power=1.5"], r"trainer\.sampler_power: must be in \[0, 1\], got 1\.5"),
    (CLS, ["trainer.sampler=round_robin"], r"trainer\.sampler"),
    (CLS, ["trainer.sampler=no_duplicates"], r"trainer\.sampler: 'no_duplicates' .*'text_classification'"),
    (INFONCE, ["trainer.sampler=balanced"], r"trainer\.sampler: 'balanced' .*have no class.*or no_duplicates"),
    (SIMNET, ["trainer.sampler=m_per_class"], r"trainer\.sampler: 'm_per_class' .*have no class"),
])
def test_a_sampler_that_does_not_fit_is_refused_at_plan_time(tmp_path, path, overrides, match):
    with pytest.raises(ConfigError, match=match):
        validate(load(path, tmp_path, *overrides))


def test_too_few_classes_for_m_per_class_is_refused_before_training():
    with pytest.raises(ConfigError, match=r"trainer\.sampler_m: .*32 / 2 = 16 classes per batch, but the "
                                          r"training data has 4"):
        check_class_count("m_per_class", 32, 2, [0, 1, 2, 3, 3])
    check_class_count("m_per_class", 8, 2, [0, 1, 2, 3])


# ---- through the CLI ------------------------------------------------------------------
EXAMPLE = "examples/cls_ernie_fc_with_focal.json"
FAST = ["--set", "trainer.batch_size=8", "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false",
        "--set", "dataset_reader.max_seq_len=32", "--set", "trainer.logging_steps=1"]


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["balanced", "m_per_class"])
def test_resume_with_a_class_sampler_matches_an_uninterrupted_run(tmp_path, monkeypatch, sampler):
    args = [*FAST, "--set", f"trainer.sampler={sampler}", "--set", "trainer.sampler_m=2",
            "--set", "trainer.max_steps=4", "--set", "trainer.eval_steps=2", "--set", "trainer.keep_checkpoints=3"]
    seen = []
    real = Trainer._train_step

    def record(self, micro_batches):
        seen.append([int(f["labels"]) for b in micro_batches for f in b])
        return real(self, micro_batches)

    monkeypatch.setattr(Trainer, "_train_step", record)
    straight = str(tmp_path / "straight")
    assert cli(EXAMPLE, straight, *args) == 0
    if sampler == "m_per_class":  # 2 of each of 4 classes
        assert all(sorted(Counter(b).values()) == [2, 2, 2, 2] for b in seen)

    crashed = str(tmp_path / "crashed")
    with crash_after_step(monkeypatch, 3), pytest.raises(RuntimeError, match="simulated crash"):
        cli(EXAMPLE, crashed, *args)
    assert cli(EXAMPLE, crashed, *args, "--set", "trainer.resume=true") == 0
    logs = [{r["step"]: r["loss"] for r in read_jsonl(os.path.join(d, "train_log.jsonl")) if "loss" in r}
            for d in (straight, crashed)]
    assert logs[1][4] == pytest.approx(logs[0][4], rel=1e-5)  # step 4 trained on the same batch


@pytest.mark.slow
@pytest.mark.parametrize("sampler", [None, "random"])
def test_in_batch_negatives_default_to_full_duplicate_free_batches(tmp_path, monkeypatch, sampler):
    sizes, drops = [], []
    real = PairwiseMatchingReader.collate

    def record(self, features, pad_id):
        out = real(self, features, pad_id)
        if "positive_input_ids" in features[0]:
            sizes.append(len(out["query_input_ids"]))
            drops.append(self.dropped_duplicates)
        return out

    monkeypatch.setattr(PairwiseMatchingReader, "collate", record)
    chosen = ["--set", f"trainer.sampler={sampler}"] if sampler else []
    assert cli(INFONCE, str(tmp_path / "out"), *FAST[2:], *chosen, "--set", "trainer.batch_size=32",
               "--set", "trainer.max_steps=3", "--set", "trainer.eval_steps=3", "--do", "train") == 0
    if sampler is None:  # no_duplicates: the collate's safety net never fires
        assert sizes == [32, 32, 32] and drops[-1] == 0
    else:  # data/match/train.tsv repeats queries and positives: random batches lose pairs
        assert min(sizes) < 32 and drops[-1] == 96 - sum(sizes)
