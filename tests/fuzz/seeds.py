#!/usr/bin/env python3
"""seeds.py - writes the hand-made seed inputs of the fuzz targets into tests/fuzz/corpus/NAME/.

usage: tests/fuzz/seeds.py [NAME...]     (default: every target below)

Each seed is small and valid, or one step from valid, in the layout its target reads (the header of
tests/fuzz/fuzz_NAME.c). The seeds that fedvm itself writes (checkpoints, plans, metrics of real runs,
the cross-device files) come from tests/fuzz/seeds.sh, which also runs this. Only the standard
library and msgpack (Debian's python3-msgpack) are used; the bytes are laid out here from the formats'
specifications, not by fedvm.
"""
import gzip
import json
import os
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def out(name, seed, data):
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, seed), "wb") as f:
        f.write(data)


# ---- safetensors ------------------------------------------------------------------------------

ST_DTYPES = {"BOOL": ("?", 1), "U8": ("B", 1), "I32": ("i", 4), "I64": ("q", 8), "U32": ("I", 4),
             "F32": ("f", 4), "F64": ("d", 8)}


def safetensors(tensors, meta=None, pad=True):
    """tensors: list of (name, dtype, shape, values); values flat, C order."""
    header, data = {}, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, dt, shape, values in tensors:
        fmt, size = ST_DTYPES[dt]
        raw = struct.pack("<%d%s" % (len(values), fmt), *values)
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def seeds_safetensors():
    n = "safetensors"
    out(n, "state_struct", safetensors(
        [("model.w", "F32", [2, 3], [0.5, -1, 2, 3.25, 0, 1e-3]), ("model.b", "F32", [3], [1, 2, 3]),
         ("opt.0", "F32", [], [0.1]), ("opt.1", "I32", [], [7])],
        {"fedvm.state": "<model=<w=f32[2,3],b=f32[3]>,opt=<f32[],i32[]>>", "fedvm.round": "3",
         "fedvm.seed": "1", "fedvm.clients_per_round": "10", "fedvm.program": "fuzz.json"}))
    out(n, "state_value", safetensors([("value", "F64", [2, 2], [1, 2, 3, 4])], {"fedvm.state": "f64[2,2]"}))
    out(n, "state_unknown_dim", safetensors([("value", "F32", [4], [1, 2, 3, 4])], {"fedvm.state": "f32[?]@SERVER"}))
    out(n, "every_dtype", safetensors(
        [("a", "BOOL", [3], [True, False, True]), ("b", "U8", [2], [0, 255]), ("c", "I32", [1], [-5]),
         ("d", "I64", [2], [1 << 40, -1]), ("e", "U32", [1], [4000000000]), ("f", "F32", [1], [1.5]),
         ("g", "F64", [1], [-2.5])],
        {"fedvm.state": "<a=bool[3],b=u8[2],c=i32[1],d=i64[2],e=u32[1],f=f32[1],g=f64[1]>"}))
    out(n, "positional", safetensors([("0", "I32", [2], [1, 2]), ("1.x", "F32", [], [3])],
                                     {"fedvm.state": "<i32[2],<x=f32[]>>"}))
    out(n, "empty_tensor", safetensors([("value", "F32", [0, 3], [])], {"fedvm.state": "f32[0,3]"}))
    out(n, "no_tensors", safetensors([], {"fedvm.kind": "state"}))
    out(n, "no_metadata", safetensors([("w", "F32", [2], [1, 2])]))
    out(n, "unpadded", safetensors([("w", "I64", [1], [3])], {"fedvm.state": "<w=i64[1]>"}, pad=False))
    # near misses
    good = safetensors([("w", "F32", [2], [1, 2])], {"fedvm.state": "<w=f32[2]>"})
    out(n, "truncated", good[:-3])
    out(n, "header_too_long", struct.pack("<Q", 1 << 40) + good[8:])
    out(n, "overlap", struct.pack("<Q", 84) + b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
        b'"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} ' + b"\0" * 4)
    out(n, "f16", safetensors([("w", "U8", [2], [1, 2])]).replace(b'"U8"', b'"F16"'))


# ---- FedJAX client blobs ----------------------------------------------------------------------

def fedjax_array(shape, dtype, fmt, values):
    import msgpack
    raw = struct.pack("<%d%s" % (len(values), fmt), *values) if values else b""
    return msgpack.ExtType(1, msgpack.packb([list(shape), dtype, raw], use_bin_type=True))


