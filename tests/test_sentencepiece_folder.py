"""An XLM-R-family encoder folder with a ``sentencepiece.bpe.model`` and no ``tokenizer.json`` (as
xlm-roberta and bge-m3 folders saved by older tools are): its ids are SentencePiece's own, in fairseq's
numbering, which Hugging Face's XLM-R tokenizers use (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, the
model's pieces from its fourth on one id up). The SentencePiece model is trained here on the texts of data/
by the ``sentencepiece`` library itself, which then is the reference.
"""
import glob
import os
import re

import pytest

from appzoo.errors import ConfigError

spm = pytest.importorskip("sentencepiece")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def data_texts():
    """Every text of data/: each field of a .tsv line, each sentence of a CoNLL file (characters joined)."""
    texts = []
    for path in sorted(glob.glob(os.path.join(ROOT, "data", "*", "*.*"))):
        with open(path, encoding="utf-8") as f:
            content = f.read()
        if path.endswith(".tsv"):
            texts += [field for line in content.splitlines() for field in line.split("\t") if field]
        elif path.endswith(".txt"):
            texts += ["".join(line.split("\t")[0] for line in block.splitlines())
                      for block in content.split("\n\n") if block.strip()]
    return texts


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """An XLM-R-layout folder: sentencepiece.bpe.model (Unigram, NFKC), config.json and weights of a tiny BERT."""
    import paddle
    from paddlenlp.transformers import BertConfig, BertModel

    out = tmp_path_factory.mktemp("xlmr-spm")
    texts = data_texts() + ["Hello world, this is English text.", "ＡＢＣ１２３ full width"]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_prefix=str(out / "sentencepiece.bpe"),
                                   model_type="unigram", vocab_size=800, character_coverage=0.9995,
                                   unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2, num_threads=1)
    os.remove(out / "sentencepiece.bpe.vocab")
    processor = spm.SentencePieceProcessor(model_file=str(out / "sentencepiece.bpe.model"))
    paddle.seed(0)
    BertModel(BertConfig(vocab_size=processor.get_piece_size() + 2, hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=32, max_position_embeddings=128,
                         pad_token_id=1)).save_pretrained(str(out))
    return str(out), processor


def fairseq(ids):
    return [3 if i == 0 else i + 1 for i in ids]


def test_its_ids_are_sentencepieces_own_on_every_text_of_data(folder):
    from appzoo.data.encoding import encode_texts
    from appzoo.data.unigram import UnigramTokenizer, is_unigram_folder

    path, processor = folder
    assert is_unigram_folder(path)
    tokenizer = UnigramTokenizer.from_folder(path)
    texts = data_texts() + ["", "  two  spaces ", "ＡＢＣ（全角）① ﬁ", "unseen 龘 characters 😀", "Hello world"]
    got = encode_texts(tokenizer, texts)["input_ids"]
    mismatched = [(t, ids, [0] + fairseq(processor.encode(t)) + [2]) for t, ids in zip(texts, got)
                  if ids != [0] + fairseq(processor.encode(t)) + [2]]
    assert len(texts) > 2000 and not mismatched, mismatched[:3]
    assert (tokenizer.bos_token_id, tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id) == (0, 1, 2, 3)
    # a special token written in a text is read as that token, as Hugging Face's XLM-R tokenizers do
    assert 0 in encode_texts(tokenizer, ["a <s> b"])["input_ids"][0][1:-1]


def test_it_builds_trains_saves_and_prunes_like_a_tokenizer_json_folder(folder, tmp_path):
    from appzoo.data.encoding import encode_texts
    from appzoo.encoders import build_encoder, check_model_sources, load_encoder, parse_encoder_spec, save_encoder
    from appzoo.encoders.prune import prune

    path, _ = folder
    spec = parse_encoder_spec({"pretrained": path, "prune_vocab": True})
    check_model_sources(spec, 64)
    encoder, tokenizer = build_encoder(spec, None, None)
    texts = ["今天上午，国家队公布了名单", "Hello world"]
    before = encode_texts(tokenizer, texts)["input_ids"]
    kept, _, _ = prune(encoder, tokenizer, {i for ids in before for i in ids})
    save_encoder(encoder, tokenizer, str(tmp_path / "encoder"))
    assert sorted(os.listdir(tmp_path / "encoder")) == ["config.json", "pruned_vocab.json", "tokenizer.json"]
    _, again = load_encoder(str(tmp_path / "encoder"))
    assert encode_texts(again, texts)["input_ids"] == [[kept.index(i) for i in ids] for ids in before]


def test_a_damaged_or_foreign_model_file_is_one_line_naming_it(folder, tmp_path):
    import shutil

    from appzoo.encoders import build_encoder, parse_encoder_spec

    path, _ = folder
    broken = tmp_path / "broken"
    shutil.copytree(path, broken)
    model = broken / "sentencepiece.bpe.model"
    whole = (folder[0] + "/sentencepiece.bpe.model")
    for cut in (5, 1000, os.path.getsize(whole) - 3):
        with open(whole, "rb") as f:
            model.write_bytes(f.read()[:cut])
        with pytest.raises(ConfigError, match=rf"^model\.encoder\.pretrained: {re.escape(str(model))}: cannot be read "
                                              rf"as a SentencePiece model \(.*\); the file is truncated or corrupt$"):
            build_encoder(parse_encoder_spec(str(broken)), None, None)
    bpe = tmp_path / "bpe"
    shutil.copytree(path, bpe)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(data_texts()), model_prefix=str(bpe / "sentencepiece.bpe"),
                                   model_type="bpe", vocab_size=800, character_coverage=0.9995, minloglevel=2, num_threads=1)
    with pytest.raises(ConfigError, match=rf"^model\.encoder\.pretrained: {re.escape(str(bpe))}/sentencepiece\.bpe\.model: "
                                          rf"a SentencePiece BPE model; only a Unigram one \(the XLM-R family\) is read$"):
        build_encoder(parse_encoder_spec(str(bpe)), None, None)
