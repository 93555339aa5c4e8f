#!/usr/bin/env python3
"""Independent reader of FedJAX SQLite files, for files fedvm writes.

Decodes a file exactly as FedJAX's reader does (sqlite3; table federated_data
with client_id, data, num_examples in rowid order; zlib.decompress; msgpack
with ext type 1 holding msgpack (shape, dtype name, C-order bytes), unpacked
with raw=True as FedJAX's _ndarray_from_bytes does) and checks the layout,
the dtype names and the values against facts given as JSON:

  {"splits": ["default", "test"],                 # the tables, in this order
   "default": {"clients": 10, "examples": 60000,
               "columns": {"pixels": ["uint8", [28, 28]], "label": ["int32", []]},
               "label": "label", "label_range": [0, 9],   # optional checks below
               "equal_sizes": true, "max_labels_per_client": 2, "min_client_size": 10,
               "client_ids": ["f_00000", ...]}}

It also re-encodes each client as FedJAX's writer would (msgpack.packb of the
same map, use_bin_type=True) and requires the same bytes; with --same-zlib
(Python's zlib is the library fedvm uses) also zlib.compress's bytes.
With --fashion-mnist DIR, the default split must hold every training image of
DIR's IDX files exactly once with its label, and split 'test' the test set in
order. Only the standard library and msgpack (Debian's python3-msgpack).
"""

import argparse
import array
import collections
import gzip
import json
import sqlite3
import struct
import sys
import zlib

import msgpack

# numpy dtype names -> array/struct codes (FedJAX stores numpy's native
# little-endian bytes).
CODES = {"bool": "B", "uint8": "B", "int32": "i", "int64": "q", "uint32": "I", "float32": "f", "float64": "d"}


SAME_ZLIB = False


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def decode_ndarray(data):
    """FedJAX's _ndarray_from_bytes, without numpy: (shape, dtype name, values)."""
    shape, dtype_name, buf = msgpack.unpackb(data, raw=True)
    name = dtype_name.decode()
    check(name in CODES, "dtype %r is not one fedvm writes" % name)
    values = array.array(CODES[name])
    values.frombytes(buf)
    if sys.byteorder == "big":
        values.byteswap()
    count = 1
    for dim in shape:
        count *= dim
    check(len(values) == count, "shape %r holds %d values, the bytes %d" % (shape, count, len(values)))
    return list(shape), name, values, buf


def ext_hook(code, data):
    check(code == 1, "msgpack ext type %d, FedJAX's ndarray is 1" % code)
    return decode_ndarray(data)


def read_split(db, table):
    rows = db.execute("SELECT client_id, data, num_examples FROM %s ORDER BY rowid" % table).fetchall()
    clients = []
    for cid, blob, n in rows:
        check(isinstance(cid, bytes), "client_id %r is not a blob" % (cid,))
        check(isinstance(n, int), "num_examples %r is not an integer" % (n,))
        raw = zlib.decompress(blob)
        cols = msgpack.unpackb(raw, ext_hook=ext_hook, raw=False)
        check(isinstance(cols, dict) and cols, "client %r: data is not a map of columns" % cid)
        # FedJAX's writer: msgpack_serialize (packb, use_bin_type) then zlib.compress.
        again = msgpack.packb(msgpack.unpackb(raw, ext_hook=msgpack.ExtType, raw=False), use_bin_type=True)
        check(again == raw, "client %r: msgpack bytes differ from FedJAX's encoding" % cid)
        if SAME_ZLIB:
            check(zlib.compress(raw) == blob, "client %r: zlib bytes differ from zlib.compress" % cid)
        for name, (shape, _, _, _) in cols.items():
            check(shape and shape[0] == n, "client %r column %r: %r rows, num_examples %d" % (cid, name, shape, n))
        clients.append((cid, n, cols))
    return clients


