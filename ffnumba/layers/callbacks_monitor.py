"""Callbacks that watch a logged quantity: EarlyStopping, ModelCheckpoint, ReduceLROnPlateau.

Part of :mod:`ffnumba.layers.callbacks` (which re-exports them); the
semantics are Keras 3's, described on each class.
"""
import os
import warnings

import numpy as np

from ..base import ParamError
from .callback_base import Callback

__all__ = ['EarlyStopping', 'ModelCheckpoint', 'ReduceLROnPlateau']

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
        'auto': 'min' for losses and errors, 'max' for accuracy-like names.
    save_freq : 'epoch' or int, default 'epoch'
        An int saves every that many training batches (the logs then also
        have ``batch``, 1-based, for the file name).
    initial_value_threshold : float, optional
        The best value to beat at first.

    With ``save_best_only`` and ``monitor`` missing from the logs, it warns
    and saves (Keras 3).
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
        self.mode = mode
        self.monitor_op = None          # chosen at the first save (mode 'auto': by name)
        self.best = initial_value_threshold
        self._batches = 0
        self._epoch = 0
        self.last_saved = None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq != 'epoch':
            self._batches += 1
            if self._batches % self.save_freq == 0:
                self._save(self._epoch, dict(logs or {}, batch=batch + 1))

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
            if self.monitor_op is None:
                self.monitor_op = _monitor_op('ModelCheckpoint', self.monitor, self.mode)
            if current is None:
                warnings.warn('Can save best model only with %s available.' % self.monitor,
                              stacklevel=3)
            elif self.best is not None and not self.monitor_op(current, self.best):
                if self.verbose > 0:
                    print('Epoch %d: %s did not improve from %.5f' % (epoch + 1, self.monitor,
                                                                     self.best))
                return
            else:
                if self.verbose > 0:
                    print('Epoch %d: %s improved from %s to %.5f, saving model to %s'
                          % (epoch + 1, self.monitor, 'None' if self.best is None else
                             '%.5f' % self.best, current, path))
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
                if old > np.float32(self.min_lr):   # Keras compares in float32
                    new = max(old * self.factor, self.min_lr)
                    self.model.learning_rate = new
                    if self.verbose > 0:
                        print('Epoch %d: ReduceLROnPlateau reducing learning rate to %s.'
                              % (epoch + 1, new))
                    self.cooldown_counter = self.cooldown
                    self.wait = 0
