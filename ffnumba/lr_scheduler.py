"""Learning-rate schedules (MXNet ``mx.lr_scheduler``).

A scheduler is called with the optimizer's ``num_update`` (the number of
updates so far, counted after the current one) and returns the learning
rate for that update. Every scheduler can start with a warm-up of
``warmup_steps`` updates, during which the rate is

* ``'linear'``:   ``warmup_begin_lr + (base_lr - warmup_begin_lr) * n / warmup_steps``
* ``'constant'``: ``warmup_begin_lr``

Schedulers keep state (``FactorScheduler`` lowers ``base_lr`` in place), so
one instance serves one optimizer, as in MXNet. ``get_config()`` /
:func:`from_config` turn a scheduler, state included, into JSON-able values
(used by the optimizer state files).

Source: MXNet 1.x ``python/mxnet/lr_scheduler.py``; step sequences checked
against MXNet 1.9.1.
"""
import logging
import math
import numbers
from math import cos, pi

from .base import ParamError

_LOG = logging.getLogger(__name__)

__all__ = ['LRScheduler', 'FactorScheduler', 'MultiFactorScheduler', 'PolyScheduler',
           'CosineScheduler', 'from_config']


def _err(cls, field, rule, value):
    return ParamError('%s: `%s` must be %s. Received: %s=%r' % (cls, field, rule, field, value))


def _finite(cls, field, value, low=0.0):
    """``value`` checked as a finite real number ``>= low`` (NaN and inf refused: a NaN
    passes no comparison and would make every later rate NaN)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not math.isfinite(value) or value < low:
        raise _err(cls, field, 'a finite number >= %g' % low, value)
    return value


def _count(cls, field, value, low):
    """``value`` checked as an int ``>= low`` (an integral float is accepted, as MXNet does)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not math.isfinite(value) or int(value) != value or value < low:
        raise _err(cls, field, 'an int >= %d' % low, value)
    return value


class LRScheduler:
    """Base class: warm-up handling and the learning-rate call.

    Parameters
    ----------
    base_lr : float, default 0.01
        The rate after warm-up (optimizers given ``learning_rate`` overwrite it).
    warmup_steps : int, default 0
        Number of warm-up updates (>= 0).
    warmup_begin_lr : float, default 0
        Rate at update 0 of the warm-up; must not exceed ``base_lr``.
    warmup_mode : {'linear', 'constant'}, default 'linear'

    Raises
    ------
    ParamError
        For a negative or non-int ``warmup_steps``, ``warmup_begin_lr > base_lr``
        or an unknown ``warmup_mode``.
    """

    def __init__(self, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0, warmup_mode='linear'):
        name = type(self).__name__
        self.base_lr = _finite(name, 'base_lr', base_lr)
        _finite(name, 'warmup_begin_lr', warmup_begin_lr)
        if not isinstance(warmup_steps, int) or isinstance(warmup_steps, bool) \
                or warmup_steps < 0:
            raise _err(name, 'warmup_steps', 'an int >= 0', warmup_steps)
        self.warmup_steps = warmup_steps
        self.warmup_final_lr = base_lr
        self.warmup_begin_lr = warmup_begin_lr
        if self.warmup_begin_lr > self.warmup_final_lr:
            raise _err(name, 'warmup_begin_lr', '<= base_lr (%r)' % base_lr, warmup_begin_lr)
        if warmup_mode not in ('linear', 'constant'):
            raise _err(name, 'warmup_mode', "'linear' or 'constant'", warmup_mode)
        self.warmup_mode = warmup_mode

    def get_warmup_lr(self, num_update):
        """The warm-up rate at update ``num_update`` (< ``warmup_steps``)."""
        if self.warmup_mode == 'linear':
            return self.warmup_begin_lr + (self.warmup_final_lr - self.warmup_begin_lr) \
                * float(num_update) / float(self.warmup_steps)
        return self.warmup_begin_lr

    def __call__(self, num_update):
        """The learning rate for update number ``num_update``.

        Parameters
        ----------
        num_update : int
            Number of updates so far (from 0; the optimizer's counter).

        Returns
        -------
        float
            The warm-up rate while ``num_update < warmup_steps``, else the schedule's rate.
        """
        raise NotImplementedError('an LRScheduler subclass must define __call__')

    def get_config(self):
        """JSON-able ``{'type': class name, 'state': attributes}``, state included."""
        return {'type': type(self).__name__, 'state': dict(vars(self))}


