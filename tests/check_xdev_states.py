#!/usr/bin/env python3
"""check_xdev_states.py STORE STATE_DIR [PLAN]

The clients' states that devices kept through a cross-device plan
('fedvm device --state') against those 'fedvm run' kept for the same run,
with Python's standard library alone:

- STORE is the run's client_states.sqlite (format/client_store.h): a row
  (client, round, state) per client and round, the state as safetensors
  bytes; a client's state is its row of the highest round.
- STATE_DIR holds the devices' state files, client-K.safetensors for client
  K. Exactly the clients with a row have a file (a client that never took
  part has neither), and no STATE.pending file is left.
- Each file holds the tensors of the client's latest row, bit for bit (the
  same names, dtypes, shapes and bytes), and its metadata says what it is:
  fedvm.kind "client_state", fedvm.client K, fedvm.round the round of that
  row, and, given PLAN, fedvm.state the plan's client.state type.

Prints how many clients' states were compared; exit status 1 on any
difference, naming the client.
"""
import json
import os
import re
import sqlite3
import struct
import sys


def tensors(raw, what):
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    meta = head.pop("__metadata__", {})
    data = raw[8 + n:]
    try:
        return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in head.items()}, meta
    except (KeyError, TypeError) as e:
        sys.exit("%s: not a safetensors file (%s)" % (what, e))


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[0])
    store, states = sys.argv[1], sys.argv[2]
    want_type = json.load(open(sys.argv[3]))["client"]["state"]["type"] if len(sys.argv) == 4 else None
    db = sqlite3.connect("file:%s?mode=ro" % store, uri=True)
    rows = {c: (r, s) for c, r, s in db.execute(
        "SELECT client, round, state FROM client_state AS a WHERE round = "
        "(SELECT max(round) FROM client_state AS b WHERE b.client = a.client)")}
    files, pending = {}, []
    for name in os.listdir(states):
        m = re.fullmatch(r"client-(\d+)\.safetensors", name)
        if m:
            files[int(m.group(1))] = os.path.join(states, name)
        elif name.endswith(".pending"):
            pending.append(name)
    bad = []
    if pending:
        bad.append("pending states left: %s" % sorted(pending))
    if set(rows) != set(files):
        bad.append("clients with a row but no file: %s; with a file but no row: %s"
                   % (sorted(set(rows) - set(files)), sorted(set(files) - set(rows))))
    for c in sorted(set(rows) & set(files)):
        r, blob = rows[c]
        want, _ = tensors(blob, "row of client %d" % c)
        got, meta = tensors(open(files[c], "rb").read(), files[c])
        if got != want:
            diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            bad.append("client %d: the tensors differ from the run's (%s)" % (c, ", ".join(diff)))
        expect = {"fedvm.kind": "client_state", "fedvm.client": str(c), "fedvm.round": str(r)}
        if want_type:
            expect["fedvm.state"] = want_type
        for k, v in expect.items():
            if meta.get(k) != v:
                bad.append("client %d: metadata %s is %r, expected %r" % (c, k, meta.get(k), v))
    if not rows:
        bad.append("no client states in %s" % store)
    if bad:
        sys.exit("\n".join(bad))
    print("%d clients' states identical" % len(rows))


if __name__ == "__main__":
    main()
