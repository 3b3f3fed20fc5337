"""Evaluation metrics (MXNet ``mx.metric``, 1.9.1 semantics).

Every metric keeps a local pair ``sum_metric``/``num_inst`` (cleared by
:meth:`EvalMetric.reset_local`, which the Speedometer calls) and a global pair
``global_sum_metric``/``global_num_inst`` (cleared only by
:meth:`EvalMetric.reset`; the end-of-epoch log reads it). ``get()`` returns
``(name, sum_metric / num_inst)`` or ``(name, nan)`` before any update.

Inputs to ``update(labels, preds)`` are lists of :class:`~ffnumba.ndarray.NDArray`
or numpy arrays (a bare array is wrapped in a list). The numbers follow MXNet
1.9.1's ``python/mxnet/metric.py`` (formulas in each class docstring).

This is the public module. :class:`EvalMetric` and the registry live in
:mod:`ffnumba._metric_base`, the real-valued metrics (MAE, MSE, RMSE, the log
losses, the correlations) in :mod:`ffnumba._metric_numeric`; both are
re-exported here, and the classification metrics are defined here.
"""
import math
from collections import OrderedDict

import numpy

from . import registry
from .base import FFError, ParamError, ShapeError

__all__ = ['EvalMetric', 'CompositeEvalMetric', 'Accuracy', 'TopKAccuracy', 'F1', 'MCC',
           'Perplexity', 'MAE', 'MSE', 'RMSE', 'CrossEntropy', 'NegativeLogLikelihood',
           'PearsonCorrelation', 'PCC', 'Loss', 'Torch', 'Caffe', 'CustomMetric', 'create',
           'register', 'alias', 'np', 'check_label_shapes']


from ._metric_base import (EvalMetric, alias, check_label_shapes, register,  # noqa: F401
                           _host, _is_array)
from ._metric_numeric import (MAE, MSE, RMSE, CrossEntropy, NegativeLogLikelihood,  # noqa: F401
                              PearsonCorrelation, PCC)

_create = registry.get_create_func(EvalMetric, 'metric')


def create(metric, *args, **kwargs):
    """Create a metric from a name, a callable, a list, a config dict or an instance.

    Parameters
    ----------
    metric : str, callable, list, dict or EvalMetric
        A registered name (``'acc'``, ``'ce'``, ``'top_k_accuracy'``, ...), a
        function ``feval(label, pred)`` (becomes a :class:`CustomMetric`), a
        list of any of these (becomes a :class:`CompositeEvalMetric`), or a
        :meth:`EvalMetric.get_config` dict.

    Raises
    ------
    ParamError
        For an unknown name (the message lists the valid ones).
    """
    if callable(metric) and not isinstance(metric, EvalMetric):
        return CustomMetric(metric, *args, **kwargs)
    if isinstance(metric, list):
        composite = CompositeEvalMetric()
        for child in metric:
            composite.add(create(child, *args, **kwargs))
        return composite
    return _create(metric, *args, **kwargs)


