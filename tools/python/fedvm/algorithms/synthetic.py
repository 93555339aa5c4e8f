"""Federated algorithms for softmax regression on FedProx's synthetic data, in Python: the programs
programs/fedavg.json, fedprox.json, fedadam.json, fedyogi.json and fedadagrad.json (with
programs/lib/fedavg_synthetic.json, lib/optim.json, lib/metrics.json and
models/softmax_regression.json), whose runs these reproduce bit for bit."""

import fedvm as fv

__all__ = ["fedavg_synthetic", "fedprox_synthetic", "fedadam_synthetic", "fedyogi_synthetic", "fedadagrad_synthetic",
           "fedsgd_synthetic"]

# the model and the data (programs/models/softmax_regression.json, lib/metrics.json, lib/optim.json)
SoftmaxRegression = fv.Struct(w=fv.f32[60, 10], b=fv.f32[10])
SyntheticExample = fv.Struct(x=fv.f32[60], y=fv.i32)
SyntheticBatch = fv.Struct(x=fv.f32[None, 60], y=fv.i32[None])
EvalTotals = fv.Struct(loss=fv.f32, correct=fv.f32, examples=fv.f32)
FedOptState = fv.Struct(m=fv.f32[None], v=fv.f32[None])


def _clients(client_lr, epochs, batch_size):
    """The model, metrics and client training shared by every algorithm (lib/fedavg_synthetic.json)."""
    CLIENT_LR = fv.hparam("client_lr", fv.f32, client_lr, doc="the clients' SGD learning rate")
    EPOCHS = fv.hparam("epochs", fv.i32, epochs, doc="E: local epochs per round")
    BATCH = fv.hparam("batch_size", fv.i32, batch_size, doc="B: examples per local SGD step")
    ns = {"CLIENT_LR": CLIENT_LR, "EPOCHS": EPOCHS, "BATCH": BATCH}

    @fv.function
    def softmax_regression_init():
        """The zero model."""
        return fv.struct(w=fv.zeros([60, 10]), b=fv.zeros([10]))

    @fv.function
    def softmax_regression_logits(model: SoftmaxRegression, x: fv.f32[None, 60]):
        return x @ model.w + model.b

    @fv.function
    def softmax_regression_loss(model: SoftmaxRegression, batch: SyntheticBatch):
        """Mean softmax cross-entropy over the batch."""
        return fv.mean(fv.softmax_cross_entropy(softmax_regression_logits(model, batch.x), batch.y))

    @fv.function
    def softmax_regression_flatten(model: SoftmaxRegression):
        """The model as one vector: w row-major (600 entries), then b (10)."""
        return fv.concat(model.w.reshape(-1), model.b)

    @fv.function
    def softmax_regression_unflatten(flat: fv.f32[None]):
        """The inverse of softmax_regression_flatten."""
        w = fv.slice(flat, start=[0], stop=[600]).reshape(60, 10)
        b = fv.slice(flat, start=[600], stop=[610]).reshape(10)
        return fv.struct(w=w, b=b)

    @fv.function
    def metrics_zero_totals():
        zero = fv.array(0.0)
        return fv.struct(loss=zero, correct=zero, examples=zero)

    @fv.function
    def metrics_batch_totals(logits: fv.f32[None, None], labels: fv.i32[None]):
        """A batch's summed cross-entropy, examples classified right, examples."""
        losses = fv.softmax_cross_entropy(logits, labels)
        right = fv.argmax(logits, axis=-1) == labels.astype(fv.i64)
        return fv.struct(loss=fv.sum(losses), correct=fv.sum(right.astype(fv.f32)), examples=fv.sum(fv.ones_like(losses)))

    @fv.function
    def metrics_from_totals(totals: EvalTotals):
        """loss = total loss / examples, accuracy = correct / examples."""
        examples = totals.examples
        return fv.struct(loss=totals.loss / examples, accuracy=totals.correct / examples, examples=examples)

    @fv.function
    def synth_sgd_step(model: SoftmaxRegression, batch: SyntheticBatch, lr: fv.f32):
        """One step of SGD on a batch: model - lr * grad(mean cross-entropy)."""
        return model - lr * fv.grad(softmax_regression_loss)(model, batch)

    @fv.function
    def synth_epoch(i: fv.i32, model: SoftmaxRegression, data: fv.Seq[SyntheticExample], key: fv.u32[2]):
        """Epoch i: shuffle with random_fold_in(key, i), batches of batch_size, SGD with client_lr."""
        batches = fv.batch(fv.sequence_shuffle(data, fv.random_fold_in(key, i)), size=BATCH)
        return fv.sequence_reduce(batches, model, synth_sgd_step, CLIENT_LR)

    @fv.function
    def synth_add_batch_totals(acc: EvalTotals, batch: SyntheticBatch, model: SoftmaxRegression):
        return acc + metrics_batch_totals(softmax_regression_logits(model, batch.x), batch.y)

    @fv.function
    def synth_totals(model: SoftmaxRegression, data: fv.Seq[SyntheticExample]):
        """The model's totals on a sequence of examples, in batches of 500."""
        return fv.sequence_reduce(fv.batch(data, size=500), metrics_zero_totals(), synth_add_batch_totals, model)

    @fv.function
    def synth_client_update(model: SoftmaxRegression, data: fv.Seq[SyntheticExample], key: fv.u32[2]):
        totals = synth_totals(model, data)
        trained = fv.fori(EPOCHS, synth_epoch, model, data, key)
        return fv.struct(pseudo_grad=model - trained, weight=totals.examples, totals=totals)

    @fv.function
    def synth_test_metrics(model: SoftmaxRegression, test: fv.Seq[SyntheticExample]):
        return metrics_from_totals(synth_totals(model, test))

    ns.update({f.name: f for f in (softmax_regression_init, softmax_regression_logits, softmax_regression_loss,
                                   softmax_regression_flatten, softmax_regression_unflatten, metrics_from_totals,
                                   synth_client_update, synth_test_metrics, synth_totals)})
    return ns


