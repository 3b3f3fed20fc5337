"""Metrics over real-valued predictions: regression errors, log losses, correlations.

``MAE``, ``MSE``, ``RMSE``, ``CrossEntropy``, ``NegativeLogLikelihood``,
``PearsonCorrelation`` and ``PCC`` (MXNet 1.9.1 semantics, formulas in each
class docstring). Public through :mod:`ffnumba.metric`, which re-exports them.
"""
import numpy

from .base import ParamError, ShapeError
from ._metric_base import EvalMetric, alias, check_label_shapes, register, _host

__all__ = ['MAE', 'MSE', 'RMSE', 'CrossEntropy', 'NegativeLogLikelihood', 'PearsonCorrelation',
           'PCC']


def _as_columns(label, pred):
    label, pred = _host(label), _host(pred)
    if label.ndim == 1:
        label = label.reshape(label.shape[0], 1)
    if pred.ndim == 1:
        pred = pred.reshape(pred.shape[0], 1)
    return label, pred


class _Regression(EvalMetric):
    """Per batch, add ``_reduce(label - pred)`` and count one batch."""

    def __init__(self, name, output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = _as_columns(label, pred)
            try:
                diff = label - pred
            except ValueError:
                raise ShapeError('%s: label shape %s and prediction shape %s do not broadcast'
                                 % (type(self).__name__, label.shape, pred.shape)) from None
            self._add(float(self._reduce(diff)), 1)


@register
class MAE(_Regression):
    """Mean absolute error, averaged over batches: ``mean_b(mean|y - p|)``."""

    _reduce = staticmethod(lambda d: numpy.abs(d).mean())

    def __init__(self, name='mae', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)


@register
class MSE(_Regression):
    """Mean squared error, averaged over batches: ``mean_b(mean (y - p)^2)``."""

    _reduce = staticmethod(lambda d: (d ** 2.0).mean())

    def __init__(self, name='mse', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)


@register
class RMSE(_Regression):
    """Root mean squared error, averaged over batches: ``mean_b(sqrt(mean (y - p)^2))``."""

    _reduce = staticmethod(lambda d: numpy.sqrt((d ** 2.0).mean()))

    def __init__(self, name='rmse', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)


class _LogLoss(EvalMetric):
    """``sum(-log(p[i, y_i] + eps))`` per batch, counting samples.

    Raises ShapeError for non-2-D predictions or a count mismatch, and
    ParamError for a label outside ``[0, C)`` (numpy indexing would raise an
    IndexError, or silently wrap a negative label).
    """

    def __init__(self, eps, name, output_names=None, label_names=None):
        super().__init__(name, eps=eps, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.eps = eps

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = _host(label).ravel(), _host(pred)
            if label.shape[0] != pred.shape[0]:
                raise ShapeError('%s: %d labels but %d predictions (shape %s)'
                                 % (type(self).__name__, label.shape[0], pred.shape[0],
                                    pred.shape))
            if pred.ndim != 2:
                raise ShapeError('%s: predictions must be 2-D (N, C). Received shape %s'
                                 % (type(self).__name__, pred.shape))
            idx = numpy.int64(label)
            bad = (idx < 0) | (idx >= pred.shape[1])
            if bad.any():
                raise ParamError('%s: labels must be class indices in [0, %d). Received: %r'
                                 % (type(self).__name__, pred.shape[1],
                                    label[bad][:5].tolist()))
            prob = pred[numpy.arange(label.shape[0]), idx]
            self._add(float((-numpy.log(prob + self.eps)).sum()), label.shape[0])


@register
@alias('ce')
class CrossEntropy(_LogLoss):
    """Cross entropy ``sum_i -log(p[i, y_i] + eps) / N``.

    **Shapes**: label ``(N,)``, pred ``(N, C)`` of probabilities.
    Parameters: ``eps`` (float, default 1e-12), ``name`` default 'cross-entropy'.
    """

    def __init__(self, eps=1e-12, name='cross-entropy', output_names=None, label_names=None):
        super().__init__(eps, name, output_names, label_names)


@register
@alias('nll_loss')
class NegativeLogLikelihood(_LogLoss):
    """Negative log likelihood, the same formula as :class:`CrossEntropy` ('nll-loss')."""

    def __init__(self, eps=1e-12, name='nll-loss', output_names=None, label_names=None):
        super().__init__(eps, name, output_names, label_names)


@register
@alias('pearsonr')
class PearsonCorrelation(EvalMetric):
    """Pearson correlation of predictions and labels.

    ``'macro'`` averages ``corrcoef(pred, label)`` of each batch; ``'micro'``
    computes one coefficient over all samples with streaming (Welford) sums.
    """

    def __init__(self, name='pearsonr', output_names=None, label_names=None, average='macro'):
        if average not in ('macro', 'micro'):
            raise ParamError("PearsonCorrelation: `average` must be 'macro' or 'micro'. "
                             "Received: average=%r" % (average,))
        self.average = average
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def reset_micro(self):
        """Clear the streaming sums of ``average='micro'`` (called by ``reset``)."""
        self._sse_p = self._mean_p = self._sse_l = self._mean_l = 0.
        self._pred_nums = self._label_nums = 0
        self._conv = 0.

    def reset(self):
        super().reset()
        if self.average == 'micro':
            self.reset_micro()

    @staticmethod
    def _update_variance(values, count, mean, m_2):
        count += len(values)
        delta = values - mean
        mean += numpy.sum(delta / count)
        m_2 += numpy.sum(delta * (values - mean))
        return count, mean, m_2

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            check_label_shapes(label, pred, False, True)
            label = _host(label).ravel().astype(numpy.float64)
            pred = _host(pred).ravel().astype(numpy.float64)
            if self.average == 'macro':
                self._add(float(numpy.corrcoef(pred, label)[0, 1]), 1)
            else:
                self.num_inst += 1
                self.global_num_inst += 1
                self._label_nums, self._mean_l, self._sse_l = self._update_variance(
                    label, self._label_nums, self._mean_l, self._sse_l)
                self._conv += numpy.sum((label - self._mean_l) * (pred - self._mean_p))
                self._pred_nums, self._mean_p, self._sse_p = self._update_variance(
                    pred, self._pred_nums, self._mean_p, self._sse_p)

    def get(self):
        if self.num_inst == 0:
            return (self.name, float('nan'))
        if self.average == 'macro':
            return (self.name, self.sum_metric / self.num_inst)
        n = self._label_nums
        val = self._conv / ((n - 1) * numpy.sqrt(self._sse_p / (n - 1))
                            * numpy.sqrt(self._sse_l / (n - 1)))
        return (self.name, float(val))


@register
class PCC(EvalMetric):
    """Multi-class Matthews correlation (Gorodkin's R_K) over a growing confusion matrix."""

    def __init__(self, name='pcc', output_names=None, label_names=None, has_global_stats=True):
        self.k = 2
        super().__init__(name=name, output_names=output_names, label_names=label_names,
                         has_global_stats=has_global_stats)

    def _grow(self, inc):
        self.lcm = numpy.pad(self.lcm, ((0, inc), (0, inc)), 'constant')
        self.gcm = numpy.pad(self.gcm, ((0, inc), (0, inc)), 'constant')
        self.k += inc

    @staticmethod
    def _calc_mcc(cmat):
        n = cmat.sum()
        x, y = cmat.sum(axis=1), cmat.sum(axis=0)
        cov_xx, cov_yy = numpy.sum(x * (n - x)), numpy.sum(y * (n - y))
        if cov_xx == 0 or cov_yy == 0:
            return float('nan')
        cov_xy = numpy.sum(cmat.diagonal() * n - x * y)
        return cov_xy / (cov_xx * cov_yy) ** 0.5

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = _host(label).astype('int32'), _host(pred)
            pred = pred.argmax(axis=1) if pred.shape != label.shape else pred.astype('int32')
            n = max(pred.max(), label.max())
            if n >= self.k:
                self._grow(n + 1 - self.k)
            bcm = numpy.zeros((self.k, self.k))
            numpy.add.at(bcm, (pred.ravel(), label.ravel()), 1)
            self.lcm += bcm
            self.gcm += bcm
        self.num_inst += 1
        self.global_num_inst += 1

    @property
    def sum_metric(self):
        return self._calc_mcc(self.lcm) * self.num_inst

    @property
    def global_sum_metric(self):
        return self._calc_mcc(self.gcm) * self.global_num_inst

    def reset(self):
        self.global_num_inst = 0
        self.gcm = numpy.zeros((self.k, self.k))
        self.reset_local()

    def reset_local(self):
        self.num_inst = 0
        self.lcm = numpy.zeros((self.k, self.k))
