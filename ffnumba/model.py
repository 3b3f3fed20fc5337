"""MXNet 1.x's legacy model API: ``FeedForward`` and checkpoint files.

``FeedForward`` takes numpy arrays or a ``DataIter`` and trains through the
same :class:`~ffnumba.module.Module` executor group and the same
``BaseModule`` loop as the module API; it only keeps its MXNet 1.x
conventions (numpy input, string-name initialisation, ``nbatch`` from 1).
Checkpoints are ``prefix-symbol.json`` plus ``prefix-%04d.params`` with
``arg:``/``aux:`` keys (reference ``mxnet_api.md`` sections 7 and 14).
"""
import warnings

import numpy as np

from .base import FFError, ParamError, ShapeError, get_logger
from .context import cpu, check_device
from .callback import BatchEndParam
from .checkpoint import save_checkpoint, load_checkpoint, load_params
from .kvstore import _create_kvstore
from .module import Module
from .module.executor_group import _split_input_slice

__all__ = ['FeedForward', 'save_checkpoint', 'load_checkpoint', 'load_params',
           'BatchEndParam', '_create_kvstore', '_split_input_slice']


class _FeedForwardModule(Module):
    """The Module a :class:`FeedForward` trains through: MXNet 1.x FeedForward's conventions.

    It changes steps of the one loop in :meth:`BaseModule.fit` through its
    fit hooks, nothing else:

    * ``Start training with [ctx]`` is logged once the optimizer is ready;
    * an epoch is the iterator once or, with ``epoch_size``, that many
      batches (the iterator is reset whenever it runs out, see
      :func:`_epoch_batches`); without ``epoch_size`` the iterator is reset
      (``Epoch[e] Resetting Data Iterator``) before the ``Time cost`` line and
      not again at the end of the epoch;
    * no ``Train-`` line, and the validation line comes only from
      ``eval_end_callback`` (FeedForward's default is
      :class:`~ffnumba.callback.LogValidationMetricsCallback`).

    Batch callbacks counting ``nbatch`` from 1 are FeedForward's own wrapping
    (:func:`_count_from_one`).
    """

    _fit_owner = 'FeedForward'   # named in fit's errors

    def __init__(self, symbol, epoch_size=None, **kwargs):
        super().__init__(symbol, **kwargs)
        self._epoch_size = epoch_size

    def init_optimizer(self, *args, **kwargs):
        super().init_optimizer(*args, **kwargs)
        self.logger.info('Start training with %s', str(self._context))

    def _fit_batches(self, train_data, epoch):
        return _epoch_batches(train_data, epoch, self._epoch_size, self.logger)

    def _fit_log_metrics(self, epoch, kind, name_vals):
        pass

    def _fit_batches_done(self, epoch, train_data):
        if self._epoch_size is None:
            self.logger.info('Epoch[%d] Resetting Data Iterator', epoch)
            train_data.reset()

    def _fit_epoch_end(self, epoch, train_data):
        pass


class _ByName:
    """FeedForward's initializer convention for ``Module.init_params``, the one place that
    initialises: ``init(name, arr)`` with the plain name, so MXNet's legacy name rules apply
    (``upsampling*`` bilinear, ``stn_loc*``, the BatchNorm statistics by name)."""

    def __init__(self, initializer):
        self.initializer = initializer

    def __call__(self, desc, arr):
        with warnings.catch_warnings():
            # the legacy by-name call is FeedForward's own convention
            warnings.simplefilter('ignore', DeprecationWarning)
            self.initializer(str(desc), arr)


def _count_from_one(callbacks):
    """Batch-end callbacks that see ``nbatch`` counted from 1 (MXNet 1.x FeedForward)."""
    if callbacks is None:
        return None
    callbacks = callbacks if isinstance(callbacks, (list, tuple)) else [callbacks]

    def shifted(param):
        param = param._replace(nbatch=param.nbatch + 1)
        for cb in callbacks:
            cb(param)
    return shifted


