#!/usr/bin/env python3
"""make_tff_tiny.py - writes tff_tiny.sqlite, a small dataset in TFF's SqlClientData layout.

A few KB for README.md's `fedvm data info` example: EMNIST-like examples
(`pixels`: 16 floats, a 4x4 image; `label`: one int64; `tag`: the writer's
name as bytes) in two splits, train (4 clients of 1, 2, 3 and 6 examples) and
test (2 clients of 2 examples). Written with Python's standard library only:
each example is a tf.train.Example protocol buffer encoded here by hand
(format/proto/example.proto and feature.proto), independently of fedvm's
reader.

Usage: python3 docs/examples/make_tff_tiny.py [OUT]   (default: tff_tiny.sqlite beside this script)
"""
import os
import sqlite3
import struct
import sys


def varint(n):
    n &= (1 << 64) - 1          # int64 as protobuf writes it: two's complement, 64 bits
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number, payload):
    """A length-delimited field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def feature(kind, values):
    # Feature { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
    if kind == "bytes":      # BytesList { repeated bytes value = 1; }
        return field(1, b"".join(field(1, v) for v in values))
    if kind == "float":      # FloatList { repeated float value = 1 [packed = true]; }
        return field(2, field(1, b"".join(struct.pack("<f", v) for v in values)))
    if kind == "int64":      # Int64List { repeated int64 value = 1 [packed = true]; }
        return field(3, field(1, b"".join(varint(v) for v in values)))
    raise ValueError(kind)


def example(features):
    # Example { Features features = 1; }  Features { map<string, Feature> feature = 1; }
    # (a map entry: { string key = 1; Feature value = 2; })
    entries = b"".join(field(1, field(1, name.encode()) + field(2, feature(kind, values)))
                       for name, (kind, values) in sorted(features.items()))
    return field(1, entries)


CLIENTS = {
    "train": [("f0000_14", 1), ("f0001_41", 2), ("f0002_03", 3), ("f0003_27", 6)],
    "test": [("f0000_14", 2), ("f0002_03", 2)],
}


def rows():
    n = 0
    for split, clients in CLIENTS.items():
        for client, count in clients:
            for i in range(count):
                label = (7 * n + 3) % 10
                pixels = [((5 * n + 3 * p) % 17) / 16 for p in range(16)]
                tag = ("w%d" % (n % 40)).encode()
                n += 1
                yield split, client, example({"label": ("int64", [label]), "pixels": ("float", pixels),
                                              "tag": ("bytes", [tag])})


def main(argv):
    out = argv[0] if argv else os.path.join(os.path.dirname(os.path.abspath(__file__)), "tff_tiny.sqlite")
    tmp = out + ".tmp"
    if os.path.exists(tmp):
        os.remove(tmp)
    db = sqlite3.connect(tmp)
    db.execute("PRAGMA page_size = 512")
    # the tables of TFF's sql_client_data_utils
    db.execute("CREATE TABLE examples (split_name TEXT NOT NULL, client_id TEXT NOT NULL, "
               "serialized_example_proto BLOB NOT NULL)")
    db.execute("CREATE TABLE client_metadata (client_id TEXT NOT NULL, split_name TEXT NOT NULL, "
               "num_examples INTEGER NOT NULL)")
    db.executemany("INSERT INTO examples VALUES (?, ?, ?)", rows())
    db.executemany("INSERT INTO client_metadata VALUES (?, ?, ?)",
                   [(c, s, k) for s, cs in CLIENTS.items() for c, k in cs])
    db.commit()
    db.execute("VACUUM")
    db.close()
    os.replace(tmp, out)
    print(f"{out}: {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
