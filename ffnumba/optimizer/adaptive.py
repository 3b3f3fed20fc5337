"""Per-coordinate adaptive optimizers: AdaGrad, RMSProp, AdaDelta, Ftrl (MXNet names).

Their states are float32 whatever the weight dtype, as MXNet creates them.

* AdaGrad:  ``g^ = clip(r g)``; ``h <- h + g^2``; ``w <- w - lr (g^/sqrt(h + eps) + wd w)``.
* RMSProp:  ``g^ = clip(r g + wd w)``; ``n <- (1-g1) g^2 + g1 n``; ``w <- w - lr g^/sqrt(n + eps)``;
  centered: ``gm <- (1-g1) g^ + g1 gm``; ``D <- g2 D - lr g^/sqrt(n - gm^2 + eps)``; ``w <- w + D``;
  then ``w`` is clipped to ``[-clip_weights, clip_weights]`` when that is set.
* AdaDelta: ``g^ = clip(r g)``; ``A <- rho A + (1-rho) g^2``;
  ``d = sqrt(D + eps)/sqrt(A + eps) g^``; ``D <- rho D + (1-rho) d^2``; ``w <- w - d - wd w``.
  No learning rate. As MXNet, the caller's gradient array is scaled by ``r`` in place.
* Ftrl:     ``g^ = clip(r g)``; ``z <- z + g^ - (sqrt(n + g^2) - sqrt(n)) w/lr``; ``n <- n + g^2``;
  ``w <- (sign(z) lamda1 - z)/((beta + sqrt(n))/lr + wd)`` where ``|z| > lamda1``, else 0.

Sources: Duchi et al., "Adaptive subgradient methods" (JMLR 2011); Tieleman &
Hinton, Lecture 6.5 (2012) and Graves, "Generating sequences with recurrent
neural networks" (2013, centered); Zeiler, "ADADELTA" (2012); McMahan et
al., "Ad click prediction" (KDD 2013); MXNet 1.x ``optimizer.py``.
"""
import math

import numpy as np
from numba import njit

from .base import Optimizer, register, check_unit, check_nonneg, as_nd, _zeros
from .kernels import clip, hp_record, make_update

__all__ = ['AdaGrad', 'RMSProp', 'AdaDelta', 'Ftrl']


# hyper-parameter records (kernels.hp_record): the steps read them by name
_COMMON = 'lr wd rescale_grad clip_gradient'
AdaGradHP = hp_record('AdaGradHP', _COMMON + ' epsilon')
RMSPropHP = hp_record('RMSPropHP', _COMMON + ' gamma1 gamma2 epsilon clip_weights')
AdaDeltaHP = hp_record('AdaDeltaHP', 'wd rescale_grad clip_gradient rho epsilon')
FtrlHP = hp_record('FtrlHP', _COMMON + ' lamda1 beta')


@njit(inline='always')
def _adagrad_step(w, g, h, b, c, hp):
    gg = clip(hp.rescale_grad * g, hp.clip_gradient)
    h = h + gg * gg
    return w + (gg / math.sqrt(h + hp.epsilon) + w * hp.wd) * -hp.lr, g, h, b, c


@njit(inline='always')
def _rmsprop_step(w, g, n, b, c, hp):
    gg = clip(hp.rescale_grad * g + hp.wd * w, hp.clip_gradient)
    n = (1.0 - hp.gamma1) * gg * gg + hp.gamma1 * n
    return clip(w - hp.lr * gg / math.sqrt(n + hp.epsilon), hp.clip_weights), g, n, b, c


@njit(inline='always')
def _rmsprop_centered_step(w, g, n, gm, d, hp):
    g1 = hp.gamma1
    gg = clip(hp.rescale_grad * g + hp.wd * w, hp.clip_gradient)
    n = (1.0 - g1) * gg * gg + g1 * n
    gm = (1.0 - g1) * gg + g1 * gm
    d = hp.gamma2 * d - hp.lr * (gg / math.sqrt(n - gm * gm + hp.epsilon))
    return clip(w + d, hp.clip_weights), g, n, gm, d


@njit(inline='always')
def _adadelta_step(w, g, acc_g, acc_d, c, hp):
    gs = hp.rescale_grad * g
    gg = clip(gs, hp.clip_gradient)
    rho = hp.rho
    acc_g = rho * acc_g + (1.0 - rho) * gg * gg
    delta = math.sqrt(acc_d + hp.epsilon) / math.sqrt(acc_g + hp.epsilon) * gg
    acc_d = rho * acc_d + (1.0 - rho) * delta * delta
    return w - (delta + hp.wd * w), gs, acc_g, acc_d, c


@njit(inline='always')
def _ftrl_step(w, g, z, n, c, hp):
    lr, lam = hp.lr, hp.lamda1
    gg = clip(hp.rescale_grad * g, hp.clip_gradient)
    z = z + gg - (math.sqrt(n + gg * gg) - math.sqrt(n)) * w / lr
    n = n + gg * gg
    if abs(z) > lam:
        s = 1.0 if z > 0.0 else -1.0
        w = (s * lam - z) / ((hp.beta + math.sqrt(n)) / lr + hp.wd)
    else:
        w = 0.0 * w
    return w, g, z, n, c


_ADAGRAD = make_update(_adagrad_step, 'AdaGrad', AdaGradHP)
_RMSPROP = make_update(_rmsprop_step, 'RMSProp', RMSPropHP)
_RMSPROP_C = make_update(_rmsprop_centered_step, 'RMSProp', RMSPropHP)
_ADADELTA = make_update(_adadelta_step, 'AdaDelta', AdaDeltaHP)
_FTRL = make_update(_ftrl_step, 'Ftrl', FtrlHP)


