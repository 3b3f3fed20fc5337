"""SGD-family optimizers: SGD, NAG, Signum, SGLD, DCASGD (MXNet names and defaults).

Notation: ``r`` = rescale_grad, ``clip`` = clipping to ``[-clip_gradient,
clip_gradient]``, ``lr``/``wd`` the per-parameter rate and weight decay.

* SGD:    ``w <- (1 - lr wd) w - lr clip(r g)``; with momentum ``mu`` the state
  is the *negative* velocity: ``m <- mu m - lr wd w - lr clip(r g)``, ``w <- w + m``.
* NAG:    ``m1 = mu m``; ``w' = w - m1 + (1 + mu)(m1 - lr (clip(r g) + wd w))``;
  ``m <- m1 - lr (clip(r g) + wd w')`` (MXNet's in-place kernel reads the
  *updated* weight in that last term; kept for exactness).
* Signum: ``m <- mu m - (1 - mu)(wd w + clip(r g))``; ``w <- (1 - lr wd_lh) w + lr sign(m)``;
  without momentum ``w <- (1 - lr wd) w - lr sign(clip(r g))`` (signSGD).
* SGLD:   ``w <- w - lr/2 (clip(r g) + wd w) + N(0, sqrt(lr))``.
* DCASGD: ``m <- mu m - lr (clip(r g) + wd w + lamda clip(r g)^2 (w - w_prev))``;
  ``w_prev <- w``; ``w <- w + m``.

Sources: Nesterov (1983); Bernstein et al., "signSGD" (ICML 2018); Welling &
Teh, "Bayesian learning via stochastic gradient Langevin dynamics" (ICML
2011); Zheng et al., "Asynchronous SGD with delay compensation" (ICML 2017);
MXNet 1.x ``optimizer.py`` and ``src/operator/optimizer_op-inl.h``.
"""
import math

import numpy as np
from numba import njit

from ..random import generator
from ..ndarray.ndarray import NDArray
from .base import Optimizer, register, check_unit, check_nonneg, as_nd, _real, _zeros
from .kernels import clip, hp_record, make_update

__all__ = ['SGD', 'ccSGD', 'NAG', 'Signum', 'SGLD', 'DCASGD']


@njit(inline='always')
def _sign(x):
    if x > 0.0:
        return 1.0
    if x < 0.0:
        return -1.0
    return 0.0


# hyper-parameter records (kernels.hp_record): the steps read them by name
_COMMON = 'lr wd rescale_grad clip_gradient'
SGDHP = hp_record('SGDHP', _COMMON)
SGDMomHP = hp_record('SGDMomHP', _COMMON + ' momentum')
SignumHP = hp_record('SignumHP', _COMMON + ' momentum wd_lh')
DCASGDHP = hp_record('DCASGDHP', _COMMON + ' lamda')
DCASGDMomHP = hp_record('DCASGDMomHP', _COMMON + ' momentum lamda')


@njit(inline='always')
def _sgd_step(w, g, a, b, c, hp):
    gg = clip(hp.rescale_grad * g, hp.clip_gradient)
    return (1.0 - hp.lr * hp.wd) * w - hp.lr * gg, g, a, b, c


@njit(inline='always')
def _sgd_mom_step(w, g, m, b, c, hp):
    gg = clip(hp.rescale_grad * g, hp.clip_gradient)
    m = hp.momentum * m - hp.lr * hp.wd * w - hp.lr * gg
    return w + m, g, m, b, c


@njit(inline='always')
def _nag_mom_step(w, g, m, b, c, hp):
    lr, wd, mu = hp.lr, hp.wd, hp.momentum
    gg = clip(hp.rescale_grad * g, hp.clip_gradient)
    m1 = mu * m
    w2 = w - m1 + (mu + 1.0) * (m1 - lr * (gg + wd * w))
    return w2, g, m1 - lr * (gg + wd * w2), b, c


@njit(inline='always')
def _signsgd_step(w, g, a, b, c, hp):
    gg = clip(hp.rescale_grad * g, hp.clip_gradient)
    return (1.0 - hp.lr * hp.wd) * w - hp.lr * _sign(gg), g, a, b, c


@njit(inline='always')
def _signum_step(w, g, m, b, c, hp):
    mu = hp.momentum
    gg = clip(hp.rescale_grad * g, hp.clip_gradient)
    m = mu * m - (1.0 - mu) * hp.wd * w - (1.0 - mu) * gg
    return (1.0 - hp.lr * hp.wd_lh) * w + hp.lr * _sign(m), g, m, b, c


