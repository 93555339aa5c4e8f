#!/usr/bin/env python3
"""check_plan_dot.py - reads what Graphviz made of a 'fedplan --to dot' graph (dot -Tjson) for tests/run_plan.sh.

  check_plan_dot.py summary FILE.json
      one line of counts: nodes, edges, the nodes of each cluster, nodes in
      no cluster, bold (placement-crossing) edges, hexagon nodes (intrinsics
      that move values) and intrinsic nodes (filled, bold outline);
  check_plan_dot.py members FILE.json CLUSTER
      the first label line of each node of cluster CLUSTER ('outside': nodes
      in no cluster), one per line, in the order Graphviz lists them;
  check_plan_dot.py texts FILE.json
      every line of text Graphviz draws (graph and cluster titles, node and
      edge labels) as rendered, one per line: escapes already undone;
  check_plan_dot.py verify FILE.json PROGRAM.json [FN]
      compares the picture with the program, read here independently of
      fedvm (JSON only, includes followed): one node per parameter, per
      instruction and for the result; one edge per argument and one into the
      result; parameters in the cluster of their declared type's placement;
      intrinsics in the cluster their result lives in (broadcast and map at
      the clients, aggregations and apply at the server, federated_value and
      federated_eval at their placement attribute); intrinsics bold, those
      that move values hexagons, other ops neither; edges between the two
      clusters bold. Prints each difference and exits 1 if there is one.
"""
import collections
import json
import os
import sys

# Intrinsics by where their result lives (None: at their 'placement' attribute).
AT = {"federated_broadcast": "clients", "federated_select": "clients", "federated_map": "clients", "federated_apply": "server",
      "federated_sum": "server", "federated_mean": "server", "federated_weighted_mean": "server",
      "federated_min": "server", "federated_max": "server", "federated_aggregate": "server",
      "federated_secure_sum_bitwidth": "server", "federated_secure_modular_sum": "server", "federated_secure_sum": "server",
      "federated_map_all_equal": "clients", "federated_value": None, "federated_eval": None}
# Intrinsics that move values: between the two placements, or an unplaced value to one.
MOVES = {"federated_broadcast", "federated_select", "federated_sum", "federated_mean", "federated_weighted_mean", "federated_min",
         "federated_max", "federated_aggregate", "federated_secure_sum_bitwidth", "federated_secure_modular_sum",
         "federated_secure_sum", "federated_value"}


def read_program(path, funcs, types, seen):
    """The functions and type aliases of path and everything it includes."""
    path = os.path.realpath(path)
    if path in seen:
        return
    seen.add(path)
    doc = json.load(open(path, encoding="utf-8"))
    for inc in doc.get("include", []):
        read_program(os.path.join(os.path.dirname(path), inc), funcs, types, seen)
    funcs.update(doc.get("functions", {}))
    types.update(doc.get("types", {}))


def placement(type_text, types):
    """'server', 'clients', 'outside' (unplaced) or None (not known here) of a type string."""
    for _ in range(32):
        if type_text not in types:
            break
        type_text = types[type_text]
    if "@" not in type_text:
        return "outside"
    if type_text.endswith("@SERVER") and type_text.count("@") == 1:
        return "server"
    if type_text.endswith("@CLIENTS") and type_text.count("@") == 1:
        return "clients"
    return None