def _f32(weight):
    return _zeros(weight, np.float32)


@register
class AdaGrad(Optimizer):
    """AdaGrad (MXNet ``AdaGrad``): steps scaled by the accumulated squared gradients.

    Parameters
    ----------
    eps : float, default 1e-7
        Added inside the square root (>= 0).
    **kwargs
        See :class:`~ffnumba.optimizer.Optimizer`.

    State: the float32 history of squared gradients.
    """

    _clip_rule = 'not_none'

    def __init__(self, eps=1e-7, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = check_nonneg('AdaGrad', 'eps', eps)

    def create_state(self, index, weight):
        return _f32(weight)

    _one_kernel_update = True     # update() ends in its one fused kernel: may defer

    def update(self, index, weight, grad, state):
        weight, grad = as_nd(weight), as_nd(grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        _ADAGRAD(weight, grad, (state,), **self._hp(lr, wd, epsilon=self.float_stable_eps))


@register
class RMSProp(Optimizer):
    """RMSProp, plain (Tieleman & Hinton) or centered (Graves) (MXNet ``RMSProp``).

    Parameters
    ----------
    learning_rate : float, default 0.001
    gamma1 : float, default 0.9
        Decay of the moving averages, in [0, 1).
    gamma2 : float, default 0.9
        Momentum of the centered version, in [0, 1).
    epsilon : float, default 1e-8
    centered : bool, default False
    clip_weights : float, optional
        Clip weights to ``[-clip_weights, clip_weights]`` after the update (when truthy).
    **kwargs
        See :class:`~ffnumba.optimizer.Optimizer`.

    State: ``(n,)``, or ``(n, g, delta)`` when centered; float32.
    """

    def __init__(self, learning_rate=0.001, gamma1=0.9, gamma2=0.9, epsilon=1e-8,
                 centered=False, clip_weights=None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1 = check_unit('RMSProp', 'gamma1', gamma1)
        self.gamma2 = check_unit('RMSProp', 'gamma2', gamma2)
        self.centered = bool(centered)
        self.epsilon = check_nonneg('RMSProp', 'epsilon', epsilon)
        if clip_weights is not None:
            check_nonneg('RMSProp', 'clip_weights', clip_weights)
        self.clip_weights = clip_weights

    def create_state(self, index, weight):
        if self.centered:
            return (_f32(weight), _f32(weight), _f32(weight))
        return (_f32(weight),)

    _one_kernel_update = True     # update() ends in its one fused kernel: may defer

    def update(self, index, weight, grad, state):
        weight, grad = as_nd(weight), as_nd(grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        hp = self._hp(lr, wd, gamma1=self.gamma1, gamma2=self.gamma2, epsilon=self.epsilon,
                      clip_weights=float(self.clip_weights) if self.clip_weights else -1.0)
        (_RMSPROP_C if self.centered else _RMSPROP)(weight, grad, state, **hp)


@register
class AdaDelta(Optimizer):
    """AdaDelta (MXNet ``AdaDelta``): unit-correct steps without a learning rate.

    Parameters
    ----------
    rho : float, default 0.9
        Decay rate, in [0, 1).
    epsilon : float, default 1e-5
    **kwargs
        See :class:`~ffnumba.optimizer.Optimizer` (``learning_rate`` is ignored).

    State ``(acc_g, acc_delta)``, float32. The gradient array is scaled by
    ``rescale_grad`` in place, as MXNet does.
    """

    _clip_rule = 'not_none'

    def __init__(self, rho=0.90, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.rho = check_unit('AdaDelta', 'rho', rho)
        self.epsilon = check_nonneg('AdaDelta', 'epsilon', epsilon)

    def create_state(self, index, weight):
        return (_f32(weight), _f32(weight))

    _one_kernel_update = True     # update() ends in its one fused kernel: may defer

    def update(self, index, weight, grad, state):
        weight, grad = as_nd(weight), as_nd(grad)
        wd = self._get_wd(index)
        self._update_count(index)
        _ADADELTA(weight, grad, state, write_grad=True, wd=wd, rescale_grad=self.rescale_grad,
                  clip_gradient=self._clip(), rho=self.rho, epsilon=self.epsilon)


@register
class Ftrl(Optimizer):
    """FTRL-Proximal (MXNet ``Ftrl``), with L1 strength ``lamda1`` and L2 ``wd``.

    Parameters
    ----------
    lamda1 : float, default 0.01
        L1 regularisation (>= 0).
    learning_rate : float, default 0.1
    beta : float, default 1
        Added to ``sqrt(n)`` in the per-coordinate rate (>= 0).
    **kwargs
        See :class:`~ffnumba.optimizer.Optimizer`.

    State ``(z, n)``, float32.
    """

    def __init__(self, lamda1=0.01, learning_rate=0.1, beta=1, **kwargs):
        super().__init__(**kwargs)
        self.lamda1 = check_nonneg('Ftrl', 'lamda1', lamda1)
        self.beta = check_nonneg('Ftrl', 'beta', beta)
        self.lr = check_nonneg('Ftrl', 'learning_rate', learning_rate)

    def create_state(self, index, weight):
        return (_f32(weight), _f32(weight))

    _one_kernel_update = True     # update() ends in its one fused kernel: may defer

    def update(self, index, weight, grad, state):
        weight, grad = as_nd(weight), as_nd(grad)
        self._update_count(index)
        wd, lr = self._get_wd(index), self._get_lr(index)
        _FTRL(weight, grad, state, **self._hp(lr, wd, lamda1=self.lamda1, beta=self.beta))
