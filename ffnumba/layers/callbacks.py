"""Keras-style callbacks for ``ff.layers`` models (``ff.layers.callbacks``).

The hooks, their arguments and the order ``fit``/``evaluate``/``predict``
call them are Keras 3's (``keras.callbacks.Callback``):

- ``on_train_begin(logs)``, then per epoch ``on_epoch_begin(epoch)``,
  per batch ``on_train_batch_begin(batch)`` / ``on_train_batch_end(batch,
  logs)`` (running means over the epoch so far), validation (the
  ``on_test_*`` hooks), ``on_epoch_end(epoch, logs)`` with the epoch's
  values and the ``val_`` ones, finally ``on_train_end(logs)``.
- ``evaluate`` calls ``on_test_begin``, ``on_test_batch_begin/end``,
  ``on_test_end``; ``predict`` the ``on_predict_*`` twins.
- ``epoch`` and ``batch`` are 0-based (printed 1-based, as Keras does);
  ``self.model`` is the model; setting ``self.model.stop_training = True``
  ends training after the current batch.

MXNet callables work in the same ``callbacks=`` list (:func:`adapt`): a
callable of one argument (``ff.callback.Speedometer``, ``ProgressBar``,
``log_train_metric``) is called after each batch with a
``BatchEndParam(epoch, nbatch, eval_metric, locals)``; a callable of four
(``ff.callback.do_checkpoint(prefix)``, ``module_checkpoint``) after each
epoch with ``(epoch, symbol, arg_params, aux_params)``, as ``Module.fit``
calls them.
"""
import csv
import inspect
import logging
import math
import os
import sys
import time
import warnings

import numpy as np

from ..base import ParamError

__all__ = ['Callback', 'CallbackList', 'History', 'EarlyStopping', 'ModelCheckpoint',
           'CSVLogger', 'LearningRateScheduler', 'ReduceLROnPlateau', 'TerminateOnNaN',
           'LambdaCallback', 'ProgbarLogger', 'adapt']

_log = logging.getLogger(__name__)

_HOOKS = ('on_train_begin', 'on_train_end', 'on_epoch_begin', 'on_epoch_end',
          'on_train_batch_begin', 'on_train_batch_end', 'on_test_begin', 'on_test_end',
          'on_test_batch_begin', 'on_test_batch_end', 'on_predict_begin', 'on_predict_end',
          'on_predict_batch_begin', 'on_predict_batch_end')


class Callback:
    """Base class: every hook does nothing. Subclass and override the ones you need.

    Attributes
    ----------
    model : Model
        Set by ``fit``/``evaluate``/``predict`` before the first hook.
    params : dict
        ``{'verbose', 'epochs', 'steps'}`` of the current call.
    """

    def __init__(self):
        self.model = None
        self.params = {}

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        pass

    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs)

    def on_batch_begin(self, batch, logs=None):
        """Keras' older name of :meth:`on_train_batch_begin`."""

    def on_batch_end(self, batch, logs=None):
        """Keras' older name of :meth:`on_train_batch_end`."""

    def on_test_begin(self, logs=None):
        pass

    def on_test_end(self, logs=None):
        pass

    def on_test_batch_begin(self, batch, logs=None):
        pass

    def on_test_batch_end(self, batch, logs=None):
        pass

    def on_predict_begin(self, logs=None):
        pass

    def on_predict_end(self, logs=None):
        pass

    def on_predict_batch_begin(self, batch, logs=None):
        pass

    def on_predict_batch_end(self, batch, logs=None):
        pass


class _DuckCallback(Callback):
    """An object with some Keras hook methods but not a :class:`Callback` subclass."""

    def __init__(self, obj):
        super().__init__()
        self.obj = obj
        for hook in _HOOKS + ('on_batch_begin', 'on_batch_end'):
            if callable(getattr(obj, hook, None)):
                setattr(self, hook, getattr(obj, hook))

    def set_model(self, model):
        super().set_model(model)
        if hasattr(self.obj, 'set_model'):
            self.obj.set_model(model)
        elif hasattr(self.obj, 'model'):
            self.obj.model = model