def verify(g, program, fn):
    funcs, types = {}, {}
    read_program(program, funcs, types, set())
    if fn is None:
        fn = "next" if "next" in funcs else "main"
    f = funcs[fn]
    want_nodes, want_edges, want_at, ops = [], collections.Counter(), {}, {}
    for name, t in f.get("params", {}).items():
        want_nodes.append(name)
        want_at[name] = placement(t, types)
    for ins in f.get("body", []):
        name, op = ins[0], ins[1]
        rest = ins[2:]
        attrs = rest[0] if rest and isinstance(rest[0], dict) else {}
        args = rest[1:] if rest and isinstance(rest[0], dict) else rest
        # a literal argument runs as a const before its instruction, named <name>#<argument> (format/SPEC.md,
        # Literals); a destructuring [[a, b], "fields", s] as one field per name
        for k, a in enumerate(args):
            if not isinstance(a, str):
                want_nodes.append("%s#%d" % (name, k + 1))
                ops["%s#%d" % (name, k + 1)] = "const"
        args = [a if isinstance(a, str) else "%s#%d" % (name, k + 1) for k, a in enumerate(args)]
        for bound in name if isinstance(name, list) else [name]:
            want_nodes.append(bound)
            ops[bound] = op
            for a in args:
                want_edges[(a, bound)] += 1
            if op in AT:
                want_at[bound] = AT[op] or attrs["placement"].lower()
    want_nodes.append("returns")
    want_edges[(f["result"], "returns")] += 1

    objects = g.get("objects", [])
    clusters = {c["name"]: c for c in objects if "nodes" in c}
    nodes = {o["_gvid"]: o for o in objects if "nodes" not in o}
    name = {gvid: (drawn_texts(o) or [""])[0] for gvid, o in nodes.items()}
    at = {gvid: "outside" for gvid in nodes}
    for cname, c in clusters.items():
        for gvid in c["nodes"]:
            at[gvid] = {"cluster_server": "server", "cluster_clients": "clients"}.get(cname, cname)
    at_name = {name[gvid]: at[gvid] for gvid in nodes}
    problems = []
    if sorted(name.values()) != sorted(want_nodes):
        problems.append("nodes: drawn %s, program %s" % (sorted(name.values()), sorted(want_nodes)))
    drawn_edges = collections.Counter((name[e["tail"]], name[e["head"]]) for e in g.get("edges", []))
    for e in sorted(set(drawn_edges) | set(want_edges)):
        if drawn_edges[e] != want_edges[e]:
            problems.append("edge %s -> %s: drawn %d times, %d arguments" % (e[0], e[1], drawn_edges[e], want_edges[e]))
    for n, w in want_at.items():
        if w is not None and at_name.get(n) != w:
            problems.append("node %s: drawn in %s, lives in %s" % (n, at_name.get(n), w))
    if at_name.get("returns") != at_name.get(f["result"]):
        problems.append("returns: drawn in %s, its value %s in %s" % (at_name.get("returns"), f["result"],
                                                                       at_name.get(f["result"])))
    for gvid, o in nodes.items():
        op = ops.get(name[gvid])
        bold = "bold" in o.get("style", "")
        hexagon = o.get("shape") == "hexagon"
        if op is not None and (bold, hexagon) != (op.startswith("federated_"), op in MOVES):
            problems.append("node %s (%s): bold=%s hexagon=%s" % (name[gvid], op, bold, hexagon))
    for e in g.get("edges", []):
        ends = {at[e["tail"]], at[e["head"]]}
        crossing = ends == {"server", "clients"}
        if crossing != (e.get("penwidth") == "2"):
            problems.append("edge %s -> %s: penwidth %s between %s" % (name[e["tail"]], name[e["head"]],
                                                                       e.get("penwidth"), sorted(ends)))
    for p in problems:
        print(p)
    return 1 if problems else 0


def drawn_texts(obj):
    return [op["text"] for op in obj.get("_ldraw_", []) if op.get("op") == "T"]


def main():
    mode, path = sys.argv[1], sys.argv[2]
    g = json.load(open(path, encoding="utf-8"))
    objects = g.get("objects", [])
    clusters = [o for o in objects if "nodes" in o]
    nodes = [o for o in objects if "nodes" not in o]
    edges = g.get("edges", [])
    in_cluster = {}
    for c in clusters:
        for gvid in c["nodes"]:
            in_cluster[gvid] = c["name"]

    def first_line(n):
        t = drawn_texts(n)
        return t[0] if t else ""

    if mode == "summary":
        counts = ["nodes=%d" % len(nodes), "edges=%d" % len(edges)]
        for c in clusters:
            counts.append("%s=%d" % (c["name"], len(c["nodes"])))
        counts.append("outside=%d" % sum(1 for n in nodes if n["_gvid"] not in in_cluster))
        counts.append("crossing=%d" % sum(1 for e in edges if e.get("penwidth") == "2"))
        counts.append("hexagons=%d" % sum(1 for n in nodes if n.get("shape") == "hexagon"))
        counts.append("intrinsics=%d" % sum(1 for n in nodes if "bold" in n.get("style", "")))
        print(" ".join(counts))
    elif mode == "members":
        want = sys.argv[3]
        for n in nodes:
            if in_cluster.get(n["_gvid"], "outside") == want:
                print(first_line(n))
    elif mode == "texts":
        lines = drawn_texts(g)
        for o in objects + edges:
            lines += drawn_texts(o)
        for line in lines:
            print(line)
    elif mode == "verify":
        sys.exit(verify(g, sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