@njit(inline='always')
def _sgld_step(w, g, noise, b, c, hp):
    gg = clip(hp.rescale_grad * g, hp.clip_gradient)
    return w - hp.lr / 2.0 * (gg + hp.wd * w) + noise, g, noise, b, c


@njit(inline='always')
def _dcasgd_step(w, g, prev, b, c, hp):
    gg = clip(hp.rescale_grad * g, hp.clip_gradient)
    m = -hp.lr * (gg + hp.wd * w + hp.lamda * gg * gg * (w - prev))
    return w + m, g, w, b, c


@njit(inline='always')
def _dcasgd_mom_step(w, g, m, prev, c, hp):
    gg = clip(hp.rescale_grad * g, hp.clip_gradient)
    m = hp.momentum * m - hp.lr * (gg + hp.wd * w + hp.lamda * gg * gg * (w - prev))
    return w + m, g, m, w, c


_SGD = make_update(_sgd_step, 'SGD', SGDHP)
_SGD_MOM = make_update(_sgd_mom_step, 'SGD', SGDMomHP)
_NAG_MOM = make_update(_nag_mom_step, 'NAG', SGDMomHP)
_SIGNSGD = make_update(_signsgd_step, 'Signum', SGDHP)
_SIGNUM = make_update(_signum_step, 'Signum', SignumHP)
_SGLD = make_update(_sgld_step, 'SGLD', SGDHP)
_DCASGD = make_update(_dcasgd_step, 'DCASGD', DCASGDHP)
_DCASGD_MOM = make_update(_dcasgd_mom_step, 'DCASGD', DCASGDMomHP)


class _Momentum(Optimizer):
    """Shared momentum state: None when momentum is 0, else zeros like the weight."""

    def create_state(self, index, weight):
        return _zeros(weight) if self.momentum != 0.0 else None

    def _begin(self, index, weight, grad):
        self._update_count(index)
        return (as_nd(weight), as_nd(grad), self._get_lr(index), self._get_wd(index))

    def _run(self, index, weight, grad, state, plain, with_state, **extra):
        """One update: ``plain`` without a state, else ``with_state`` (+ momentum, ``extra``)."""
        weight, grad, lr, wd = self._begin(index, weight, grad)
        if state is None:
            plain(weight, grad, (), **self._hp(lr, wd))
        else:
            with_state(weight, grad, (state,), **self._hp(lr, wd, momentum=self.momentum,
                                                          **extra))


