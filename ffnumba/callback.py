"""Training callbacks (MXNet ``mx.callback``) and a Keras-like :class:`History`.

Batch-end callbacks receive a :data:`BatchEndParam` ``(epoch, nbatch,
eval_metric, locals)``; epoch-end callbacks receive ``(epoch, symbol,
arg_params, aux_params)``. Log lines use the ``logging`` module at INFO with
MXNet's exact formats (speeds are in samples per second).
"""
import logging
import math
import sys
import time
from collections import namedtuple

_LOG = logging.getLogger(__name__)

__all__ = ['BatchEndParam', 'Speedometer', 'ProgressBar', 'do_checkpoint', 'module_checkpoint',
           'log_train_metric', 'LogValidationMetricsCallback', 'History']

#: What batch-end and eval-end callbacks receive (MXNet ``mx.model.BatchEndParam``).
BatchEndParam = namedtuple('BatchEndParams', ['epoch', 'nbatch', 'eval_metric', 'locals'])


def _writes_checkpoints():
    """False on ranks other than 0 of a ``dist_sync`` run (only rank 0 writes checkpoints)."""
    from .kvstore._mpi import world
    return world['rank'] == 0


def module_checkpoint(mod, prefix, period=1, save_optimizer_states=False):
    """Epoch-end callback that calls ``mod.save_checkpoint(prefix, epoch + 1, ...)``.

    Parameters
    ----------
    mod : BaseModule
    prefix : str
        Files ``prefix-symbol.json`` and ``prefix-%04d.params``.
    period : int, default 1
        Save every ``period`` epochs (values below 1 count as 1).
    save_optimizer_states : bool, default False
        Also write ``prefix-%04d.states``.

    In a ``dist_sync`` run only rank 0 writes (the replicas are identical).
    """
    period = int(max(1, period))

    def _callback(iter_no, sym=None, arg=None, aux=None):
        if (iter_no + 1) % period == 0 and _writes_checkpoints():
            mod.save_checkpoint(prefix, iter_no + 1, save_optimizer_states)
    return _callback


def do_checkpoint(prefix, period=1):
    """Epoch-end callback that saves ``prefix-symbol.json`` and ``prefix-%04d.params``.

    Epoch ``i`` (0-based) is saved under number ``i + 1`` (epoch 0 writes
    ``prefix-0001.params``), through :func:`ffnumba.checkpoint.save_checkpoint`.

    Parameters
    ----------
    prefix : str
    period : int, default 1
        Save every ``period`` epochs (values below 1 count as 1).

    In a ``dist_sync`` run only rank 0 writes (the replicas are identical).
    """
    period = int(max(1, period))

    def _callback(iter_no, sym, arg, aux):
        if (iter_no + 1) % period == 0 and _writes_checkpoints():
            from .checkpoint import save_checkpoint
            save_checkpoint(prefix, iter_no + 1, sym, arg, aux)
    return _callback


def log_train_metric(period, auto_reset=False):
    """Batch-end callback logging ``Iter[%d] Batch[%d] Train-%s=%f`` every ``period`` batches.

    Parameters
    ----------
    period : int
    auto_reset : bool, default False
        Call ``eval_metric.reset_local()`` after logging.
    """
    def _callback(param):
        if param.nbatch % period == 0 and param.eval_metric is not None:
            for name, value in param.eval_metric.get_name_value():
                _LOG.info('Iter[%d] Batch[%d] Train-%s=%f', param.epoch, param.nbatch,
                             name, value)
            if auto_reset:
                param.eval_metric.reset_local()
    return _callback


class Speedometer:
    """Log the training speed (samples/sec) and the metric every ``frequent`` batches.

    The first call starts the timer. Lines (MXNet's format)::

        Epoch[0] Batch [0-50]\tSpeed: 8988.12 samples/sec\taccuracy=0.833333

    ``Batch [0-%d]`` with ``auto_reset=False`` and ``Iter[%d] Batch [%d]\tSpeed: ...``
    without a metric.

    Parameters
    ----------
    batch_size : int
        Samples per batch (speed = frequent * batch_size / seconds).
    frequent : int, default 50
    auto_reset : bool, default True
        Reset the metric's local counters after each line, so each line
        covers the last ``frequent`` batches.
    """

    def __init__(self, batch_size, frequent=50, auto_reset=True):
        self.batch_size = batch_size
        self.frequent = frequent
        self.init = False
        self.tic = 0
        self.last_count = 0
        self.auto_reset = auto_reset

    def __call__(self, param):
        """Log ``Speed: ... samples/sec`` (and the metric) every ``frequent`` batches.

        Parameters
        ----------
        param : BatchEndParam
            ``nbatch`` restarting from a lower value starts a new epoch.
        """
        count = param.nbatch
        if self.last_count > count:
            self.init = False
        self.last_count = count
        if not self.init:
            self.init = True
            self.tic = time.time()
            return
        if count % self.frequent != 0:
            return
        try:
            speed = self.frequent * self.batch_size / (time.time() - self.tic)
        except ZeroDivisionError:
            speed = float('inf')
        if param.eval_metric is not None:
            name_value = param.eval_metric.get_name_value()
            values = sum(name_value, ())
            if self.auto_reset:
                param.eval_metric.reset_local()
                msg = 'Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec' + \
                    '\t%s=%f' * len(name_value)
                _LOG.info(msg, param.epoch, count - self.frequent, count, speed, *values)
            else:
                msg = 'Epoch[%d] Batch [0-%d]\tSpeed: %.2f samples/sec' + \
                    '\t%s=%f' * len(name_value)
                _LOG.info(msg, param.epoch, count, speed, *values)
        else:
            _LOG.info('Iter[%d] Batch [%d]\tSpeed: %.2f samples/sec', param.epoch, count,
                         speed)
        self.tic = time.time()


