#!/usr/bin/env python3
"""fedvm reads FedJAX files as FedJAX writes them: EMNIST-, Shakespeare- and Stack Overflow-shaped.

Builds small files the way FedJAX's SQLiteFederatedDataBuilder does
(fedjax/core/sqlite_federated_data.py and serialization.py): table
federated_data(client_id BLOB NOT NULL PRIMARY KEY, data BLOB NOT NULL,
num_examples INTEGER NOT NULL); data = zlib.compress(msgpack.packb(examples,
strict_types=True)) where a numeric ndarray is ExtType(1, packb((shape,
dtype.name, arr.tobytes('C')), use_bin_type=True)) and an ndarray of bytes
objects (dtype=object, as FedJAX stores Shakespeare's snippets and Stack
Overflow's text) is ExtType(4, packb((shape, list of bytes), use_bin_type=True)).
numpy is not needed: shapes are tuples, dtype names numpy's ('float32', 'int32',
'int64', and 'bytes<8n>' for a fixed-width 'S<n>' array, padded with NULs),
bytes little-endian as numpy's on x86.

Then runs 'fedvm data info --verify' and 'fedvm data head' on each file and
compares every printed value with what was written. Standard library and
msgpack only.
"""

import argparse
import array
import json
import os
import random
import sqlite3
import struct
import subprocess
import sys
import zlib

import msgpack


def ndarray(shape, dtype, values):
    code = {"float32": "f", "int32": "i", "int64": "q", "uint8": "B"}[dtype]
    buf = array.array(code, values)
    if sys.byteorder == "big":
        buf.byteswap()
    return msgpack.ExtType(1, msgpack.packb((tuple(shape), dtype, buf.tobytes()), use_bin_type=True))


def fixed_bytes(strings):
    """numpy.array(strings): dtype S<n>, n the longest, shorter ones padded with NULs; name bytes<8n>."""
    n = max(len(s) for s in strings)
    data = b"".join(s.ljust(n, b"\0") for s in strings)
    return msgpack.ExtType(1, msgpack.packb(((len(strings),), "bytes%d" % (8 * n), data), use_bin_type=True)), n


def object_bytes(strings):
    return msgpack.ExtType(4, msgpack.packb(((len(strings),), list(strings)), use_bin_type=True))


def write(path, clients):
    """clients: [(id bytes, {column: ExtType}, num_examples)] in order, as SQLiteFederatedDataBuilder.add_many."""
    if os.path.exists(path):
        os.unlink(path)
    db = sqlite3.connect(path)
    db.execute(""" CREATE TABLE federated_data (
    client_id BLOB NOT NULL PRIMARY KEY,
    data BLOB NOT NULL,
    num_examples INTEGER NOT NULL );""")
    db.executemany("INSERT INTO federated_data VALUES (?, ?, ?);",
                   [(cid, zlib.compress(msgpack.packb(cols, strict_types=True)), n) for cid, cols, n in clients])
    db.commit()
    db.close()


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def emnist_like(rng):
    clients, truth = [], []
    for c, n in enumerate([3, 1, 5]):
        pixels = [f32(rng.random()) for _ in range(n * 28 * 28)]
        labels = [rng.randrange(62) for _ in range(n)]
        cid = b"%016x:f%04d_%02d" % (rng.getrandbits(64), rng.randrange(10000), c)
        clients.append((cid, {"pixels": ndarray((n, 28, 28), "float32", pixels), "label": ndarray((n,), "int32", labels)}, n))
        rows = [[pixels[i * 784 + r * 28:i * 784 + (r + 1) * 28] for r in range(28)] for i in range(n)]
        truth.append((cid, [{"pixels": rows[i], "label": labels[i]} for i in range(n)]))
    columns = {"pixels": "f32[28,28]", "label": "i32[]"}
    return clients, truth, columns


WORDS = b"to be or not that is the question whether tis nobler in mind suffer slings arrows".split()


def text(rng, lo, hi):
    return b" ".join(rng.choice(WORDS) for _ in range(rng.randrange(lo, hi)))


def shakespeare_like(rng):
    clients, truth = [], []
    for cid, n in [(b"ALL_S_WELL_THAT_ENDS_WELL_BERTRAM", 4), (b"HAMLET_PRINCE_OF_DENMARK_HAMLET", 2),
                   (b"THE_TEMPEST_MIRANDA", 1)]:
        snippets = [text(rng, 3, 40) for _ in range(n)]
        clients.append((cid, {"snippets": object_bytes(snippets)}, n))
        truth.append((cid, [{"snippets": list(s)} for s in snippets]))
    return clients, truth, {"snippets": "u8[?]"}


