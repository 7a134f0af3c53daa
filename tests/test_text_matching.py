"""Text matching: triple building, readers, threshold selection, model forwards."""
import inspect

import numpy as np
import paddle
import pytest

from appzoo.errors import ConfigError, DataError
from appzoo.losses import cosent_loss
from appzoo.metrics.matching import best_threshold, matching_metrics
from appzoo.registry import MODELS, READERS
from conftest import tiny_ernie
from tasks.text_matching.triples import build_triples


def pair(a, b, positive, line):
    return {"text_a": a, "text_b": b, "positive": positive, "source": f"f.tsv:{line}"}


def write(path, text, bom=False):
    path.write_text(("\ufeff" if bom else "") + text, encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------- triples

PAIRS = ([pair("q1", f"p{i}", True, i) for i in range(3)] + [pair("q1", f"n{i}", False, 10 + i) for i in range(4)]
         + [pair("q2", "x", True, 20), pair("q2", "y", False, 21), pair("q3", "z", True, 30)])


def test_triples_group_by_query_positives_times_negatives():
    triples = build_triples(PAIRS, max_per_query=100)
    assert [(t["query"], t["positive"], t["negative"]) for t in triples] == (
        [("q1", f"p{i}", f"n{j}") for i in range(3) for j in range(4)] + [("q2", "x", "y")])
    assert triples[0]["source"] == "f.tsv:0" and triples[-1]["source"] == "f.tsv:20"  # the positive pair's line


def test_triples_cap_per_query_is_seeded_and_keeps_file_order():
    first = build_triples(PAIRS, max_per_query=5, seed=3)
    assert first == build_triples(PAIRS, max_per_query=5, seed=3)
    q1 = [(t["positive"], t["negative"]) for t in first if t["query"] == "q1"]
    assert len(q1) == 5 and q1 == sorted(q1)  # a subset of the 12, in file order
    assert [t["query"] for t in first].count("q2") == 1  # under the cap: untouched
    others = {tuple((t["positive"], t["negative"]) for t in build_triples(PAIRS, max_per_query=5, seed=s)
                    if t["query"] == "q1") for s in range(10)}
    assert len(others) > 1  # the seed matters


def test_random_negatives_never_the_query_or_its_positives():
    triples = build_triples(PAIRS, max_per_query=1, random_negatives=2, seed=0)
    assert triples == build_triples(PAIRS, max_per_query=1, random_negatives=2, seed=0)
    # per query: the capped labelled triples, then 2 random negatives per positive pair
    assert [t["query"] for t in triples] == ["q1"] * (1 + 3 * 2) + ["q2"] * (1 + 2) + ["q3"] * 2
    for t in triples:
        assert t["negative"] != t["query"]
        assert t["negative"] not in {p["text_b"] for p in PAIRS if p["text_a"] == t["query"] and p["positive"]}


# ---------------------------------------------------------------- readers

def test_mrpc_layout_reads_by_configuration_alone(tmp_path):
    path = write(tmp_path / "test.tsv",
                 "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                 '1\t11\t12\tHe said " the witness " lied .\t" The witness " lied , he said .\n'
                 "0\t13\t14\tShares fell 5 % .\tShares rose .\n", bom=True)
    reader = READERS.get("text_matching", "t")(format="tsv", header=1, label_column=0, text_a_column="#1 String",
                                               text_b_column=4, quoting=False)
    examples = reader.read(path, "test")
    assert [(e["text_a"], e["text_b"], e["label"]) for e in examples] == [
        ('He said " the witness " lied .', '" The witness " lied , he said .', "1"),
        ("Shares fell 5 % .", "Shares rose .", "0")]
    assert examples[1]["source"] == f"{path}:3"


def test_jsonl_pairs_and_custom_labels(tmp_path):
    path = write(tmp_path / "d.jsonl", '{"q": "a", "d": "b", "y": "yes"}\n{"q": "c", "d": "d", "y": "no"}\n')
    reader = READERS.get("text_matching", "t")(format="jsonl", text_a_column="q", text_b_column="d",
                                               label_column="y", positive_label="yes", negative_label="no")
    examples = reader.read(path, "train")
    assert reader.build_labels(examples) == ["no", "yes"]
    assert reader.model_args(["no", "yes"], examples) == {"num_labels": 2, "class_counts": [1, 1]}


@pytest.mark.parametrize("text, message", [
    ("a\tb\t2\n", r"d\.tsv:1: label '2' is neither the positive label '1' nor the negative label '0'"),
    ("a\tb\t1\nc\td\n", r"d\.tsv:2: expected a column 2 for 'label'"),
    ("a\tb\t1\n \tb\t0\n", r"d\.tsv:2: empty text_a"),
])
def test_bad_rows_name_file_and_line(tmp_path, text, message):
    reader = READERS.get("text_matching", "t")()
    with pytest.raises(DataError, match=message):
        reader.read(write(tmp_path / "d.tsv", text), "train")


def test_labels_written_as_floats_are_the_same_labels(tmp_path):
    reader = READERS.get("text_matching", "t")()
    examples = reader.read(write(tmp_path / "d.tsv", "a\tb\t1.0\nc\td\t0.0\ne\tf\t1\n"), "train")
    assert [e["label"] for e in examples] == ["1", "0", "1"]
    with pytest.raises(DataError, match=r"d\.tsv:1: label '0\.5' is neither"):
        reader.read(write(tmp_path / "d.tsv", "a\tb\t0.5\n"), "train")


def test_a_header_row_read_as_data_says_how_to_skip_it(tmp_path):
    path = write(tmp_path / "d.tsv", "query\tdoc\tlabel\na\tb\t1\n")
    with pytest.raises(DataError, match=r"d\.tsv:1: label 'label' is neither .*; if this line is a header row, "
                                        r"set dataset_reader\.header=1"):
        READERS.get("text_matching", "t")().read(path, "train")
    examples = READERS.get("text_matching", "t")(header=1).read(path, "train")
    assert [(e["text_a"], e["label"]) for e in examples] == [("a", "1")]


def test_predict_file_may_leave_out_labels(tmp_path):
    reader = READERS.get("text_matching_siamese", "t")()
    examples = reader.read(write(tmp_path / "p.tsv", "a\tb\nc\td\n"), "predict")
    assert [e["label"] for e in examples] == [None, None]


def test_pairwise_reader_builds_triples_or_positive_pairs(tmp_path):
    path = write(tmp_path / "t.tsv", "q\tp\t1\nq\tn\t0\nq\tp\t1\nr\ts\t1\n")
    Pairwise = READERS.get("text_matching_pairwise", "t")
    triples = Pairwise().read(path, "train")
    assert [(t["query"], t["positive"], t["negative"]) for t in triples] == [("q", "p", "n")]
    positives = Pairwise(negatives="in_batch").read(path, "train")
    assert [(t["query"], t["positive"]) for t in positives] == [("q", "p"), ("r", "s")]  # duplicates dropped
    assert Pairwise(negatives="in_batch").model_args(["0", "1"], positives) == {"negatives": "in_batch"}
    dev = Pairwise().read(path, "dev")  # every other split is labelled pairs
    assert [e["label"] for e in dev] == ["1", "0", "1", "1"]


def test_pairwise_reader_triples_file(tmp_path):
    path = write(tmp_path / "t.jsonl", '{"query": "q", "positive": "p", "negative": "n"}\n'
                                       '{"query": "q", "positive": "p"}\n')
    reader = READERS.get("text_matching_pairwise", "t")(format="jsonl", train_format="triples")
    with pytest.raises(DataError, match=r"t\.jsonl:2: missing field 'negative' for 'negative'"):
        reader.read(path, "train")


def test_pairwise_reader_without_triples_says_what_to_do(tmp_path):
    path = write(tmp_path / "t.tsv", "q\tp\t1\nr\tn\t0\n")
    with pytest.raises(DataError, match=r"t\.tsv: no training triples: .*random_negatives"):
        READERS.get("text_matching_pairwise", "t")().read(path, "train")
    items = READERS.get("text_matching_pairwise", "t")(random_negatives=1).read(path, "train")
    assert [(t["query"], t["positive"]) for t in items] == [("q", "p")] and items[0]["negative"] in ("r", "n")


@pytest.mark.parametrize("kwargs, message", [
    ({"positive_label": "0"}, r"dataset_reader\.negative_label: must differ from positive_label"),
    ({"max_triples_per_query": 0}, r"dataset_reader\.max_triples_per_query: must be >= 1, got 0"),
    ({"random_negatives": -1}, r"dataset_reader\.random_negatives: must be >= 0, got -1"),
    ({"random_negatives": 2, "negatives": "in_batch"}, r"dataset_reader\.random_negatives: only used when"),
])
def test_reader_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        READERS.get("text_matching_pairwise", "t")(**kwargs)


def test_in_batch_collate_drops_duplicate_queries_and_positives():
    reader = READERS.get("text_matching_pairwise", "t")(negatives="in_batch")
    features = [{"query_input_ids": [2, 5], "positive_input_ids": [2, 6]},
                {"query_input_ids": [2, 5], "positive_input_ids": [2, 7]},   # same query
                {"query_input_ids": [2, 8], "positive_input_ids": [2, 6]},   # same positive
                {"query_input_ids": [2, 9, 9], "positive_input_ids": [2, 4]}]
    batch = reader.collate(features, pad_id=0)
    assert set(batch) == {"query_input_ids", "positive_input_ids"}
    np.testing.assert_array_equal(batch["query_input_ids"], [[2, 5, 0], [2, 9, 9]])


# ---------------------------------------------------------------- threshold

def brute_force_best_f1(gold, scores):
    best = 0.0
    for t in sorted(set(scores)):
        pred = [s >= t for s in scores]
        tp = sum(p and g for p, g in zip(pred, gold))
        best = max(best, 2 * tp / (sum(pred) + sum(gold)))
    return best


def brute_force_best_accuracy(gold, scores):
    cuts = sorted(set(scores)) + [max(scores) + 1]  # the last: every pair called negative
    return max(sum((s >= t) == bool(g) for s, g in zip(scores, gold)) / len(gold) for t in cuts)


def test_best_threshold_matches_brute_force_for_f1_and_accuracy():
    rng = np.random.RandomState(0)
    for _ in range(20):
        gold = rng.randint(0, 2, size=30) * (rng.rand(30) < rng.rand())  # some sets mostly or all negative
        scores = np.round(rng.rand(30), 1)  # ties on purpose
        threshold, f1 = best_threshold(gold, scores)
        assert f1 == pytest.approx(brute_force_best_f1(gold.tolist(), scores.tolist()))
        assert matching_metrics(gold, scores, threshold)["f1"] == pytest.approx(f1)
        threshold, accuracy = best_threshold(gold, scores, "accuracy")
        assert accuracy == pytest.approx(brute_force_best_accuracy(gold.tolist(), scores.tolist()))
        assert matching_metrics(gold, scores, threshold)["accuracy"] == pytest.approx(accuracy)


def test_best_threshold_is_halfway_to_the_next_score():
    assert best_threshold([1, 1, 0, 0], [0.9, 0.8, 0.4, 0.1]) == (pytest.approx(0.6), 1.0)
    assert best_threshold([0, 0], [0.3, 0.2])[1] == 0.0
    # accuracy: the higher threshold of a tie; above every score when calling every pair negative is best
    assert best_threshold([1, 0, 1, 0], [0.9, 0.8, 0.4, 0.1], "accuracy") == (pytest.approx(0.85), 0.75)
    assert best_threshold([0, 1, 0, 0], [0.9, 0.8, 0.4, 0.1], "accuracy") == (pytest.approx(1.9), 0.75)


def test_threshold_is_tuned_on_dev_saved_and_reused():
    reader = READERS.get("text_matching", "t")()
    examples = [{"text_a": "a", "text_b": str(i), "label": g, "source": f"d:{i}"}
                for i, g in enumerate("1100")]
    predictions = [{"score": s, "probs": np.array([1 - s, s])} for s in (0.9, 0.3, 0.2, 0.1)]
    labels = ["0", "1"]
    assert reader.evaluate(examples, predictions, labels)["threshold"] == 0.5  # nothing tuned yet
    state = reader.fit(examples, predictions, labels)
    assert state == {"threshold": pytest.approx(0.25), "tuned": True, "dev_f1": 1.0}
    metrics = reader.evaluate(examples, predictions, labels)
    assert metrics["f1"] == 1.0 and metrics["auc"] == 1.0
    assert metrics["argmax_f1"] == pytest.approx(2 / 3)  # pointwise: also at the argmax (0.5 here)

    fresh = READERS.get("text_matching", "t")()
    fresh.load_state(state)  # what the runner does with best/reader_state.json
    rows = fresh.prediction_rows(examples, predictions, labels)
    assert [r["label"] for r in rows] == ["1", "1", "0", "0"]
    assert set(rows[0]) == {"text_a", "text_b", "score", "label", "probs", "gold"}

    fixed = READERS.get("text_matching", "t")(threshold=0.95)
    assert fixed.fit(examples, predictions, labels) == {"threshold": 0.95, "tuned": False}
    assert fixed.evaluate(examples, predictions, labels)["recall"] == 0.0


def test_a_threshold_tuned_for_accuracy_is_saved_as_such_and_refit_when_f1_is_asked():
    examples = [{"text_a": "a", "text_b": str(i), "label": g, "source": f"d:{i}"} for i, g in enumerate("10100")]
    predictions = [{"score": s, "probs": np.array([1 - s, s])} for s in (0.9, 0.8, 0.4, 0.3, 0.1)]
    labels = ["0", "1"]
    reader = READERS.get("text_matching", "t")(tune_threshold_for="accuracy")
    state = reader.fit(examples, predictions, labels)
    assert state == {"threshold": pytest.approx(0.85), "tuned": True, "tuned_for": "accuracy",
                     "dev_accuracy": 0.8}
    assert reader.evaluate(examples, predictions, labels)["accuracy"] == 0.8
    by_f1 = READERS.get("text_matching", "t")()
    by_f1.load_state(state)  # tuned for accuracy: not this reader's threshold, so --do eval tunes it again
    assert by_f1.decisions.unfitted() and by_f1.decision_threshold == 0.5
    same = READERS.get("text_matching", "t")(tune_threshold_for="accuracy")
    same.load_state(state)
    assert not same.decisions.unfitted() and same.decision_threshold == pytest.approx(0.85)


def test_a_fixed_threshold_and_a_metric_to_tune_it_for_are_refused_together():
    with pytest.raises(ConfigError, match=r"^dataset_reader\.tune_threshold_for: 'accuracy' tunes the threshold, "
                                          r"but dataset_reader\.threshold fixes it at 0\.7; set one of them$"):
        READERS.get("text_matching", "t")(threshold=0.7, tune_threshold_for="accuracy")
    with pytest.raises(ConfigError, match=r"dataset_reader\.tune_threshold_for"):
        READERS.get("text_matching", "t")(tune_threshold_for="auc")


# ---------------------------------------------------------------- models

@pytest.fixture(scope="module")
def encoder():
    return tiny_ernie()


def ids(rows, cols=6, seed=0):
    rng = np.random.RandomState(seed)
    out = rng.randint(5, 30, size=(rows, cols))
    out[:, -1] = 0  # some padding
    return paddle.to_tensor(out, dtype="int64")


def check_loss(loss, model):
    assert loss.shape == [] and np.isfinite(float(loss))
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(np.isfinite(g.numpy()).all() for g in grads)
    model.clear_gradients()


CLASSIFICATION_LOSSES = [{"name": "ce"}, {"name": "focal", "gamma": 2.0, "alpha": "balanced"}, {"name": "dice"},
                         {"name": "ghm"}, {"name": "ohem", "base": {"name": "ce"}, "ratio": 0.5}]


@pytest.mark.parametrize("loss", CLASSIFICATION_LOSSES, ids=lambda loss: loss["name"])
def test_fc_pointwise_forward(encoder, loss):
    model = MODELS.get("ErnieMatchingFcPointwise", "m")(encoder, num_labels=2, class_counts=[6, 2], loss=loss)
    token_types = paddle.to_tensor(np.repeat([[0, 0, 0, 1, 1, 1]], 4, axis=0), dtype="int64")
    out = model(ids(4), token_types, labels=paddle.to_tensor([0, 1, 1, 0]))
    assert out["logits"].shape == [4, 2]
    check_loss(out["loss"], model)
    probs = model.decode(model(ids(4), token_types), {})["probs"].numpy()
    np.testing.assert_allclose(probs.sum(-1), 1, rtol=1e-5)


@pytest.mark.parametrize("loss", CLASSIFICATION_LOSSES, ids=lambda loss: loss["name"])
def test_siamese_pointwise_forward(encoder, loss):
    model = MODELS.get("ErnieMatchingSiamesePointwise", "m")(encoder, num_labels=2, class_counts=[6, 2], loss=loss)
    out = model(ids(4), ids(4, 5, seed=1), labels=paddle.to_tensor([0, 1, 1, 0]))
    assert out["logits"].shape == [4, 2]
    check_loss(out["loss"], model)
    assert "loss" not in model(ids(4), ids(4, 5, seed=1))


def test_siamese_cosine_trains_with_cosent_on_labelled_pairs(encoder):
    """ErnieMatchingSiameseCosine: a pair's score is the cosine of its two texts, the score cosent orders by
    the labels (the loss equals cosent_loss of those very scores); its text vectors are unit vectors."""
    model = MODELS.get("ErnieMatchingSiameseCosine", "m")(encoder, num_labels=2, class_counts=[6, 2])
    assert model.loss_fn.scale == 20.0  # the default loss: cosent
    q, t = ids(4), ids(4, 5, seed=1)
    labels = paddle.to_tensor([0, 1, 1, 0])
    out = model(q, t, labels=labels)
    assert out["scores"].shape == [4] and (out["scores"].abs() <= 1 + 1e-5).all()
    np.testing.assert_allclose(float(out["loss"]), float(cosent_loss(out["scores"], labels)), rtol=1e-6)
    check_loss(out["loss"], model)
    model.eval()
    u, v = model.text_embedding(q), model.text_embedding(t)
    np.testing.assert_allclose(np.linalg.norm(u.numpy(), axis=-1), 1, atol=1e-5)
    np.testing.assert_allclose(model.decode(model(q, t), {})["scores"].numpy(), (u * v).sum(-1).numpy(),
                               rtol=1e-5, atol=1e-6)
    model.train()


PAIR_LOSSES = [{"name": "pairwise_hinge", "margin": 0.2}, {"name": "circle"}, {"name": "nce"}]
EMBEDDING_LOSSES = [{"name": "infonce"}, {"name": "sum_hinge"}, {"name": "max_hinge"}]


@pytest.mark.parametrize("negatives, loss", [("labelled", loss) for loss in
                                             PAIR_LOSSES + EMBEDDING_LOSSES + [{"name": "triplet"}]]
                         + [("in_batch", loss) for loss in PAIR_LOSSES + EMBEDDING_LOSSES],
                         ids=lambda x: x["name"] if isinstance(x, dict) else x)
@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_pairwise_forward(encoder, negatives, loss, pooling):
    model = MODELS.get("ErnieMatchingSiamesePairwise", "m")(encoder, negatives=negatives, loss=loss,
                                                            pooling=pooling)
    negative = ids(4, 7, seed=2) if negatives == "labelled" else None
    out = model(ids(4), positive_input_ids=ids(4, 5, seed=1), negative_input_ids=negative)
    check_loss(out["loss"], model)
    model.eval()
    scores = model.decode(model(ids(4), title_input_ids=ids(4, 5, seed=1)), {})["scores"]
    assert scores.shape == [4] and (scores.abs() <= 1 + 1e-5).all()  # cosine
    trained_on = model(ids(4), positive_input_ids=ids(4, 5, seed=1), negative_input_ids=negative)["scores"]
    np.testing.assert_allclose(scores.numpy(), trained_on.numpy(), rtol=1e-5)  # a pair scores as it trains
    model.train()


def test_pairwise_dot_similarity(encoder):
    model = MODELS.get("ErnieMatchingSiamesePairwise", "m")(encoder, loss={"name": "pairwise_hinge"},
                                                            similarity="dot")
    model.eval()
    q, t = ids(3), ids(3, seed=1)
    expected = (model.embed(q) * model.embed(t)).sum(-1)
    np.testing.assert_allclose(model(q, t)["scores"].numpy(), expected.numpy(), rtol=1e-5)


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
def test_a_siamese_models_text_embedding_scores_its_pairs(encoder, similarity):
    """/v1/embeddings serves text_embedding: for simnet, a pair's score is the dot product of its two texts'
    vectors (their cosine, the vectors L2-normalised, with similarity cosine)."""
    model = MODELS.get("ErnieMatchingSiamesePairwise", "m")(encoder, loss={"name": "pairwise_hinge"},
                                                            similarity=similarity)
    model.eval()
    q, t = ids(3), ids(3, seed=1)
    u, v = model.text_embedding(q), model.text_embedding(t)
    np.testing.assert_allclose((u * v).sum(-1).numpy(), model(q, t)["scores"].numpy(), rtol=1e-5, atol=1e-6)
    norms = np.linalg.norm(u.numpy(), axis=-1)
    assert np.allclose(norms, 1, atol=1e-5) == (similarity == "cosine")
    assert ("cosine" in model.EMBEDDING) == (similarity == "cosine")


def test_which_matchers_embed_a_text_on_their_own(encoder):
    """A siamese classifier's vector is each text pooled alone (its u and v); a cross-encoder reads the pair as
    one sequence, so it embeds no text on its own (EMBEDDING None: /v1/embeddings refuses it)."""
    siamese = MODELS.get("ErnieMatchingSiamesePointwise", "m")(encoder, num_labels=2)
    siamese.eval()
    np.testing.assert_allclose(siamese.text_embedding(ids(3)).numpy(), siamese.embed(ids(3)).numpy(), rtol=1e-6)
    assert siamese.EMBEDDING and MODELS.get("ErnieMatchingFcPointwise", "m").EMBEDDING is None
    assert MODELS.get("ErnieCrfSeqLabel", "m").EMBEDDING is None


@pytest.mark.parametrize("name, kwargs, loss, message", [
    ("ErnieMatchingSiamesePairwise", {}, {"name": "ce"},
     r"model\.loss\.name: 'ce' does not fit a pair or embedding model \(losses that fit: circle, infonce"),
    ("ErnieMatchingSiamesePairwise", {"negatives": "in_batch"}, {"name": "triplet"},
     r"model\.loss\.name: 'triplet' needs one labelled negative per pair"),
    ("ErnieMatchingSiamesePairwise", {"similarity": "dot"}, {"name": "circle"},
     r"model\.loss\.name: 'circle' expects cosine similarities"),
    ("ErnieMatchingFcPointwise", {"num_labels": 2}, {"name": "circle"},
     r"model\.loss\.name: 'circle' does not fit a classification model"),
    ("ErnieMatchingSiamesePointwise", {"num_labels": 2}, {"name": "kl"},
     r"model\.loss\.name: 'kl' takes multi-hot targets"),
    ("ErnieMatchingSiameseCosine", {"num_labels": 2}, {"name": "infonce"},
     r"model\.loss\.name: 'infonce' does not fit a scored model \(losses that fit: cosent\)"),
    ("ErnieMatchingFcPointwise", {"num_labels": 2, "dropout": 1.0}, {"name": "ce"},
     r"model\.dropout: must be in \[0, 1\), got 1\.0"),
])
def test_model_config_errors(encoder, name, kwargs, loss, message):
    with pytest.raises(ConfigError, match=message):
        MODELS.get(name, "m")(encoder, loss=loss, **kwargs)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """A tokenizer whose ids fit the tiny encoder's 30 embeddings: most sample characters are [UNK]."""
    from paddlenlp.transformers import ErnieTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"信用卡额度怎么还款花呗开通"]
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return ErnieTokenizer(str(path))