def _program(kind, doc, state_opt, init_opt, server_step, client_update, client_args, hps, keys=True, devices=False):
    """An iterative program: initialize, next (broadcast, client_update at every client, the weighted
    mean pseudo-gradient, server_step at the server) and evaluate. devices: the clients also report stragglers and
    dropped updates (lib/devices.json), counted in the metrics, and a round whose every update was dropped
    keeps the state."""
    c = hps
    State = fv.Struct(model=SoftmaxRegression, opt=state_opt)

    @fv.function
    def server_update(state: State, pseudo_grad: SoftmaxRegression):
        params = c["softmax_regression_flatten"](state.model)
        grads = c["softmax_regression_flatten"](pseudo_grad)
        step = server_step(params, grads, state.opt)
        return fv.struct(model=c["softmax_regression_unflatten"](step.params), opt=step.state)

    @fv.function
    def initialize():
        """The zero model and the server optimizer's first state, at the server."""
        model = c["softmax_regression_init"]()
        opt = init_opt(c["softmax_regression_flatten"](model))
        return fv.federated_value(fv.struct(model=model, opt=opt), placement="SERVER")

    @fv.function
    def server_keep(state: State, pseudo_grad: SoftmaxRegression):
        return state

    @fv.function
    def server_update_if_any(state: State, pseudo_grad: SoftmaxRegression, total: fv.f32):
        """server_update when some client's update arrived (total weight > 0), else the state unchanged."""
        return fv.cond(total > 0.0, server_update, server_keep, state, pseudo_grad)

    DeviceCounts = fv.Struct(stragglers=fv.f32, dropped=fv.f32)

    @fv.function
    def fedprox_metrics(totals: EvalTotals, counts: DeviceCounts):
        """The round's metrics and the numbers of stragglers and of dropped updates."""
        m = c["metrics_from_totals"](totals)
        return fv.struct(loss=m.loss, accuracy=m.accuracy, examples=m.examples, stragglers=counts.stragglers,
                         dropped=counts.dropped)

    def round_(state, train, *extra):
        model = state.model
        outs = fv.federated_map(client_update, fv.federated_broadcast(model), train, *extra)
        pseudo_grad = fv.federated_weighted_mean(outs["pseudo_grad" if keys else "grad"], outs.weight)
        if devices:
            total_weight = fv.federated_sum(outs.weight)
            metrics = fv.federated_apply(fedprox_metrics, fv.federated_sum(outs.totals), fv.federated_sum(outs.counts))
            new_state = fv.federated_apply(server_update_if_any, state, pseudo_grad, total_weight)
            return fv.struct(state=new_state, metrics=metrics)
        metrics = fv.federated_apply(c["metrics_from_totals"], fv.federated_sum(outs.totals))
        return fv.struct(state=fv.federated_apply(server_update, state, pseudo_grad), metrics=metrics)

    if keys:
        @fv.function(name="next")
        def next_round(state: fv.Server[State], train: fv.Clients[fv.Seq[SyntheticExample]],
                       client_keys: fv.Clients[fv.u32[2]]):
            return round_(state, train, client_keys, *[fv.federated_broadcast(fv.federated_value(a, placement="SERVER"))
                                                        for a in client_args])
    else:
        @fv.function(name="next")
        def next_round(state: fv.Server[State], train: fv.Clients[fv.Seq[SyntheticExample]]):
            return round_(state, train)

    @fv.function
    def evaluate(state: fv.Server[State], test: fv.Seq[SyntheticExample]):
        """Loss and accuracy of the server's model on centralized test examples."""
        test_at_server = fv.federated_value(test, placement="SERVER")
        return fv.federated_apply(c["synth_test_metrics"], state.model, test_at_server)

    return fv.Program(initialize, next_round, evaluate, doc=doc, name=kind + ".json",
                      hparams=[h for h in hps.values() if isinstance(h, fv.HParam)])


