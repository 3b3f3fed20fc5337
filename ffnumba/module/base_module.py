"""BaseModule: the one training, scoring and prediction loop (MXNet ``mx.mod.BaseModule``).

Subclasses implement ``bind``, ``init_params``, ``init_optimizer``,
``forward``, ``backward``, ``update``, ``get_outputs``, ``update_metric``
and friends; ``fit``, ``score``, ``predict`` and ``iter_predict`` are
written once here and shared by :class:`Module`, :class:`BucketingModule`,
:class:`SequentialModule`, :class:`SVRGModule` and
:class:`~ffnumba.model.FeedForward` (reference ``mxnet_api.md`` section 8).
"""
import logging
import time
import warnings

import numpy as np

from .. import checkpoint as _ckpt
from ..base import FFError, ParamError, get_logger
from ..callback import BatchEndParam
from ._checks import _EXHAUSTED, _check_iter
from ._interface import ModuleInterface
from . import _nan_guard, _resume, _threads

__all__ = ['BaseModule', 'BatchEndParam']


def _as_list(obj):
    return obj if isinstance(obj, (list, tuple)) else [obj]


def _create_metric(eval_metric):
    from .. import metric
    if isinstance(eval_metric, metric.EvalMetric):
        return eval_metric
    return metric.create(eval_metric)


def _global_name_value(eval_metric):
    fn = getattr(eval_metric, 'get_global_name_value', None)
    return fn() if fn is not None else eval_metric.get_name_value()


def _default_initializer():
    from .. import initializer
    return initializer.Uniform(0.01)