def check_split(name, clients, facts):
    if "clients" in facts:
        check(len(clients) == facts["clients"], "split %s: %d clients, expected %d" % (name, len(clients), facts["clients"]))
    if "examples" in facts:
        total = sum(n for _, n, _ in clients)
        check(total == facts["examples"], "split %s: %d examples, expected %d" % (name, total, facts["examples"]))
    if "client_ids" in facts:
        ids = [c.decode() for c, _, _ in clients]
        check(ids == facts["client_ids"], "split %s: client ids %r..., expected %r..." % (name, ids[:3], facts["client_ids"][:3]))
    for cid, n, cols in clients:
        if "columns" in facts:
            want = facts["columns"]
            check(list(cols) == list(want), "client %r: columns %r, expected %r" % (cid, list(cols), list(want)))
            for col, (dtype, shape) in want.items():
                got_shape, got_dtype = cols[col][0], cols[col][1]
                check(got_dtype == dtype, "client %r column %s: dtype %s, expected %s" % (cid, col, got_dtype, dtype))
                check(got_shape[1:] == shape, "client %r column %s: shape %r, expected [n]+%r" % (cid, col, got_shape, shape))
        if "min_client_size" in facts:
            check(n >= facts["min_client_size"], "client %r: %d examples, below %d" % (cid, n, facts["min_client_size"]))
        if "label" in facts:
            labels = cols[facts["label"]][2]
            lo, hi = facts.get("label_range", [None, None])
            if lo is not None:
                check(all(lo <= v <= hi for v in labels), "client %r: a label outside [%d, %d]" % (cid, lo, hi))
            if "max_labels_per_client" in facts:
                check(len(set(labels)) <= facts["max_labels_per_client"],
                      "client %r: %d labels" % (cid, len(set(labels))))
    if facts.get("equal_sizes"):
        sizes = {n for _, n, _ in clients}
        check(len(sizes) == 1, "split %s: client sizes differ: %r" % (name, sorted(sizes)))


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, kind, ndim = struct.unpack(">HBB", data[:4])
    check(zero == 0 and kind == 8, "%s is not an IDX file of bytes" % path)
    dims = struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim])
    return dims, data[4 + 4 * ndim:]


def check_fashion_mnist(clients, test, source):
    """Every training image exactly once with its label; the test split the test set in order."""
    dims, images = read_idx(source + "/train-images-idx3-ubyte.gz")
    _, labels = read_idx(source + "/train-labels-idx1-ubyte.gz")
    size = dims[1] * dims[2]
    want = collections.Counter((images[i * size:(i + 1) * size], labels[i]) for i in range(dims[0]))
    got = collections.Counter()
    for cid, n, cols in clients:
        pix, lab = cols["pixels"][3], cols["label"][2]
        for i in range(n):
            got[(pix[i * size:(i + 1) * size], lab[i])] += 1
    check(got == want, "the clients' (image, label) pairs are not the training set")
    tdims, timages = read_idx(source + "/t10k-images-idx3-ubyte.gz")
    _, tlabels = read_idx(source + "/t10k-labels-idx1-ubyte.gz")
    check(len(test) == 1 and test[0][0] == b"test", "split test is not one client 'test'")
    cols = test[0][2]
    check(cols["pixels"][3] == timages, "split test: pixels differ from the test images")
    check(list(cols["label"][2]) == list(tlabels), "split test: labels differ from the test labels")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--facts", required=True, help="JSON text, or @FILE")
    ap.add_argument("--fashion-mnist", metavar="DIR", help="cross-check against the IDX files in DIR")
    ap.add_argument("--same-zlib", action="store_true", help="require zlib.compress's exact bytes")
    args = ap.parse_args()
    global SAME_ZLIB
    SAME_ZLIB = args.same_zlib
    text = open(args.facts[1:]).read() if args.facts.startswith("@") else args.facts
    facts = json.loads(text)
    try:
        db = sqlite3.connect("file:%s?mode=ro" % args.file, uri=True)
        schema = db.execute("SELECT sql FROM sqlite_master WHERE name = 'federated_data'").fetchone()
        check(schema is not None, "no table federated_data")
        cols = [(r[1], r[2].upper(), r[3], r[5]) for r in db.execute("PRAGMA table_info(federated_data)")]
        check(cols == [("client_id", "BLOB", 1, 1), ("data", "BLOB", 1, 0), ("num_examples", "INTEGER", 1, 0)],
              "federated_data's columns are not FedJAX's: %r" % cols)
        tables = [r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'federated_data%' ORDER BY name")]
        splits = ["default" if t == "federated_data" else t[len("federated_data_"):] for t in tables]
        if "splits" in facts:
            check(splits == facts["splits"], "splits %r, expected %r" % (splits, facts["splits"]))
        data = {}
        for split, table in zip(splits, tables):
            data[split] = read_split(db, table)
            if split in facts:
                check_split(split, data[split], facts[split])
        if args.fashion_mnist:
            check_fashion_mnist(data["default"], data.get("test", []), args.fashion_mnist)
    except (Failure, sqlite3.Error, zlib.error, msgpack.exceptions.UnpackException, ValueError) as e:
        print("check_fedjax_file: %s: %s" % (args.file, e), file=sys.stderr)
        return 1
    print("check_fedjax_file: %s: ok (%s)" % (args.file, ", ".join(
        "%s: %d clients" % (s, len(data[s])) for s in splits)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
