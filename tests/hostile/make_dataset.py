#!/usr/bin/env python3
"""Hostile FedJAX and TFF SQLite files for tests/hostile/*data*.case and tests/run_data.sh.

usage: make_dataset.py KIND PATH
       make_dataset.py locked PATH COMMAND...   (runs COMMAND while the file is locked)

Standard library only (sqlite3, zlib, struct): msgpack and tf.train.Example
protos are encoded here by hand, independently of fedvm, from their
specifications (msgpack's spec; tensorflow/core/example/{example,feature}.proto
and protobuf's wire format). Each KIND writes one file; `make_dataset.py list`
lists the kinds.
"""

import os
import sqlite3
import struct
import sys
import zlib

# ---- msgpack ------------------------------------------------------------------


class Str(bytes):
    """A msgpack str holding these exact bytes (which need not be UTF-8)."""


class Ext:
    def __init__(self, code, data):
        self.code, self.data = code, data


def packb(o):
    if isinstance(o, Ext):
        n = len(o.data)
        head = {1: b"\xd4", 2: b"\xd5", 4: b"\xd6", 8: b"\xd7", 16: b"\xd8"}.get(n)
        if head is None:
            head = (b"\xc7" + struct.pack(">B", n) if n < 256 else
                    b"\xc8" + struct.pack(">H", n) if n < 65536 else b"\xc9" + struct.pack(">I", n))
        return head + struct.pack(">b", o.code) + o.data
    if isinstance(o, bool):
        return b"\xc3" if o else b"\xc2"
    if isinstance(o, int):
        if 0 <= o < 128:
            return struct.pack(">B", o)
        if o >= 0:
            return b"\xcf" + struct.pack(">Q", o)
        return b"\xd3" + struct.pack(">q", o)
    if isinstance(o, str):
        o = Str(o.encode())
    if isinstance(o, Str):
        n = len(o)
        return (struct.pack(">B", 0xa0 | n) if n < 32 else b"\xd9" + struct.pack(">B", n) if n < 256 else
                b"\xda" + struct.pack(">H", n) if n < 65536 else b"\xdb" + struct.pack(">I", n)) + bytes(o)
    if isinstance(o, bytes):
        n = len(o)
        return (b"\xc4" + struct.pack(">B", n) if n < 256 else b"\xc5" + struct.pack(">H", n) if n < 65536 else
                b"\xc6" + struct.pack(">I", n)) + o
    if isinstance(o, list_of_pairs):
        n = len(o)
        head = struct.pack(">B", 0x80 | n) if n < 16 else b"\xde" + struct.pack(">H", n) if n < 65536 else \
            b"\xdf" + struct.pack(">I", n)
        return head + b"".join(packb(k) + packb(v) for k, v in o)
    if isinstance(o, (list, tuple)):
        n = len(o)
        head = struct.pack(">B", 0x90 | n) if n < 16 else b"\xdc" + struct.pack(">H", n) if n < 65536 else \
            b"\xdd" + struct.pack(">I", n)
        return head + b"".join(packb(x) for x in o)
    raise TypeError(type(o))


class list_of_pairs(list):
    """A msgpack map, its (key, value) pairs in order (keys may repeat)."""


def ndarray(shape, dtype, data):
    """FedJAX's ext 1: (shape, numpy dtype name, C-order little-endian bytes)."""
    return Ext(1, packb([list(shape), dtype, data]))


def i32(values):
    return struct.pack("<%di" % len(values), *values)


def blob(columns):
    """A client's data: zlib of the msgpack map of columns [(name, ext)]."""
    return zlib.compress(packb(list_of_pairs(columns)))


FEDJAX_TABLE = ("CREATE TABLE {} (client_id BLOB NOT NULL PRIMARY KEY, data BLOB NOT NULL, "
                "num_examples INTEGER NOT NULL)")


def fedjax(path, clients, table="federated_data", create=None):
    """clients: [(id, [(column, ext)], num_examples)] or [(rowid, id, columns, num_examples)]."""
    db = sqlite3.connect(path)
    db.execute(create or FEDJAX_TABLE.format(table))
    for c in clients:
        if len(c) == 4:
            db.execute("INSERT INTO %s (rowid, client_id, data, num_examples) VALUES (?, ?, ?, ?)" % table,
                       (c[0], c[1], blob(c[2]), c[3]))
        else:
            db.execute("INSERT INTO %s (client_id, data, num_examples) VALUES (?, ?, ?)" % table,
                       (c[0], blob(c[1]), c[2]))
    db.commit()
    return db