def _epoch_batches(train_data, epoch, epoch_size, logger):
    """The batches of one epoch: the iterator once, or ``epoch_size`` batches.

    With ``epoch_size`` the iterator is reset (``Epoch[e] Resetting Data
    Iterator``) whenever it runs out before the epoch is complete, and is left
    where it stopped otherwise (FeedForward's rule).
    """
    if epoch_size is None:
        yield from train_data
        return
    n = 0
    reset_once = False
    while True:
        exhausted = True
        for batch in train_data:
            yield batch
            n += 1
            if n >= epoch_size:
                exhausted = False
                break
        if exhausted:
            if n == 0 and reset_once:  # a reset brought no batch: empty for good
                return
            logger.info('Epoch[%d] Resetting Data Iterator', epoch)
            train_data.reset()
            reset_once = True
        if n >= epoch_size:
            return


def _is_array(x):
    from .ndarray import NDArray
    return isinstance(x, (np.ndarray, NDArray))


class FeedForward:
    """A feed-forward network trained from numpy arrays (MXNet 1.x ``mx.model.FeedForward``).

    Parameters
    ----------
    symbol : Symbol or callable
        The network, or ``sym_gen(bucket_key)`` returning one.
    ctx : Context or list of Context, default [cpu()]
        Several contexts split each batch (data parallelism, threads on CPUs).
        Several CPU contexts cap the BLAS threads of the whole process at
        ``cores // contexts`` for good; set ``FFNUMBA_BLAS_THREADS=0`` to
        leave BLAS alone or ``=N`` for another cap (see
        :class:`~ffnumba.module.executor_group.DataParallelExecutorGroup`).
    num_epoch : int, optional
        Train until this epoch (required by :meth:`fit`).
    epoch_size : int, optional
        Batches per epoch (default: one pass over the data).
    optimizer : str or Optimizer, default 'sgd'
    initializer : Initializer, default Uniform(0.01)
        Called with parameter names (MXNet's legacy name rules).
    numpy_batch_size : int, default 128
        Batch size for numpy input.
    arg_params, aux_params : dict of str to NDArray, optional
        Start from these values.
    allow_extra_params : bool, default False
        Drop given params that the symbol does not have instead of failing.
    begin_epoch : int, default 0
    **kwargs
        Optimizer hyper-parameters (``learning_rate``, ``momentum``, ``wd``...).

    Examples
    --------
    >>> model = ff.FeedForward(net, ctx=[ff.cpu(0), ff.cpu(1)], num_epoch=10,
    ...                        learning_rate=0.1, momentum=0.9)    # doctest: +SKIP
    >>> model.fit(X, y, eval_data=(Xv, yv))                         # doctest: +SKIP
    """

    def __init__(self, symbol, ctx=None, num_epoch=None, epoch_size=None, optimizer='sgd',
                 initializer=None, numpy_batch_size=128, arg_params=None, aux_params=None,
                 allow_extra_params=False, begin_epoch=0, **kwargs):
        from .symbol import Symbol
        if isinstance(symbol, Symbol):
            self.symbol, self.sym_gen = symbol, None
        elif callable(symbol):
            self.symbol, self.sym_gen = None, symbol
        else:
            raise ParamError('FeedForward: `symbol` must be a Symbol or a callable sym_gen. '
                             'Received: symbol=%r' % (symbol,))
        from .module._checks import _check_contexts
        ctx = _check_contexts('FeedForward', [cpu()] if ctx is None else ctx)
        for c in ctx:
            check_device(c)
        self.ctx = ctx
        self.arg_params = arg_params
        self.aux_params = aux_params
        self.allow_extra_params = allow_extra_params
        if self.symbol is not None:
            self._check_arguments()
        self.num_epoch = num_epoch
        self.epoch_size = epoch_size
        self.kwargs = kwargs.copy()
        self.optimizer = optimizer
        if initializer is None:
            from . import initializer as init
            initializer = init.Uniform(0.01)
        self.initializer = initializer
        if not isinstance(numpy_batch_size, (int, np.integer)) or numpy_batch_size < 1:
            raise ParamError('FeedForward: `numpy_batch_size` must be a positive int. '
                             'Received: numpy_batch_size=%r' % (numpy_batch_size,))
        self.numpy_batch_size = int(numpy_batch_size)
        self.begin_epoch = begin_epoch
        self._pred_mod = None
        self._pred_key = None
        self._train_mod = None

    def _check_arguments(self):
        """Check for duplicate argument names and drop unknown params if allowed."""
        args = self.symbol.list_arguments()
        seen = set()
        for name in args + self.symbol.list_auxiliary_states():
            if name in seen:
                raise FFError('FeedForward: the symbol has the argument name %r twice' % name)
            seen.add(name)
        if self.allow_extra_params:
            aux = set(self.symbol.list_auxiliary_states())
            if self.arg_params:
                self.arg_params = {k: v for k, v in self.arg_params.items() if k in seen - aux}
            if self.aux_params:
                self.aux_params = {k: v for k, v in self.aux_params.items() if k in aux}

    # ------------------------------------------------------------- data
    def _init_iter(self, X, y, is_train):
        from . import io
        if _is_array(X):
            if y is None:
                if is_train:
                    raise ParamError('FeedForward.fit: `y` must be given when X is an array')
                y = np.zeros(X.shape[0])
            if not _is_array(y):
                raise ParamError('FeedForward: `y` must be a numpy array or NDArray when X is '
                                 'one. Received: %s' % type(y).__name__)
            if X.shape[0] != y.shape[0]:
                raise ShapeError('FeedForward: the numbers of data points and labels differ: '
                                 'X has %d samples (shape %s) but y has %d (shape %s)'
                                 % (X.shape[0], tuple(X.shape), y.shape[0], tuple(y.shape)))
            y = np.asarray(y)
            if y.ndim == 2 and y.shape[1] == 1:
                y = y.reshape(-1)
            if y.ndim == 2 and y.size and np.all((y == 0) | (y == 1)) and np.all(y.sum(1) == 1):
                raise ShapeError('FeedForward: y of shape %s looks one-hot encoded, but the '
                                 'loss takes class indices (sparse labels, shape (n,)). Pass '
                                 'y.argmax(axis=1) instead.' % (y.shape,))
            if y.ndim != 1:
                raise ShapeError('FeedForward: y must be class indices or targets of shape '
                                 '(n,) or (n, 1). Received shape %s' % (y.shape,))
            bs = min(X.shape[0], self.numpy_batch_size)
            if is_train:
                return io.NDArrayIter(X, y, bs, shuffle=True, last_batch_handle='roll_over')
            return io.NDArrayIter(X, y, bs, shuffle=False)
        if not isinstance(X, io.DataIter):
            raise ParamError('FeedForward: X must be a DataIter, an NDArray or a numpy array. '
                             'Received: %s' % type(X).__name__)
        return X

    def _init_eval_iter(self, eval_data):
        if eval_data is None:
            return None
        if isinstance(eval_data, (tuple, list)) and len(eval_data) == 2:
            if eval_data[0] is not None:
                if eval_data[1] is None and _is_array(eval_data[0]):
                    return self._init_iter(eval_data[0], None, is_train=False)
                return self._init_iter(eval_data[0], eval_data[1], is_train=True)
            raise ParamError('FeedForward: eval_data is an (X, y) pair with X=None')
        from . import io
        if not isinstance(eval_data, io.DataIter):
            raise ParamError('FeedForward: eval_data must be a DataIter or an (X, y) pair. '
                             'Received: %s' % type(eval_data).__name__)
        return eval_data

    def _module(self, data_descs, label_descs, ctx, work_load_list=None, logger=None,
                cls=Module, **kwargs):
        data_names = [d[0] for d in data_descs]
        args = self.symbol.list_arguments()
        if label_descs:
            label_names = [d[0] for d in label_descs if d[0] in args]
        else:
            known = set(self.arg_params or {})
            label_names = [a for a in args if a not in known and a not in data_names]
        return cls(self.symbol, data_names=data_names, label_names=label_names,
                   context=ctx, work_load_list=work_load_list,
                   logger=get_logger(logger, 'ffnumba.model'), **kwargs)

    # -------------------------------------------------------------- fit
    def fit(self, X, y=None, eval_data=None, eval_metric='acc', epoch_end_callback=None,
            batch_end_callback=None, kvstore='local', logger=None, work_load_list=None,
            monitor=None, eval_end_callback=None, eval_batch_end_callback=None):
        """Train on ``X`` (numpy array, NDArray or DataIter) with labels ``y``.

        A numpy ``X`` becomes ``NDArrayIter(X, y, min(n, numpy_batch_size),
        shuffle=True, last_batch_handle='roll_over')``. Training runs through a
        :class:`~ffnumba.module.Module` on ``ctx`` and the shared loop; the
        optimizer gets ``rescale_grad=1/batch_size`` and ``param_idx2name``.

        Parameters
        ----------
        X : numpy.ndarray, NDArray or DataIter
        y : numpy.ndarray, optional
            1-D or (n, 1) labels; required with an array ``X``.
        eval_data : DataIter or (X, y), optional
        eval_metric : str or EvalMetric, default 'acc'
        epoch_end_callback, batch_end_callback : callable or list, optional
            Batch callbacks see ``nbatch`` counted from 1 (MXNet 1.x's rule).
        kvstore : str, KVStore or None, default 'local'
        logger : logging.Logger, optional
        work_load_list : list of float, optional
        monitor : Monitor, optional
        eval_end_callback : callable, default LogValidationMetricsCallback()
        eval_batch_end_callback : callable, optional

        Raises
        ------
        FFError
            For mismatched sample counts, a bad ``y`` shape, a missing
            ``num_epoch``, an unusable context, or a DataIter ``X`` that
            yields no batch (run to its end and not reset: call
            ``X.reset()``; MXNet raises a bare ``StopIteration``). With
            ``epoch_size`` set, an exhausted iterator is reset instead.
        """
        from . import metric
        if self.num_epoch is None:
            raise ParamError('FeedForward.fit: `num_epoch` must be set in the constructor. '
                             'Received: num_epoch=None')
        data = self._init_iter(X, y, is_train=True)
        eval_iter = self._init_eval_iter(eval_data)
        if self.sym_gen is not None:
            self.symbol = self.sym_gen(data.default_bucket_key)
            self._check_arguments()
        if not isinstance(eval_metric, metric.EvalMetric):
            eval_metric = metric.create(eval_metric)
        if eval_end_callback is None:
            from .callback import LogValidationMetricsCallback
            eval_end_callback = LogValidationMetricsCallback()
        mod = self._module(data.provide_data, data.provide_label, self.ctx, work_load_list,
                           logger, cls=_FeedForwardModule, epoch_size=self.epoch_size)
        self._train_mod = mod
        mod.fit(data, eval_data=eval_iter, eval_metric=eval_metric,
                epoch_end_callback=epoch_end_callback,
                batch_end_callback=_count_from_one(batch_end_callback), kvstore=kvstore,
                optimizer=self.optimizer, optimizer_params=self.kwargs,
                eval_end_callback=eval_end_callback,
                eval_batch_end_callback=eval_batch_end_callback,
                initializer=_ByName(self.initializer), arg_params=self.arg_params,
                aux_params=self.aux_params, allow_missing=True, begin_epoch=self.begin_epoch,
                num_epoch=self.num_epoch, monitor=monitor)
        self.arg_params, self.aux_params = mod.get_params()
        return self

    # ---------------------------------------------------------- predict
    def _predictor(self, data_iter):
        """A prediction Module on ``ctx[0]`` (grad_req 'null'), cached by input names."""
        if self.arg_params is None:
            raise FFError('FeedForward: the model has no parameters; call fit or load first')
        labels = [d for d in data_iter.provide_label
                  if d[0] in self.symbol.list_arguments()] if data_iter.provide_label else []
        key = (tuple(d[0] for d in data_iter.provide_data), tuple(d[0] for d in labels))
        if self._pred_mod is None or self._pred_key != key:
            mod = self._module(data_iter.provide_data, labels, self.ctx[0])
            mod.bind(data_iter.provide_data, labels or None, for_training=False)
            self._pred_mod, self._pred_key = mod, key
        self._pred_mod.set_params(self.arg_params, self.aux_params or {}, allow_extra=True)
        return self._pred_mod

    def predict(self, X, num_batch=None, return_data=False, reset=True):
        """Predict ``X``; returns numpy (a list for several outputs).

        Runs on ``ctx[0]``; padding rows of the last batch are removed. With
        ``return_data=True`` returns ``(outputs, data, label)``.
        """
        data = self._init_iter(X, None, is_train=False)
        mod = self._predictor(data)
        outs, datas, labels = None, None, None
        for outputs, _, batch in mod.iter_predict(data, num_batch=num_batch, reset=reset):
            real = outputs[0].shape[0]
            if outs is None:
                outs = [[] for _ in outputs]
                datas = [[] for _ in batch.data]
                labels = [[] for _ in (batch.label or [])]
            for lst, o in zip(outs, outputs):
                lst.append(o.asnumpy())
            if return_data:
                for lst, d in zip(datas, batch.data):
                    lst.append(np.asarray(d)[:real])
                for lst, d in zip(labels, batch.label or []):
                    lst.append(np.asarray(d)[:real])
        if outs is None:
            return []
        result = [np.concatenate(o) for o in outs]
        result = result[0] if len(result) == 1 else result
        if return_data:
            d = [np.concatenate(x) for x in datas]
            lab = [np.concatenate(x) for x in labels]
            return result, d[0] if len(d) == 1 else d, lab[0] if len(lab) == 1 else lab
        return result

    def score(self, X, y=None, eval_metric='acc', num_batch=None, batch_end_callback=None,
              reset=True):
        """Evaluate ``eval_metric`` on ``X`` (with labels ``y`` for an array).

        For MXNet compatibility ``score(data_iter, 'acc')`` also works: a str or
        EvalMetric in the ``y`` position is taken as the metric.

        Returns
        -------
        float
            ``eval_metric.get()[1]``.
        """
        from . import metric
        if isinstance(y, str) or isinstance(y, metric.EvalMetric) or callable(y):
            y, eval_metric = None, y
        if _is_array(X) and y is None:
            raise ParamError('FeedForward.score: `y` must be given when X is an array')
        data = self._init_iter(X, y, is_train=False)
        if not isinstance(eval_metric, metric.EvalMetric):
            eval_metric = metric.create(eval_metric)
        mod = self._predictor(data)
        mod.score(data, eval_metric, num_batch=num_batch, batch_end_callback=batch_end_callback,
                  reset=reset)
        return eval_metric.get()[1]

    # -------------------------------------------------------- save/load
    def save(self, prefix, epoch=None):
        """Checkpoint to ``prefix-symbol.json`` and ``prefix-%04d.params``.

        ``epoch`` defaults to ``num_epoch``.
        """
        if epoch is None:
            epoch = self.num_epoch
        if epoch is None:
            raise ParamError('FeedForward.save: give `epoch` (num_epoch is not set either)')
        if self.arg_params is None:
            raise FFError('FeedForward.save: the model has no parameters; call fit first')
        save_checkpoint(prefix, epoch, self.symbol, self.arg_params, self.aux_params or {})

    @staticmethod
    def load(prefix, epoch, ctx=None, **kwargs):
        """A FeedForward from a checkpoint; ``begin_epoch`` is set to ``epoch``."""
        symbol, arg_params, aux_params = load_checkpoint(prefix, epoch)
        return FeedForward(symbol, ctx=ctx, arg_params=arg_params, aux_params=aux_params,
                           begin_epoch=epoch, **kwargs)

    @staticmethod
    def create(symbol, X, y=None, ctx=None, num_epoch=None, epoch_size=None, optimizer='sgd',
               initializer=None, eval_data=None, eval_metric='acc', epoch_end_callback=None,
               batch_end_callback=None, kvstore='local', logger=None, work_load_list=None,
               eval_end_callback=None, eval_batch_end_callback=None, **kwargs):
        """Construct a FeedForward and fit it (same defaults as the constructor and fit)."""
        model = FeedForward(symbol, ctx=ctx, num_epoch=num_epoch, epoch_size=epoch_size,
                            optimizer=optimizer, initializer=initializer, **kwargs)
        model.fit(X, y, eval_data=eval_data, eval_metric=eval_metric,
                  epoch_end_callback=epoch_end_callback, batch_end_callback=batch_end_callback,
                  kvstore=kvstore, logger=logger, work_load_list=work_load_list,
                  eval_end_callback=eval_end_callback,
                  eval_batch_end_callback=eval_batch_end_callback)
        return model