class FactorScheduler(LRScheduler):
    """Multiply the rate by ``factor`` every ``step`` updates.

    ``lr(n)``: while ``n > count + step``: ``count += step``,
    ``base_lr = max(base_lr * factor, stop_factor_lr)``. With ``step=2``,
    ``factor=0.5`` the rates for n = 0..7 are 1, 1, 1, .5, .5, .25, .25, .125
    (times ``base_lr``).

    Parameters
    ----------
    step : int
        Updates between reductions (>= 1).
    factor : float, default 1
        Multiplier, <= 1.
    stop_factor_lr : float, default 1e-8
        The rate never goes below this.
    base_lr, warmup_steps, warmup_begin_lr, warmup_mode
        As :class:`LRScheduler`.
    """

    def __init__(self, step, factor=1, stop_factor_lr=1e-8, base_lr=0.01, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode='linear'):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        _count('FactorScheduler', 'step', step, 1)
        _finite('FactorScheduler', 'factor', factor)
        _finite('FactorScheduler', 'stop_factor_lr', stop_factor_lr)
        if factor > 1.0:
            raise _err('FactorScheduler', 'factor', '<= 1 so that the rate decreases', factor)
        self.step = step
        self.factor = factor
        self.stop_factor_lr = stop_factor_lr
        self.count = 0

    def __call__(self, num_update):
        """The rate at ``num_update`` (as :meth:`LRScheduler.__call__`): ``base_lr`` times
        ``factor`` for each ``step`` updates passed, not below ``stop_factor_lr``."""
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while num_update > self.count + self.step:
            self.count += self.step
            self.base_lr *= self.factor
            if self.base_lr < self.stop_factor_lr:
                self.base_lr = self.stop_factor_lr
                _LOG.info('Update[%d]: now learning rate arrived at %0.5e, will not '
                             'change in the future', num_update, self.base_lr)
            else:
                _LOG.info('Update[%d]: Change learning rate to %0.5e',
                             num_update, self.base_lr)
        return self.base_lr


class MultiFactorScheduler(LRScheduler):
    """Multiply the rate by ``factor`` once each listed step is passed.

    ``lr(n) = base_lr * factor ** #{s in step : n > s}``. With ``step=[2, 4]``,
    ``factor=0.1``: 1, 1, 1, .1, .1, .01, .01 for n = 0..6.

    Parameters
    ----------
    step : list of int
        Strictly increasing update numbers, each >= 1.
    factor : float, default 1
        Multiplier, <= 1.
    base_lr, warmup_steps, warmup_begin_lr, warmup_mode
        As :class:`LRScheduler`.
    """

    def __init__(self, step, factor=1, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode='linear'):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(step, list) or not step:
            raise _err('MultiFactorScheduler', 'step', 'a non-empty list of ints', step)
        for i, s in enumerate(step):
            if i and s <= step[i - 1]:
                raise _err('MultiFactorScheduler', 'step', 'an increasing list', step)
            if isinstance(s, bool) or not isinstance(s, numbers.Real) or \
                    not math.isfinite(s) or s < 1:
                raise _err('MultiFactorScheduler', 'step', 'a list of ints >= 1', step)
        _finite('MultiFactorScheduler', 'factor', factor)
        if factor > 1.0:
            raise _err('MultiFactorScheduler', 'factor', '<= 1 so that the rate decreases',
                       factor)
        self.step = list(step)
        self.cur_step_ind = 0
        self.factor = factor
        self.count = 0

    def __call__(self, num_update):
        """The rate at ``num_update`` (as :meth:`LRScheduler.__call__`): ``base_lr`` times
        ``factor`` once for each boundary in ``step`` passed."""
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while self.cur_step_ind < len(self.step):
            if num_update <= self.step[self.cur_step_ind]:
                return self.base_lr
            self.count = self.step[self.cur_step_ind]
            self.cur_step_ind += 1
            self.base_lr *= self.factor
            _LOG.info('Update[%d]: Change learning rate to %0.5e', num_update, self.base_lr)
        return self.base_lr


