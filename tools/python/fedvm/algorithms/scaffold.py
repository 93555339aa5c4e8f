"""SCAFFOLD (Karimireddy et al. 2020, Algorithm 1, option II) for softmax regression on FedProx's synthetic
data, in Python: programs/scaffold.json, whose runs this reproduces bit for bit."""

import fedvm as fv

from .synthetic import SoftmaxRegression, SyntheticExample, _clients

__all__ = ["scaffold_synthetic"]


def scaffold_synthetic(server_lr=1.0, client_lr=0.01, epochs=20, batch_size=10):
    """SCAFFOLD: the server keeps the model x and a control variate c, each client its own c_i (client
    state, zero before its first round). Client i runs K corrected SGD steps y <- y - lr_l (g(y) + c - c_i)
    from x and keeps c_i+ = c_i - c + (x - y) / (K lr_l); the server takes x <- x - lr_g mean(x - y) and
    c <- c + sum(c_i+ - c_i) / N over the round's clients, N = num_clients. The arguments are the
    hyperparameters' defaults; programs/scaffold.json."""
    LR = fv.hparam("server_lr", fv.f32, server_lr, doc="lr_g, the server's step on the mean model change")
    lib = _clients(client_lr, epochs, batch_size)
    State = fv.Struct(model=SoftmaxRegression, c=SoftmaxRegression)

    @fv.function
    def initialize():
        """The zero model and the zero server control variate, at the server."""
        model = lib["softmax_regression_init"]()
        return fv.federated_value(fv.struct(model=model, c=model), placement="SERVER")

    @fv.function
    def initialize_client():
        """A client's control variate before its first round: zero."""
        return lib["softmax_regression_init"]()

    def step(model, batch, lr, correction):  # one corrected SGD step on a batch
        return model - lr * (fv.grad(lib["softmax_regression_loss"])(model, batch) + correction)

    def epoch(i, model, data, key, correction):  # epoch i: shuffled with fold_in(key, i), in batches
        batches = fv.batch(fv.sequence_shuffle(data, fv.random_fold_in(key, i)), size=lib["BATCH"])
        return fv.sequence_reduce(batches, model, step, lib["CLIENT_LR"], correction)

    @fv.function
    def scaffold_client(model: SoftmaxRegression, c: SoftmaxRegression, c_i: SoftmaxRegression,
                        data: fv.Seq[SyntheticExample], key: fv.u32[2]):
        """K corrected steps from x, then c_i+ = c_i - c + (x - y) / (K lr_l)."""
        totals = lib["synth_totals"](model, data)
        correction = c - c_i
        pseudo_grad = model - fv.fori(lib["EPOCHS"], epoch, model, data, key, correction)
        n = totals.examples.astype(fv.i32)  # K = epochs * ceil(n / batch_size), at least 1
        k = fv.maximum((n + (lib["BATCH"] - 1)) // lib["BATCH"] * lib["EPOCHS"], 1)
        new_c = pseudo_grad / (k.astype(fv.f32) * lib["CLIENT_LR"]) - correction
        return fv.struct(pseudo_grad=pseudo_grad, delta_c=new_c - c_i, new_c=new_c, totals=totals)

    @fv.function
    def server_update(state: State, pseudo_grad: SoftmaxRegression, delta_c_sum: SoftmaxRegression,
                      num_clients: fv.i64):
        """x <- x - lr_g mean(x - y_i); c <- c + sum(c_i+ - c_i) / N."""
        return fv.struct(model=state.model - LR * pseudo_grad, c=state.c + delta_c_sum / num_clients.astype(fv.f32))

    @fv.function(name="next")
    def next_round(state: fv.Server[State], train: fv.Clients[fv.Seq[SyntheticExample]],
                   client_keys: fv.Clients[fv.u32[2]], client_states: fv.Clients[SoftmaxRegression],
                   num_clients: fv.Server[fv.i64]):
        """A round; returns the new server state, the metrics and the clients' new control variates."""
        outs = fv.map_fn(scaffold_client, fv.broadcast(state.model), fv.broadcast(state.c), client_states, train,
                         client_keys)
        metrics = fv.federated_apply(lib["metrics_from_totals"], fv.reduce_sum(outs.totals))
        new_state = fv.federated_apply(server_update, state, fv.reduce_mean(outs.pseudo_grad),
                                       fv.reduce_sum(outs.delta_c), num_clients)
        return fv.struct(state=new_state, metrics=metrics, client_states=outs.new_c)

    @fv.function
    def evaluate(state: fv.Server[State], test: fv.Seq[SyntheticExample]):
        """Loss and accuracy of the server's model on centralized test examples."""
        return fv.federated_apply(lib["synth_test_metrics"], state.model, fv.federated_value(test, placement="SERVER"))

    return fv.Program(initialize, initialize_client, next_round, evaluate, name="scaffold.json",
                      doc="SCAFFOLD for softmax regression on FedProx's synthetic data, written with fedvm's "
                      "Python package (programs/scaffold.json)", hparams=[LR, lib["CLIENT_LR"], lib["EPOCHS"], lib["BATCH"]])
