#!/usr/bin/env python3
"""check_emnist.py FILE [--only-digits] - 'fedvm data synthetic --kind emnist' against FedJAX's EMNIST.

Reads FILE as FedJAX's reader does (sqlite3, zlib, msgpack ext 1; independent
of fedvm) and checks what makes it a stand-in for fedjax.datasets.emnist:

- each example's domain_id (i32, the column Agnostic FedAvg reads) is the
  domain fedjax.datasets.emnist.domain_id gives its client's id;
- the client ids have FedJAX's form b"[16 hex digits]:f[4 digits]_[2 digits]"
  (fedjax.datasets.emnist.domain_id accepts them: 25 bytes, the form number at
  [18:22]); both splits hold the same clients; about 12% of them are
  high-school writers (forms 2100-2599, domain 0);
- pixels are f32[28,28] in [0, 1] with the background at 1 (FedJAX's
  preprocess_batch takes 1 - pixels as its input), ink in every image;
- labels are in [0, 61] ([0, 9] with --only-digits), digits about 49%;
- sizes: training examples per client with mean near 198 and standard
  deviation near 77 (FedJAX's EMNIST-62: 671,585 over 3400 writers), test
  about 11.5% of training;
- the task is learnable but not trivial: softmax regression on 1 - pixels,
  trained in NumPy on the default split, classifies the test split far above
  the majority class and below certainty.

Needs numpy and msgpack (Debian's python3-numpy, python3-msgpack).
"""
import re
import sqlite3
import sys
import zlib

import msgpack
import numpy as np


def decode(blob):
    def ext(code, data):
        assert code == 1, "ext type %d" % code
        shape, dtype, buf = msgpack.unpackb(data, raw=True)
        return np.frombuffer(buf, dtype=dtype.decode()).reshape(shape)
    return msgpack.unpackb(zlib.decompress(blob), ext_hook=ext, raw=False)


def load(path, table):
    con = sqlite3.connect(path)
    out = []
    for cid, blob, n in con.execute("SELECT client_id, data, num_examples FROM %s ORDER BY rowid" % table):
        d = decode(blob)
        assert sorted(d) == ["domain_id", "label", "pixels"], sorted(d)
        assert d["pixels"].dtype == np.float32 and d["pixels"].shape == (n, 28, 28), (d["pixels"].dtype, d["pixels"].shape)
        assert d["label"].dtype == np.int32 and d["label"].shape == (n,), d["label"].shape
        # Agnostic FedAvg's column: fedjax.datasets.emnist.domain_id of the client id on every example
        form = int(cid[18:22])
        want = 0 if 2100 <= form <= 2599 else 1
        assert d["domain_id"].dtype == np.int32 and d["domain_id"].shape == (n,), d["domain_id"].shape
        assert (d["domain_id"] == want).all(), (cid, d["domain_id"][:3])
        out.append((cid, d["pixels"], d["label"]))
    return out


def main(argv):
    path, digits = argv[0], "--only-digits" in argv
    train, test = load(path, "federated_data"), load(path, "federated_data_test")
    ids = [c for c, _, _ in train]
    assert ids == [c for c, _, _ in test], "the splits hold different clients"
    assert len(set(ids)) == len(ids), "a client id twice"
    forms = []
    for cid in ids:
        assert isinstance(cid, bytes) and re.fullmatch(rb"[0-9a-f]{16}:f[0-9]{4}_[0-9]{2}", cid), cid
        forms.append(int(cid[18:22]))
    high_school = np.mean([2100 <= f <= 2599 for f in forms])
    assert 0.04 <= high_school <= 0.25, "high-school writers %.3f" % high_school
    sizes = np.array([len(y) for _, _, y in train])
    tsizes = np.array([len(y) for _, _, y in test])
    X = 1.0 - np.concatenate([p.reshape(len(y), -1) for _, p, y in train])
    Y = np.concatenate([y for _, _, y in train])
    Xt = 1.0 - np.concatenate([p.reshape(len(y), -1) for _, p, y in test])
    Yt = np.concatenate([y for _, _, y in test])
    assert X.min() >= 0 and X.max() <= 1, (X.min(), X.max())
    assert np.median(X) == 0.0, "background not at 1"
    assert (X.max(axis=1) > 0.5).all(), "an image without ink"
    top = 9 if digits else 61
    assert Y.min() >= 0 and Y.max() <= top and Yt.max() <= top, (Y.min(), Y.max())
    share = np.mean(Y < 10)
    assert (share == 1.0) if digits else (0.44 <= share <= 0.54), "digits %.3f" % share
    # N(198, 77) clipped to [10, 500]: mean and standard deviation within 4 standard errors
    # for the number of clients (the standard deviation's error about 77 / sqrt(2 n))
    se_mean, se_sd = 77 / len(sizes) ** 0.5, 77 / (2 * len(sizes)) ** 0.5
    assert abs(sizes.mean() - 198) <= 4 * se_mean and abs(sizes.std() - 77) <= 4 * se_sd, (sizes.mean(), sizes.std())
    assert sizes.min() >= 10 and sizes.max() <= 500, (sizes.min(), sizes.max())
    ratio = tsizes.sum() / sizes.sum()
    assert 0.10 <= ratio <= 0.13, "test share %.3f" % ratio
    W, b = np.zeros((784, top + 1)), np.zeros(top + 1)
    rng = np.random.default_rng(0)
    for _ in range(10):
        p = rng.permutation(len(Y))
        for i in range(0, len(Y), 100):
            idx = p[i:i + 100]
            z = X[idx] @ W + b
            z -= z.max(axis=1, keepdims=True)
            e = np.exp(z)
            e /= e.sum(axis=1, keepdims=True)
            e[np.arange(len(idx)), Y[idx]] -= 1
            W -= 0.1 * X[idx].T @ e / len(idx)
            b -= 0.1 * e.mean(axis=0)
    acc = np.mean((Xt @ W + b).argmax(axis=1) == Yt)
    majority = np.bincount(Yt).max() / len(Yt)
    print("check_emnist: %d clients, %d + %d examples, sizes %.1f +- %.1f, high school %.3f, digits %.3f, "
          "softmax regression test accuracy %.3f (majority %.3f)" % (
              len(ids), len(Y), len(Yt), sizes.mean(), sizes.std(), high_school, share, acc, majority))
    assert acc >= majority + 0.3 and acc <= 0.95, "accuracy %.3f" % acc
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