def fedjax_bytes(items):
    import msgpack
    return msgpack.ExtType(4, msgpack.packb([[len(items)], list(items)], use_bin_type=True))


def fedjax_client(count, columns):
    import msgpack
    return bytes([count]) + msgpack.packb(columns, use_bin_type=True)


def seeds_fedjax():
    n = "fedjax"
    sep = b"@@client@@"
    c0 = fedjax_client(2, {"x": fedjax_array([2, 3], "float32", "f", [1, 2, 3, 4, 5, 6]),
                           "y": fedjax_array([2], "int32", "i", [0, 1])})
    c1 = fedjax_client(1, {"y": fedjax_array([1], "int32", "i", [2]),
                           "x": fedjax_array([1, 3], "float32", "f", [7, 8, 9])})
    out(n, "two_clients", b"\x01" + c0 + sep + c1)
    out(n, "one_client_level9", b"\x09" + c0)
    out(n, "text_ids", b"\x03" + c0 + sep + c1)
    out(n, "every_dtype", b"\x01" + fedjax_client(1, {
        "b": fedjax_array([1], "bool", "?", [True]), "u8": fedjax_array([1, 2], "uint8", "B", [1, 2]),
        "i64": fedjax_array([1], "int64", "q", [-1]), "u32": fedjax_array([1], "uint32", "I", [7]),
        "f64": fedjax_array([1, 1], "float64", "d", [0.5])}))
    out(n, "byte_strings", b"\x01" + fedjax_client(3, {
        "text": fedjax_bytes([b"ab", b"", b"xyz"]), "label": fedjax_array([3], "int32", "i", [1, 2, 3])}))
    out(n, "fixed_width_bytes", b"\x01" + fedjax_client(2, {
        "s": fedjax_array([2], "bytes24", "B", [0] * 6)}))
    out(n, "empty_client", b"\x01" + fedjax_client(0, {"x": fedjax_array([0, 3], "float32", "f", [])})
        + sep + fedjax_client(1, {"x": fedjax_array([1, 3], "float32", "f", [1, 2, 3])}))
    out(n, "schema_mismatch", b"\x01" + c0 + sep + fedjax_client(1, {
        "x": fedjax_array([1, 4], "float32", "f", [1, 2, 3, 4]), "y": fedjax_array([1], "int32", "i", [0])}))
    # the stored blob itself: a zlib stream made here
    import msgpack
    raw = msgpack.packb({"x": fedjax_array([1], "float32", "f", [1])}, use_bin_type=True)
    out(n, "raw_zlib", b"\x00\x01" + zlib.compress(raw))
    out(n, "raw_zlib_truncated", b"\x00\x01" + zlib.compress(raw)[:-5])


# ---- TFF tf.train.Example protos --------------------------------------------------------------

def varint(v):
    b = b""
    while True:
        x = v & 0x7F
        v >>= 7
        if v:
            b += bytes([x | 0x80])
        else:
            return b + bytes([x])


def field(num, wire, payload):
    if wire == 2:
        return varint(num << 3 | 2) + varint(len(payload)) + payload
    return varint(num << 3 | wire) + payload


def feature(kind, values):
    if kind == "float":
        inner = field(1, 2, struct.pack("<%df" % len(values), *values))
        return field(2, 2, inner)
    if kind == "int":
        inner = field(1, 2, b"".join(varint(v & (2 ** 64 - 1)) for v in values))
        return field(3, 2, inner)
    inner = b"".join(field(1, 2, v) for v in values)
    return field(1, 2, inner)


def example(features):
    entries = b"".join(field(1, 2, field(1, 2, k.encode()) + field(2, 2, feature(*v))) for k, v in features.items())
    return field(1, 2, entries)


