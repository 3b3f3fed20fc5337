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
import math
import os
import sys
import time

import numpy as np

from ..base import ParamError

__all__ = ['Callback', 'CallbackList', 'History', 'EarlyStopping', 'ModelCheckpoint',
           'CSVLogger', 'LearningRateScheduler', 'ReduceLROnPlateau', 'TerminateOnNaN',
           'LambdaCallback', 'ProgbarLogger', 'adapt']

from .callback_base import _HOOKS, Callback  # noqa: F401 (re-exported)


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


class _Pair(Callback):
    """Two adapted callbacks run as one (ff.callback.History)."""

    def __init__(self, first, second):
        super().__init__()
        self.parts = (first, second)

    def set_model(self, model):
        for p in self.parts:
            p.set_model(model)

    def __getattribute__(self, name):
        if name in _HOOKS:
            parts = object.__getattribute__(self, 'parts')
            return lambda *args: [getattr(p, name)(*args) for p in parts]
        return object.__getattribute__(self, name)


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
    from ..callback import History as _MXHistory
    if isinstance(obj, _MXHistory):       # ff.callback.History: its batch and epoch hooks
        return _Pair(_MXNetBatchEnd(obj.batch_end), _MXNetEpochEnd(obj.epoch_end))
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


# The monitoring callbacks live in callbacks_monitor.py (file size); they are part of this module.
from .callbacks_monitor import EarlyStopping, ModelCheckpoint, ReduceLROnPlateau  # noqa: E402,F401