def labels(*v):
    return [("y", ndarray([len(v)], "int32", i32(v)))]


# ---- tf.train.Example ------------------------------------------------------------


def varint(n):
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out += struct.pack("B", b | 0x80)
        else:
            return out + struct.pack("B", b)


def field(num, payload):
    """A length-delimited field."""
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def feature(kind, values):
    if kind == "float":
        return field(2, field(1, struct.pack("<%df" % len(values), *values)))
    if kind == "int64":
        return field(3, field(1, b"".join(varint(v) for v in values)))
    return field(1, b"".join(field(1, v) for v in values))  # bytes


def example(features):
    """features: [(name bytes or str, kind, values)] in order (names may repeat)."""
    entries = []
    for name, kind, values in features:
        if isinstance(name, str):
            name = name.encode()
        entries.append(field(1, field(1, name) + field(2, feature(kind, values))))
    return field(1, b"".join(entries))


TFF_TABLES = ("CREATE TABLE examples (split_name TEXT NOT NULL, client_id TEXT NOT NULL, "
              "serialized_example_proto BLOB NOT NULL);"
              "CREATE TABLE client_metadata (client_id TEXT NOT NULL, split_name TEXT NOT NULL, "
              "num_examples INTEGER NOT NULL);")


def tff(path, clients, split="train"):
    """clients: [(id, [example bytes])]; client_metadata counts the examples."""
    db = sqlite3.connect(path)
    db.executescript(TFF_TABLES)
    for cid, exs in clients:
        db.execute("INSERT INTO client_metadata VALUES (?, ?, ?)", (cid, split, len(exs)))
        for e in exs:
            db.execute("INSERT INTO examples VALUES (?, ?, ?)", (split, cid, e))
    db.commit()
    return db


def xy(x, y):
    return example([("x", "float", x), ("y", "int64", [y])])


# ---- the kinds --------------------------------------------------------------------


def nul_column(path):
    # Column "y\0" in the first client aliased column "y" of the second.
    fedjax(path, [(b"a", [("x", ndarray([1], "int32", i32([1]))), (Str(b"y\0"), ndarray([1], "int32", i32([2])))], 1),
                  (b"b", [("x", ndarray([1], "int32", i32([3]))), ("y", ndarray([1], "int32", i32([4])))], 1)])


def rowid_column(path):
    # A user column named rowid, the same value in every row: each client read the first row.
    create = ("CREATE TABLE federated_data (client_id BLOB NOT NULL PRIMARY KEY, data BLOB NOT NULL, "
              "num_examples INTEGER NOT NULL, rowid INTEGER)")
    db = fedjax(path, [(b"a", labels(1), 1), (b"b", labels(2, 3), 2)], create=create)
    db.execute("UPDATE federated_data SET rowid = 1")
    db.commit()


def rowid_all(path):
    # Columns rowid, _rowid_ and oid hide every name of SQLite's rowid.
    create = ("CREATE TABLE federated_data (client_id BLOB NOT NULL PRIMARY KEY, data BLOB NOT NULL, "
              "num_examples INTEGER NOT NULL, rowid INTEGER, _rowid_ INTEGER, oid INTEGER)")
    db = fedjax(path, [(b"a", labels(1), 1), (b"b", labels(2, 3), 2)], create=create)
    db.execute("UPDATE federated_data SET rowid = 1, _rowid_ = 1, oid = 1")
    db.commit()


def without_rowid(path):
    create = ("CREATE TABLE federated_data (client_id BLOB NOT NULL PRIMARY KEY, data BLOB NOT NULL, "
              "num_examples INTEGER NOT NULL, rowid INTEGER) WITHOUT ROWID")
    db = fedjax(path, [(b"a", labels(1), 1), (b"b", labels(2, 3), 2)], create=create)
    db.execute("UPDATE federated_data SET rowid = 1")
    db.commit()


def extreme_rowids(path):
    # Rowids at both ends of int64: max - min overflowed a signed subtraction. The client at the
    # top rowid is corrupt: its error must name it, at index 2.
    db = fedjax(path, [(-2**63, b"lo", labels(1), 1), (0, b"mid", labels(2, 3), 2), (2**63 - 1, b"hi", labels(4), 1)])
    db.execute("UPDATE federated_data SET data = x'789c' WHERE client_id = x'6869'")
    db.commit()


