"""Predict with a toolkit model's best/ folder through HF transformers + torch (eager), for the engine comparison.

The "HF transformers + torch eager" row of ``benchmarks/predict_engines.py``:
the same fine-tuned weights as the toolkit's model, loaded into a
``transformers.BertModel`` plus a torch head, tokenized by ``BertTokenizerFast``
from the saved vocabulary, timed at batch 32 and batch 1, and scored with the
dev metric the toolkit reports (so a dev metric equal to the toolkit's fp32 one
checks the conversion).

It runs in a separate virtual environment with torch (never a toolkit
dependency), so it imports no paddle: the files of best/ are read directly, and
the tag-scheme and window rules are the toolkit's own modules, loaded by their
files (``tasks/sequence_labeling/schemes.py`` and ``windows.py``; their
package's ``__init__`` would import paddle). A ``.pdparams`` file is a pickle of numpy arrays keyed by the
paddlenlp parameter names; paddle's ``Linear`` stores ``[in, out]``, torch's
``[out, in]``.

Supported: ``ErnieFcClassification`` on ``text_classification`` files
(tsv / csv / jsonl; single-label by argmax, with a saved logit adjustment;
multi-label by each label's sigmoid against its saved threshold), and the
taggers ``ErnieFcSeqLabel`` (argmax) / ``ErnieCrfSeqLabel`` (constrained
Viterbi in numpy) on ``sequence_labeling`` CoNLL files, long sentences cut
into the toolkit's overlapping windows. Encoders: paddlenlp BERT, and ERNIE
without task ids (the same layers).

The tokenizer is HF's own BertTokenizerFast, as an HF user would run it; it
splits a few characters differently from paddlenlp (symbols and emoji, which
paddlenlp splits off a word), so on texts with those the ids, and rarely a
prediction, can differ from the toolkit's.

    /work/hfenv/bin/python benchmarks/hf_predict.py --best output/RUN/best \\
        [--data FILE] --out result.json [--threads 2] [--repeats 2] [--limit 200]
"""
import argparse
import csv
import json
import os
import pickle
import sys
import time

import numpy as np
import torch
from transformers import BertConfig, BertModel, BertTokenizerFast

CLASSIFIERS = ("ErnieFcClassification",)
TAGGERS = ("ErnieFcSeqLabel", "ErnieCrfSeqLabel")
FORBIDDEN = -1e4  # the toolkit CRF's penalty on a transition the tag scheme forbids
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _toolkit_module(path):
    """A module of the toolkit, loaded by its file (``path`` from the repository root) without its
    package's ``__init__``, which imports paddle."""
    import importlib.util

    sys.path.insert(0, ROOT)  # its own imports: light appzoo modules, no paddle
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0],
                                                  os.path.join(ROOT, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCHEMES = _toolkit_module("tasks/sequence_labeling/schemes.py")  # split_tag, transition_masks
WINDOWS = _toolkit_module("tasks/sequence_labeling/windows.py")  # windows
RECORD = _toolkit_module("benchmarks/record.py")  # versions


# ---- best/ ----------------------------------------------------------------
def load_json(path, default=None):
    if default is not None and not os.path.exists(path):
        return default
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_bundle(best):
    """The files of a toolkit best/ folder, read without paddle."""
    if not os.path.exists(os.path.join(best, "COMPLETE")):
        sys.exit(f"{best}: not a complete best/ folder (no COMPLETE marker)")
    if os.path.isfile(os.path.join(best, "model.safetensors")):  # what appzoo writes since Step 24
        from safetensors.numpy import load_file

        state = load_file(os.path.join(best, "model.safetensors"))
    else:  # a best/ saved before: Paddle's pickle
        with open(os.path.join(best, "model_state.pdparams"), "rb") as f:
            state = pickle.load(f)
    state.pop("StructuredToParameterName@@", None)
    return {"config": load_json(os.path.join(best, "config.json")),
            "labels": load_json(os.path.join(best, "labels.json")),
            "model_args": load_json(os.path.join(best, "model_args.json"), {}),
            "reader_state": load_json(os.path.join(best, "reader_state.json"), {}),
            "encoder_config": load_json(os.path.join(best, "encoder", "config.json")),
            "tokenizer_config": load_json(os.path.join(best, "encoder", "tokenizer_config.json"), {}),
            "vocab": os.path.join(best, "encoder", "vocab.txt"),
            "state": state}


def bert_config(saved):
    """A transformers BertConfig from a paddlenlp BERT / ERNIE encoder config."""
    if saved.get("model_type") not in ("bert", "ernie"):
        sys.exit(f"encoder model_type {saved.get('model_type')!r}: only bert and ernie map onto BertModel")
    if saved.get("use_task_id"):
        sys.exit("an ERNIE encoder with use_task_id has task-type embeddings, which BertModel lacks")
    keys = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
            "hidden_act", "max_position_embeddings", "type_vocab_size", "layer_norm_eps", "pad_token_id")
    return BertConfig(**{k: saved[k] for k in keys if k in saved}, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)