class _MXNetBatchEnd(Callback):
    """An MXNet batch-end callable ``f(BatchEndParam)`` run after each training batch."""

    def __init__(self, func):
        super().__init__()
        self.func = func
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        from ..callback import BatchEndParam
        self.func(BatchEndParam(epoch=self._epoch, nbatch=batch,
                                eval_metric=self.model._train_metric, locals=None))


class _MXNetEpochEnd(Callback):
    """An MXNet epoch-end callable ``f(epoch, symbol, arg_params, aux_params)``."""

    def __init__(self, func):
        super().__init__()
        self.func = func

    def on_epoch_end(self, epoch, logs=None):
        arg, aux = self.model._params('an MXNet epoch-end callback')
        self.func(epoch, self.model.to_symbol(), dict(arg), dict(aux))


def _arity(func):
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return 1
    params = [p for p in sig.parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values()):
        return 4
    return len(params)


def adapt(obj):
    """A :class:`Callback` for ``obj``: itself, an object with hook methods, or an MXNet callable.

    Raises
    ------
    ParamError
        For anything else.
    """
    if isinstance(obj, Callback):
        return obj
    if any(callable(getattr(obj, h, None)) for h in _HOOKS):
        return _DuckCallback(obj)
    if callable(obj):
        return _MXNetEpochEnd(obj) if _arity(obj) >= 4 else _MXNetBatchEnd(obj)
    raise ParamError('fit: `callbacks` entries must be Callback instances, objects with '
                     'on_epoch_end/... methods or MXNet callables. Received: %r' % (obj,))


class CallbackList:
    """Calls a hook on every callback in order (History first, the progress bar last)."""

    def __init__(self, callbacks, model, params):
        self.callbacks = [adapt(c) for c in callbacks]
        for c in self.callbacks:
            c.set_model(model)
            c.set_params(params)

    def __getattr__(self, hook):
        if hook not in _HOOKS:
            raise AttributeError(hook)

        def call(*args):
            for c in self.callbacks:
                getattr(c, hook)(*args)
        return call


class History(Callback):
    """Records the epoch logs: ``history.history['val_loss'][k]`` (``fit`` returns it).

    Attributes
    ----------
    history : dict of str -> list of float
    epoch : list of int
        The 0-based epochs recorded by the last ``fit``.
    """

    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = []

    def __repr__(self):
        return 'History(epochs=%d, keys=%s)' % (len(self.epoch), sorted(self.history))

    def on_train_begin(self, logs=None):
        self.epoch = []

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)
        if self.model is not None:
            self.model.history = self

    def plot(self, keys=None, to_file=None, title=None):
        """Draw loss and metrics per epoch (:func:`ffnumba.viz.plot_history`)."""
        from .plotting import plot_history
        return plot_history(self, keys=keys, to_file=to_file, title=title)


_UP = ('acc', 'auc', 'f1', 'precision', 'recall', 'fmeasure')


def _monitor_op(owner, monitor, mode):
    """``np.less`` or ``np.greater`` for ``mode`` ('auto' guesses from the metric name)."""
    if mode not in ('auto', 'min', 'max'):
        raise ParamError('%s: `mode` must be one of \'auto\', \'min\', \'max\'. Received: '
                         'mode=%r' % (owner, mode))
    if mode == 'min':
        return np.less
    if mode == 'max':
        return np.greater
    name = monitor[4:] if monitor.startswith('val_') else monitor
    if name.endswith('loss') or name in ('mse', 'mae', 'rmse', 'cross-entropy', 'perplexity',
                                         'nll-loss', 'ce', 'mean_squared_error',
                                         'mean_absolute_error'):
        return np.less
    if any(k in name for k in _UP):
        return np.greater
    raise ParamError('%s: cannot tell whether %r should go up or down; pass mode=\'min\' or '
                     'mode=\'max\'.' % (owner, monitor))


