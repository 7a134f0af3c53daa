"""benchmarks/get_data.py against the raw mirror in ../shared/data/raw: every
processed sha256 of SOURCES.md, idempotence, the offline message and a
corrupted raw file. All eight sets take about 2 s, so every test does all."""
import os
import shutil
import subprocess
import sys
import urllib.request
from collections import Counter

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import get_data  # noqa: E402

MIRROR = os.path.join("..", "shared", "data", "raw")
needs_mirror = pytest.mark.skipif(not os.path.isdir(MIRROR),
                                  reason=f"no raw-file mirror at {MIRROR} (the shared benchmark data)")


@needs_mirror
def test_all_sets_from_the_mirror_match_every_processed_sha256(tmp_path, capsys):
    dest = tmp_path / "bench"
    code = subprocess.run([sys.executable, "benchmarks/get_data.py", "all", "--dest", str(dest),
                           "--mirror", MIRROR], capture_output=True, text=True)
    assert code.returncode == 0, code.stderr
    expected = {rel: digest for d in get_data.DATASETS.values() for rel, digest in d.processed.items()}
    assert len(expected) == 24
    for rel, digest in expected.items():
        assert get_data.file_sha256(dest / rel) == digest, rel
    written = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert written == sorted(expected), "no temporary or extra files are left"
    for name, dataset in get_data.DATASETS.items():  # the source and licence note of every set
        assert f"{name}: " in code.stdout and dataset.repo in code.stdout
    assert "CC BY-SA 3.0" in code.stdout and "Apache 2.0" in code.stdout



@needs_mirror
def test_goemotions_reads_back_through_its_benchmark_param_file(tmp_path, capsys):
    """The written TSV, read with the dataset_reader of cls_goemotions_minilm_bce.json,
    gives every comment's text and label set as the release has them (unquoted,
    so quotes stay; no text holds a tab or line break), and the counts of SOURCES.md."""
    from appzoo.params.param_file import load_param_file
    from appzoo.run.plan import validate

    dest = tmp_path / "bench"
    assert get_data.main(["goemotions", "--dest", str(dest), "--mirror", MIRROR]) == 0
    dataset = get_data.DATASETS["goemotions"]
    for rel, digest in dataset.processed.items():
        assert get_data.file_sha256(dest / rel) == digest, rel

    path = "benchmarks/configs/cls_goemotions_minilm_bce.json"
    config = load_param_file(path)
    reader_config = config["dataset_reader"]
    for key in ("train", "dev", "test", "label_file"):
        reader_config[key] = str(dest / reader_config[key].replace("data/benchmarks/", ""))
    config["model"]["encoder"] = {"config": "configs/ernie_tiny.json"}  # no installed package needed
    config["trainer"]["output_dir"] = str(tmp_path / "out")
    plan = validate(config, path)
    reader = plan.reader_class(**plan.reader_kwargs)

    def raw_rows(key):
        data = get_data.fetch(dataset, dataset.raws[key], MIRROR).decode("utf-8")
        return [line.split("\t") for line in data.split("\n") if line]

    names = [row[0] for row in raw_rows("labels")]
    splits = {}
    for split in ("train", "dev", "test"):
        examples = reader.read(reader_config[split], split)
        rows = raw_rows(split)
        assert len(examples) == len(rows)
        for example, (text, ids, _) in zip(examples, rows):
            # the reader strips surrounding spaces (2,533 train texts have some); nothing else changes
            assert example["text"] == text.strip()
            assert example["label"] == sorted({names[int(i)] for i in ids.split(",")})
        splits[split] = examples
    labels = reader.build_labels(splits["train"])
    assert len(labels) == 28 and labels[0] == "admiration" and labels[-1] == "neutral"

    assert [len(splits[s]) for s in ("train", "dev", "test")] == [43410, 5426, 5427]
    counts = {s: Counter(label for e in examples for label in e["label"]) for s, examples in splits.items()}
    several = sum(len(e["label"]) > 1 for e in splits["train"])
    assert several == 7102  # 16.4% of train has 2+ labels
    assert counts["train"].most_common(2) == [("neutral", 14219), ("admiration", 4130)]
    assert counts["train"]["grief"] == 77 and counts["test"]["grief"] == 6
    assert min(counts["train"].values()) == 77 and counts["train"]["pride"] == 111
    assert all(len(counts[s]) == 28 for s in counts), "every label occurs in every split"
    assert any('"' in e["text"] for e in splits["train"]), "quotes stay in the texts"