def _sgd_server(server_lr):
    lr = fv.hparam("server_lr", fv.f32, server_lr, doc="the server's SGD learning rate on the mean pseudo-gradient")

    @fv.function
    def sgd_update(params: fv.f32[None], grads: fv.f32[None], state: fv.Struct(), lr: fv.f32):
        """x <- x - lr * g."""
        return fv.struct(params=params - lr * grads, state=state)

    return (fv.Struct(), lambda flat: fv.struct(), lambda p, g, opt: sgd_update(p, g, opt, lr))


def fedavg_synthetic(server_lr=1.0, client_lr=0.01, epochs=20, batch_size=10):
    """FedAvg (McMahan et al. 2017): programs/fedavg.json; the arguments are its hyperparameters' defaults."""
    server = _sgd_server(server_lr)
    c = _clients(client_lr, epochs, batch_size)
    return _program("fedavg", "Federated Averaging for softmax regression on FedProx's synthetic data, written "
                    "with fedvm's Python package (programs/fedavg.json)", *server, c["synth_client_update"], [], c)


def fedprox_synthetic(server_lr=1.0, mu=1.0, client_lr=0.01, epochs=20, batch_size=10, stragglers=0.0,
                      drop_stragglers=False):
    """FedProx (Li et al. 2020): FedAvg with mu/2 ||model - global||^2 added to the client's loss, and the
    device model of programs/lib/devices.json (stragglers running x of the E epochs, x uniform in 1..E,
    their updates dropped under drop_stragglers): programs/fedprox.json."""
    server = _sgd_server(server_lr)
    MU = fv.hparam("mu", fv.f32, mu, doc="the proximal weight")
    c = _clients(client_lr, epochs, batch_size)
    STRAGGLERS = fv.hparam("stragglers", fv.f32, stragglers,
                           doc="the probability that a round's client is a straggler (0 to 1)")
    DROP = fv.hparam("drop_stragglers", fv.bool_, drop_stragglers,
                     doc="discard the stragglers' updates (FedAvg's deadline) instead of using their partial work")
    c["STRAGGLERS"], c["DROP"] = STRAGGLERS, DROP

    @fv.function
    def device_draw(key: fv.u32[2], epochs: fv.i32):
        """A client's device in a round, from its round key folded in with 0xffffffff."""
        device_key = fv.random_fold_in(key, fv.const(4294967295, dtype="u32"))
        u = fv.random_uniform(fv.random_fold_in(device_key, fv.const(0, dtype="u32")), shape=[])
        v = fv.random_uniform(fv.random_fold_in(device_key, fv.const(1, dtype="u32")), shape=[])
        straggler = u < STRAGGLERS
        x = fv.minimum(fv.astype(v * fv.astype(epochs, "f32"), "i32") + 1, epochs)
        return fv.struct(epochs=fv.where(straggler, x, epochs), straggler=straggler, dropped=straggler & DROP)

    @fv.function
    def prox_loss(model: SoftmaxRegression, batch: SyntheticBatch, global_: SoftmaxRegression, mu: fv.f32):
        """Mean cross-entropy + mu/2 * ||model - global||^2."""
        sq = fv.square(model - global_)
        return c["softmax_regression_loss"](model, batch) + (0.5 * mu) * (fv.sum(sq.w) + fv.sum(sq.b))

    @fv.function
    def prox_sgd_step(model: SoftmaxRegression, batch: SyntheticBatch, lr: fv.f32, global_: SoftmaxRegression,
                      mu: fv.f32):
        return model - lr * fv.grad(prox_loss)(model, batch, global_, mu)

    @fv.function
    def prox_epoch(i: fv.i32, model: SoftmaxRegression, data: fv.Seq[SyntheticExample], key: fv.u32[2],
                   global_: SoftmaxRegression, mu: fv.f32):
        batches = fv.batch(fv.sequence_shuffle(data, fv.random_fold_in(key, i)), size=c["BATCH"])
        return fv.sequence_reduce(batches, model, prox_sgd_step, c["CLIENT_LR"], global_, mu)

    @fv.function
    def prox_keep(i: fv.i32, model: SoftmaxRegression, data: fv.Seq[SyntheticExample], key: fv.u32[2],
                  global_: SoftmaxRegression, mu: fv.f32):
        """A straggler's epoch past its last: the model unchanged."""
        return model

    @fv.function
    def prox_epoch_if(i: fv.i32, model: SoftmaxRegression, data: fv.Seq[SyntheticExample], key: fv.u32[2],
                      global_: SoftmaxRegression, mu: fv.f32, runs: fv.i32):
        return fv.cond(i < runs, prox_epoch, prox_keep, i, model, data, key, global_, mu)

    @fv.function
    def prox_client_update(model: SoftmaxRegression, data: fv.Seq[SyntheticExample], key: fv.u32[2], mu: fv.f32):
        totals = c["synth_totals"](model, data)
        device = device_draw(key, c["EPOCHS"])
        trained = fv.fori(c["EPOCHS"], prox_epoch_if, model, data, key, model, mu, device.epochs)
        counts = fv.struct(stragglers=fv.astype(device.straggler, "f32"), dropped=fv.astype(device.dropped, "f32"))
        return fv.struct(pseudo_grad=model - trained, weight=fv.where(device.dropped, 0.0, totals.examples),
                         totals=totals, counts=counts)

    return _program("fedprox", "FedProx for softmax regression on FedProx's synthetic data, written with fedvm's "
                    "Python package (programs/fedprox.json)", *server, prox_client_update, [MU], c, devices=True)


