#!/usr/bin/env python3
"""poison.py - a FedJAX SQLite file with one client turned malicious, for the robust aggregation tests.

usage: poison.py IN.sqlite OUT.sqlite CLIENT SCALE

Copies IN to OUT and multiplies the features x of the CLIENT-th client of the
training split (in row order, as fedvm numbers clients) by SCALE, so that its
model update is huge. Reads and writes the rows as FedJAX does: zlib-compressed
msgpack maps of column name to NumPy array (msgpack extension 1: shape, dtype,
bytes).
"""
import shutil
import sqlite3
import sys
import zlib

import msgpack
import numpy as np


def unpack_ext(code, data):
    assert code == 1, code
    shape, dtype, buf = msgpack.unpackb(data, raw=True)
    return np.frombuffer(buf, dtype=np.dtype(dtype.decode())).reshape(shape)


def pack_ext(a):
    a = np.ascontiguousarray(a)
    return msgpack.ExtType(1, msgpack.packb([list(a.shape), a.dtype.name, a.tobytes()], use_bin_type=True))


def main(argv):
    if len(argv) != 5:
        print(__doc__)
        return 2
    src, dst, client, scale = argv[1], argv[2], int(argv[3]), float(argv[4])
    shutil.copyfile(src, dst)
    db = sqlite3.connect(dst)
    rows = db.execute("SELECT rowid, data FROM federated_data ORDER BY rowid").fetchall()
    rowid, blob = rows[client]
    cols = msgpack.unpackb(zlib.decompress(blob), ext_hook=unpack_ext, raw=False)
    cols["x"] = (cols["x"] * scale).astype(cols["x"].dtype)
    packed = zlib.compress(msgpack.packb({k: pack_ext(v) for k, v in cols.items()}, use_bin_type=True))
    db.execute("UPDATE federated_data SET data = ? WHERE rowid = ?", (packed, rowid))
    db.commit()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