def seeds_tff():
    n = "tff"
    ce, ex = b"@@client@@", b"@@example@@"
    e1 = example({"pixels": ("float", [0.5, 1.0, 0.25]), "label": ("int", [3])})
    e2 = example({"pixels": ("float", [0.0, 1.0, 1.0]), "label": ("int", [7])})
    e3 = example({"label": ("int", [1]), "pixels": ("float", [1.0, 2.0, 3.0])})
    out(n, "two_clients", b"\x00" + e1 + ex + e2 + ce + e3)
    out(n, "blob_ids_reversed", b"\x06" + e1 + ce + e2 + ex + e3)
    out(n, "counted", b"\x01" + b"\x02" + e1 + ex + e2 + ce + b"\x01" + e3)
    out(n, "bytes_feature", b"\x00" + example({"text": ("bytes", [b"hello"]), "n": ("int", [-1, 5])}) + ex
        + example({"text": ("bytes", [b""]), "n": ("int", [2, 3])}))
    out(n, "varying_length", b"\x00" + example({"v": ("float", [1.0])}) + ex + example({"v": ("float", [1.0, 2.0])}))
    out(n, "missing_feature", b"\x00" + e1 + ex + example({"pixels": ("float", [1.0, 1.0, 1.0])}))
    out(n, "two_bytes_values", b"\x00" + example({"t": ("bytes", [b"a", b"b"])}))
    out(n, "no_features", b"\x00" + field(1, 2, b""))
    out(n, "empty_client", b"\x01" + b"\x01" + e1 + ce + b"\x00")


# ---- whole dataset files, as SQL -------------------------------------------------------------

def sql_dump(build):
    """The SQL of a database that build(connection) fills, as 'sqlite3 .dump' prints it, less pragmas."""
    import sqlite3
    db = sqlite3.connect(":memory:")
    build(db)
    db.commit()
    return "\n".join(line for line in db.iterdump() if not line.startswith("PRAGMA")) + "\n"


def seeds_dataset_sql():
    import msgpack
    n = "dataset_sql"
    fedjax = "CREATE TABLE %s (client_id BLOB NOT NULL PRIMARY KEY, data BLOB NOT NULL, num_examples INTEGER NOT NULL)"

    def blob(k):
        cols = {"x": fedjax_array([k, 2], "float32", "f", [float(i) for i in range(2 * k)]),
                "y": fedjax_array([k], "int32", "i", list(range(k)))}
        return zlib.compress(msgpack.packb(cols, use_bin_type=True))

    def fj(db, splits=("",)):
        for sp in splits:
            t = "federated_data" + ("_" + sp if sp else "")
            db.execute(fedjax % t)
            for c in range(3):
                db.execute("INSERT INTO %s VALUES (?, ?, ?)" % t, (("c%d" % c).encode(), blob(c + 1), c + 1))
    out(n, "fedjax", sql_dump(fj))
    out(n, "fedjax_splits", sql_dump(lambda db: fj(db, ("", "test", "val_1"))))
    out(n, "fedjax_rowid_gaps", sql_dump(fj) + "DELETE FROM federated_data WHERE client_id = X'6331';\n")
    out(n, "fedjax_text_ids", sql_dump(fj).replace("X'6330'", "'c0'").replace("X'6331'", "'c1'"))

    def tff(db, splits=("train",)):
        db.execute("CREATE TABLE examples (split_name TEXT NOT NULL, client_id TEXT NOT NULL, "
                   "serialized_example_proto BLOB NOT NULL)")
        db.execute("CREATE TABLE client_metadata (client_id TEXT NOT NULL, split_name TEXT NOT NULL, "
                   "num_examples INTEGER NOT NULL)")
        for sp in splits:
            for c in ("b", "a"):
                for e in range(2):
                    db.execute("INSERT INTO examples VALUES (?, ?, ?)",
                               (sp, c, example({"v": ("float", [e, 1.0]), "l": ("int", [e])})))
                db.execute("INSERT INTO client_metadata VALUES (?, ?, 2)", (c, sp))
    out(n, "tff", sql_dump(tff))
    out(n, "tff_splits", sql_dump(lambda db: tff(db, ("train", "test"))))
    out(n, "tff_one_table", "CREATE TABLE examples (split_name TEXT, client_id TEXT, serialized_example_proto BLOB);\n")
    out(n, "fedjax_missing_column", "CREATE TABLE federated_data (client_id BLOB, data BLOB);\n"
        "INSERT INTO federated_data VALUES (X'61', X'00');\n")
    out(n, "not_a_dataset", "CREATE TABLE t (x);\n")


# ---- metrics files ----------------------------------------------------------------------------