def torch_state(state, num_layers):
    """``({transformers BertModel name: tensor}, the toolkit names read)`` from its ``encoder.*`` parameters."""
    out, read = {}, set()

    def take(key):
        read.add(key)
        return state[key]

    def linear(src, dst):
        out[f"{dst}.weight"] = take(f"{src}.weight").T
        out[f"{dst}.bias"] = take(f"{src}.bias")

    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        out[f"embeddings.{name}.weight"] = take(f"encoder.embeddings.{name}.weight")
    for part in ("weight", "bias"):
        out[f"embeddings.LayerNorm.{part}"] = take(f"encoder.embeddings.layer_norm.{part}")
    for i in range(num_layers):
        src, dst = f"encoder.encoder.layers.{i}", f"encoder.layer.{i}"
        for p, h in (("q_proj", "query"), ("k_proj", "key"), ("v_proj", "value")):
            linear(f"{src}.self_attn.{p}", f"{dst}.attention.self.{h}")
        linear(f"{src}.self_attn.out_proj", f"{dst}.attention.output.dense")
        linear(f"{src}.linear1", f"{dst}.intermediate.dense")
        linear(f"{src}.linear2", f"{dst}.output.dense")
        for part in ("weight", "bias"):
            out[f"{dst}.attention.output.LayerNorm.{part}"] = take(f"{src}.norm1.{part}")
            out[f"{dst}.output.LayerNorm.{part}"] = take(f"{src}.norm2.{part}")
    if "encoder.pooler.dense.weight" in state:
        linear("encoder.pooler.dense", "pooler.dense")
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in out.items()}, read


def build_model(bundle):
    """``(BertModel, head Linear, crf or None)`` in eval mode, loaded strictly (every weight used once)."""
    config = bert_config(bundle["encoder_config"])
    state = bundle["state"]
    encoder = BertModel(config, add_pooling_layer="encoder.pooler.dense.weight" in state)
    mapped, read = torch_state(state, config.num_hidden_layers)
    missing, unexpected = encoder.load_state_dict(mapped, strict=False)
    missing = [k for k in missing if not k.endswith(("position_ids", "token_type_ids"))]  # buffers, not weights
    if missing or unexpected:
        sys.exit(f"weight mapping: missing {missing}, unexpected {unexpected}")
    weight = state["classifier.weight"]
    head = torch.nn.Linear(*weight.shape)
    head.load_state_dict({"weight": torch.from_numpy(weight.T.copy()),
                          "bias": torch.from_numpy(state["classifier.bias"])})
    crf = {k[4:]: state[k].astype(np.float64) for k in state if k.startswith("crf.")} or None
    left = set(state) - read - {"classifier.weight", "classifier.bias"} - {f"crf.{k}" for k in crf or ()}
    if left:
        sys.exit(f"weights this script does not map: {sorted(left)}")
    return encoder.eval(), head.eval(), crf


def tokenizer_of(bundle):
    saved = bundle["tokenizer_config"]
    lowercase = saved.get("do_lower_case", bundle["config"]["model"].get("encoder", {}).get("lowercase", True))
    return BertTokenizerFast(vocab_file=bundle["vocab"], do_lower_case=lowercase,
                             tokenize_chinese_chars=saved.get("tokenize_chinese_chars", True),
                             strip_accents=saved.get("strip_accents"))


