"""Federated Averaging (McMahan et al., AISTATS 2017) for softmax regression on FedProx's synthetic
data, in Python: the program of programs/fedavg.json (with programs/lib/fedavg_synthetic.json,
programs/models/softmax_regression.json, programs/lib/metrics.json and SGD of programs/lib/optim.json),
whose runs it reproduces bit for bit."""

import fedvm as fv

__all__ = ["fedavg_synthetic"]

# the model and the data (programs/models/softmax_regression.json)
SoftmaxRegression = fv.Struct(w=fv.f32[60, 10], b=fv.f32[10])
SyntheticExample = fv.Struct(x=fv.f32[60], y=fv.i32)
SyntheticBatch = fv.Struct(x=fv.f32[None, 60], y=fv.i32[None])
EvalTotals = fv.Struct(loss=fv.f32, correct=fv.f32, examples=fv.f32)
FedAvgState = fv.Struct(model=SoftmaxRegression, opt=fv.Struct())


def fedavg_synthetic(server_lr=1.0, client_lr=0.01, epochs=20, batch_size=10):
    """The FedAvg program of programs/fedavg.json; the arguments are its hyperparameters' defaults
    (server_lr, client_lr, epochs E, batch_size B)."""
    SERVER_LR = fv.hparam("server_lr", fv.f32, server_lr, doc="the server's SGD learning rate on the mean pseudo-gradient")
    CLIENT_LR = fv.hparam("client_lr", fv.f32, client_lr, doc="the clients' SGD learning rate")
    EPOCHS = fv.hparam("epochs", fv.i32, epochs, doc="E: local epochs per round")
    BATCH = fv.hparam("batch_size", fv.i32, batch_size, doc="B: examples per local SGD step")

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
        logits = softmax_regression_logits(model, batch.x)
        return fv.mean(fv.softmax_cross_entropy(logits, batch.y))

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
        shuffled = fv.sequence_shuffle(data, fv.random_fold_in(key, i))
        batches = fv.batch(shuffled, size=BATCH)
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
    def server_update(state: FedAvgState, pseudo_grad: SoftmaxRegression):
        """SGD with the server learning rate on the mean pseudo-gradient (sgd_update of optim.json)."""
        params = softmax_regression_flatten(state.model)
        grads = softmax_regression_flatten(pseudo_grad)
        new_params = params - SERVER_LR * grads
        return fv.struct(model=softmax_regression_unflatten(new_params), opt=state.opt)

    @fv.function
    def synth_test_metrics(model: SoftmaxRegression, test: fv.Seq[SyntheticExample]):
        return metrics_from_totals(synth_totals(model, test))

    @fv.function
    def initialize():
        """The zero model and plain SGD's (empty) state, at the server."""
        return fv.federated_value(fv.struct(model=softmax_regression_init(), opt=fv.struct()), placement="SERVER")

    @fv.function(name="next")
    def next_round(state: fv.Server[FedAvgState], train: fv.Clients[fv.Seq[SyntheticExample]],
                   client_keys: fv.Clients[fv.u32[2]]):
        model = state.model
        outs = fv.federated_map(synth_client_update, fv.federated_broadcast(model), train, client_keys)
        pseudo_grad = fv.federated_weighted_mean(outs.pseudo_grad, outs.weight)
        metrics = fv.federated_apply(metrics_from_totals, fv.federated_sum(outs.totals))
        return fv.struct(state=fv.federated_apply(server_update, state, pseudo_grad), metrics=metrics)

    @fv.function
    def evaluate(state: fv.Server[FedAvgState], test: fv.Seq[SyntheticExample]):
        """Loss and accuracy of the server's model on centralized test examples."""
        test_at_server = fv.federated_value(test, placement="SERVER")
        return fv.federated_apply(synth_test_metrics, state.model, test_at_server)

    return fv.Program(initialize, next_round, evaluate, doc="Federated Averaging for softmax regression on "
                      "FedProx's synthetic data, written with fedvm's Python package (the program of programs/fedavg.json)",
                      name="fedavg.json")