def seeds_metrics():
    n = "metrics"
    out(n, "run", '{"round": 1, "train": {"loss": 2.5, "examples": 100.0}, "seconds": 0.5, "clients": 10, '
        '"sampled": [1, 4, 7]}\n{"round": 2, "train": {"loss": 1.5, "examples": 90.0}, "eval": {"loss": 1.25, '
        '"accuracy": 0.5}, "seconds": 0.25, "clients": 10}\n')
    out(n, "non_finite", '{"round": 0, "loss": "nan"}\n{"round": 1, "loss": "inf"}\n{"round": 2, "loss": "-inf"}\n')
    out(n, "restart", '{"round": 0, "a": 1}\n{"round": 1, "a": 2}\n{"round": 0, "a": 3}\n{"round": 1, "b": 4}\n')
    out(n, "partial_last_line", '{"round": 0, "a": 1}\n{"round": 1, "a"')
    out(n, "nested", '{"round": 3, "x": {"y": {"z": {"w": 1}}, "v": true, "s": "str", "n": null}, "t": 2}\n\n  \n')
    out(n, "bare_scalar", '{"round": 5, "train": 0.25}\r\n{"round": 6, "train": {"loss": 1}}\r\n')
    out(n, "no_round", '{"loss": 1}\n')
    out(n, "many_series", json.dumps({"round": 0, **{"m%d" % i: i for i in range(40)}}) + "\n"
        + "".join(json.dumps({"round": r, "s%d" % r: r}) + "\n" for r in range(1, 40)))


# ---- IDX files --------------------------------------------------------------------------------

def idx(code, shape, fmt, values):
    head = bytes([0, 0, code, len(shape)]) + b"".join(struct.pack(">I", d) for d in shape)
    return head + struct.pack(">%d%s" % (len(values), fmt), *values)


def seeds_idx():
    n = "idx"
    out(n, "u8_images", idx(0x08, [2, 2, 3], "B", list(range(12))))
    out(n, "u8_labels", idx(0x08, [4], "B", [9, 0, 3, 1]))
    out(n, "i32", idx(0x0C, [3], "i", [-1, 0, 7]))
    out(n, "f32", idx(0x0D, [2, 1], "f", [0.5, -2]))
    out(n, "f64", idx(0x0E, [1], "d", [3.25]))
    out(n, "empty", idx(0x08, [0, 28], "B", []))
    out(n, "gzip", gzip.compress(idx(0x08, [2, 3], "B", [1, 2, 3, 4, 5, 6]), mtime=0))
    out(n, "gzip_truncated", gzip.compress(idx(0x0D, [4], "f", [1, 2, 3, 4]), mtime=0)[:-6])
    out(n, "too_short", idx(0x08, [5], "B", [1, 2, 3, 4]))
    out(n, "signed_byte", idx(0x09, [1], "b", [-1]))


# ---- the wire format (vm/exec/wire.h; host byte order, little-endian here) ------------------------

TAG_NONE, TAG_TENSOR, TAG_STRUCT, TAG_SEQ_LIST, TAG_SEQ_COLS, TAG_CLIENTS = range(6)
# fvm_dtype order (vm/ir/tensor.h): bool, u8, i32, i64, u32, f32, f64
WIRE_DTYPES = {"bool": (0, "?"), "u8": (1, "B"), "i32": (2, "i"), "i64": (3, "q"), "u32": (4, "I"), "f32": (5, "f"),
               "f64": (6, "d")}


def w_tensor(dt, shape, values):
    code, fmt = WIRE_DTYPES[dt]
    return (bytes([TAG_TENSOR, code, len(shape)]) + b"".join(struct.pack("<q", d) for d in shape)
            + struct.pack("<%d%s" % (len(values), fmt), *values))


def w_list(tag, items):
    return bytes([tag]) + struct.pack("<q", len(items)) + b"".join(items)


def w_str(s):
    if s is None:
        return struct.pack("<I", 0xFFFFFFFF)
    return struct.pack("<I", len(s)) + s.encode()


def w_diag(errors, dropped=0):
    b = struct.pack("<ii", len(errors), dropped)
    for code, line, col, file, ptr, msg in errors:
        b += bytes([code]) + struct.pack("<ii", line, col) + w_str(file) + w_str(ptr) + w_str(msg)
    return b


