"""Small reader of FedJAX SQLite federated datasets into numpy arrays, for the reference implementations.

Layout (format/DATASETS.md): table federated_data (split 'default') or
federated_data_<split>, rows (client_id BLOB, data BLOB, num_examples INTEGER)
in rowid order; data = zlib(msgpack map column -> ext type 1 whose payload is
msgpack (shape, dtype name, C-order little-endian bytes)). Only numeric
columns (ext type 1) are read; this is all the image datasets need.
Dependencies: the standard library, numpy and msgpack (Debian's
python3-numpy and python3-msgpack).
"""

import sqlite3
import zlib

import msgpack
import numpy as np


def _table(split):
    return "federated_data" if split == "default" else "federated_data_" + split


def _ext_hook(code, payload):
    if code != 1:
        raise ValueError("msgpack ext type %d is not a numeric array (type 1)" % code)
    shape, dtype_name, buf = msgpack.unpackb(payload, raw=True)
    dtype = np.dtype(dtype_name.decode()).newbyteorder("<")
    arr = np.frombuffer(buf, dtype=dtype)
    count = int(np.prod(shape)) if shape else 1
    if arr.size != count:
        raise ValueError("array of shape %r holds %d values, its bytes %d" % (shape, count, arr.size))
    return arr.reshape(shape).astype(dtype.newbyteorder("="), copy=False)


def splits(path):
    """The split names in the file: 'default' for federated_data, S for federated_data_S."""
    with sqlite3.connect("file:%s?mode=ro" % path, uri=True) as db:
        names = [r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'federated_data%' ORDER BY name")]
    return ["default" if n == "federated_data" else n[len("federated_data_"):] for n in names]


def read_clients(path, split="default"):
    """Every client of a split in rowid order: a list of (client_id bytes, {column: ndarray})."""
    clients = []
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        rows = db.execute("SELECT client_id, data, num_examples FROM %s ORDER BY rowid" % _table(split))
        for cid, blob, n in rows:
            cols = msgpack.unpackb(zlib.decompress(blob), ext_hook=_ext_hook, raw=False)
            if not isinstance(cols, dict):
                raise ValueError("client %r: data is not a map of columns" % (cid,))
            for name, arr in cols.items():
                if arr.shape[:1] != (n,):
                    raise ValueError("client %r column %r: shape %r, num_examples %d" % (cid, name, arr.shape, n))
            if isinstance(cid, str):
                cid = cid.encode()
            clients.append((cid, cols))
    finally:
        db.close()
    return clients