def _import_tqdm():
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


class ProgressBar:
    """Show training progress within an epoch.

    With ``tqdm`` importable (``pip install ffnumba[progress]``) it draws a
    tqdm bar on stderr; otherwise (or with ``use_tqdm=False``) it logs
    MXNet's line ``[=====-----] 42%`` at INFO for every batch.

    Parameters
    ----------
    total : int
        Batches per epoch.
    length : int, default 80
        Width of the plain bar in characters.
    use_tqdm : bool or None, default None
        None picks tqdm when importable.
    """

    def __init__(self, total, length=80, use_tqdm=None):
        self.bar_len = length
        self.total = total
        tqdm = _import_tqdm() if use_tqdm in (None, True) else None
        if use_tqdm and tqdm is None:
            from .base import ParamError
            raise ParamError('ProgressBar: use_tqdm=True needs tqdm; pip install '
                             'ffnumba[progress]')
        self._tqdm_cls = tqdm
        self._bar = None
        self._last = -1

    def __call__(self, param):
        """Draw the bar at ``param.nbatch`` out of ``total`` batches.

        Parameters
        ----------
        param : BatchEndParam
        """
        count = param.nbatch
        if self._tqdm_cls is None:
            filled_len = int(round(self.bar_len * count / float(self.total)))
            percents = math.ceil(100.0 * count / float(self.total))
            prog_bar = '=' * filled_len + '-' * (self.bar_len - filled_len)
            _LOG.info('[%s] %s%s\r', prog_bar, percents, '%')
            return
        if self._bar is None or count < self._last:
            self.close()
            self._bar = self._tqdm_cls(total=self.total, desc='Epoch %d' % param.epoch,
                                       leave=True, file=sys.stderr)
        self._bar.update(count + 1 - self._bar.n)
        self._last = count
        if count + 1 >= self.total:
            self.close()

    def close(self):
        """Close the current tqdm bar, if any."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            self._last = -1


class LogValidationMetricsCallback:
    """Eval-end callback logging ``Epoch[%d] Validation-%s=%f`` for each metric value."""

    def __call__(self, param):
        """Log one ``Epoch[e] Validation-<name>=<value>`` line per metric value.

        Parameters
        ----------
        param : BatchEndParam
            Nothing is logged when ``param.eval_metric`` is None.
        """
        if not param.eval_metric:
            return
        for name, value in param.eval_metric.get_name_value():
            _LOG.info('Epoch[%d] Validation-%s=%f', param.epoch, name, value)


class History:
    """Per-epoch metric values, Keras style (``history.history['accuracy'][epoch]``).

    Hook it into ``Module.fit`` with three callbacks::

        h = ff.callback.History()
        mod.fit(train, eval_data=val, batch_end_callback=h.batch_end_callback,
                epoch_end_callback=h.epoch_end_callback,
                eval_end_callback=h.eval_end_callback)

    ``batch_end`` remembers the training metric; ``epoch_end`` records its
    global values (what the ``Epoch[%d] Train-...`` log shows); ``eval_end``
    records validation values with the prefix ``val_``. A front end that
    computes values itself calls :meth:`record`.

    Attributes
    ----------
    history : dict of str -> list of float
    epoch : list of int
        Epochs recorded, in order.
    """

    def __init__(self):
        self.history = {}
        self.epoch = []
        self._train_metric = None

    def __repr__(self):
        return 'History(epochs=%d, keys=%s)' % (len(self.epoch), sorted(self.history))

    def record(self, epoch, name_value, prefix=''):
        """Add ``[(name, value), ...]`` for ``epoch`` under ``prefix + name``."""
        if not self.epoch or self.epoch[-1] != epoch:
            self.epoch.append(epoch)
        for name, value in name_value:
            self.history.setdefault(prefix + name, []).append(float(value))

    def batch_end(self, param):
        """Batch-end callback: remember the training metric."""
        if param.eval_metric is not None:
            self._train_metric = param.eval_metric

    def epoch_end(self, epoch, symbol=None, arg_params=None, aux_params=None):
        """Epoch-end callback: record the training metric's values over the epoch."""
        if self._train_metric is not None:
            self.record(epoch, self._train_metric.get_global_name_value())
        elif not self.epoch or self.epoch[-1] != epoch:
            self.epoch.append(epoch)

    def eval_end(self, param):
        """Eval-end callback: record validation values as ``val_<name>``."""
        if param.eval_metric is not None:
            self.record(param.epoch, param.eval_metric.get_name_value(), prefix='val_')

    @property
    def batch_end_callback(self):
        return self.batch_end

    @property
    def epoch_end_callback(self):
        return self.epoch_end

    @property
    def eval_end_callback(self):
        return self.eval_end