def extreme_rowids_contiguous(path):
    fedjax(path, [(2**63 - 2, b"a", labels(1), 1), (2**63 - 1, b"b", labels(2, 3), 2)])


def blob_split(path):
    # A split name stored as a BLOB was listed as a split with no clients.
    db = tff(path, [("c1", [xy([1.0], 1)])])
    db.execute("INSERT INTO client_metadata VALUES ('c2', CAST('other' AS BLOB), 1)")
    db.commit()


def blob_client_id(path):
    db = tff(path, [("c1", [xy([1.0], 1)])])
    db.execute("INSERT INTO client_metadata VALUES (CAST('c2' AS BLOB), 'train', 1)")
    db.execute("INSERT INTO examples VALUES ('train', CAST('c2' AS BLOB), ?)", (xy([2.0], 2),))
    db.commit()


def many_columns(path):
    # 100,000 columns: each client's columns were matched to the schema's in quadratic time. The
    # second client has them in reverse, the last one (first in its map) of another dtype.
    cols = [("c%06d" % k, ndarray([1], "int32", i32([k]))) for k in range(100000)]
    other = cols[::-1]
    other[0] = ("c099999", ndarray([1], "float32", struct.pack("<f", 1.5)))
    fedjax(path, [(b"a", cols, 1), (b"b", other, 1)])


def too_many_columns(path):
    cols = [("c%06d" % k, ndarray([1], "int32", i32([k]))) for k in range(100001)]
    fedjax(path, [(b"a", cols, 1)])


def many_features(path):
    # 100,000 features in each example: looked up in quadratic time. The second client's second
    # example has feature f000000 as a float list.
    feats = [("f%06d" % k, "int64", [k]) for k in range(100000)]
    ex = example(feats)
    tff(path, [("a", [ex, ex]), ("b", [ex, example([("f000000", "float", [0.5])] + feats[1:])])])


def too_many_features(path):
    ex = example([("f%06d" % k, "int64", [k]) for k in range(100001)])
    tff(path, [("a", [ex])])


def huge_count(path):
    # client_metadata claiming 2^61 examples: an allocation of that many before counting.
    db = tff(path, [("c1", [xy([1.0], 1)])])
    db.execute("UPDATE client_metadata SET num_examples = ?", (2**61,))
    db.commit()


def huge_count_fedjax(path):
    db = fedjax(path, [(b"a", labels(1), 1), (b"b", labels(2), 1)])
    db.execute("UPDATE federated_data SET num_examples = ?", (2**62,))
    db.commit()


def tff_empty_first(path):
    # The first client in sorted order has no examples; the schema comes from the next.
    tff(path, [("a_empty", []), ("b", [xy([1.0, 2.0], 1), xy([3.0, 4.0], 2)]), ("c", [xy([5.0, 6.0], 3)])])


def tff_varlen_later(path):
    # A feature whose length is the same in the first client but differs in a later one.
    tff(path, [("a", [xy([1.0, 2.0], 1), xy([3.0, 4.0], 2)]), ("b", [xy([5.0], 3), xy([6.0, 7.0, 8.0], 4)]),
               ("c", [xy([9.0, 10.0, 11.0], 5)])])


def tff_later(path):
    # The first client has no examples (the schema comes from the next); x's length varies only in
    # client c. Client d has a feature of another kind: the only error.
    tff(path, [("a_empty", []), ("b", [xy([1.0, 2.0], 1), xy([3.0, 4.0], 2)]), ("c", [xy([5.0], 3), xy([6.0, 7.0, 8.0], 4)]),
               ("d", [example([("x", "int64", [9]), ("y", "int64", [5])])])])


def locked(path):
    # Runs fedvm (argv[3:], PATH's) while another connection holds the file's write lock.
    import subprocess
    fedjax(path, [(b"a", labels(1), 1)]).close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN EXCLUSIVE")
    db.execute("DELETE FROM federated_data")
    rc = subprocess.call(sys.argv[3:])
    db.execute("ROLLBACK")
    sys.exit(rc)


def tff_all_empty(path):
    tff(path, [("a", []), ("b", [])])


def bad_utf8_split(path):
    # A split name that is not UTF-8.
    db = tff(path, [("c1", [xy([1.0], 1)])])
    db.execute("UPDATE client_metadata SET split_name = CAST(x'74726169ff6e' AS TEXT)")
    db.execute("UPDATE examples SET split_name = CAST(x'74726169ff6e' AS TEXT)")
    db.commit()