def _fedopt(kind, update, server_lr, beta1, beta2, tau, client_lr, epochs, batch_size):
    LR = fv.hparam("server_lr", fv.f32, server_lr, doc="the server optimizer's learning rate")
    B1 = fv.hparam("beta1", fv.f32, beta1, doc="the first moment's decay") if beta1 is not None else None
    B2 = fv.hparam("beta2", fv.f32, beta2, doc="the second moment's decay") if beta2 is not None else None
    TAU = fv.hparam("tau", fv.f32, tau, doc="the adaptivity (added to the root of the second moment)")
    c = _clients(client_lr, epochs, batch_size)

    @fv.function
    def fedopt_init(params: fv.f32[None], tau: fv.f32):
        """m = 0, v = tau^2."""
        m = fv.zeros_like(params)
        return fv.struct(m=m, v=m + tau * tau)

    @fv.function(name="fed%s_update" % kind)
    def fedopt_update(params: fv.f32[None], grads: fv.f32[None], state: FedOptState, lr: fv.f32, beta1: fv.f32,
                      beta2: fv.f32, tau: fv.f32):
        """Reddi et al. 2021, Algorithm 2: m <- beta1 m + (1 - beta1) g; v by the method; x <- x - lr m / (sqrt(v) + tau)."""
        m1 = beta1 * state.m + (1.0 - beta1) * grads
        g2 = grads * grads
        if kind == "adam":
            v1 = beta2 * state.v + (1.0 - beta2) * g2
        elif kind == "yogi":
            gap = state.v - g2
            sign = (gap > 0.0).astype(fv.f32) - (gap < 0.0).astype(fv.f32)
            v1 = state.v - ((1.0 - beta2) * g2) * sign
        else:
            v1 = state.v + g2
        step = (lr * m1) / (fv.sqrt(v1) + tau)
        return fv.struct(params=params - step, state=fv.struct(m=m1, v=v1))

    def server_step(p, g, opt):
        return fedopt_update(p, g, opt, LR, B1 if B1 is not None else fv.array(0.0), B2 if B2 is not None else 0.0, TAU)

    return _program("fed" + kind, "Fed%s for softmax regression on FedProx's synthetic data, written with fedvm's "
                    "Python package (programs/fed%s.json)" % (kind.capitalize(), kind), FedOptState,
                    lambda flat: fedopt_init(flat, TAU), server_step, c["synth_client_update"], [], c)