def seeds_wire():
    n = "wire"
    v = b"\x00"
    out(n, "scalar", v + w_tensor("f32", [], [1.5]))
    out(n, "matrix", v + w_tensor("i64", [2, 2], [1, -2, 3, 1 << 40]))
    out(n, "none", v + bytes([TAG_NONE]))
    out(n, "struct", v + w_list(TAG_STRUCT, [w_tensor("u8", [3], [1, 2, 3]), w_tensor("bool", [], [True]),
                                            bytes([TAG_NONE])]))
    out(n, "seq_list", v + w_list(TAG_SEQ_LIST, [w_tensor("f64", [1], [2.0]), w_tensor("f64", [1], [3.0])]))
    out(n, "seq_cols", v + bytes([TAG_SEQ_COLS]) + struct.pack("<q", 2)
        + w_list(TAG_STRUCT, [w_tensor("f32", [2, 2], [1, 2, 3, 4]), w_tensor("i32", [2], [5, 6])]))
    out(n, "seq_cols_tensor", v + bytes([TAG_SEQ_COLS]) + struct.pack("<q", 3) + w_tensor("u32", [3], [1, 2, 3]))
    out(n, "clients", v + w_list(TAG_CLIENTS, [w_list(TAG_STRUCT, [w_tensor("f32", [], [1.0])]),
                                               w_list(TAG_STRUCT, [w_tensor("f32", [], [2.0])])]))
    out(n, "empty_tensor", v + w_tensor("f32", [0, 5], []))
    d = b"\x01"
    out(n, "diag", d + w_diag([(5, 3, 7, "p.json", "/functions/f", "a type error"),
                               (2, 0, 0, None, None, "syntax")], dropped=2))
    out(n, "diag_empty", d + w_diag([]))


# ---- argument values (type line, then the document) ------------------------------------------

def seeds_value_doc():
    n = "value_doc"
    j, y = "\x00", "\x01"
    cases = {
        "tensor": j + "f32[3]\n[1, 2.5, -3]",
        "scalar_shape": j + "i32[2,2]\n7",
        "bool": j + "bool[2]\n[true, false]",
        "non_finite": j + "f64[3]\n[\"nan\", \"inf\", \"-inf\"]",
        "unknown_dim": j + "u8[?,2]\n[[1, 2], [3, 4], [5, 6]]",
        "empty_rows": j + "f32[?,3]\n[]",
        "struct": j + "<w=f32[2],b=f32[]>\n{\"w\": [1, 2], \"b\": 0.5}",
        "positional": j + "<i64[],<u32[1],bool[]>>\n[1, [[4000000000], true]]",
        "sequence": j + "<x=f32[2],y=i32[]>*\n[{\"x\": [1, 2], \"y\": 0}, {\"x\": [3, 4], \"y\": 1}]",
        "clients": j + "{f32[]*}@CLIENTS\n[[1, 2], [], [3]]",
        "server": j + "<n=i32[]>@SERVER\n{\"n\": 3}",
        "all_equal": j + "f32[2]@CLIENTS\n[0, 1]",
        "yaml_struct": y + "<w=f32[2],b=f32[]>\nw: [1, 2]\nb: .nan\n",
        "yaml_seq": y + "i32[]*\n- 1\n- 2\n- 0x10\n",
        "yaml_anchor": y + "<a=f32[2],b=f32[2]>\na: &v [1, 2]\nb: *v\n",
        "ragged": j + "f32[?,?]\n[[1], [2, 3]]",
        "too_big_int": j + "i32[]\n3000000000",
        "mixed": j + "<a=f32[],i32[]>\n[1, 2]",
        "function": j + "(f32[] -> f32[])\n1",
    }
    for k, v in cases.items():
        out(n, k, v)


# ---- dictionaries (tests/fuzz/NAME.dict) -----------------------------------------------------

def names_of(path, macro):
    """The quoted names of the X-macro rows macro(ID, "name", ...) of a .def file."""
    import re
    text = open(os.path.join(HERE, "..", "..", path)).read()
    return re.findall(r'^%s\(\w+, "([^"]+)"' % macro, text, re.M)


def dict_file(name, tokens):
    def esc(t):
        return "".join(c if 32 <= ord(c) < 127 and c not in '\\"' else "\\x%02x" % ord(c) for c in t)
    with open(os.path.join(HERE, name + ".dict"), "w") as f:
        f.write("# %s.dict - tokens for the fuzz_%s target (written by tests/fuzz/seeds.py)\n" % (name, name))
        for t in sorted(set(tokens)):
            f.write('"%s"\n' % esc(t))