class EarlyStopping(Callback):
    """Stop training when ``monitor`` has stopped improving (Keras 3 semantics).

    After each epoch (from ``start_from_epoch`` on) the monitored value
    counts as an improvement when ``current - min_delta`` beats the best so
    far (``mode`` 'min': smaller; 'max': larger; ``min_delta`` is taken with
    the sign that makes improving harder). Each epoch without improvement
    adds one to ``wait``; training stops at the end of the epoch where
    ``wait >= patience`` (never after the first epoch). With a ``baseline``,
    ``wait`` restarts only when the value also beats the baseline.

    Parameters
    ----------
    monitor : str, default 'val_loss'
    min_delta : float, default 0
        Its absolute value is used.
    patience : int, default 0
        Epochs without improvement after which training stops.
    verbose : int, default 0
    mode : {'auto', 'min', 'max'}, default 'auto'
        'auto': 'max' for accuracy-like names, 'min' for losses and errors.
    baseline : float, optional
    restore_best_weights : bool, default False
        At the end of training, load the weights of the best epoch (the
        first monitored epoch's when none improved), whether training
        stopped early or not (Keras 3).
    start_from_epoch : int, default 0
        Epochs to wait before monitoring.

    Attributes
    ----------
    stopped_epoch : int
        0-based epoch where training was stopped (0 if it was not).
    best, best_epoch, wait
    """

    def __init__(self, monitor='val_loss', min_delta=0, patience=0, verbose=0, mode='auto',
                 baseline=None, restore_best_weights=False, start_from_epoch=0):
        super().__init__()
        self.monitor = monitor
        self.patience = patience
        self.verbose = verbose
        self.baseline = baseline
        self.min_delta = abs(min_delta)
        self.restore_best_weights = restore_best_weights
        self.start_from_epoch = start_from_epoch
        self.mode = mode
        _monitor_op('EarlyStopping', monitor, mode) if mode != 'auto' else None
        self.monitor_op = None
        self.wait = self.stopped_epoch = self.best_epoch = 0
        self.best = self.best_weights = None

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.stopped_epoch = 0
        self.best = None
        self.best_weights = None
        self.best_epoch = 0

    def _improves(self, value, reference):
        if reference is None:
            return True
        delta = -self.min_delta if self.monitor_op is np.less else self.min_delta
        return bool(self.monitor_op(value - delta, reference))

    def on_epoch_end(self, epoch, logs=None):
        if self.monitor_op is None:
            self.monitor_op = _monitor_op('EarlyStopping', self.monitor, self.mode)
        current = _monitor_value('EarlyStopping', self.monitor, logs)
        if current is None or epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights = self.model.get_weights()
            self.best_epoch = epoch
        self.wait += 1
        if self._improves(current, self.best):
            self.best = current
            self.best_epoch = epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self._improves(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0:
            print('Epoch %d: early stopping' % (self.stopped_epoch + 1))
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose > 0:
                print('Restoring model weights from the end of the best epoch: %d.'
                      % (self.best_epoch + 1))
            self.model.set_weights(self.best_weights)


def _monitor_value(owner, monitor, logs):
    value = (logs or {}).get(monitor)
    if value is None:
        warnings.warn('%s conditioned on metric `%s` which is not available. Available '
                      'metrics are: %s' % (owner, monitor, ','.join(sorted(logs or {}))),
                      stacklevel=3)
    return value


class ModelCheckpoint(Callback):
    """Save the model (or only its weights) after every epoch, Keras style.

    Parameters
    ----------
    filepath : str
        May hold ``str.format`` fields: ``{epoch}`` (1-based) and every log
        key, e.g. ``'ckpt-{epoch:02d}-{val_loss:.2f}'``. Whole models go
        through :meth:`Model.save` (a folder, see
        :func:`ffnumba.layers.load_model`); weights through
        :meth:`Model.save_weights` (a ``.params`` file when the path ends with
        ``.params``, else an MXNet checkpoint ``path-symbol.json`` +
        ``path-0000.params``).
    monitor : str, default 'val_loss'
    verbose : int, default 0
    save_best_only : bool, default False
        Save only when ``monitor`` beats the best value so far.
    save_weights_only : bool, default False
    mode : {'auto', 'min', 'max'}, default 'auto'
        'auto': 'max' when the name has 'acc' or starts with 'fmeasure', else 'min'.
    save_freq : 'epoch' or int, default 'epoch'
        An int saves every that many training batches.
    initial_value_threshold : float, optional
        The best value to beat at first.
    """

    def __init__(self, filepath, monitor='val_loss', verbose=0, save_best_only=False,
                 save_weights_only=False, mode='auto', save_freq='epoch',
                 initial_value_threshold=None):
        super().__init__()
        self.filepath = os.fspath(filepath)
        self.monitor = monitor
        self.verbose = verbose
        self.save_best_only = save_best_only
        self.save_weights_only = save_weights_only
        if save_freq != 'epoch' and (isinstance(save_freq, bool) or not isinstance(
                save_freq, int) or save_freq < 1):
            raise ParamError("ModelCheckpoint: `save_freq` must be 'epoch' or a positive int. "
                             'Received: save_freq=%r' % (save_freq,))
        self.save_freq = save_freq
        if mode not in ('auto', 'min', 'max'):
            raise ParamError("ModelCheckpoint: `mode` must be one of 'auto', 'min', 'max'. "
                             'Received: mode=%r' % (mode,))
        if mode == 'auto':
            mode = 'max' if ('acc' in monitor or monitor.startswith('fmeasure')) else 'min'
        self.monitor_op = np.greater if mode == 'max' else np.less
        if initial_value_threshold is not None:
            self.best = initial_value_threshold
        else:
            self.best = -np.inf if mode == 'max' else np.inf
        self._batches = 0
        self._epoch = 0
        self.last_saved = None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq != 'epoch':
            self._batches += 1
            if self._batches % self.save_freq == 0:
                self._save(self._epoch, logs)

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == 'epoch':
            self._save(epoch, logs)

    def _save(self, epoch, logs):
        logs = dict(logs or {})
        try:
            path = self.filepath.format(epoch=epoch + 1, **logs)
        except KeyError as e:
            raise ParamError('ModelCheckpoint: failed to format filepath %r: no key %s in the '
                             'logs (%s)' % (self.filepath, e, ', '.join(sorted(logs)))) from None
        if self.save_best_only:
            current = logs.get(self.monitor)
            if current is None:
                warnings.warn('Can save best model only with %s available, skipping.'
                              % self.monitor, stacklevel=3)
                return
            if not self.monitor_op(current, self.best):
                if self.verbose > 0:
                    print('Epoch %d: %s did not improve from %.5f' % (epoch + 1, self.monitor,
                                                                     self.best))
                return
            if self.verbose > 0:
                print('Epoch %d: %s improved from %.5f to %.5f, saving model to %s'
                      % (epoch + 1, self.monitor, self.best, current, path))
            self.best = current
        elif self.verbose > 0:
            print('Epoch %d: saving model to %s' % (epoch + 1, path))
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        if self.save_weights_only:
            self.model.save_weights(path)
        else:
            self.model.save(path)
        self.last_saved = path


class CSVLogger(Callback):
    """Write each epoch's logs as a CSV row: ``epoch`` (0-based, as Keras) then sorted keys.

    Parameters
    ----------
    filename : str
    separator : str, default ','
    append : bool, default False
        Append to an existing file (no second header) instead of overwriting.

    Values missing in an epoch (``val_*`` when ``validation_freq`` skips it)
    are written as ``NA``.
    """

    def __init__(self, filename, separator=',', append=False):
        super().__init__()
        self.filename = os.fspath(filename)
        self.sep = separator
        self.append = append
        self.keys = None
        self._file = self._writer = None

    def on_train_begin(self, logs=None):
        exists = self.append and os.path.exists(self.filename)
        self._header_done = exists and os.path.getsize(self.filename) > 0
        if exists and self._header_done:
            with open(self.filename, newline='') as f:
                self.keys = next(csv.reader(f, delimiter=self.sep))[1:]
        folder = os.path.dirname(self.filename)
        if folder:
            os.makedirs(folder, exist_ok=True)
        self._file = open(self.filename, 'a' if self.append else 'w', newline='')

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.keys is None:
            self.keys = sorted(logs)
        if self._writer is None:
            self._writer = csv.writer(self._file, delimiter=self.sep)
            if not self._header_done:
                self._writer.writerow(['epoch'] + self.keys)
        self._writer.writerow([epoch] + [logs.get(k, 'NA') for k in self.keys])
        self._file.flush()

    def on_train_end(self, logs=None):
        if self._file is not None:
            self._file.close()
        self._file = self._writer = None


class LearningRateScheduler(Callback):
    """Set the learning rate at the start of each epoch from ``schedule(epoch, lr)``.

    Parameters
    ----------
    schedule : callable
        ``schedule(epoch, lr) -> new lr`` (0-based epoch); a function of the
        epoch alone works too.
    verbose : int, default 0

    The rate in use is added to the epoch logs as ``learning_rate``.
    """

    def __init__(self, schedule, verbose=0):
        super().__init__()
        self.schedule = schedule
        self.verbose = verbose

    def on_epoch_begin(self, epoch, logs=None):
        lr = self.model.learning_rate
        try:
            lr = self.schedule(epoch, lr)
        except TypeError:
            lr = self.schedule(epoch)
        if not isinstance(lr, (float, int, np.floating, np.integer)) or isinstance(lr, bool):
            raise ParamError('LearningRateScheduler: the schedule must return a float. '
                             'Received: %r' % (lr,))
        self.model.learning_rate = float(lr)
        if self.verbose > 0:
            print('Epoch %d: LearningRateScheduler setting learning rate to %s.'
                  % (epoch + 1, float(lr)))

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs['learning_rate'] = self.model.learning_rate


class ReduceLROnPlateau(Callback):
    """Multiply the learning rate by ``factor`` when ``monitor`` stops improving (Keras 3).

    An epoch improves when the value beats the best by more than
    ``min_delta``; after ``patience`` epochs without improvement the rate
    becomes ``max(lr * factor, min_lr)`` and ``cooldown`` epochs follow in
    which ``wait`` stays 0.

    Parameters
    ----------
    monitor : str, default 'val_loss'
    factor : float < 1, default 0.1
    patience : int, default 10
    verbose : int, default 0
    mode : {'auto', 'min', 'max'}, default 'auto'
        'auto': 'max' when the name has 'acc', else 'min'.
    min_delta : float, default 1e-4
    cooldown : int, default 0
    min_lr : float, default 0
    """

    def __init__(self, monitor='val_loss', factor=0.1, patience=10, verbose=0, mode='auto',
                 min_delta=1e-4, cooldown=0, min_lr=0.0):
        super().__init__()
        if factor >= 1.0:
            raise ParamError('ReduceLROnPlateau: `factor` must be < 1. Received: factor=%r'
                             % (factor,))
        if mode not in ('auto', 'min', 'max'):
            raise ParamError("ReduceLROnPlateau: `mode` must be one of 'auto', 'min', 'max'. "
                             'Received: mode=%r' % (mode,))
        self.monitor, self.factor, self.patience = monitor, factor, patience
        self.verbose, self.mode, self.min_delta = verbose, mode, min_delta
        self.cooldown, self.min_lr = cooldown, min_lr
        self._reset()

    def _reset(self):
        if self.mode == 'min' or (self.mode == 'auto' and 'acc' not in self.monitor):
            self.monitor_op = lambda a, b: a < b - self.min_delta
            self.best = np.inf
        else:
            self.monitor_op = lambda a, b: a > b + self.min_delta
            self.best = -np.inf
        self.cooldown_counter = 0
        self.wait = 0

    def on_train_begin(self, logs=None):
        self._reset()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        logs['learning_rate'] = self.model.learning_rate
        current = logs.get(self.monitor)
        if current is None:
            warnings.warn('Learning rate reduction is conditioned on metric `%s` which is not '
                          'available. Available metrics are: %s'
                          % (self.monitor, ','.join(sorted(logs))), stacklevel=2)
            return
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if self.monitor_op(current, self.best):
            self.best = current
            self.wait = 0
        elif self.cooldown_counter <= 0:
            self.wait += 1
            if self.wait >= self.patience:
                old = self.model.learning_rate
                if old > self.min_lr:
                    new = max(old * self.factor, self.min_lr)
                    self.model.learning_rate = new
                    if self.verbose > 0:
                        print('Epoch %d: ReduceLROnPlateau reducing learning rate to %s.'
                              % (epoch + 1, new))
                    self.cooldown_counter = self.cooldown
                    self.wait = 0


class TerminateOnNaN(Callback):
    """Stop training as soon as a batch's ``loss`` is NaN or infinite."""

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get('loss')
        if loss is not None and not math.isfinite(loss):
            print('Batch %d: Invalid loss, terminating training' % batch)
            self.model.stop_training = True


class LambdaCallback(Callback):
    """A callback from plain functions: ``LambdaCallback(on_epoch_end=lambda e, logs: ...)``.

    Any hook name of :class:`Callback` is accepted as a keyword
    (``on_batch_begin``/``on_batch_end`` mean the training batch hooks).
    """

    def __init__(self, **hooks):
        super().__init__()
        for name, func in hooks.items():
            if name in ('on_batch_begin', 'on_batch_end'):
                name = name.replace('on_', 'on_train_')
            if name not in _HOOKS:
                raise ParamError('LambdaCallback: unknown hook %r (one of %s)'
                                 % (name, ', '.join(_HOOKS)))
            if func is not None:
                setattr(self, name, func)


class ProgbarLogger(Callback):
    """The progress display ``fit`` adds for ``verbose`` 1 or 2.

    ``verbose=1`` on a terminal draws a tqdm bar per epoch on stdout:
    ``Epoch 3/10: 42%|#### | 21/50 [00:01<00:01, loss=0.31, accuracy=0.91]``
    (step k/N, elapsed and ETA, running loss and metrics), ended by the
    epoch's values with the ``val_`` ones. Where stdout is not a terminal
    (a log file, a notebook capture), and for ``verbose=2``, one plain line
    per epoch: ``Epoch 3/10 - loss: 0.3100 - accuracy: 0.9100 - val_loss: ...
    - 50 steps, 1.2s``. Epochs are numbered from 1.
    """

    def __init__(self, verbose=1):
        super().__init__()
        self.verbose = verbose
        self._bar = None

    def _use_bar(self):
        stream = sys.stdout
        return self.verbose == 1 and hasattr(stream, 'isatty') and stream.isatty()

    def on_epoch_begin(self, epoch, logs=None):
        self._tic = time.time()
        self._epoch = epoch
        self._steps = 0
        if self._use_bar():
            from tqdm import tqdm
            self._bar = tqdm(total=self.params.get('steps'), file=sys.stdout, leave=True,
                             desc='Epoch %d/%d' % (epoch + 1, self.params.get('epochs', 0)),
                             unit='step', dynamic_ncols=True)

    def on_train_batch_end(self, batch, logs=None):
        self._steps = batch + 1
        if self._bar is not None:
            self._bar.set_postfix({k: '%.4f' % v for k, v in (logs or {}).items()},
                                  refresh=False)
            self._bar.update(1)

    def on_epoch_end(self, epoch, logs=None):
        text = ' - '.join('%s: %.4f' % kv for kv in (logs or {}).items())
        took = time.time() - self._tic
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=True)
            self._bar.close()
            self._bar = None
        else:
            print('Epoch %d/%d - %s - %d steps, %.1fs' % (
                epoch + 1, self.params.get('epochs', 0), text, self._steps, took), flush=True)

    def on_train_end(self, logs=None):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