# ---- reading data as the toolkit readers do ---------------------------------
def table_rows(path, reader):
    """``[(text, label field)]`` of a text_classification tsv / csv / jsonl file."""
    fmt = reader.get("format", "tsv")
    text_col = reader.get("text_column")
    label_col = reader.get("label_column")
    encoding = reader.get("encoding", "utf-8")
    if encoding.lower().replace("_", "-") in ("utf-8", "utf8"):
        encoding = "utf-8-sig"  # a byte-order mark is dropped, as the toolkit drops it
    with open(path, encoding=encoding, newline="") as f:
        if fmt == "jsonl":
            rows = [json.loads(line) for line in f if line.strip()]
            text_col = "text" if text_col is None else text_col
            label_col = "label" if label_col is None else label_col
            return [(r[text_col], r.get(label_col)) for r in rows]
        delimiter = reader.get("delimiter") or ("\t" if fmt == "tsv" else ",")
        quoting = reader.get("quoting")
        quoting = fmt == "csv" if quoting is None else quoting
        if quoting:
            lines = [r for r in csv.reader(f, delimiter=delimiter, quotechar='"', strict=True)
                     if r and any(x.strip() for x in r)]
        else:
            lines = [line.rstrip("\r\n").split(delimiter) for line in f if line.strip()]
    header = reader.get("header", 0)
    names = [x.strip() for x in lines[0]] if header else []
    lines = lines[header:]

    def index(col, default):
        if col is None:
            return default
        return names.index(col) if isinstance(col, str) else col

    t, lab = index(text_col, 0), index(label_col, 1)
    return [(r[t].strip(), r[lab].strip() if lab < len(r) else None) for r in lines]


def read_classification(path, bundle):
    """Texts and gold labels (a label index; multi-label: a multi-hot row)."""
    reader, labels = bundle["config"]["dataset_reader"], bundle["labels"]
    index = {name: i for i, name in enumerate(labels)}
    multi = reader.get("multi_label", False)
    texts, gold = [], []
    for text, value in table_rows(path, reader):
        if not isinstance(text, str) or not text.strip():
            if reader.get("on_bad_line") == "skip":
                continue
            sys.exit(f"{path}: an empty text (the toolkit refuses it)")
        texts.append(text)
        if value is None:
            gold.append(None)
        elif multi:
            parts = value if isinstance(value, list) else str(value).split(reader.get("label_separator", ","))
            row = np.zeros(len(labels), dtype=int)
            row[[index[p] for p in {str(p).strip() for p in parts} if p]] = 1
            gold.append(row)
        else:
            gold.append(index[str(value).strip()])
    return texts, gold


def read_conll(path, reader):
    """Sentences ``[(tokens, tags)]`` of a CoNLL file (blank line or -DOCSTART- between sentences)."""
    tok_col = reader.get("token_column") or 0
    tag_col = 1 if reader.get("tag_column") is None else reader["tag_column"]
    delimiter = reader.get("delimiter")
    sentences, tokens, tags = [], [], []
    with open(path, encoding=reader.get("encoding", "utf-8")) as f:
        for raw in f:
            line = raw.rstrip("\r\n")
            if not line.strip() or line.startswith("-DOCSTART-"):
                if tokens:
                    sentences.append((tokens, tags))
                tokens, tags = [], []
                continue
            cols = line.split(delimiter) if delimiter else line.split("\t") if "\t" in line else line.split()
            tokens.append(cols[tok_col])
            tags.append(cols[tag_col].strip() if len(cols) > max(tag_col, -tag_col - 1) else None)
    if tokens:
        sentences.append((tokens, tags))
    return [(t, None if any(x is None for x in g) else g) for t, g in sentences]