@pytest.mark.parametrize("name", ["ErnieMatchingFcPointwise", "ErnieMatchingSiamesePointwise",
                                  "ErnieMatchingSiameseCosine", "ErnieMatchingSiamesePairwise"])
def test_a_model_takes_the_batches_of_the_reader_it_names(encoder, tokenizer, name):
    """``READERS`` promises that the named reader's batches, for training and for prediction, carry
    every argument ``forward`` needs (the trainer hands it those it takes): a loss when training,
    outputs ``decode`` reads when predicting."""
    model_class = MODELS.get(name, "m")
    reader = READERS.get(model_class.READERS[0], "dataset_reader.type")()
    train = reader.read("data/match/train.tsv", "train")
    labels = reader.build_labels(train)
    model = model_class(encoder, **reader.model_args(labels, train))
    forward = inspect.signature(model.forward).parameters
    needed = {k for k, p in forward.items() if p.default is p.empty}
    for split, examples in (("train", train[:4]), ("predict", reader.read("data/match/predict.tsv", "predict")[:4])):
        features = reader.encode(examples, tokenizer, labels, max_seq_len=16, split=split)
        batch = {k: paddle.to_tensor(v) for k, v in reader.collate(features, tokenizer.pad_token_id).items()}
        assert needed <= set(batch), f"{split}: {reader.__class__.__name__} makes {sorted(batch)}"
        out = model(**{k: v for k, v in batch.items() if k in forward})
        if split == "train":
            check_loss(out["loss"], model)
        else:
            assert "loss" not in out
            decoded = model.decode(out, batch)
            assert all(len(v) == len(examples) for v in decoded.values())