@register
class SGD(_Momentum):
    """Stochastic gradient descent with momentum and weight decay (MXNet ``SGD``).

    ``w <- (1 - lr wd) w - lr clip(r g)``, or with momentum
    ``m <- mu m - lr wd w - lr clip(r g); w <- w + m`` (``m`` is the negative velocity).

    Parameters
    ----------
    momentum : float, default 0.0
        In [0, 1).
    lazy_update : bool, default True
        Accepted for MXNet compatibility (dense arrays only here).
    **kwargs
        See :class:`~ffnumba.optimizer.Optimizer`.

    Shapes: weight, grad and the momentum state share one shape. State:
    ``None`` or the momentum; with multi_precision on float16, ``(momentum, master)``.

    Raises
    ------
    ParamError
        If momentum is outside [0, 1).
    """

    _mp_master_last = True

    def __init__(self, momentum=0.0, lazy_update=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = check_unit(type(self).__name__, 'momentum', momentum)
        self.lazy_update = lazy_update

    _one_kernel_update = True     # update() ends in its one fused kernel: may defer

    def update(self, index, weight, grad, state):
        """Update ``weight`` (and the momentum ``state``) in place from ``grad``."""
        self._run(index, weight, grad, state, _SGD, _SGD_MOM)


@register
class ccSGD(SGD):  # noqa: N801 (MXNet's name)
    """Deprecated MXNet alias of :class:`SGD` (same update)."""


@register
class NAG(_Momentum):
    """Nesterov accelerated gradient (MXNet ``NAG``).

    ``m1 = mu m``; ``w <- w - m1 + (1 + mu)(m1 - lr (clip(r g) + wd w))``;
    ``m <- m1 - lr (clip(r g) + wd w_new)``. With momentum 0 it is SGD.

    Parameters
    ----------
    momentum : float, default 0.0
        In [0, 1).
    **kwargs
        See :class:`~ffnumba.optimizer.Optimizer`.
    """

    _mp_master_last = True

    def __init__(self, momentum=0.0, **kwargs):
        super().__init__(**kwargs)
        self.momentum = check_unit('NAG', 'momentum', momentum)

    _one_kernel_update = True     # update() ends in its one fused kernel: may defer

    def update(self, index, weight, grad, state):
        """Update ``weight`` (and the momentum ``state``) in place from ``grad``."""
        self._run(index, weight, grad, state, _SGD, _NAG_MOM)


@register
class Signum(_Momentum):
    """Sign of the momentum (MXNet ``Signum``); signSGD when momentum is 0.

    ``m <- mu m - (1 - mu)(wd w + clip(r g))``; ``w <- (1 - lr wd_lh) w + lr sign(m)``.

    Parameters
    ----------
    learning_rate : float, default 0.01
    momentum : float, default 0.9
        In [0, 1).
    wd_lh : float, default 0.0
        Decoupled weight decay (Loshchilov & Hutter), applied to the weight.
    **kwargs
        See :class:`~ffnumba.optimizer.Optimizer`.

    Raises
    ------
    FFError
        If momentum is outside [0, 1) or ``wd_lh`` is not a finite real number.
    """

    def __init__(self, learning_rate=0.01, momentum=0.9, wd_lh=0.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = check_unit('Signum', 'momentum', momentum)
        self.wd_lh = _real('Signum', 'wd_lh', wd_lh)

    _one_kernel_update = True     # update() ends in its one fused kernel: may defer

    def update(self, index, weight, grad, state):
        """Update ``weight`` (and the momentum ``state``) in place from ``grad``."""
        self._run(index, weight, grad, state, _SIGNSGD, _SIGNUM, wd_lh=self.wd_lh)


@register
class SGLD(Optimizer):
    """Stochastic gradient Langevin dynamics (MXNet ``SGLD``).

    ``w <- w - lr/2 (clip(r g) + wd w) + eps``, ``eps ~ N(0, sqrt(lr))`` drawn from
    :func:`ffnumba.random.generator` (so ``ff.random.seed`` repeats a run).

    Parameters
    ----------
    **kwargs
        See :class:`~ffnumba.optimizer.Optimizer`. No state.
    """

    _clip_rule = 'not_none'

    _one_kernel_update = True     # update() ends in its one fused kernel: may defer

    def update(self, index, weight, grad, state):
        weight, grad = as_nd(weight), as_nd(grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        dt = np.float64 if weight.dtype is np.float64 else np.float32
        noise = generator().normal(0.0, math.sqrt(lr), size=weight.shape).astype(dt)
        noise = NDArray(noise).as_in_context(weight.context)
        _SGLD(weight, grad, (noise,), **self._hp(lr, wd))


@register
class DCASGD(Optimizer):
    """Delay-compensated asynchronous SGD (MXNet ``DCASGD``).

    ``m <- mu m - lr (clip(r g) + wd w + lamda clip(r g)^2 (w - w_prev))``;
    ``w_prev <- w``; ``w <- w + m``. State ``(momentum or None, previous weight)``.

    MXNet 1.9.1's Python code tests the momentum array's truth value and so
    fails for ``momentum > 0``; here the formula above runs.

    Parameters
    ----------
    momentum : float, default 0.0
        In [0, 1).
    lamda : float, default 0.04
        Delay-compensation strength (>= 0).
    **kwargs
        See :class:`~ffnumba.optimizer.Optimizer`.
    """

    _clip_rule = 'not_none'

    def __init__(self, momentum=0.0, lamda=0.04, **kwargs):
        super().__init__(**kwargs)
        self.momentum = check_unit('DCASGD', 'momentum', momentum)
        self.lamda = check_nonneg('DCASGD', 'lamda', lamda)
        self.weight_previous = {}

    def create_state(self, index, weight):
        mom = _zeros(weight) if self.momentum != 0.0 else None
        return (mom, weight.copy())

    _one_kernel_update = True     # update() ends in its one fused kernel: may defer

    def update(self, index, weight, grad, state):
        weight, grad = as_nd(weight), as_nd(grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        mom, prev = state
        if mom is None:
            _DCASGD(weight, grad, (prev,), **self._hp(lr, wd, lamda=self.lamda))
        else:
            _DCASGD_MOM(weight, grad, (mom, prev), **self._hp(lr, wd, momentum=self.momentum,
                                                               lamda=self.lamda))