# ---- classification ---------------------------------------------------------
class Classifier:
    """Texts -> the toolkit's decisions (label indices, or multi-hot rows)."""

    def __init__(self, bundle, encoder, head):
        reader, model = bundle["config"]["dataset_reader"], bundle["config"]["model"]
        self.encoder, self.head = encoder, head
        self.tokenizer = tokenizer_of(bundle)
        self.max_len = reader.get("max_seq_len") or 512
        self.pooling = model.get("pooling", "cls")
        self.multi = reader.get("multi_label", False)
        labels, saved = bundle["labels"], bundle["reader_state"]
        tuned = saved.get("per_label", {}) if reader.get("per_label_thresholds", True) else {}
        default = reader.get("threshold", 0.5)
        self.thresholds = np.array([tuned[n]["threshold"] if n in tuned else default for n in labels])
        self.shift = None  # logit adjustment: argmax of logits - tau * log(prior)
        adjust = reader.get("logit_adjust")
        if adjust is not None and not self.multi:
            tau = saved.get("logit_adjust", {}).get("tau", 0.0) if adjust == "tune" else float(adjust)
            priors = saved.get("logit_adjust", {}).get("priors")
            if priors is None:
                counts = np.maximum(np.asarray(bundle["model_args"]["class_counts"], dtype=np.float64), 1.0)
                priors = counts / counts.sum()
            if tau:
                self.shift = tau * np.log(np.asarray(priors, dtype=np.float64))

    def tokenize(self, texts):
        return self.tokenizer(texts, truncation=True, max_length=self.max_len, padding=True, return_tensors="pt")

    def forward(self, batch):
        mask = batch["input_ids"] != self.encoder.config.pad_token_id
        out = self.encoder(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                           attention_mask=mask.long())
        if self.pooling == "cls":
            vector = out.pooler_output
        else:
            weights = mask.unsqueeze(-1).to(out.last_hidden_state.dtype)
            vector = (out.last_hidden_state * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        return self.head(vector).double().numpy()

    def decode(self, logits):
        if self.multi:
            return list((1.0 / (1.0 + np.exp(-logits))) >= self.thresholds)
        if self.shift is not None:
            logits = logits - self.shift
        return list(np.argmax(logits, axis=1))

    def metric(self, gold, pred):
        if self.multi:
            g, p = np.stack(gold).astype(int), np.stack(pred).astype(int)
            tp, fp, fn = (g & p).sum(0), ((1 - g) & p).sum(0), (g & (1 - p)).sum(0)
            return {"micro_f1": f1(tp.sum(), fp.sum(), fn.sum()),
                    "macro_f1": float(np.mean([f1(*c) for c in zip(tp, fp, fn)])),
                    "subset_accuracy": float((g == p).all(axis=1).mean())}
        g, p = np.asarray(gold), np.asarray(pred)
        classes = range(len(self.thresholds))
        return {"accuracy": float((g == p).mean()),
                "macro_f1": float(np.mean([f1(((g == c) & (p == c)).sum(), ((g != c) & (p == c)).sum(),
                                              ((g == c) & (p != c)).sum()) for c in classes]))}


def f1(tp, fp, fn):
    """F1 from counts; 0 where it is undefined (sklearn's zero_division=0)."""
    return float(2 * tp / (2 * tp + fp + fn)) if tp else 0.0


# ---- sequence labeling --------------------------------------------------------
def entity_spans(tags, scheme):
    """``{(type, start, end)}``, seqeval strict mode: a chunk that breaks the scheme is no entity."""
    if scheme not in ("BIO", "BIOES", "BMES"):
        sys.exit(f"scheme {scheme!r}: entity scoring here covers BIO, BIOES and BMES")
    inner = "M" if scheme == "BMES" else "I"
    spans, i, n = set(), 0, len(tags)
    while i < n:
        prefix, kind = SCHEMES.split_tag(tags[i])
        if prefix == "S" and scheme != "BIO":
            spans.add((kind, i, i + 1))
        elif prefix == "B":
            j = i + 1
            while j < n and SCHEMES.split_tag(tags[j]) == (inner, kind):
                j += 1
            if scheme == "BIO":
                spans.add((kind, i, j))
                i = j
                continue
            if j < n and SCHEMES.split_tag(tags[j]) == ("E", kind):
                spans.add((kind, i, j + 1))
                i = j + 1
                continue
            i = j
            continue
        i += 1
    return spans


class Tagger:
    """Sentences (token lists) -> tag indices, one per token (first word piece's state)."""

    def __init__(self, bundle, encoder, head, crf):
        reader = bundle["config"]["dataset_reader"]
        if reader.get("format", "conll") != "conll":
            sys.exit(f"sequence_labeling format {reader.get('format')!r}: only conll is read here")
        self.encoder, self.head, self.crf = encoder, head, crf
        self.tokenizer = tokenizer_of(bundle)
        self.budget = (reader.get("max_seq_len") or 512) - 2
        self.overlap = reader.get("window_overlap", 16)
        self.labels = bundle["labels"]
        self.scheme = bundle["reader_state"].get("scheme") or bundle["model_args"].get("scheme") or "BIO"
        if crf is not None:
            constrained = bundle["config"]["model"].get("constrained", True)
            labels, scheme = self.labels, self.scheme

            def penalty(ok):  # the scheme's forbidden moves, rebuilt as the toolkit rebuilds them (not saved)
                return np.where(ok, 0.0, FORBIDDEN) if constrained else np.zeros(np.shape(ok))

            trans, start, end = SCHEMES.transition_masks(labels, scheme)
            self.trans = crf["transitions"] + penalty(trans)
            self.start_penalty, self.end_penalty = penalty(start), penalty(end)

    def tokenize(self, sentences):
        """Windows: ``(input_ids, positions, lengths, owners)``, owner = (sentence, start, end)."""
        tok = self.tokenizer
        distinct = list(dict.fromkeys(t for s in sentences for t in s))
        encoded = tok(distinct, add_special_tokens=False)["input_ids"]
        pieces_of = {t: (ids or [tok.unk_token_id])[:self.budget] for t, ids in zip(distinct, encoded)}
        rows, positions, owners = [], [], []
        for number, tokens in enumerate(sentences):
            pieces = [pieces_of[t] for t in tokens]
            for start, end in WINDOWS.windows([len(p) for p in pieces], self.budget, self.overlap):
                ids, pos = [tok.cls_token_id], []
                for p in pieces[start:end]:
                    pos.append(len(ids))
                    ids.extend(p)
                ids.append(tok.sep_token_id)
                rows.append(ids)
                positions.append(pos)
                owners.append((number, start, end, len(tokens)))
        width, steps = max(map(len, rows)), max(map(len, positions))
        input_ids = torch.full((len(rows), width), tok.pad_token_id, dtype=torch.long)
        index = torch.zeros((len(rows), steps), dtype=torch.long)
        for i, (ids, pos) in enumerate(zip(rows, positions)):
            input_ids[i, :len(ids)] = torch.tensor(ids)
            index[i, :len(pos)] = torch.tensor(pos)
        return {"input_ids": input_ids, "positions": index, "owners": owners, "count": len(sentences)}

    def forward(self, batch):
        ids = batch["input_ids"]
        mask = (ids != self.encoder.config.pad_token_id).long()
        states = self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        picked = torch.gather(states, 1, batch["positions"].unsqueeze(-1).expand(-1, -1, states.shape[-1]))
        return {"emissions": self.head(picked).double().numpy(), "owners": batch["owners"], "count": batch["count"]}

    def viterbi(self, emissions, first, last):
        """Best path of one window's ``[n, C]`` emissions; start / end constraints only at real sentence edges."""
        score = self.crf["start"] + (self.start_penalty if first else 0.0) + emissions[0]
        pointers = []
        for t in range(1, len(emissions)):
            total = score[:, None] + self.trans
            pointers.append(total.argmax(axis=0))
            score = total.max(axis=0) + emissions[t]
        best = [int(np.argmax(score + self.crf["end"] + (self.end_penalty if last else 0.0)))]
        for pointer in reversed(pointers):
            best.append(int(pointer[best[-1]]))
        return best[::-1]

    def decode(self, out):
        """Each sentence's tags; a token in several windows takes the window where it is farthest from a cut."""
        tags = {}
        for row, (number, start, end, size) in zip(out["emissions"], out["owners"]):
            n = end - start
            path = (self.viterbi(row[:n], start == 0, end == size) if self.crf is not None
                    else list(np.argmax(row[:n], axis=1)))
            chosen = tags.setdefault(number, ([-1] * size, [-1] * size))
            for k, position in enumerate(range(start, end)):
                left = size if start == 0 else position - start
                right = size if end == size else end - 1 - position
                if min(left, right) > chosen[1][position]:
                    chosen[0][position], chosen[1][position] = int(path[k]), min(left, right)
        return [tags[i][0] for i in sorted(tags)]

    def metric(self, gold, pred):
        counts = {}  # type -> [tp, fp, fn]
        correct = total = 0
        for g, p in zip(gold, pred):
            p = [self.labels[i] for i in p]
            correct += sum(a == b for a, b in zip(g, p))
            total += len(g)
            gs, ps = entity_spans(g, self.scheme), entity_spans(p, self.scheme)
            for kind, *_ in gs | ps:
                counts.setdefault(kind, [0, 0, 0])
            for span in gs & ps:
                counts[span[0]][0] += 1
            for span in ps - gs:
                counts[span[0]][1] += 1
            for span in gs - ps:
                counts[span[0]][2] += 1
        tp, fp, fn = (sum(c[k] for c in counts.values()) for k in range(3))
        return {"micro_f1": f1(tp, fp, fn), "macro_f1": float(np.mean([f1(*c) for c in counts.values()]))
                if counts else 0.0, "token_accuracy": correct / total if total else 0.0}


# ---- timing -------------------------------------------------------------------
def predict(task, items, batch_size):
    """Decisions for ``items`` in order, the seconds in all and the seconds in the tokenizer."""
    decisions, tokenizer_s = [], 0.0
    begin = time.perf_counter()
    with torch.inference_mode():
        for start in range(0, len(items), batch_size):
            t0 = time.perf_counter()
            batch = task.tokenize(items[start:start + batch_size])
            tokenizer_s += time.perf_counter() - t0
            decisions.extend(task.decode(task.forward(batch)))
    return decisions, time.perf_counter() - begin, tokenizer_s


def best_of(task, items, batch_size, repeats):
    runs = [predict(task, items, batch_size) for _ in range(max(1, repeats))]
    return min(runs, key=lambda r: r[1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--best", required=True, help="a toolkit run's best/ folder")
    parser.add_argument("--data", help="labelled file to predict and score (default: the config's dev file)")
    parser.add_argument("--out", required=True, help="result JSON")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes; the fastest is kept")
    parser.add_argument("--limit", type=int, default=200, help="texts in the batch-1 pass (0: all)")
    parser.add_argument("--max-texts", type=int, default=0, help="the first N texts of the file only (0: all)")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    bundle = load_bundle(args.best)
    config = bundle["config"]
    model_type, reader_type = config["model"]["type"], config["dataset_reader"]["type"]
    data = args.data or config["dataset_reader"].get("dev")
    if not data:
        sys.exit("no --data and no dev file in the saved config")
    encoder, head, crf = build_model(bundle)
    if model_type in CLASSIFIERS and reader_type == "text_classification":
        task = Classifier(bundle, encoder, head)
        items, gold = read_classification(data, bundle)
    elif model_type in TAGGERS and reader_type == "sequence_labeling":
        task = Tagger(bundle, encoder, head, crf if model_type == "ErnieCrfSeqLabel" else None)
        sentences = read_conll(data, config["dataset_reader"])
        items, gold = [s[0] for s in sentences], [s[1] for s in sentences]
    else:
        sys.exit(f"{model_type} with reader {reader_type}: not supported (classification: {CLASSIFIERS}; "
                 f"tagging: {TAGGERS})")

    if args.max_texts:
        items, gold = items[:args.max_texts], gold[:args.max_texts]
    predict(task, items[:32], 32)  # warm-up, untimed: first-call allocations and kernel selection
    pred, b32_s, b32_tok = best_of(task, items, 32, args.repeats)
    one = items[:args.limit] if args.limit else items
    _, b1_s, b1_tok = best_of(task, one, 1, args.repeats)
    scored = [(g, p) for g, p in zip(gold, pred) if g is not None]
    metric = task.metric(*zip(*scored)) if scored else {}
    result = {"texts": len(items), "batch32_texts_per_s": len(items) / b32_s,
              "batch1_texts": len(one), "batch1_texts_per_s": len(one) / b1_s,
              "tokenizer_share_b32": b32_tok / b32_s, "tokenizer_share_b1": b1_tok / b1_s,
              "metric": metric, **RECORD.versions(("torch", "transformers")),
              "threads": args.threads, "attn_implementation": encoder.config._attn_implementation,
              "model": model_type, "data": data, "repeats": args.repeats}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    shown = " ".join(f"{k}={v:.4f}" for k, v in metric.items())
    print(f"hf-torch-eager {model_type} {os.path.basename(data)}: {len(items)} texts, "
          f"b32 {result['batch32_texts_per_s']:.1f}/s (tok {result['tokenizer_share_b32']:.0%}), "
          f"b1 {result['batch1_texts_per_s']:.1f}/s (tok {result['tokenizer_share_b1']:.0%}), {shown}")


if __name__ == "__main__":
    main()
