#!/usr/bin/env python3
"""check_stackoverflow.py RAW [PREPROCESSED [--vocab FILE] [--vocab-size N] [--max-length L] [--tokens-only]] - the Stack Overflow stand-in against FedJAX's.

Reads RAW ('fedvm data synthetic --kind stackoverflow') as FedJAX's reader does
(sqlite3, zlib, msgpack; independent of fedvm, with check_shakespeare.py's
decoder) and checks what makes it a stand-in for fedjax.datasets.stackoverflow:

- the splits train (the default table), held_out and test, each client's map
  holding FedJAX's columns: creation_date, title, tags, tokens and type (ext-4
  arrays of bytes objects of one axis) and score (int64), num_examples their
  length, every client at least one example;
- TFF's split: held_out all the examples of the users whose id % 10 == 0 and
  of no other, train the other users' examples dated before 2018-01-01 UTC,
  test theirs from then on; dates in FedJAX's form
  (b'2018-02-28 19:06:18.34 UTC'), in order within a client;
- sizes: every user has at least 100 sentences over the splits (TFF dropped
  the others), heavy-tailed: the mean within 4 standard errors of
  100 + exp(5.2 + 1.1^2 / 2) (the stand-in's lognormal), the median well
  below it and the largest user over five times the median; about a tenth of
  the users held out; test smaller than train;
- the words: tokens separated by single spaces; Zipf's law (the log-log
  slope of count against rank between -1.3 and -0.9 over ranks 10 to 2000),
  more than 10000 distinct words, the top 10000 covering 85% to 99% of the
  training split's tokens (an OOV rate that means something).

With PREPROCESSED ('fedvm data preprocess stackoverflow RAW -o PREPROCESSED'),
also checks, client by client and split by split, that its x, y and domain_id
are FedJAX's StackoverflowTokenizer(vocab).as_preprocess_batch(max_length)
and load_data's preprocess_client, written here from FedJAX's code: the
vocabulary the training split's 10000 most frequent words (count descending,
then bytes ascending) or the first words of --vocab FILE (a word, or a word
and its count, per line); ids PAD 0, BOS 1, EOS 2, word i 3 + i, OOV 3 + size.
--tokens-only: RAW is any file with a column tokens (not checked as the
stand-in), and only its default split is compared.

Needs numpy and msgpack (Debian's python3-numpy, python3-msgpack).
"""
import collections
import os
import re
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_shakespeare import load  # noqa: E402  (FedJAX's reading, shared)

TEXT = ("creation_date", "title", "tags", "tokens", "type")
DATE = re.compile(rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d\d UTC$")
PAD, BOS, EOS = 0, 1, 2


def tokenize(tokens, table, max_length):
    """StackoverflowTokenizer.as_preprocess_batch(max_length) on one example."""
    ids = [BOS] + [table.get(w, len(table)) + 3 for w in tokens.split(b" ")] + [EOS]
    x = (ids[:-1] + [PAD] * max_length)[:max_length]
    y = (ids[1:] + [PAD] * max_length)[:max_length]
    return x, y


def vocabulary(train, vocab_file, size=10000):
    if vocab_file:
        words = [line.split()[0] for line in open(vocab_file, "rb") if line.strip()][:size]
    else:
        counts = collections.Counter(w for _, d, _ in train for t in d["tokens"] for w in t.split(b" "))
        words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:size]]
    return {w: i for i, w in enumerate(words)}


