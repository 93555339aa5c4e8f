#!/usr/bin/env python3
"""check_shakespeare.py RAW [PREPROCESSED] - 'fedvm data synthetic --kind shakespeare' against FedJAX's Shakespeare.

Reads RAW as FedJAX's reader does (sqlite3, zlib, msgpack ext 4 for an ndarray
of bytes objects; independent of fedvm) and checks what makes it a stand-in
for fedjax.datasets.shakespeare:

- each client's map holds one column, snippets, an ext-4 array (shape,
  [bytes, ...]) of one axis, num_examples its length; both splits hold the
  same clients, every client at least one snippet in each (as TFF's split);
- sizes: snippets per client heavy-tailed around TFF's 16,068 / 715 = 22.5
  (mean within its sampling error, the median well below the mean, the
  largest client over ten times the median), test about 2,356 / 16,068 of
  training;
- every byte is one of FedJAX's 86 characters (no OOV in made-up text);
- the text is learnable: a character bigram model counted on the training
  split predicts the test split's next characters far better than the most
  common character, and below certainty.

With PREPROCESSED ('fedvm data preprocess shakespeare RAW -o PREPROCESSED'),
also checks that its x and y are, client by client and split by split,
fedjax.datasets.shakespeare.preprocess_client(snippets, sequence_length=80)
as written here in NumPy from FedJAX's code.

Needs numpy and msgpack (Debian's python3-numpy, python3-msgpack).
"""
import sqlite3
import sys
import zlib

import msgpack
import numpy as np

VOCAB = b'dhlptx@DHLPTX $(,048cgkoswCGKOSW[_#\'/37;?bfjnrvzBFJNRVZ"&*.26:\naeimquyAEIMQUY]!%)-159\r'
PAD, BOS, EOS, NUM_RESERVED = 0, 1, 2, 3


def table():
    oov = NUM_RESERVED + len(VOCAB)
    t = np.full([256], oov, dtype=np.int32)
    for i, c in enumerate(VOCAB):
        t[c] = NUM_RESERVED + i
    return t, oov + 1


TABLE, VOCAB_SIZE = table()


def preprocess_client(snippets, sequence_length=80):
    """fedjax.datasets.shakespeare.preprocess_client."""
    joined_length = sum(len(i) + 2 for i in snippets)
    joined = np.zeros([joined_length], dtype=np.int32)
    offset = 0
    for i in snippets:
        joined[offset] = BOS
        joined[offset + 1:offset + 1 + len(i)] = TABLE[list(i)]
        joined[offset + 1 + len(i)] = EOS
        offset += len(i) + 2
    padded_length = (joined_length - 1 + sequence_length - 1) // sequence_length * sequence_length
    x = np.full([padded_length], PAD, dtype=np.int32)
    x[:joined_length - 1] = joined[:-1]
    y = np.full([padded_length], PAD, dtype=np.int32)
    y[:joined_length - 1] = joined[1:]
    return x.reshape([-1, sequence_length]), y.reshape([-1, sequence_length])


def decode(blob):
    def ext(code, data):
        if code == 1:
            shape, dtype, buf = msgpack.unpackb(data, raw=True)
            return np.frombuffer(buf, dtype=dtype.decode()).reshape(shape)
        assert code == 4, "ext type %d" % code
        shape, flat = msgpack.unpackb(data, raw=True)
        assert all(isinstance(b, bytes) for b in flat)
        arr = np.empty(len(flat), dtype=object)
        arr[:] = flat
        return arr.reshape(shape)
    return msgpack.unpackb(zlib.decompress(blob), ext_hook=ext, raw=False)


def load(path, table_name):
    con = sqlite3.connect(path)
    rows = con.execute("SELECT client_id, data, num_examples FROM %s ORDER BY rowid" % table_name).fetchall()
    con.close()
    return [(cid, decode(blob), n) for cid, blob, n in rows]


def main(argv):
    raw = argv[0]
    train, test = load(raw, "federated_data"), load(raw, "federated_data_test")
    ids = [c for c, _, _ in train]
    assert ids == [c for c, _, _ in test], "the splits hold different clients"
    assert len(set(ids)) == len(ids), "a client id twice"
    for split in (train, test):
        for cid, d, n in split:
            assert isinstance(cid, bytes), cid
            assert list(d) == ["snippets"], list(d)
            s = d["snippets"]
            assert s.dtype == object and s.shape == (n,) and n >= 1, (cid, s.shape, n)
    sizes = np.array([n for _, _, n in train])
    tsizes = np.array([n for _, _, n in test])
    text = b"".join(b for _, d, _ in train for b in d["snippets"])
    ttext = b"".join(b for _, d, _ in test for b in d["snippets"])
    assert set(text) | set(ttext) <= set(VOCAB), sorted(set(text) - set(VOCAB))
    # heavy-tailed sizes: the mean near TFF's 22.5 within 4 standard errors of the sample
    mean, se = sizes.mean(), sizes.std() / len(sizes) ** 0.5
    assert abs(mean - 16068 / 715) <= 4 * se + 1, (mean, se)
    assert np.median(sizes) < 0.75 * mean and sizes.max() >= 10 * np.median(sizes), (np.median(sizes), sizes.max())
    share = tsizes.sum() / sizes.sum()
    assert 0.10 <= share <= 0.20, "test share %.3f" % share
    # a character bigram model (add-one counts) on training, next characters of the test split
    a = np.frombuffer(text, dtype=np.uint8)
    counts = np.ones((256, 256))
    np.add.at(counts, (a[:-1], a[1:]), 1)
    b = np.frombuffer(ttext, dtype=np.uint8)
    acc = np.mean(counts[b[:-1]].argmax(axis=1) == b[1:])
    majority = np.bincount(b).max() / len(b)
    assert acc >= majority + 0.15 and acc <= 0.9, "bigram accuracy %.3f (majority %.3f)" % (acc, majority)
    seqs = 0
    if len(argv) > 1:
        for name, split in (("federated_data", train), ("federated_data_test", test)):
            pre = load(argv[1], name)
            assert [c for c, _, _ in pre] == ids, "preprocessed: other clients"
            for (cid, d, _), (_, p, n) in zip(split, pre):
                x, y = preprocess_client(list(d["snippets"]))
                assert sorted(p) == ["x", "y"], sorted(p)
                assert p["x"].dtype == np.int32 and p["y"].dtype == np.int32 and n == len(x), (cid, n, len(x))
                assert np.array_equal(p["x"], x) and np.array_equal(p["y"], y), "preprocessed %r differs" % cid
                seqs += n
    print("check_shakespeare: %d clients, %d + %d snippets, per client mean %.1f median %d max %d, %d characters, "
          "bigram test accuracy %.3f (majority %.3f)%s" % (
              len(ids), sizes.sum(), tsizes.sum(), mean, np.median(sizes), sizes.max(), len(text) + len(ttext), acc,
              majority, ", %d sequences of 80 as FedJAX's preprocess_client" % seqs if seqs else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