def fedadam_synthetic(server_lr=0.03, beta1=0.9, beta2=0.99, tau=0.001, client_lr=0.01, epochs=20, batch_size=10):
    """FedAdam (Reddi et al. 2021): programs/fedadam.json."""
    return _fedopt("adam", None, server_lr, beta1, beta2, tau, client_lr, epochs, batch_size)


def fedyogi_synthetic(server_lr=0.03, beta1=0.9, beta2=0.99, tau=0.001, client_lr=0.01, epochs=20, batch_size=10):
    """FedYogi (Reddi et al. 2021): programs/fedyogi.json."""
    return _fedopt("yogi", None, server_lr, beta1, beta2, tau, client_lr, epochs, batch_size)


def fedadagrad_synthetic(server_lr=0.03, tau=0.001, client_lr=0.01, epochs=20, batch_size=10):
    """FedAdagrad (Reddi et al. 2021, beta1 = 0): programs/fedadagrad.json."""
    return _fedopt("adagrad", None, server_lr, None, None, tau, client_lr, epochs, batch_size)


def fedsgd_synthetic(server_lr=0.2, client_lr=0.01, epochs=20, batch_size=10):
    """FedSGD (McMahan et al. 2017): each client's gradient of its mean loss at the broadcast model,
    their example-weighted mean, one step of SGD at the server: programs/fedsgd.json (which declares
    the clients' hyperparameters of lib/fedavg_synthetic.json it includes, unused)."""
    server = _sgd_server(server_lr)
    c = _clients(client_lr, epochs, batch_size)

    @fv.function
    def batch_loss_sum(model: SoftmaxRegression, batch: SyntheticBatch):
        return fv.sum(fv.softmax_cross_entropy(c["softmax_regression_logits"](model, batch.x), batch.y))

    @fv.function
    def add_batch_grad(acc: SoftmaxRegression, batch: SyntheticBatch, model: SoftmaxRegression):
        return acc + fv.grad(batch_loss_sum)(model, batch)

    @fv.function
    def client_grad(model: SoftmaxRegression, data: fv.Seq[SyntheticExample]):
        totals = c["synth_totals"](model, data)
        n = totals.examples
        grad_sum = fv.sequence_reduce(fv.batch(data, size=500), fv.zeros_like(model), add_batch_grad, model)
        return fv.struct(grad=grad_sum / fv.maximum(n, 1.0), weight=n, totals=totals)

    return _program("fedsgd", "FedSGD for softmax regression on FedProx's synthetic data, written with fedvm's "
                    "Python package (programs/fedsgd.json)", *server, client_grad, [], c, keys=False)