def check_raw(raw):
    splits = {s: load(raw, t) for s, t in
              (("train", "federated_data"), ("held_out", "federated_data_held_out"), ("test", "federated_data_test"))}
    total = collections.Counter()
    for name, split in splits.items():
        ids = [c for c, _, _ in split]
        assert len(set(ids)) == len(ids) and ids == sorted(ids), "%s: ids repeated or out of order" % name
        for cid, d, n in split:
            assert isinstance(cid, bytes) and re.match(rb"^\d{8}$", cid), cid
            assert sorted(d) == sorted(TEXT + ("score",)), sorted(d)
            assert n >= 1, (name, cid)
            for c in TEXT:
                a = d[c]
                assert a.dtype == object and a.shape == (n,) and all(isinstance(b, bytes) for b in a), (cid, c)
            assert d["score"].dtype == np.int64 and d["score"].shape == (n,), (cid, d["score"].dtype)
            held = int(cid) % 10 == 0
            assert held == (name == "held_out"), "%s: user %s in %s" % (name, cid, name)
            dates = list(d["creation_date"])
            assert all(DATE.match(t) for t in dates), dates[:3]
            assert dates == sorted(dates), "%s: dates out of order" % cid
            if name == "train":
                assert dates[-1] < b"2018-01-01", (cid, dates[-1])
            elif name == "test":
                assert dates[0] >= b"2018-01-01", (cid, dates[0])
            assert set(d["type"]) <= {b"question", b"answer"}, set(d["type"])
            assert all(t and b"" not in t.split(b"|") for t in d["tags"]), cid
            assert all(t and b"" not in t.split(b" ") for t in d["tokens"]), cid
            total[cid] += n
    held = set(c for c, _, _ in splits["held_out"])
    assert not held & set(c for c, _, _ in splits["train"] + splits["test"]), "held-out users elsewhere"
    sizes = np.array(list(total.values()))
    assert sizes.min() >= 100, "a user with %d sentences" % sizes.min()
    mean, se, want = sizes.mean(), sizes.std() / len(sizes) ** 0.5, 100 + np.exp(5.2 + 1.1 ** 2 / 2)
    assert abs(mean - want) <= 4 * se, (mean, se, want)
    med = np.median(sizes)
    assert med < 0.8 * mean and sizes.max() >= 5 * med, (med, mean, sizes.max())
    share_held = len(held) / len(sizes)
    assert 0.03 <= share_held <= 0.2, share_held
    n = {s: sum(k for _, _, k in v) for s, v in splits.items()}
    assert 0.05 <= n["test"] / n["train"] <= 0.3, n
    counts = collections.Counter(w for _, d, _ in splits["train"] for t in d["tokens"] for w in t.split(b" "))
    freq = np.array(sorted(counts.values(), reverse=True), dtype=float)
    r = np.arange(10, 2000)
    slope = np.polyfit(np.log(r + 1), np.log(freq[r]), 1)[0]
    cover = freq[:10000].sum() / freq.sum()
    assert len(freq) > 10000 and -1.3 <= slope <= -0.9 and 0.85 <= cover <= 0.99, (len(freq), slope, cover)
    print("check_stackoverflow: %d users (%d held out), sentences train %d, held_out %d, test %d; per user mean %.0f "
          "(lognormal's %.0f), median %d, max %d; %d distinct words, Zipf slope %.2f, top 10000 cover %.3f" % (
              len(sizes), len(held), n["train"], n["held_out"], n["test"], mean, want, med, sizes.max(), len(freq),
              slope, cover))
    return splits


def check_preprocessed(splits, path, vocab_file, max_length, vocab_size):
    table = vocabulary(splits["train"], vocab_file, vocab_size)
    rows = 0
    for name, t in (("train", "federated_data"), ("held_out", "federated_data_held_out"), ("test", "federated_data_test")):
        if name not in splits:
            continue
        pre = load(path, t)
        assert [c for c, _, _ in pre] == [c for c, _, _ in splits[name]], "preprocessed %s: other clients" % name
        for (cid, d, _), (_, p, n) in zip(splits[name], pre):
            assert sorted(p) == (["domain_id", "x", "y"] if "type" in d else ["x", "y"]), sorted(p)
            xy = [tokenize(t, table, max_length) for t in d["tokens"]]
            x = np.array([a for a, _ in xy], np.int32)
            y = np.array([b for _, b in xy], np.int32)
            dom = (d["type"] == b"answer").astype(np.int32) if "type" in d else p.get("domain_id")
            assert p["x"].dtype == np.int32 and p["y"].dtype == np.int32
            assert n == len(x) and np.array_equal(p["x"], x) and np.array_equal(p["y"], y), "%s %r differs" % (name, cid)
            assert dom is None or (p["domain_id"].dtype == np.int32 and np.array_equal(p["domain_id"], dom)), cid
            rows += n
    print("check_stackoverflow: %d sequences of %d as FedJAX's StackoverflowTokenizer (vocabulary %d words, %s)" % (
        rows, max_length, len(table), vocab_file or "the training split's counts"))


def main(argv):
    vocab_file, max_length, vocab_size = None, 20, 10000
    if "--vocab-size" in argv:
        i = argv.index("--vocab-size")
        vocab_size = int(argv[i + 1])
        del argv[i:i + 2]
    if "--vocab" in argv:
        i = argv.index("--vocab")
        vocab_file = argv[i + 1]
        del argv[i:i + 2]
    if "--max-length" in argv:
        i = argv.index("--max-length")
        max_length = int(argv[i + 1])
        del argv[i:i + 2]
    if "--tokens-only" in argv:  # any file with tokens (no stand-in checks), its default split
        argv.remove("--tokens-only")
        splits = {"train": load(argv[0], "federated_data")}
    else:
        splits = check_raw(argv[0])
    if len(argv) > 1:
        check_preprocessed(splits, argv[1], vocab_file, max_length, vocab_size)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