def bad_utf8_column(path):
    fedjax(path, [(b"a", [(Str(b"x\xff\"q"), ndarray([1], "int32", i32([1])))], 1)])


def bad_utf8_feature(path):
    tff(path, [("a", [example([(b"x\xffq", "int64", [1])])])])


def nul_feature(path):
    # Feature "y\0" in the first client, "y" in the second.
    tff(path, [("a", [example([("x", "int64", [1]), (b"y\0", "int64", [2])])]),
               ("b", [example([("x", "int64", [3]), ("y", "int64", [4])])])])


def control_names(path):
    # Names with control characters and quotes are valid UTF-8: read, and escaped when printed.
    db = tff(path, [("c\x1b[31m", [example([("new\nline", "int64", [1]), ("it's", "int64", [2])])])],
             split="tab\tsplit")
    db.commit()


def absurd_dims(path):
    # A zero-size array of shape [3, 2^63-1, 0]: no bytes, but 2^63-1 rows per example to print.
    fedjax(path, [(b"a", [("x", ndarray([3, 2**63 - 1, 0], "float32", b""))], 3)])


def absurd_width(path):
    fedjax(path, [(b"a", [("x", ndarray([3, 0], "bytes8000000000000", b""))], 3)])


def duplicate_ids(path):
    # A table without FedJAX's primary key, holding one client id twice.
    create = "CREATE TABLE federated_data (client_id BLOB NOT NULL, data BLOB NOT NULL, num_examples INTEGER NOT NULL)"
    fedjax(path, [(b"a", labels(1), 1), (b"b", labels(2), 1), (b"a", labels(3, 4), 2)], create=create)


def text_and_blob_ids(path):
    # The id 'a' as text and as bytes: two clients that print alike.
    create = "CREATE TABLE federated_data (client_id BLOB NOT NULL, data BLOB NOT NULL, num_examples INTEGER NOT NULL)"
    db = fedjax(path, [(b"a", labels(1), 1)], create=create)
    db.execute("INSERT INTO federated_data VALUES ('a', ?, 1)", (blob(labels(2)),))
    db.commit()


def tff_duplicate_ids(path):
    db = tff(path, [("a", [xy([1.0], 1)])])
    db.execute("INSERT INTO client_metadata VALUES ('a', 'train', 5)")
    db.commit()


def mixed_dtypes(path):
    fedjax(path, [(b"a", labels(1), 1), (b"b", [("y", ndarray([1], "float32", struct.pack("<f", 1.5)))], 1)])


def duplicate_column(path):
    fedjax(path, [(b"a", labels(1) + labels(2), 1)])


def tff_duplicate_feature(path):
    # A feature given twice in one example: protobuf's maps keep the last.
    tff(path, [("a", [example([("y", "int64", [1]), ("y", "int64", [2, 3])])])])


def wal(path):
    db = fedjax(path, [(b"a", labels(1), 1), (b"b", labels(2, 3), 2)])
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("INSERT INTO federated_data VALUES (?, ?, ?)", (b"c", blob(labels(4)), 1))
    db.commit()
    # Exits without a checkpoint: client c is only in the -wal file.
    os._exit(0)


def empty(path):
    open(path, "wb").close()


KINDS = {f.__name__: f for f in [
    nul_column, rowid_column, rowid_all, without_rowid, extreme_rowids, extreme_rowids_contiguous, blob_split,
    blob_client_id, many_columns, too_many_columns, many_features, too_many_features, huge_count,
    huge_count_fedjax, tff_empty_first, tff_varlen_later, tff_all_empty, bad_utf8_split, bad_utf8_column,
    bad_utf8_feature, nul_feature, control_names, absurd_dims, absurd_width, duplicate_ids, text_and_blob_ids,
    tff_duplicate_ids, mixed_dtypes, duplicate_column, tff_duplicate_feature, wal, empty, tff_later, locked]}

if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "list":
        print("\n".join(KINDS))
        sys.exit(0)
    if len(sys.argv) < 3 or sys.argv[1] not in KINDS or (len(sys.argv) > 3 and sys.argv[1] != "locked"):
        sys.exit("usage: make_dataset.py KIND PATH (make_dataset.py list: the kinds)")
    if os.path.exists(sys.argv[2]):
        os.unlink(sys.argv[2])
    KINDS[sys.argv[1]](sys.argv[2])
