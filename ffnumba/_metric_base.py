"""The metric base: :class:`EvalMetric`, its registry and the label/pred helpers.

Split from :mod:`ffnumba.metric` (the public module, which re-exports every
name here) so that metric families live in files under the line cap: the
classification metrics stay in ``metric.py``, real-valued ones live in
:mod:`ffnumba._metric_numeric`. See :mod:`ffnumba.metric` for the
conventions (local and global statistics, inputs).
"""
import numpy

from . import registry
from .base import ShapeError

__all__ = ['EvalMetric', 'register', 'alias', 'check_label_shapes']


def _host(x):
    """A numpy view of an NDArray, numpy array or array-like."""
    if hasattr(x, 'asnumpy'):
        return x.asnumpy()
    return numpy.asarray(x)


def _is_array(x):
    return hasattr(x, 'asnumpy') or isinstance(x, numpy.ndarray)


def check_label_shapes(labels, preds, wrap=False, shape=False):
    """Check that labels and predictions agree in length (or in shape).

    Parameters
    ----------
    labels, preds : list or array
    wrap : bool, default False
        Wrap a bare array into a one-element list.
    shape : bool, default False
        Compare ``.shape`` instead of ``len``.

    Returns
    -------
    (labels, preds)

    Raises
    ------
    ShapeError
        ``"Shape of labels {} does not match shape of predictions {}"`` (MXNet's text).
    """
    if wrap:
        if _is_array(labels):
            labels = [labels]
        if _is_array(preds):
            preds = [preds]
    if shape:
        lshape, pshape = numpy.shape(_host(labels)), numpy.shape(_host(preds))
    else:
        lshape, pshape = len(labels), len(preds)
    if lshape != pshape:
        raise ShapeError('Shape of labels {} does not match shape of predictions {}'
                         .format(lshape, pshape))
    return labels, preds


class EvalMetric:
    """Base class of every metric.

    Parameters
    ----------
    name : str
        Printed name of the metric.
    output_names : list of str, optional
        Which predictions ``update_dict`` passes on (default: all, in order).
    label_names : list of str, optional
        Which labels ``update_dict`` passes on (default: all, in order).
    **kwargs
        Stored for :meth:`get_config`; ``has_global_stats`` is consumed.
    """

    def __init__(self, name, output_names=None, label_names=None, **kwargs):
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self._has_global_stats = kwargs.pop('has_global_stats', False)
        self._kwargs = kwargs
        self.reset()

    def __str__(self):
        return 'EvalMetric: {}'.format(dict(self.get_name_value()))

    def get_config(self):
        """A dict that :func:`create` can rebuild the metric from."""
        config = self._kwargs.copy()
        config.update({'metric': self.__class__.__name__, 'name': self.name,
                       'output_names': self.output_names, 'label_names': self.label_names})
        return config

    def update_dict(self, label, pred):
        """Update from dicts ``name -> array``, selected by label/output names."""
        if self.output_names is not None:
            pred = [pred[name] for name in self.output_names]
        else:
            pred = list(pred.values())
        if self.label_names is not None:
            label = [label[name] for name in self.label_names]
        else:
            label = list(label.values())
        self.update(label, pred)

    def update(self, labels, preds):
        """Accumulate one batch. ``labels`` and ``preds`` are lists of arrays."""
        raise NotImplementedError()

    def _add(self, value, num):
        self.sum_metric += value
        self.global_sum_metric += value
        self.num_inst += num
        self.global_num_inst += num

    def reset(self):
        """Clear the local and the global counters."""
        self.num_inst = 0
        self.sum_metric = 0.0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0

    def reset_local(self):
        """Clear only the local counters."""
        self.num_inst = 0
        self.sum_metric = 0.0

    def get(self):
        """``(name, value)`` over the updates since the last local reset."""
        if self.num_inst == 0:
            return (self.name, float('nan'))
        return (self.name, self.sum_metric / self.num_inst)

    def get_global(self):
        """``(name, value)`` over the updates since the last full reset."""
        if not self._has_global_stats:
            return self.get()
        if self.global_num_inst == 0:
            return (self.name, float('nan'))
        return (self.name, self.global_sum_metric / self.global_num_inst)

    @staticmethod
    def _pairs(name, value):
        if not isinstance(name, list):
            name = [name]
        if not isinstance(value, list):
            value = [value]
        return list(zip(name, value))

    def get_name_value(self):
        """``[(name, value), ...]`` of :meth:`get`."""
        return self._pairs(*self.get())

    def get_global_name_value(self):
        """``[(name, value), ...]`` of :meth:`get_global`."""
        if self._has_global_stats:
            return self._pairs(*self.get_global())
        return self.get_name_value()


register = registry.get_register_func(EvalMetric, 'metric')
_alias = registry.get_alias_func(EvalMetric, 'metric')


def alias(*aliases):
    """Class decorator registering an :class:`EvalMetric` under the extra names ``aliases``.

    ``@alias('acc')`` lets ``create('acc')`` (any case) build the class; the
    decorator returns the class unchanged.
    """
    return _alias(*aliases)
