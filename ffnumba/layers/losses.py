"""Losses of ``ff.layers``: MXNet loss heads, per-sample weights and the reported values.

Losses map onto MXNet loss heads (the head's gradient is the loss's):

=================================================  =============================  ==============
``loss=``                                          head (node name)               label name
=================================================  =============================  ==============
'softmax', 'sparse_categorical_crossentropy'       ``SoftmaxOutput`` (softmax)    softmax_label
'categorical_crossentropy' (one-hot y, argmaxed)   ``SoftmaxOutput`` (softmax)    softmax_label
'mse', 'mean_squared_error'                        ``LinearRegressionOutput``     lro_label
'mae', 'mean_absolute_error'                       ``MAERegressionOutput``        mae_label
'binary_crossentropy', 'sigmoid'                   ``LogisticRegressionOutput``   logistic_label
=================================================  =============================  ==============

With several outputs each head is named ``<output layer>_<head>`` (label
``<output layer>_<head>_label``) and the history has ``<output layer>_loss``
and ``<output layer>_<metric>`` besides the weighted total ``loss``.

**Sample weights** (``sample_weight=``, ``class_weight=``) follow Keras'
``sum_over_batch_size`` reduction: a batch of ``n`` samples has loss
``sum_i w_i * l_i / n``. ``fit`` trains on exactly that: the head's input
passes through ``BlockGrad(x) + (x - BlockGrad(x)) * w`` (``<head>_weighted``),
which is ``x`` in the forward pass and scales each sample's gradient by
``w_i`` in the backward pass; the head's own gradient is the unweighted
loss's. ``loss_weights`` become the heads' ``grad_scale``.

The reported ``loss`` is computed from the head's outputs and the labels:
``-log p[y]`` (softmax, ``p`` clipped to ``[1e-7, 1]``), squared / absolute
error averaged over output units, binary cross-entropy (logistic), each
weighted as above and averaged over all samples (Keras' epoch mean).
MXNet's regression heads use the gradient ``(pred - label) / m`` for ``m``
outputs per sample, without the factor 2 of the squared error's derivative:
training is as in MXNet, the reported mse is Keras'.
"""
import numpy as np

from ..base import ParamError
from .. import metric as M
from .. import symbol as S

__all__ = ['LOSSES', 'LossMetric', 'per_sample_loss']

#: loss name -> (kind, head op, head name)
LOSSES = {
    'softmax': ('softmax', 'SoftmaxOutput', 'softmax'),
    'sparse_categorical_crossentropy': ('softmax', 'SoftmaxOutput', 'softmax'),
    'categorical_crossentropy': ('onehot', 'SoftmaxOutput', 'softmax'),
    'mse': ('mse', 'LinearRegressionOutput', 'lro'),
    'mean_squared_error': ('mse', 'LinearRegressionOutput', 'lro'),
    'mae': ('mae', 'MAERegressionOutput', 'mae'),
    'mean_absolute_error': ('mae', 'MAERegressionOutput', 'mae'),
    'binary_crossentropy': ('logistic', 'LogisticRegressionOutput', 'logistic'),
    'sigmoid': ('logistic', 'LogisticRegressionOutput', 'logistic'),
}

_ACT = {'softmax': 'softmax', 'onehot': 'softmax', 'logistic': 'sigmoid'}


def check_loss(loss):
    if not isinstance(loss, str) or loss.lower() not in LOSSES:
        raise ParamError('compile: `loss` must be one of %s. Received: loss=%r'
                         % (', '.join(repr(k) for k in LOSSES), loss))
    return loss.lower()


def per_sample_loss(kind, label, pred, eps=1e-7):
    """Each sample's loss, float64 ``(n,)``, from head outputs and labels (module docstring)."""
    label, pred = np.asarray(label, np.float64), np.asarray(pred, np.float64)
    n = pred.shape[0]
    if kind in ('softmax', 'onehot'):
        prob = pred.reshape(n, -1)[np.arange(n), label.reshape(n).astype(np.int64)]
        return -np.log(np.clip(prob, eps, 1.0))
    pred, label = pred.reshape(n, -1), label.reshape(n, -1)
    if kind == 'mse':
        return ((pred - label) ** 2).mean(axis=1)
    if kind == 'mae':
        return np.abs(pred - label).mean(axis=1)
    p = np.clip(pred, eps, 1 - eps)
    return -(label * np.log(p) + (1 - label) * np.log(1 - p)).mean(axis=1)