@needs_mirror
def test_chnsenticorps_split_is_fixed_stratified_disjoint_and_reads_through_its_param_file(tmp_path):
    """The project's split of the one hotel-review CSV: every non-empty review in exactly one of
    train/dev/test, 80/10/10 within each label, and what cls_chnsenticorp_e5_frozen.json reads back."""
    import csv
    import io

    from appzoo.params.param_file import load_param_file
    from appzoo.run.plan import validate

    dest = tmp_path / "bench"
    assert get_data.main(["chnsenticorp_htl", "--dest", str(dest), "--mirror", MIRROR]) == 0
    dataset = get_data.DATASETS["chnsenticorp_htl"]
    released = get_data.fetch(dataset, dataset.raws["csv"], MIRROR).decode("utf-8")
    reviews = Counter((" ".join(row["review"].split()), {"0": "negative", "1": "positive"}[row["label"]])
                      for row in csv.DictReader(io.StringIO(released)))
    del reviews[("", "positive")], reviews[("", "negative")]  # the one empty review is dropped

    path = "benchmarks/configs/cls_chnsenticorp_e5_frozen.json"
    config = load_param_file(path)
    for key in ("train", "dev", "test"):
        config["dataset_reader"][key] = str(dest / config["dataset_reader"][key].replace("data/benchmarks/", ""))
    config["model"]["encoder"] = {"config": "configs/ernie_tiny.json"}
    config["trainer"]["output_dir"] = str(tmp_path / "out")
    plan = validate(config, path)
    reader = plan.reader_class(**plan.reader_kwargs)
    splits = {s: Counter((e["text"], e["label"]) for e in reader.read(config["dataset_reader"][s], s))
              for s in ("train", "dev", "test")}
    assert splits["train"] + splits["dev"] + splits["test"] == reviews, "each review in exactly one split"
    shares = {s: Counter(label for _, label in rows.elements()) for s, rows in splits.items()}
    assert shares == {"train": {"positive": 4258, "negative": 1955}, "dev": {"positive": 532, "negative": 244},
                      "test": {"positive": 532, "negative": 244}}


@needs_mirror
def test_a_second_run_skips_present_sets_and_redoes_a_changed_file(tmp_path, capsys):
    dest = str(tmp_path / "bench")
    assert get_data.main(["weibo", "mrpc", "--dest", dest, "--mirror", MIRROR]) == 0
    capsys.readouterr()
    train = os.path.join(dest, "ner/weibo/train.txt")
    mtime = os.stat(train).st_mtime_ns
    assert get_data.main(["weibo", "mrpc", "--dest", dest, "--mirror", MIRROR]) == 0
    out = capsys.readouterr().out
    assert "weibo: already present and verified" in out and "mrpc: already present and verified" in out
    assert os.stat(train).st_mtime_ns == mtime
    with open(train, "ab") as f:  # a file that no longer verifies is fetched again
        f.write(b"x")
    assert get_data.main(["weibo", "--dest", dest, "--mirror", MIRROR]) == 0
    assert "weibo: wrote 3 file(s)" in capsys.readouterr().out
    assert get_data.file_sha256(train) == get_data.DATASETS["weibo"].processed["ner/weibo/train.txt"]


@needs_mirror
def test_a_corrupted_raw_file_is_a_one_line_sha256_error(tmp_path, capsys):
    mirror = tmp_path / "mirror"
    shutil.copytree(os.path.join(MIRROR, "hltcoe"), mirror / "hltcoe")
    dataset = get_data.DATASETS["weibo"]
    bad = mirror / get_data.relative_url(dataset, dataset.raws["dev"])
    os.chmod(bad, 0o644)
    bad.write_bytes(bad.read_bytes()[:-10])
    dest = tmp_path / "bench"
    assert get_data.main(["weibo", "--dest", str(dest), "--mirror", str(mirror)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith(f"error: {bad}: sha256 mismatch: expected {dataset.raws['dev'].sha256}, got ")
    assert not dest.exists(), "nothing is written when a raw file is bad"


def test_offline_fails_fast_with_one_line_naming_mirror(tmp_path, capsys, monkeypatch):
    def no_network(url, timeout=None):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    assert get_data.main(["weibo", "--dest", str(tmp_path / "bench")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith("error: cannot download https://raw.githubusercontent.com/hltcoe/golden-horse/"
                          "7a73c08e45ed94312af4ef2d97cc35a47d029e99/data/weiboNER_2nd_conll.train")
    assert "--mirror DIR" in err


def test_offline_from_the_command_line(tmp_path):
    # port 9 (discard) on this machine refuses the connection at once
    result = subprocess.run([sys.executable, "benchmarks/get_data.py", "afqmc", "--dest", str(tmp_path),
                             "--base-url", "http://127.0.0.1:9", "--timeout", "2"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--mirror DIR" in lines[0], result.stderr


def test_unknown_name_and_missing_mirror(tmp_path, capsys):
    assert get_data.main(["weibu", "--dest", str(tmp_path)]) == 2
    assert "unknown data set 'weibu'" in capsys.readouterr().err
    assert get_data.main(["weibo", "--mirror", str(tmp_path / "nope")]) == 2
    assert "is not a folder" in capsys.readouterr().err


@pytest.mark.parametrize("dest", ["a_file", "a_file/bench"])
def test_a_dest_that_is_or_lies_under_a_file_is_one_line(tmp_path, capsys, dest):
    (tmp_path / "a_file").write_text("x")
    assert get_data.main(["weibo", "--dest", str(tmp_path / dest), "--mirror", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"error: --dest '{tmp_path / dest}'") and "a_file" in err
    assert (tmp_path / "a_file").read_text() == "x"


def test_a_folder_where_the_mirror_has_a_raw_file_is_one_line(tmp_path, capsys):
    dataset = get_data.DATASETS["weibo"]
    where = tmp_path / "mirror" / get_data.relative_url(dataset, dataset.raws["train"])
    where.mkdir(parents=True)
    assert get_data.main(["weibo", "--dest", str(tmp_path / "bench"), "--mirror", str(tmp_path / "mirror")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err == f"error: {where}: is a folder in the mirror, expected the raw file"
    assert not (tmp_path / "bench").exists()