def stackoverflow_like(rng):
    clients, truth = [], []
    for c, n in enumerate([3, 2]):
        dates = [b"20%02d-%02d-%02d %02d:%02d:%02d.%02d UTC" % tuple(rng.randrange(1, 28) for _ in range(7))
                 for _ in range(n)]
        titles = [text(rng, 2, 9) for _ in range(n)]
        scores = [rng.randrange(-5, 100) for _ in range(n)]
        tags = [b"|".join(rng.sample([b"python", b"sqlite", b"c", b"msgpack", b"zlib"], 2)) for _ in range(n)]
        tokens = [text(rng, 5, 30) for _ in range(n)]
        kinds = [rng.choice([b"question", b"answer"]) for _ in range(n)]
        # 'type' as numpy's default for a list of bytes: fixed width 'S<n>' (dtype name bytes<8n>).
        type_col, width = fixed_bytes(kinds)
        cols = {"creation_date": object_bytes(dates), "title": object_bytes(titles),
                "score": ndarray((n,), "int64", scores), "tags": object_bytes(tags),
                "tokens": object_bytes(tokens), "type": type_col}
        cid = b"%08d" % rng.randrange(10 ** 8)
        clients.append((cid, cols, n))
        truth.append((cid, [{"creation_date": list(dates[i]), "title": list(titles[i]), "score": scores[i],
                             "tags": list(tags[i]), "tokens": list(tokens[i]),
                             "type": list(kinds[i].ljust(width, b"\0"))} for i in range(n)]))
    columns = {"creation_date": "u8[?]", "title": "u8[?]", "score": "i64[]", "tags": "u8[?]", "tokens": "u8[?]",
               "type": "u8[?]"}
    return clients, truth, columns


def same(got, want, where):
    if isinstance(want, dict):
        if not isinstance(got, dict) or list(got) != list(want):
            raise AssertionError("%s: keys %s, expected %s" % (where, list(got)[:8] if isinstance(got, dict) else type(got).__name__, list(want)))
        for k in want:
            same(got[k], want[k], "%s.%s" % (where, k))
    elif isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            raise AssertionError("%s: %s, expected a list of %d" % (where, "a list of %d" % len(got) if isinstance(got, list) else type(got).__name__, len(want)))
        for i, (g, w) in enumerate(zip(got, want)):
            same(g, w, "%s[%d]" % (where, i))
    elif isinstance(want, float):
        if f32(got) != want:
            raise AssertionError("%s: %r, expected %r" % (where, got, want))
    elif got != want:
        raise AssertionError("%s: %r, expected %r" % (where, got, want))


def run(fedvm, *args):
    p = subprocess.run([fedvm, "data"] + list(args), capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError("fedvm data %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()))
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fedvm", required=True)
    ap.add_argument("--dir", required=True, help="where to write the files")
    args = ap.parse_args()
    rng = random.Random(20240601)
    failures = 0
    for name, make in [("emnist", emnist_like), ("shakespeare", shakespeare_like), ("stackoverflow", stackoverflow_like)]:
        path = os.path.join(args.dir, "fedjax_%s_like.sqlite" % name)
        clients, truth, columns = make(rng)
        write(path, clients)
        try:
            info = run(args.fedvm, "info", path, "--verify")
            want_cols = "  columns: " + ", ".join("%s %s" % kv for kv in columns.items())
            if want_cols not in info.splitlines():
                raise AssertionError("info: no line %r in:\n%s" % (want_cols, info))
            total = sum(n for _, _, n in clients)
            if "split default: %d clients, %d examples" % (len(clients), total) not in info:
                raise AssertionError("info: wrong totals:\n%s" % info)
            for index, (cid, examples) in enumerate(truth):
                out = json.loads(run(args.fedvm, "head", path, cid.decode(), "-n", "1000"))
                same(out["client"], cid.decode(), "client")
                same(out["index"], index, "index")
                same(out["examples"], len(examples), "examples")
                same(out["head"], examples, "%s head" % cid.decode())
                # by index as well
                again = json.loads(run(args.fedvm, "head", path, str(index), "-n", "1"))
                same(again["client"], cid.decode(), "client by index")
            print("check_fedjax_compat: %s: ok (%d clients)" % (name, len(clients)))
        except AssertionError as e:
            failures += 1
            print("check_fedjax_compat: %s: FAIL: %s" % (name, e), file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