class LossMetric(M.EvalMetric):
    """The compiled loss averaged over samples, optionally weighted (history key ``loss``).

    ``update(labels, preds, weights=None)`` adds ``sum(w_i l_i)`` and counts
    ``n`` samples, so the value is Keras' ``sum_over_batch_size`` mean.

    Parameters
    ----------
    kind : {'softmax', 'onehot', 'mse', 'mae', 'logistic'}
    eps : float, default 1e-7
        Probabilities are clipped to ``[eps, 1 - eps]`` before the log (Keras).
    """

    def __init__(self, kind, eps=1e-7, name='loss'):
        super().__init__(name, has_global_stats=True)
        self.kind = kind
        self.eps = eps

    def update(self, labels, preds, weights=None):
        labels, preds = M.check_label_shapes(labels, preds, True)
        for i, (label, pred) in enumerate(zip(labels, preds)):
            values = per_sample_loss(self.kind, label, pred, self.eps)
            if weights is not None:
                values = values * np.asarray(weights[i], np.float64).reshape(-1)
            self._add(float(values.sum()), len(values))


class MeanMetric(LossMetric):
    """Keras' ``mse``/``mae``/``rmse`` metrics: averaged over samples, not over batches.

    (MXNet's ``mx.metric.MSE``/``MAE`` average the per-batch means, so a last
    partial batch counts as much as a full one.) Unweighted, as Keras'
    ``metrics``; ``rmse`` is the square root of the mean squared error.
    """

    def __init__(self, name):
        super().__init__('mse' if name == 'rmse' else name, name=name)
        self.root = name == 'rmse'

    def update(self, labels, preds, weights=None):
        super().update(labels, preds, None)

    def get(self):
        name, value = super().get()
        return name, float(np.sqrt(value)) if self.root and value == value else value

    def get_global(self):
        name, value = super().get_global()
        return name, float(np.sqrt(value)) if self.root and value == value else value


class OutputSpec:
    """One model output with its loss: names, kind, loss weight and metrics."""

    def __init__(self, node, loss, loss_weight, metrics, single):
        self.node = node
        self.loss = loss
        self.kind, self.op, head = LOSSES[loss]
        self.head = head if single else '%s_%s' % (node, head)
        self.label_name = self.head + '_label'
        self.weight_name = self.head + '_sample_weight'
        self.loss_weight = float(loss_weight)
        self.metrics = metrics
        self.prefix = '' if single else node + '_'

    def head_symbol(self, out, logits, weighted):
        """The loss head on ``out`` (on its logits when the head applies the activation)."""
        data = out
        if logits is not None and logits[0] == _ACT.get(self.kind):
            data = logits[1]
        if weighted:
            w = S.Variable(self.weight_name)
            stop = S.BlockGrad(data, name=self.head + '_stop')
            delta = S.elemwise_sub(data, stop, name=self.head + '_delta')
            data = S.elemwise_add(stop, S.elemwise_mul(delta, w, name=self.head + '_scaled'),
                                  name=self.head + '_weighted')
        kw = {'grad_scale': self.loss_weight} if self.loss_weight != 1.0 else {}
        return getattr(S, self.op)(data, S.Variable(self.label_name), name=self.head, **kw)


def onehot_hint(kind, y, n):
    """A ParamError for one-hot labels met by a sparse loss (names the right loss)."""
    if kind == 'softmax' and y.ndim == 2 and y.shape[1] > 1 and y.shape[0] == n:
        vals = np.unique(y[: min(n, 64)])
        if np.all(np.isin(vals, (0, 1))):
            return ParamError(
                'fit: the labels have shape %s and look one-hot, but the loss is sparse '
                '(class indices). Use loss=\'categorical_crossentropy\' for one-hot labels, '
                'or pass class indices (y.argmax(axis=1)).' % (y.shape,))
    return None


class _Accumulator:
    """Per-output loss and metrics over an epoch (or an evaluation)."""

    def __init__(self, specs):
        self.specs = specs
        self.losses = [LossMetric(s.kind) for s in specs]
        for m in [self.losses] + [s.metrics for s in specs]:
            for metric in m:
                metric.reset()

    def update(self, labels, outs, weights):
        for spec, loss, label, out, w in zip(self.specs, self.losses, labels, outs, weights):
            loss.update([label], [out], None if w is None else [w])
            for m in spec.metrics:
                m.update([label], [out])

    def logs(self):
        values = [(s, loss.get()[1]) for s, loss in zip(self.specs, self.losses)]
        out = {'loss': float(sum(s.loss_weight * v for s, v in values))}
        if len(self.specs) > 1:
            for s, v in values:
                out[s.prefix + 'loss'] = float(v)
        for s in self.specs:
            for m in s.metrics:
                for name, value in m.get_name_value():
                    out[s.prefix + name] = float(value)
        return out