class _Annealing(LRScheduler):
    """Shared checks of the schedules that anneal to ``final_lr`` at ``max_update``."""

    def __init__(self, max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr,
                 warmup_mode):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(max_update, int) or isinstance(max_update, bool) or max_update < 1:
            raise _err(type(self).__name__, 'max_update', 'an int >= 1', max_update)
        _finite(type(self).__name__, 'final_lr', final_lr)
        if warmup_steps >= max_update:
            raise _err(type(self).__name__, 'warmup_steps', '< max_update (%r)' % max_update,
                       warmup_steps)
        self.base_lr_orig = self.base_lr
        self.max_update = max_update
        self.final_lr = final_lr
        self.max_steps = self.max_update - self.warmup_steps

    def _shape(self, frac):
        raise NotImplementedError

    def __call__(self, num_update):
        """The rate at ``num_update`` (as :meth:`LRScheduler.__call__`): annealed from
        ``base_lr`` to ``final_lr`` over ``max_update`` updates, then ``final_lr``."""
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            frac = float(num_update - self.warmup_steps) / float(self.max_steps)
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * self._shape(frac)
        return self.base_lr


class PolyScheduler(_Annealing):
    """Polynomial decay to ``final_lr`` at ``max_update``, then constant.

    ``lr(n) = final_lr + (base_lr - final_lr) * (1 - (n - w) / (max_update - w)) ** pwr``
    with ``w = warmup_steps``.

    Parameters
    ----------
    max_update : int
        Update at which the rate reaches ``final_lr`` (>= 1).
    base_lr : float, default 0.01
    pwr : float, default 2
        Finite and >= 0 (a negative power would divide by zero at ``max_update``).
    final_lr : float, default 0
    warmup_steps, warmup_begin_lr, warmup_mode
        As :class:`LRScheduler`.
    """

    def __init__(self, max_update, base_lr=0.01, pwr=2, final_lr=0, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode='linear'):
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr,
                         warmup_mode)
        self.power = _finite('PolyScheduler', 'pwr', pwr)

    def _shape(self, frac):
        return pow(1 - frac, self.power)


class CosineScheduler(_Annealing):
    """Cosine decay to ``final_lr`` at ``max_update``, then constant.

    ``lr(n) = final_lr + (base_lr - final_lr) * (1 + cos(pi (n - w) / (max_update - w))) / 2``
    with ``w = warmup_steps`` (Loshchilov & Hutter, SGDR, 2017, without restarts).

    Parameters
    ----------
    max_update : int
        Update at which the rate reaches ``final_lr`` (>= 1).
    base_lr : float, default 0.01
    final_lr : float, default 0
    warmup_steps, warmup_begin_lr, warmup_mode
        As :class:`LRScheduler`.
    """

    def __init__(self, max_update, base_lr=0.01, final_lr=0, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode='linear'):
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr,
                         warmup_mode)

    def _shape(self, frac):
        return (1 + cos(pi * frac)) / 2


_CLASSES = {c.__name__: c for c in (FactorScheduler, MultiFactorScheduler, PolyScheduler,
                                    CosineScheduler)}


def from_config(config):
    """Rebuild a scheduler, state included, from :meth:`LRScheduler.get_config`.

    Raises
    ------
    ParamError
        For an unknown scheduler type.
    """
    name = config.get('type')
    if name not in _CLASSES:
        raise ParamError('lr_scheduler: unknown scheduler type %r (known: %s)'
                         % (name, ', '.join(sorted(_CLASSES))))
    obj = _CLASSES[name].__new__(_CLASSES[name])
    obj.__dict__.update(config['state'])
    return obj
