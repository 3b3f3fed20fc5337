"""Monitor: statistics of the arrays inside executors, every ``interval`` batches.

MXNet ``mx.mon.Monitor``: ``install(exe)`` registers a callback that sees
every intermediate output during forward/backward; ``tic()`` at the start of
a batch turns it on every ``interval`` batches; ``toc()`` adds the
arguments and auxiliary states and returns ``[(step, name, stat_str)]``;
``toc_print()`` logs them as ``Batch: {step:7d} {name:30s} {stat}``.
"""
import logging
import math
import re

import numpy as np

from .base import ParamError

_LOG = logging.getLogger(__name__)

__all__ = ['Monitor']


def _default_stat(x):
    """``norm(x) / sqrt(size)``: the root mean square of the array."""
    from . import ndarray as nd
    a = np.asarray(x, dtype=np.float64)
    return nd.array([np.sqrt((a * a).sum()) / math.sqrt(max(a.size, 1))])


class Monitor:
    """Collect a statistic of executor arrays every ``interval`` batches.

    Parameters
    ----------
    interval : int
        Collect on batches ``0, interval, 2*interval, ...``; at least 1.
    stat_func : callable, optional
        ``stat_func(NDArray) -> NDArray`` (or a list of them); default
        ``norm(x)/sqrt(x.size)``.
    pattern : str, default '.*'
        Regular expression (``re.match``) selecting array names.
    sort : bool, default False
        Sort the results by name.
    monitor_all : bool, default False
        Passed to ``Executor.set_monitor_callback`` (inputs of each op too).
    """

    def __init__(self, interval, stat_func=None, pattern='.*', sort=False, monitor_all=False):
        if isinstance(interval, bool) or not isinstance(interval, (int, np.integer)) \
                or interval < 1:
            raise ParamError('Monitor: `interval` must be a positive int. Received: '
                             'interval=%r' % (interval,))
        self.interval = int(interval)
        self.stat_func = stat_func if stat_func is not None else _default_stat
        self.activated = False
        self.queue = []
        self.step = 0
        self.exes = []
        try:
            self.re_prog = re.compile(pattern)
        except (re.error, TypeError) as e:
            raise ParamError('Monitor: `pattern` must be a regular expression. Received: '
                             'pattern=%r (%s)' % (pattern, e)) from None
        self.sort = sort
        self.monitor_all = monitor_all

        def stat_helper(name, array):
            if not self.activated or not self.re_prog.match(name):
                return
            self.queue.append((self.step, name, self.stat_func(array)))
        self.stat_helper = stat_helper

    def install(self, exe):
        """Register the callback on executor ``exe``."""
        try:
            exe.set_monitor_callback(self.stat_helper, self.monitor_all)
        except TypeError:
            exe.set_monitor_callback(self.stat_helper)
        self.exes.append(exe)

    def tic(self):
        """Start collecting if this batch is on the interval."""
        if self.step % self.interval == 0:
            self.queue = []
            self.activated = True
        self.step += 1

    def toc(self):
        """Stop collecting; returns ``[(step, name, stat_str)]``."""
        if not self.activated:
            return []
        for exe in self.exes:
            for name, arr in exe.arg_dict.items():
                if self.re_prog.match(name):
                    self.queue.append((self.step, name, self.stat_func(arr)))
            for name, arr in exe.aux_dict.items():
                if self.re_prog.match(name):
                    self.queue.append((self.step, name, self.stat_func(arr)))
        self.activated = False
        if self.sort:
            self.queue.sort(key=lambda x: x[1])
        res = []
        for step, name, values in self.queue:
            if not isinstance(values, (list, tuple)):
                values = [values]
            s = ''
            for v in values:
                a = np.asarray(v)
                s += (str(a.reshape(-1)[0]) if a.size == 1 else str(a)) + '\t'
            res.append((step, name, s))
        self.queue = []
        return res

    def toc_print(self):
        """``toc()`` and log each entry as ``Batch: {step:7d} {name:30s} {stat}``."""
        for step, name, s in self.toc():
            _LOG.info('Batch: {:7d} {:30s} {:s}'.format(step, name, s))
