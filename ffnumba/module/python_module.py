"""Modules written in Python: no parameters, computation in numpy/NDArray.

:class:`PythonModule` is the base; :class:`PythonLossModule` outputs its input
scores unchanged and, on backward, sets the input gradient to
``grad_func(scores, labels)`` (MXNet ``mx.mod.PythonLossModule``).
"""
import logging

from ..base import FFError
from .base_module import BaseModule

__all__ = ['PythonModule', 'PythonLossModule']


class PythonModule(BaseModule):
    """A module without parameters, implemented in Python.

    Parameters
    ----------
    data_names, label_names, output_names : list of str
    logger : logging.Logger, default logging

    Subclasses implement ``_compute_output_shapes``, ``forward``,
    ``backward``, ``get_outputs`` and ``get_input_grads``.
    """

    def __init__(self, data_names, label_names, output_names, logger=logging):
        super().__init__(logger=logger)
        self._data_names = list(data_names)
        self._label_names = list(label_names) if label_names is not None else None
        self._output_names = list(output_names)
        self._data_shapes = None
        self._label_shapes = None
        self._output_shapes = None

    @property
    def data_names(self):
        return self._data_names

    @property
    def output_names(self):
        return self._output_names

    @property
    def data_shapes(self):
        return self._data_shapes

    @property
    def label_shapes(self):
        return self._label_shapes

    @property
    def output_shapes(self):
        return self._output_shapes

    def get_params(self):
        """No parameters: two empty dicts."""
        return {}, {}

    def init_params(self, initializer=None, arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Nothing to initialise."""
        self.params_initialized = True

    def update(self):
        """Nothing to update."""

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Update ``eval_metric`` with ``labels`` and the outputs (if bound with labels)."""
        if self._label_shapes is None:
            return
        if pre_sliced:
            raise FFError('PythonModule does not support pre-sliced labels')
        eval_metric.update(labels, self.get_outputs())

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req='write'):
        """Record the shapes and compute the output shapes."""
        if self.binded and not force_rebind:
            self.logger.warning('Already bound, ignoring bind()')
            return
        if grad_req != 'write':
            raise FFError("PythonModule only supports grad_req='write'. Received: grad_req=%r"
                          % (grad_req,))
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        names = [x[0] for x in data_shapes]
        if names != self._data_names:
            raise FFError('PythonModule: data_shapes names %s do not match data_names %s'
                          % (names, self._data_names))
        self._data_shapes = list(data_shapes)
        if label_shapes is not None:
            lnames = [x[0] for x in label_shapes]
            if self._label_names is None or lnames != self._label_names:
                raise FFError('PythonModule: label_shapes names %s do not match label_names %s'
                              % (lnames, self._label_names))
        self._label_shapes = label_shapes
        self._output_shapes = self._compute_output_shapes()
        self.binded = True

    def _compute_output_shapes(self):
        raise NotImplementedError()

    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """No parameters, so no optimizer."""
        self.optimizer_initialized = True

    def install_monitor(self, mon):
        raise FFError('PythonModule does not support monitors')


class PythonLossModule(PythonModule):
    """A loss written in Python: outputs its scores, gradient from ``grad_func``.

    Parameters
    ----------
    name : str, default 'pyloss'
        The output is named ``name + '_output'``.
    data_names : list of str, default ('data',)
        Exactly one.
    label_names : list of str, default ('softmax_label',)
        Exactly one.
    logger : logging.Logger
    grad_func : callable, optional
        ``grad_func(scores, labels) -> gradient`` (NDArray or numpy) of the
        loss w.r.t. the scores; required for backward.
    """

    def __init__(self, name='pyloss', data_names=('data',), label_names=('softmax_label',),
                 logger=logging, grad_func=None):
        super().__init__(data_names, label_names, [name + '_output'], logger=logger)
        self._name = name
        if len(self._data_names) != 1 or len(self._label_names) != 1:
            raise FFError('PythonLossModule takes exactly one data and one label name')
        if grad_func is not None and not callable(grad_func):
            raise FFError('PythonLossModule: `grad_func` must be callable')
        self._grad_func = grad_func
        self._scores = None
        self._labels = None
        self._scores_grad = None

    def _compute_output_shapes(self):
        return [(self._name + '_output', tuple(self._data_shapes[0][1]))]

    def forward(self, data_batch, is_train=None):
        """Keep the scores (and the labels when training)."""
        self._scores = data_batch.data[0]
        if is_train is None:
            is_train = self.for_training
        if is_train:
            self._labels = data_batch.label[0]

    def get_outputs(self, merge_multi_context=True):
        if not merge_multi_context:
            raise FFError('PythonLossModule only supports merge_multi_context=True')
        return [self._scores]

    def backward(self, out_grads=None):
        """Set the input gradient to ``grad_func(scores, labels)``."""
        from .. import ndarray as nd
        if out_grads is not None:
            raise FFError('For a loss module, out_grads should be None')
        if not self.for_training:
            raise FFError('PythonLossModule: bind with for_training=True to run backward')
        if self._grad_func is None:
            raise FFError('PythonLossModule: give grad_func to run backward')
        grad = self._grad_func(self._scores, self._labels)
        if not isinstance(grad, nd.NDArray):
            grad = nd.array(grad)
        self._scores_grad = grad

    def get_input_grads(self, merge_multi_context=True):
        if not merge_multi_context:
            raise FFError('PythonLossModule only supports merge_multi_context=True')
        return [self._scores_grad]