@pytest.mark.parametrize("path,model_class,loss_class,supplied", [
    ("benchmarks/configs/mtch_afqmc_e5_cosent.json", "ErnieMatchingSiameseCosine", "CoSENTLoss", {"num_labels": 2}),
    ("benchmarks/configs/mtch_afqmc_e5_frozen.json", "ErnieMatchingFcPointwise", "CrossEntropyLoss", {"num_labels": 2}),
    ("benchmarks/configs/mtch_afqmc_e5_pairwise.json", "ErnieMatchingSiamesePairwise", "CircleLoss",
     {"negatives": "in_batch"})])
def test_the_afqmc_frozen_prefix_benchmarks_plan(tmp_path, path, model_class, loss_class, supplied):
    """The AFQMC param files of Step 21's recipe (9 of 12 layers frozen): the CoSENT bi-encoder, the
    cross-encoder and the pairwise bi-encoder (in-batch negatives) plan as written (their data stood in for by
    empty files), and their model and loss build on a
    tiny encoder."""
    from appzoo.params.param_file import load_param_file
    from appzoo.run.plan import validate

    config = load_param_file(path)
    for key in ("train", "dev"):
        stand_in = tmp_path / config["dataset_reader"][key]
        stand_in.parent.mkdir(parents=True, exist_ok=True)
        stand_in.touch()
        config["dataset_reader"][key] = str(stand_in)
    config["trainer"]["output_dir"] = str(tmp_path / "out")
    plan = validate(config)
    assert plan.model_class.__name__ == model_class and plan.encoder.pretrained and plan.encoder.freeze_layers == 9
    model = plan.model_class(tiny_ernie(), **supplied, **plan.model_kwargs)
    assert type(model.loss_fn).__name__ == loss_class and model.pooling == "mean"
