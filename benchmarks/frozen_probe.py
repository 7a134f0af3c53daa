"""The frozen-encoder probe: what a pretrained encoder gives with no fine-tuning at all.

    python benchmarks/frozen_probe.py benchmarks/configs/cls_tnews_e5.json --train-examples 3200

Reads the param file's training and dev (and test, where there is one) files with its own reader,
embeds each text with the param file's encoder, frozen (mean over its tokens, L2-normalised, as
multilingual-e5 is pooled), and fits scikit-learn's logistic regression on ``--train-examples``
training texts (a seeded sample: as many as the fine-tuned runs of the table see). Prints and writes
dev (and test) accuracy and macro-F1, so that the gain from fine-tuning is measured beside the gain
from pretraining (benchmarks/RESULTS.md).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from appzoo.env import configure_cpu  # noqa: E402


def embed(encoder, tokenizer, texts, max_seq_len, batch_size=128):
    import paddle

    from appzoo.data.encoding import encode_texts, pad
    from appzoo.task.model import encode

    ids = encode_texts(tokenizer, texts, max_seq_len=max_seq_len)["input_ids"]
    order = np.argsort([len(i) for i in ids])  # similar lengths together: less padding
    out = np.zeros((len(ids), encoder.config.hidden_size), dtype="float32")
    with paddle.no_grad():
        for start in range(0, len(ids), batch_size):
            chunk = order[start:start + batch_size]
            sequence, _, mask = encode(encoder, paddle.to_tensor(pad([ids[i] for i in chunk], tokenizer.pad_token_id)))
            mask = mask.astype("float32").unsqueeze(-1)
            pooled = ((sequence * mask).sum(axis=1) / mask.sum(axis=1)).numpy()
            out[chunk] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("param_path")
    parser.add_argument("--train-examples", type=int, default=3200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "frozen_probe.json"))
    args = parser.parse_args(argv)
    configure_cpu(args.threads)
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score

    from appzoo.encoders import build_encoder
    from appzoo.utils.files import read_json, write_json
    from appzoo.params.param_file import load_param_file
    from appzoo.run.plan import validate

    started = time.time()
    plan = validate(load_param_file(args.param_path), args.param_path)
    reader = plan.reader_class(**plan.reader_kwargs)
    encoder, tokenizer = build_encoder(plan.encoder, None, None)
    encoder.eval()
    splits = {s: reader.read(getattr(plan.data, s), s) for s in ("train", "dev", "test") if getattr(plan.data, s)}
    train = splits["train"]
    picked = np.random.RandomState(args.seed).permutation(len(train))[:args.train_examples]
    splits["train"] = [train[i] for i in sorted(picked)]
    features = {s: embed(encoder, tokenizer, list(reader.texts(ex)), plan.data.max_seq_len) for s, ex in splits.items()}
    labels = {s: [e["label"] for e in ex] for s, ex in splits.items()}
    probe = LogisticRegression(C=10.0, max_iter=2000).fit(features["train"], labels["train"])
    result = {"param_path": args.param_path, "encoder": plan.config["model"]["encoder"],
              "train_examples": len(splits["train"]), "seed": args.seed, "probe": "LogisticRegression(C=10)"}
    for split in splits:
        if split == "train":
            continue
        predicted = probe.predict(features[split])
        result[split] = {"accuracy": round(float(accuracy_score(labels[split], predicted)), 4),
                         "macro_f1": round(float(f1_score(labels[split], predicted, average="macro")), 4),
                         "examples": len(predicted)}
    result["seconds"] = round(time.time() - started, 1)
    print(json.dumps(result, ensure_ascii=False))
    book = read_json(args.out, "frozen probe results") if os.path.exists(args.out) else {}
    book[os.path.basename(args.param_path)] = result
    write_json(args.out, book)


if __name__ == "__main__":
    main()
