"""Command line of the FedAvg reference implementations; pins the thread count before numpy or torch loads.

Standard library only: OpenBLAS (which numpy and torch's matmuls call on
Debian) sizes its thread pool from the environment when it is loaded, so
parse() must run before either library is imported.
"""

import argparse
import os

THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def parser(description):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--data", required=True, metavar="FILE",
                    help="FedJAX SQLite file with split 'default' (training clients, columns pixels u8[28,28] and "
                         "label i32[]) and split 'test', as 'fedvm data import fashion-mnist' writes")
    ap.add_argument("--rounds", type=int, default=20, help="rounds of FedAvg (default 20)")
    ap.add_argument("--clients-per-round", type=int, default=10, metavar="K",
                    help="clients sampled uniformly without replacement each round (default 10)")
    ap.add_argument("--epochs", type=int, default=1, metavar="E", help="local epochs per client (default 1)")
    ap.add_argument("--batch", type=int, default=10, metavar="B", help="local minibatch size (default 10)")
    ap.add_argument("--lr", type=float, default=0.05, help="client learning rate (default 0.05)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the initial model, the client sampling and "
                    "the shuffles; both implementations draw the same numbers for the same seed (default 0)")
    ap.add_argument("--threads", type=int, default=None, metavar="N",
                    help="threads for the linear algebra (default: the libraries' own choice)")
    ap.add_argument("--eval-every", type=int, default=1, metavar="R",
                    help="evaluate on split 'test' every R rounds; 0: after the last round only (default 1)")
    ap.add_argument("--save-init", metavar="FILE.npz",
                    help="write the initial model (w1 b1 w2 b2 w3 b3, weights [in, out]) as .npy arrays in an .npz")
    ap.add_argument("--load-init", metavar="FILE.npz", help="start from this initial model instead of --seed's")
    return ap


def pin_threads(threads):
    """Set the thread count of OpenBLAS and OpenMP through the environment (before they load)."""
    if threads is not None:
        if threads < 1:
            raise SystemExit("--threads must be at least 1")
        for var in THREAD_VARS:
            os.environ[var] = str(threads)


def parse(description, argv=None):
    args = parser(description).parse_args(argv)
    for name in ("rounds", "clients_per_round", "epochs", "batch"):
        if getattr(args, name) < 1:
            raise SystemExit("--%s must be at least 1" % name.replace("_", "-"))
    if args.eval_every < 0:
        raise SystemExit("--eval-every must be 0 or more")
    pin_threads(args.threads)
    return args
