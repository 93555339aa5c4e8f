"""Federated datasets from Python: fv.write_dataset's FedJAX files read back as FedJAX reads them
(sqlite3, zlib, msgpack: independently of fedvm) and by fedvm; a dataset fedvm made, read and written
back row for row; a TFF file written by hand opened; bad input refused by name."""

import os
import sqlite3
import subprocess
import sys
import zlib

import msgpack
import numpy as np
import pytest

import conftest
import fedvm as fv

sys.path.insert(0, os.path.join(conftest.ROOT, "tests", "hostile"))
import make_dataset  # noqa: E402  (TFF files encoded by hand, from the protobuf spec)

rng = np.random.default_rng(5)


def fedjax_rows(path, table="federated_data"):
    """(client_id, {column: array}, num_examples) as FedJAX's reader decodes them."""
    def ext(code, data):
        assert code == 1
        shape, dtype, buf = msgpack.unpackb(data, raw=True)
        return np.frombuffer(buf, dtype=dtype.decode()).reshape(shape)

    db = sqlite3.connect(path)
    try:
        return [(cid, msgpack.unpackb(zlib.decompress(blob), ext_hook=ext, raw=False), n)
                for cid, blob, n in db.execute("SELECT client_id, data, num_examples FROM %s ORDER BY rowid" % table)]
    finally:
        db.close()


def test_numpy_arrays_keyed_by_client_id(tmp_path):
    clients = {"f0001": {"x": rng.standard_normal((3, 4)).astype(np.float32), "y": np.array([1, 0, 2], np.int32)},
               b"f0002": {"x": rng.standard_normal((5, 4)).astype(np.float32), "y": np.arange(5, dtype=np.int32)},
               7: {"x": np.zeros((0, 4), np.float32), "y": np.zeros(0, np.int32)}}
    test = {"t": {"x": np.ones((2, 4), np.float32), "y": np.array([3, 3], np.int32)}}
    path = str(tmp_path / "d.sqlite")
    fv.write_dataset(path, splits={None: clients, "test": test})
    rows = fedjax_rows(path)
    assert [r[0] for r in rows] == [b"f0001", b"f0002", b"7"] and [r[2] for r in rows] == [3, 5, 0]
    for (_, cols, _), want in zip(rows, clients.values()):
        assert sorted(cols) == ["x", "y"]
        for k in want:
            assert cols[k].dtype == want[k].dtype and np.array_equal(cols[k], want[k])
    assert [r[0] for r in fedjax_rows(path, "federated_data_test")] == [b"t"]
    assert fv.dataset_splits(path) == ["default", "test"]
    with fv.open_dataset(path) as ds:
        assert len(ds) == 3 and ds.format == "fedjax" and ds.ids == [b"f0001", b"f0002", b"7"]
        assert {k: str(t) for k, t in ds.columns.items()} == {"x": "f32[4]", "y": "i32[]"}
        assert ds.examples("f0002") == 5
        got = ds["f0002"]
        assert np.array_equal(got["x"], clients[b"f0002"]["x"]) and np.array_equal(got["y"], np.arange(5))
        assert ds[2]["x"].shape == (0, 4)
        with pytest.raises(KeyError):
            ds["nobody"]
    with fv.open_dataset(path, "test") as ds:
        assert np.array_equal(ds["t"]["y"], [3, 3])
    info = subprocess.run([conftest.FEDVM, "data", "info", path], capture_output=True, text=True)
    assert info.returncode == 0 and "split default: 3 clients, 8 examples" in info.stdout, info.stdout


def test_a_dataset_read_and_written_back_is_the_same_rows(tmp_path, syn):
    splits = {}
    for split in ("default", "test"):
        with fv.open_dataset(syn, split) as ds:
            splits[split] = dict(zip(ds.ids, ds))
    again = str(tmp_path / "again.sqlite")
    fv.write_dataset(again, splits=splits)
    for table in ("federated_data", "federated_data_test"):
        db1, db2 = sqlite3.connect(syn), sqlite3.connect(again)
        q = "SELECT client_id, data, num_examples FROM %s ORDER BY rowid" % table
        assert db1.execute(q).fetchall() == db2.execute(q).fetchall()
        db1.close()
        db2.close()


def test_a_tff_file(tmp_path):
    path = str(tmp_path / "tff.sqlite")
    xy = make_dataset.xy
    make_dataset.tff(path, [("b", [xy([5.0, 6.0], 3)]), ("a", [xy([1.0, 2.0], 1), xy([3.0, 4.0], 2)])]).close()
    with fv.open_dataset(path, "train") as ds:
        assert ds.format == "tff" and ds.ids == [b"a", b"b"]  # sorted, as TFF lists them
        assert {k: str(t) for k, t in ds.columns.items()} == {"x": "f32[?]", "y": "i64[?]"}
        a = ds["a"]
        assert np.array_equal(a["x"], [[1, 2], [3, 4]]) and np.array_equal(a["y"], [[1], [2]])


def test_bad_clients_are_refused_by_name(tmp_path):
    path = str(tmp_path / "bad.sqlite")
    ok = {"x": np.zeros((2, 3), np.float32)}
    with pytest.raises(fv.FedvmError, match="c2"):
        fv.write_dataset(path, {"c1": ok, "c2": {"x": np.zeros((2, 4), np.float32)}})
    with pytest.raises(fv.FedvmError):
        fv.write_dataset(path, {1: ok, "1": ok})  # the same id twice
    with pytest.raises(TypeError, match="float16"):
        fv.write_dataset(path, {"c1": {"x": np.zeros(2, np.float16)}})
    with pytest.raises(TypeError, match="scalar"):
        fv.write_dataset(path, {"c1": {"x": np.float32(1)}})
    assert os.listdir(str(tmp_path)) == []  # nothing left behind, not even a temporary file
    with pytest.raises(fv.FedvmError, match="bad.sqlite"):
        fv.open_dataset(path)