@register
@alias('composite')
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; ``get()`` returns ``([names], [values])``.

    Parameters
    ----------
    metrics : list, optional
        Metrics or anything :func:`create` accepts.
    name : str, default 'composite'
    """

    def __init__(self, metrics=None, name='composite', output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.metrics = [create(m) for m in (metrics or [])]

    def add(self, metric):
        """Append a child metric (anything :func:`create` accepts)."""
        self.metrics.append(create(metric))

    def get_metric(self, index):
        """The child metric at ``index``.

        Raises
        ------
        ParamError
            If ``index`` is out of range (MXNet returns the error instead).
        """
        try:
            return self.metrics[index]
        except IndexError:
            raise ParamError('Metric index {} is out of range 0 and {}'
                             .format(index, len(self.metrics))) from None

    def update_dict(self, labels, preds):
        if self.label_names is not None:
            labels = OrderedDict([i for i in labels.items() if i[0] in self.label_names])
        if self.output_names is not None:
            preds = OrderedDict([i for i in preds.items() if i[0] in self.output_names])
        for metric in self.metrics:
            metric.update_dict(labels, preds)

    def update(self, labels, preds):
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self):
        for metric in getattr(self, 'metrics', []):
            metric.reset()

    def reset_local(self):
        for metric in getattr(self, 'metrics', []):
            metric.reset_local()

    def _collect(self, attr):
        names, values = [], []
        for metric in self.metrics:
            name, value = getattr(metric, attr)()
            names.extend(name if isinstance(name, list) else [name])
            values.extend(value if isinstance(value, list) else [value])
        return (names, values)

    def get(self):
        return self._collect('get')

    def get_global(self):
        return self._collect('get_global')

    def get_config(self):
        config = super().get_config()
        config.update({'metrics': [m.get_config() for m in self.metrics]})
        return config


@register
@alias('acc')
class Accuracy(EvalMetric):
    """Fraction of correct predictions.

    ``pred`` is argmax-ed along ``axis`` when its shape differs from the
    label's; both are cast to int32 and compared element by element.

    **Shapes**: label ``(N,)``, pred ``(N, C)`` or ``(N,)``.

    Parameters
    ----------
    axis : int, default 1
        Class axis of the predictions.
    name : str, default 'accuracy'
    """

    def __init__(self, axis=1, name='accuracy', output_names=None, label_names=None):
        super().__init__(name, axis=axis, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.axis = axis

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = _host(label), _host(pred)
            if pred.shape != label.shape:
                pred = numpy.argmax(pred, axis=self.axis)
            pred = pred.astype('int32').ravel()
            label = label.astype('int32').ravel()
            check_label_shapes(label, pred)
            self._add(int((pred == label).sum()), len(pred))


@register
@alias('top_k_accuracy', 'top_k_acc')
class TopKAccuracy(EvalMetric):
    """Fraction of samples whose label is among the ``top_k`` highest scores.

    Parameters
    ----------
    top_k : int, > 1, default 1
        Must be more than 1 (use :class:`Accuracy` otherwise).
    name : str, default 'top_k_accuracy' (``'_%d' % top_k`` is appended)

    Raises
    ------
    ParamError
        If ``top_k <= 1``.
    """

    def __init__(self, top_k=1, name='top_k_accuracy', output_names=None, label_names=None):
        if top_k <= 1:
            raise ParamError('TopKAccuracy: `top_k` must be more than 1 (use Accuracy '
                             'otherwise). Received: top_k=%r' % (top_k,))
        super().__init__(name, top_k=top_k, output_names=output_names,
                         label_names=label_names, has_global_stats=True)
        self.top_k = top_k
        self.name += '_%d' % self.top_k

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            pred = _host(pred).astype('float32')
            if pred.ndim > 2:
                raise ShapeError('TopKAccuracy: predictions should be no more than 2 dims. '
                                 'Received: shape=%s' % (pred.shape,))
            if pred.shape[-1] >= self.top_k:
                order = numpy.argpartition(pred, -self.top_k)
            else:
                order = numpy.argsort(pred, axis=-1)
            label = _host(label).astype('int32')
            check_label_shapes(label, order)
            if order.ndim == 1:
                self.sum_metric += int((order.ravel() == label.ravel()).sum())
            else:
                ncls = order.shape[1]
                hits = 0
                for j in range(min(ncls, self.top_k)):
                    hits += int((order[:, ncls - 1 - j] == label.ravel()).sum())
                self.sum_metric += hits
                self.global_sum_metric += hits
            self.num_inst += order.shape[0]
            self.global_num_inst += order.shape[0]


class _BinaryStats:
    """Confusion counts of a binary classifier, local and global."""

    _FIELDS = ('tp', 'fp', 'fn', 'tn')

    def __init__(self):
        self.reset_stats()

    def update_binary_stats(self, owner, label, pred):
        pred = _host(pred)
        label = _host(label).astype('int32')
        pred_label = numpy.argmax(pred, axis=1)
        check_label_shapes(label, pred)
        if len(numpy.unique(label)) > 2:
            raise ParamError('%s currently only supports binary classification.' % owner)
        pt, lt = pred_label == 1, label.ravel() == 1
        counts = ((pt & lt).sum(), (pt & ~lt).sum(), (~pt & lt).sum(), (~pt & ~lt).sum())
        for f, c in zip(self._FIELDS, counts):
            self.local[f] += int(c)
            self.glob[f] += int(c)

    @staticmethod
    def fscore(s):
        prec = s['tp'] / (s['tp'] + s['fp']) if s['tp'] + s['fp'] > 0 else 0.
        rec = s['tp'] / (s['tp'] + s['fn']) if s['tp'] + s['fn'] > 0 else 0.
        return 2 * prec * rec / (prec + rec) if prec + rec > 0 else 0.

    @staticmethod
    def mcc(s):
        if not sum(s.values()):
            return 0.
        tp, fp, fn, tn = (float(s[f]) for f in _BinaryStats._FIELDS)
        denom = 1.
        for t in (tp + fp, tp + fn, tn + fp, tn + fn):
            if t != 0.:
                denom *= t
        return (tp * tn - fp * fn) / math.sqrt(denom)

    @staticmethod
    def total(s):
        return sum(s.values())

    def local_reset_stats(self):
        self.local = dict.fromkeys(self._FIELDS, 0)

    def reset_stats(self):
        self.local_reset_stats()
        self.glob = dict.fromkeys(self._FIELDS, 0)


class _BinaryMetric(EvalMetric):
    """Shared update of F1 and MCC: macro averages per-batch scores, micro pools counts."""

    _score = None

    def __init__(self, name, output_names=None, label_names=None, average='macro'):
        if average not in ('macro', 'micro'):
            raise ParamError("%s: `average` must be 'macro' or 'micro'. Received: average=%r"
                             % (type(self).__name__, average))
        self.average = average
        self.metrics = _BinaryStats()
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            self.metrics.update_binary_stats(type(self).__name__, label, pred)
        score, m = type(self)._score, self.metrics
        if self.average == 'macro':
            self._add(score(m.local), 1)
            m.reset_stats()
        else:
            self.sum_metric = score(m.local) * m.total(m.local)
            self.global_sum_metric = score(m.glob) * m.total(m.glob)
            self.num_inst = m.total(m.local)
            self.global_num_inst = m.total(m.glob)

    def reset(self):
        super().reset()
        self.metrics.reset_stats()

    def reset_local(self):
        super().reset_local()
        self.metrics.local_reset_stats()


@register
class F1(_BinaryMetric):
    """F1 score of a binary classifier: ``2 P R / (P + R)`` with class 1 positive.

    ``average='macro'`` averages the per-batch scores; ``'micro'`` pools the
    confusion counts over all batches. **Shapes**: label ``(N,)``, pred ``(N, 2)``.

    Raises
    ------
    ParamError
        If a batch holds more than two label values.
    """

    _score = staticmethod(_BinaryStats.fscore)

    def __init__(self, name='f1', output_names=None, label_names=None, average='macro'):
        super().__init__(name, output_names, label_names, average)


@register
class MCC(_BinaryMetric):
    """Matthews correlation coefficient of a binary classifier.

    ``(TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN))``, zero factors of
    the denominator left out (MXNet's rule). ``average`` as in :class:`F1`.
    """

    _score = staticmethod(_BinaryStats.mcc)

    def __init__(self, name='mcc', output_names=None, label_names=None, average='macro'):
        super().__init__(name, output_names, label_names, average)


@register
class Perplexity(EvalMetric):
    """Perplexity ``exp(-sum(log max(1e-10, p[label])) / count)``.

    Entries whose label equals ``ignore_label`` count neither in the sum nor in
    ``count``. **Shapes**: label ``(...)``, pred ``(..., C)`` with
    ``label.size == pred.size / C``.

    Parameters
    ----------
    ignore_label : int or None
    axis : int, default -1
        Class axis of the predictions.
    """

    def __init__(self, ignore_label, axis=-1, name='perplexity', output_names=None,
                 label_names=None):
        super().__init__(name, ignore_label=ignore_label, output_names=output_names,
                         label_names=label_names, has_global_stats=True)
        self.ignore_label = ignore_label
        self.axis = axis

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        loss, num = 0., 0
        for label, pred in zip(labels, preds):
            label, pred = _host(label), _host(pred)
            if pred.ndim == 0 or label.size * pred.shape[self.axis] != pred.size:
                raise ShapeError('Perplexity: shape mismatch: %s vs. %s'
                                 % (label.shape, pred.shape))
            label = label.reshape(label.size)
            moved = numpy.moveaxis(pred, self.axis, -1).reshape(-1, pred.shape[self.axis])
            idx = numpy.clip(label.astype('int32'), 0, moved.shape[1] - 1)
            picked = moved[numpy.arange(moved.shape[0]), idx]
            if self.ignore_label is not None:
                ignore = (label == self.ignore_label).astype(picked.dtype)
                num -= int(ignore.sum())
                picked = picked * (1 - ignore) + ignore
            loss -= float(numpy.log(numpy.maximum(picked.dtype.type(1e-10), picked)).sum())
            num += picked.size
        self._add(loss, num)

    def get(self):
        if self.num_inst == 0:
            return (self.name, float('nan'))
        return (self.name, math.exp(self.sum_metric / self.num_inst))

    def get_global(self):
        if self.global_num_inst == 0:
            return (self.name, float('nan'))
        return (self.name, math.exp(self.global_sum_metric / self.global_num_inst))


@register
class Loss(EvalMetric):
    """Mean of the outputs themselves, ``sum(pred) / pred.size`` (labels unused)."""

    def __init__(self, name='loss', output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def update(self, _, preds):
        if _is_array(preds):
            preds = [preds]
        for pred in preds:
            pred = _host(pred)
            self._add(float(pred.sum()), pred.size)


@register
class Torch(Loss):
    """Alias kept for MXNet's registry: a :class:`Loss` named 'torch'."""

    def __init__(self, name='torch', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)


@register
class Caffe(Loss):
    """Alias kept for MXNet's registry: a :class:`Loss` named 'caffe'."""

    def __init__(self, name='caffe', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)


@register
class CustomMetric(EvalMetric):
    """A metric from a function ``feval(label, pred)`` of numpy arrays.

    ``feval`` returns a number (counted as one instance) or a pair
    ``(sum_metric, num_inst)``.

    Parameters
    ----------
    feval : callable
    name : str, optional
        Defaults to ``feval.__name__`` (``'custom(<lambda>)'`` for a lambda).
    allow_extra_outputs : bool, default False
        Allow more predictions than labels (the extras are ignored).
    """

    def __init__(self, feval, name=None, allow_extra_outputs=False, output_names=None,
                 label_names=None):
        if name is None:
            name = feval.__name__
            if '<' in name:
                name = 'custom(%s)' % name
        super().__init__(name, feval=feval, allow_extra_outputs=allow_extra_outputs,
                         output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def update(self, labels, preds):
        if not self._allow_extra_outputs:
            labels, preds = check_label_shapes(labels, preds, True)
        elif _is_array(labels) or _is_array(preds):
            labels = [labels] if _is_array(labels) else labels
            preds = [preds] if _is_array(preds) else preds
        for pred, label in zip(preds, labels):
            reval = self._feval(_host(label), _host(pred))
            if isinstance(reval, tuple):
                self._add(reval[0], reval[1])
            else:
                self._add(reval, 1)

    def get_config(self):
        raise FFError('CustomMetric cannot be serialized')


def np(numpy_feval, name=None, allow_extra_outputs=False):
    """Wrap a numpy function ``f(label, pred) -> float`` into a :class:`CustomMetric`."""
    def feval(label, pred):
        return numpy_feval(label, pred)
    feval.__name__ = numpy_feval.__name__
    return CustomMetric(feval, name, allow_extra_outputs)