def dicts():
    ops = names_of("vm/ir/ops.def", "FVM_(?:OP|EW)")
    attrs = names_of("vm/ir/attrs.def", "FVM_ATTR")
    keys = ["fedvm", "doc", "form", "include", "hparams", "type", "default", "hparam", "types", "functions", "params",
            "body", "result"]
    types = ["f32", "f64", "i32", "i64", "u8", "u32", "bool", "@CLIENTS", "@SERVER", "{", "}@CLIENTS", "<", ">",
             "*", "[?]", "[]", "->", "=", ","]
    values = ["SERVER", "CLIENTS", "true", "false", "null", "nan", "inf", "-inf", "1e308", "-0", "4294967296",
              "9223372036854775807", "-9223372036854775808"]
    json_tokens = ['"%s"' % t for t in ops + attrs + keys + values] + types + ["[", "]", "{", "}", ":", "\\u0000"]
    dict_file("ir_json", json_tokens)
    yaml_tokens = ops + attrs + keys + types + values + ["- ", ": ", "&a ", "*a", "!!str ", "!!int ", "!!float ",
                                                         "!!map", "!!seq", "---", "...", "|", ">-", "? ", ".nan",
                                                         ".inf", "~", "<<: "]
    dict_file("ir_yaml", yaml_tokens)
    plan = ["plan", "kind", "cross-device", "client", "server", "program", "work", "inputs", "param", "data",
            "client_key", "state", "round_key", "outputs", "name", "aggregation", "secure_sum", "bitwidth", "op",
            "modulus", "max_input",
            "initialize", "prepare", "aggregate", "partial", "block", "function", "merge", "combine",
            "client_index", "client_state", "num_clients", "input", "output"]
    dict_file("xdev_plan", json_tokens + ['"%s"' % t for t in plan])
    meta = ["__metadata__", "dtype", "shape", "data_offsets", "BOOL", "U8", "I32", "I64", "U32", "F32", "F64",
            "F16", "BF16", "fedvm.state", "fedvm.round", "fedvm.seed", "fedvm.kind", "fedvm.plan", "fedvm.client",
            "fedvm.clients", "fedvm.key", "fedvm.population", "fedvm.block", "fedvm.clients_per_round", "fedvm.hparams",
            "value"]
    dict_file("safetensors", ['"%s"' % t for t in meta] + types)
    dict_file("xdev_files", ['"%s"' % t for t in meta + ["state", "broadcast", "update", "partial"]]
              + ["@@file@@", "PLANPLANPLANPLANPLANPLANPLANPLANPLANPLANPLANPLANPLANPLANPLANPLAN", "updates.u0",
                 "secure.s0", "acc.a0", "0,1,2,3,4,5", "-1", "18446744073709551615"])
    dict_file("metrics", ['"round"', '"run"', '"hparams"', '"train"', '"eval"', '"loss"', '"accuracy"', '"seconds"', '"nan"', '"inf"',
                          '"-inf"', "\n", "\r\n", "{", "}", "1e999", "-0.0"])
    dict_file("fedjax", ["@@client@@", "float32", "float64", "int32", "int64", "uint8", "uint32", "bool", "bytes8",
                         "bytes65536", "\xc7", "\xc8", "\xc9", "\xd4\x01", "\xd8\x01", "\xdc", "\xdd", "\xde",
                         "\xdf", "\x93", "\x92", "\x91", "\xc4", "\xc5", "\xc6", "\xd9", "\xda", "\xdb",
                         "\xcf\xff\xff\xff\xff\xff\xff\xff\xff", "\x78\x9c", "\x78\x01", "\x78\xda"])
    dict_file("tff", ["@@client@@", "@@example@@", "\x0a", "\x12", "\x1a", "\x0d", "\xff\xff\xff\xff\x0f",
                      "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"])
    dict_file("value_doc", types + values + ["[", "]", "{", "}", "\n", "- ", ": ", "&a ", "*a", "[[", "]]"])
    dict_file("dataset_sql", ["CREATE TABLE ", "INSERT INTO ", " VALUES ", "federated_data", "federated_data_",
                              "client_id", "data", "num_examples", "examples", "client_metadata", "split_name",
                              "serialized_example_proto", "BLOB", "TEXT", "INTEGER", "NOT NULL", "PRIMARY KEY",
                              "rowid", "X'", "zeroblob(", "NULL", "CAST(", " AS BLOB)", "DELETE FROM ", ";\n"])
    dict_file("wire", ["\xff\xff\xff\xff", "\xff\xff\xff\xff\xff\xff\xff\x7f", "\x00\x00\x00\x80"])


TARGETS = {"safetensors": seeds_safetensors, "fedjax": seeds_fedjax, "tff": seeds_tff, "metrics": seeds_metrics,
           "idx": seeds_idx, "dataset_sql": seeds_dataset_sql, "wire": seeds_wire, "value_doc": seeds_value_doc}

if __name__ == "__main__":
    for name in sys.argv[1:] or TARGETS:
        if name in TARGETS:
            TARGETS[name]()
    dicts()