class BaseModule(ModuleInterface):
    """The abstract module: a computation that can be bound, run and trained.

    The methods a module implements are declared (with their documentation)
    in :class:`~ffnumba.module._interface.ModuleInterface`; this class adds
    what is written once for every module: the loops and the parameter I/O.

    Parameters
    ----------
    logger : logging.Logger, default logging
        Receives the epoch and validation log lines.

    Attributes
    ----------
    binded, for_training, inputs_need_grad, params_initialized, optimizer_initialized : bool
        State flags, as MXNet.
    """

    def __init__(self, logger=logging):
        self.logger = get_logger(logger, 'ffnumba.module')
        self.binded = False
        self.for_training = False
        self.inputs_need_grad = False
        self.params_initialized = False
        self.optimizer_initialized = False
        self._symbol = None
        self._total_exec_bytes = 0

    # ------------------------------------------------------ high level
    def forward_backward(self, data_batch):
        """``forward(data_batch, is_train=True)`` then ``backward()``."""
        self.forward(data_batch, is_train=True)
        self.backward()

    def score(self, eval_data, eval_metric, num_batch=None, batch_end_callback=None,
              score_end_callback=None, reset=True, epoch=0, sparse_row_id_fn=None):
        """Run ``eval_data`` through the module and evaluate ``eval_metric``.

        Parameters
        ----------
        eval_data : DataIter
        eval_metric : str or EvalMetric
        num_batch : int, optional
            Stop after this many batches (default: the whole iterator).
        batch_end_callback, score_end_callback : callable or list, optional
            Called with a :data:`BatchEndParam` after each batch / at the end.
        reset : bool, default True
            Reset ``eval_data`` first.
        epoch : int, default 0
            Passed to the callbacks.

        Returns
        -------
        list of (str, float)
            ``eval_metric.get_name_value()``.
        """
        self._check_ready('score')
        _check_iter('score', 'eval_data', eval_data)
        if reset:
            eval_data.reset()
        eval_metric = _create_metric(eval_metric)
        eval_metric.reset()
        actual = 0
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            with _threads.lock(self):   # one batch at a time (docs/guide/threads.md)
                self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
                self.forward(eval_batch, is_train=False)
                if isinstance(eval_batch, list):
                    self.update_metric(eval_metric, [b.label for b in eval_batch],
                                       pre_sliced=True)
                else:
                    self.update_metric(eval_metric, eval_batch.label)
            if batch_end_callback is not None:
                params = BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=eval_metric,
                                       locals=locals())
                for cb in _as_list(batch_end_callback):
                    cb(params)
            actual += 1
        if score_end_callback:
            params = BatchEndParam(epoch=epoch, nbatch=actual, eval_metric=eval_metric,
                                   locals=locals())
            for cb in _as_list(score_end_callback):
                cb(params)
        return eval_metric.get_name_value()

    def iter_predict(self, eval_data, num_batch=None, reset=True, sparse_row_id_fn=None):
        """Yield ``(outputs, nbatch, batch)`` for each batch, padding rows removed."""
        self._check_ready('iter_predict')
        _check_iter('iter_predict', 'eval_data', eval_data)
        if reset:
            eval_data.reset()
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            with _threads.lock(self):   # one batch at a time; outputs copied (threads.md)
                self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
                self.forward(eval_batch, is_train=False)
                pad = eval_batch.pad or 0
                outputs = [out[0:out.shape[0] - pad].copy() for out in self.get_outputs()]
            yield outputs, nbatch, eval_batch

    def predict(self, eval_data, num_batch=None, merge_batches=True, reset=True,
                always_output_list=False, sparse_row_id_fn=None):
        """Run prediction over ``eval_data`` and collect the outputs.

        Parameters
        ----------
        eval_data : DataIter, NDArray or numpy.ndarray
            An array runs one forward pass and returns ``get_outputs()[0]``.
        num_batch : int, optional
        merge_batches : bool, default True
            Concatenate the batches of each output.
        reset : bool, default True
        always_output_list : bool, default False
            Return a list even for a single output.

        Returns
        -------
        NDArray or list
            Padding rows (``batch.pad``) are removed.
        """
        from .. import ndarray as nd
        from ..io import DataBatch
        self._check_ready('predict')
        if isinstance(eval_data, (nd.NDArray, np.ndarray)):
            if isinstance(eval_data, np.ndarray):
                eval_data = nd.array(eval_data)
            with _threads.lock(self):
                self.forward(DataBatch([eval_data]), is_train=False)
                return self.get_outputs()[0].copy()
        if not hasattr(eval_data, 'reset') or not hasattr(eval_data, '__iter__'):
            raise FFError('predict: eval_data must be a DataIter, an NDArray or a numpy array. '
                          'Received: %s' % type(eval_data).__name__)
        if reset:
            eval_data.reset()
        output_list = []
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            with _threads.lock(self):   # one batch at a time (docs/guide/threads.md)
                self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
                self.forward(eval_batch, is_train=False)
                pad = eval_batch.pad or 0
                output_list.append([out[0:out.shape[0] - pad].copy()
                                    for out in self.get_outputs()])
        if not output_list:
            return output_list
        if merge_batches:
            n = len(output_list[0])
            for out in output_list:
                if len(out) != n:
                    raise FFError('Cannot merge batches, as num of outputs is not the same in '
                                  'mini-batches. Maybe bucketing is used?')
            merged = [nd.concatenate([out[i] for out in output_list]) for i in range(n)]
            if n == 1 and not always_output_list:
                return merged[0]
            return merged
        return output_list

    def fit(self, train_data, eval_data=None, eval_metric='acc', epoch_end_callback=None,
            batch_end_callback=None, kvstore='local', optimizer='sgd',
            optimizer_params=(('learning_rate', 0.01),), eval_end_callback=None,
            eval_batch_end_callback=None, initializer=None, arg_params=None,
            aux_params=None, allow_missing=False, force_rebind=False, force_init=False,
            begin_epoch=0, num_epoch=None, validation_metric=None, monitor=None,
            sparse_row_id_fn=None):
        """Train the module on ``train_data`` for ``num_epoch - begin_epoch`` epochs.

        Each batch runs ``forward_backward``, ``update`` and ``update_metric``;
        the batch callbacks get a :data:`BatchEndParam` (``nbatch`` from 0).
        Each epoch logs ``Epoch[e] Train-<metric>=<value>`` and
        ``Epoch[e] Time cost=<s>``, syncs the parameters, calls
        ``epoch_end_callback(epoch, symbol, arg_params, aux_params)``, scores
        ``eval_data`` (``Epoch[e] Validation-<metric>=<value>``) and resets
        ``train_data``.

        Parameters
        ----------
        train_data : DataIter
        eval_data : DataIter, optional
        eval_metric : str or EvalMetric, default 'acc'
        epoch_end_callback, batch_end_callback : callable or list, optional
        kvstore : str or KVStore, default 'local'
        optimizer : str or Optimizer, default 'sgd'
        optimizer_params : dict or pairs, default (('learning_rate', 0.01),)
        eval_end_callback, eval_batch_end_callback : callable or list, optional
        initializer : Initializer, default Uniform(0.01)
        arg_params, aux_params : dict of str to NDArray, optional
            Start from these values (others are initialised).
        allow_missing : bool, default False
        force_rebind, force_init : bool, default False
        begin_epoch : int, default 0
        num_epoch : int
            Required: the epoch to stop before.
        validation_metric : str or EvalMetric, optional
            Defaults to ``eval_metric``.
        monitor : Monitor, optional
        sparse_row_id_fn : ignored (dense storage only)

        Raises
        ------
        FFError
            If ``num_epoch`` is missing, or if ``train_data`` yields no batch
            at the start of an epoch (an iterator already run to its end and
            not reset, or an empty one). MXNet lets a bare ``StopIteration``
            escape here; ffnumba names the cause instead, as a
            ``StopIteration`` leaking out of ``fit`` can end an enclosing
            generator silently.
        """
        if num_epoch is None:
            raise FFError('fit: please specify number of epochs (`num_epoch`)')
        for field, value in (('num_epoch', num_epoch), ('begin_epoch', begin_epoch)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ParamError('fit: `%s` must be an int >= 0. Received: %s=%r'
                                 % (field, field, value))
        _check_iter('fit', 'train_data', train_data)
        if eval_data is not None:
            _check_iter('fit', 'eval_data', eval_data)
        if initializer is None:
            initializer = _default_initializer()
        self.bind(data_shapes=train_data.provide_data, label_shapes=train_data.provide_label,
                  for_training=True, force_rebind=force_rebind)
        if monitor is not None:
            self.install_monitor(monitor)
        self.init_params(initializer=initializer, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init)
        self.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                            optimizer_params=optimizer_params)
        _resume.restore(self, train_data)     # generator states of a loaded checkpoint
        if validation_metric is None:
            validation_metric = eval_metric
        eval_metric = _create_metric(eval_metric)
        batch_cbs = _as_list(batch_end_callback) if batch_end_callback is not None else ()
        kv = getattr(self, '_kvstore', None)   # a dist store checks epochs, averages metrics
        saved_logger = self.logger
        if kv is not None:   # the loop and its hooks log through the store's rank-aware logger
            self.logger = kv._logger(self.logger)
        try:
            self._fit_loop(train_data, eval_data, eval_metric, validation_metric,
                           epoch_end_callback, batch_cbs, eval_end_callback,
                           eval_batch_end_callback, begin_epoch, num_epoch, monitor, kv,
                           sparse_row_id_fn)
        finally:
            self.logger = saved_logger

    def _fit_loop(self, train_data, eval_data, eval_metric, validation_metric,
                  epoch_end_callback, batch_cbs, eval_end_callback, eval_batch_end_callback,
                  begin_epoch, num_epoch, monitor, kv, sparse_row_id_fn):
        """The epochs of :meth:`fit` (its arguments, checked; ``kv`` the kvstore or None)."""
        for epoch in range(begin_epoch, num_epoch):
            tic = time.time()
            self._fit_epoch_begin(epoch, train_data)
            eval_metric.reset()
            nbatch = 0
            data_iter = iter(self._fit_batches(train_data, epoch))
            end_of_batch = False
            next_batch = next(data_iter, None)
            if next_batch is None:
                raise FFError(_EXHAUSTED % (getattr(self, '_fit_owner', type(self).__name__),
                                            epoch, type(train_data).__name__))
            name_vals = []
            while not end_of_batch:
                data_batch = next_batch
                if monitor is not None:
                    monitor.tic()
                self.forward_backward(data_batch)
                _nan_guard.check_batch(self, data_batch, epoch, nbatch)  # stop before a NaN update
                self.update()
                if isinstance(data_batch, list):
                    self.update_metric(eval_metric, [b.label for b in data_batch],
                                       pre_sliced=True)
                else:
                    self.update_metric(eval_metric, data_batch.label)
                try:
                    next_batch = next(data_iter)
                    self.prepare(next_batch, sparse_row_id_fn=sparse_row_id_fn)
                except StopIteration:
                    end_of_batch = True
                if monitor is not None:
                    monitor.toc_print()
                if end_of_batch and kv is not None:
                    kv._end_epoch(epoch, nbatch + 1)
                if end_of_batch:   # before the callbacks, which may reset the metric
                    name_vals = _global_name_value(eval_metric) if kv is None \
                        else kv._metric_name_value(eval_metric)
                if batch_cbs:
                    params = BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=eval_metric,
                                           locals=locals())
                    for cb in batch_cbs:
                        cb(params)
                nbatch += 1
            self._fit_log_metrics(epoch, 'Train', name_vals)
            self._fit_batches_done(epoch, train_data)
            self.logger.info('Epoch[%d] Time cost=%.3f', epoch, time.time() - tic)
            arg_params_, aux_params_ = self.get_params()
            self.set_params(arg_params_, aux_params_)
            if epoch_end_callback is not None:
                for cb in _as_list(epoch_end_callback):
                    cb(epoch, self.symbol, arg_params_, aux_params_)
            if eval_data:
                res = self.score(eval_data, validation_metric,
                                 score_end_callback=eval_end_callback,
                                 batch_end_callback=eval_batch_end_callback, epoch=epoch)
                self._fit_log_metrics(epoch, 'Validation', res)
            self._fit_epoch_end(epoch, train_data)

    # ------------------------------------------------------ fit hooks
    # Each hook is one step of the loop in :meth:`fit` that a subclass may
    # change (SVRGModule computes its full gradient at epoch begin;
    # FeedForward's module keeps MXNet 1.x's FeedForward conventions).
    def _fit_epoch_begin(self, epoch, train_data):
        """Run at the start of each fit epoch, before the metric is reset. Default: nothing."""

    def _fit_batches(self, train_data, epoch):
        """The iterable of one epoch's batches. Default: ``train_data`` itself, once."""
        return train_data

    def _fit_log_metrics(self, epoch, kind, name_vals):
        """Log ``Epoch[e] {kind}-{name}={value}`` for ``kind`` 'Train' and 'Validation'."""
        for name, val in name_vals:
            self.logger.info('Epoch[%d] %s-%s=%f', epoch, kind, name, val)

    def _fit_batches_done(self, epoch, train_data):
        """Run after an epoch's last batch, before the ``Time cost`` line. Default: nothing."""

    def _fit_epoch_end(self, epoch, train_data):
        """Run last in each epoch (after validation). Default: ``train_data.reset()``."""
        train_data.reset()

    @property
    def symbol(self):
        """The symbol this module runs."""
        return self._symbol

    # --------------------------------------------------------- params
    def get_params(self):
        """The current parameters, as MXNet.

        Returns
        -------
        (dict of str to NDArray, dict of str to NDArray)
            ``(arg_params, aux_params)``, host copies.

        Raises
        ------
        FFError
            Before ``bind`` and ``init_params``.
        """
        raise NotImplementedError()

    def init_params(self, initializer=None, arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Initialise the parameters and auxiliary states.

        Parameters
        ----------
        initializer : Initializer, optional
            Fills each array not found in ``arg_params``/``aux_params``.
        arg_params, aux_params : dict of str to NDArray, optional
            Values to copy in; shapes must match the bound ones.
        allow_missing : bool, default False
            Let ``initializer`` fill names missing from the dicts.
        force_init : bool, default False
            Re-initialise even if already initialised.
        allow_extra : bool, default False
            Ignore names in the dicts that the symbol does not have.

        Raises
        ------
        FFError
            Before ``bind``, for a missing name without ``allow_missing``, an
            unknown name without ``allow_extra`` or a wrong shape.
        """
        raise NotImplementedError()

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        """Assign parameter values.

        Without ``allow_missing`` this is ``init_params`` with no initializer
        (every parameter must be given); with it, only the given values are
        copied and the others keep theirs.

        Parameters
        ----------
        arg_params, aux_params : dict of str to NDArray
        allow_missing : bool, default False
        force_init : bool, default True
            False leaves already initialised parameters alone (with a warning).
        allow_extra : bool, default False

        Raises
        ------
        FFError
            As :meth:`init_params`.
        """
        if not allow_missing:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=False, force_init=force_init,
                             allow_extra=allow_extra)
            return
        if self.params_initialized and not force_init:
            warnings.warn('Parameters already initialized and force_init=False. '
                          'set_params call ignored.', stacklevel=2)
            return
        self._copy_given_params(arg_params, aux_params, allow_extra)
        self._params_dirty = True
        self.params_initialized = True

    def _copy_given_params(self, arg_params, aux_params, allow_extra):
        """Copy just the given values (``set_params(allow_missing=True)``)."""
        self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=True, force_init=True, allow_extra=allow_extra)

    def save_params(self, fname):
        """Save the parameters to ``fname`` with ``arg:``/``aux:`` keys (atomic write)."""
        arg_params, aux_params = self.get_params()
        _ckpt.save_params(fname, arg_params, aux_params)

    def load_params(self, fname):
        """Load parameters saved by :meth:`save_params`.

        Raises
        ------
        FFError
            ``Invalid param file`` for a key without an ``arg:``/``aux:`` prefix.
        """
        arg_params, aux_params = _ckpt.load_params_file(fname)
        self.set_params(arg_params, aux_params)

    def get_states(self, merge_multi_context=True):
        """The state arrays (none for a module without ``state_names``)."""
        self._check_ready('get_states', params=False)
        return []

    def set_states(self, states=None, value=None):
        """Set the state arrays (``state_names``) from arrays or one scalar.

        Parameters
        ----------
        states : list of list of NDArray, optional
            One list per state, one array per device.
        value : float, optional
            Fill every state with this value instead.

        Raises
        ------
        FFError
            Before ``bind``.
        """
        self._check_ready('set_states', params=False)

    def install_monitor(self, mon):
        """Attach a :class:`~ffnumba.monitor.Monitor` to every executor.

        Raises
        ------
        FFError
            Before ``bind``.
        """
        raise NotImplementedError()

    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Prepare for a batch (row-sparse pulls in MXNet; nothing with dense storage)."""

    # ------------------------------------------------------- helpers
    def _check_ready(self, what, params=True):
        if not self.binded:
            raise FFError('%s: call bind before %s' % (type(self).__name__, what))
        if params and not self.params_initialized:
            raise FFError('%s: call init_params (or fit) before %s' % (type(self).__name__, what))
