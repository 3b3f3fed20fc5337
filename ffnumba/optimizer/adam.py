"""Adam-family optimizers: Adam, Adamax, Nadam, FTML (MXNet names and defaults).

``g^ = clip(r g + wd w)`` in all four (weight decay enters the gradient);
``t`` is the per-parameter update count.

* Adam:   ``m <- b1 m + (1-b1) g^``; ``v <- b2 v + (1-b2) g^2``;
  ``w <- w - lr sqrt(1-b2^t)/(1-b1^t) m / (sqrt(v) + eps)``.
* Adamax: ``m <- b1 m + (1-b1) g^``; ``u <- max(b2 u, |g^|)``; ``w <- w - lr/(1-b1^t) m/u``.
* Nadam:  ``mu_t = b1 (1 - 0.96^(t sd)/2)``; ``M_t = prod mu`` (one product shared by
  all parameters, as MXNet); ``w <- w - lr ((1-mu_t) g^/(1-M_t) + mu_{t+1} m/(1-M_t mu_{t+1}))
  / (sqrt(v/(1-b2^t)) + eps)``.
* FTML:   ``v <- b2 v + (1-b2) g^2``; ``d = (1-b1^t)/lr (sqrt(v/(1-b2^t)) + eps)``;
  ``z <- b1 z + (1-b1) g^ - (d - b1 d_prev) w``; ``w <- -z/d``.

Sources: Kingma & Ba, "Adam" (ICLR 2015, Adam and Adamax); Dozat, "Incorporating
Nesterov momentum into Adam" (ICLR 2016 workshop); Zheng & Kwok, "Follow the
moving leader" (ICML 2017); MXNet 1.x ``optimizer.py`` and ``optimizer_op-inl.h``.
"""
import math

from numba import njit

from .base import Optimizer, register, check_unit, check_nonneg, as_nd, _zeros
from .kernels import clip, hp_record, make_update

__all__ = ['Adam', 'Adamax', 'Nadam', 'FTML']


# hyper-parameter records (kernels.hp_record): the steps read them by name
_COMMON = 'lr wd rescale_grad clip_gradient beta1 beta2'
AdamHP = hp_record('AdamHP', _COMMON + ' epsilon')
AdamaxHP = hp_record('AdamaxHP', _COMMON)
# mu_t, mu_t1: momentum schedule now and next; one_m_schedule = 1 - M_t,
# one_m_next = 1 - M_t mu_t1, c2 = 1 - b2^t
NadamHP = hp_record('NadamHP', _COMMON + ' epsilon mu_t mu_t1 one_m_schedule one_m_next c2')
# c1 = 1 - b1^t, c2 = 1 - b2^t
FTMLHP = hp_record('FTMLHP', _COMMON + ' epsilon c1 c2')


@njit(inline='always')
def _adam_step(w, g, m, v, c, hp):
    gg = clip(hp.rescale_grad * g + hp.wd * w, hp.clip_gradient)
    b1, b2 = hp.beta1, hp.beta2
    m = b1 * m + (1.0 - b1) * gg
    v = b2 * v + (1.0 - b2) * gg * gg
    return w - hp.lr * m / (math.sqrt(v) + hp.epsilon), g, m, v, c


@njit(inline='always')
def _adamax_step(w, g, m, u, c, hp):
    gg = clip(hp.rescale_grad * g + hp.wd * w, hp.clip_gradient)
    b1 = hp.beta1
    m = b1 * m + (1.0 - b1) * gg
    u = max(hp.beta2 * u, abs(gg))
    return w - hp.lr * m / u, g, m, u, c


@njit(inline='always')
def _nadam_step(w, g, m, v, c, hp):
    gg = clip(hp.rescale_grad * g + hp.wd * w, hp.clip_gradient)
    b1, b2 = hp.beta1, hp.beta2
    m = b1 * m + (1.0 - b1) * gg
    v = b2 * v + (1.0 - b2) * gg * gg
    mbar = (1.0 - hp.mu_t) * (gg / hp.one_m_schedule) + hp.mu_t1 * (m / hp.one_m_next)
    return w - hp.lr * mbar / (math.sqrt(v / hp.c2) + hp.epsilon), g, m, v, c


@njit(inline='always')
def _ftml_step(w, g, d, v, z, hp):
    gg = clip(hp.rescale_grad * g + hp.wd * w, hp.clip_gradient)
    b1, b2 = hp.beta1, hp.beta2
    v = b2 * v + (1.0 - b2) * gg * gg
    dt = hp.c1 / hp.lr * (math.sqrt(v / hp.c2) + hp.epsilon)
    z = b1 * z + (1.0 - b1) * gg - (dt - b1 * d) * w
    return -z / dt, g, dt, v, z


_ADAM = make_update(_adam_step, 'Adam', AdamHP)
_ADAMAX = make_update(_adamax_step, 'Adamax', AdamaxHP)
_NADAM = make_update(_nadam_step, 'Nadam', NadamHP)
_FTML = make_update(_ftml_step, 'FTML', FTMLHP)


class _Betas(Optimizer):
    def _betas(self, beta1, beta2):
        name = type(self).__name__
        self.beta1 = check_unit(name, 'beta1', beta1)
        self.beta2 = check_unit(name, 'beta2', beta2)

    def _begin(self, index, weight, grad):
        self._update_count(index)
        return (as_nd(weight), as_nd(grad), self._get_lr(index), self._get_wd(index),
                self._index_update_count[index])

    def create_state(self, index, weight):
        return (_zeros(weight), _zeros(weight))


@register
class Adam(_Betas):
    """Adam (MXNet ``Adam``): bias-corrected first and second moment estimates.

    Parameters
    ----------
    learning_rate : float, default 0.001
    beta1 : float, default 0.9
        In [0, 1).
    beta2 : float, default 0.999
        In [0, 1).
    epsilon : float, default 1e-8
        >= 0.
    lazy_update : bool, default True
        Accepted for MXNet compatibility (dense arrays only here).
    **kwargs
        See :class:`~ffnumba.optimizer.Optimizer`.

    State ``(mean, var)`` of the weight's shape and dtype.
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 lazy_update=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self._betas(beta1, beta2)
        self.epsilon = check_nonneg('Adam', 'epsilon', epsilon)
        self.lazy_update = lazy_update

    _one_kernel_update = True     # update() ends in its one fused kernel: may defer

    def update(self, index, weight, grad, state):
        weight, grad, lr, wd, t = self._begin(index, weight, grad)
        lr *= math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        _ADAM(weight, grad, state, **self._hp(lr, wd, beta1=self.beta1, beta2=self.beta2,
                                             epsilon=self.epsilon))


@register
class Adamax(_Betas):
    """AdaMax, Adam with the infinity norm (MXNet ``Adamax``).

    Parameters
    ----------
    learning_rate : float, default 0.002
    beta1 : float, default 0.9
    beta2 : float, default 0.999
    **kwargs
        See :class:`~ffnumba.optimizer.Optimizer`.

    State ``(mean, u)``. As in MXNet there is no epsilon: a zero ``u`` gives NaN.
    """

    _clip_rule = 'not_none'

    def __init__(self, learning_rate=0.002, beta1=0.9, beta2=0.999, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self._betas(beta1, beta2)

    _one_kernel_update = True     # update() ends in its one fused kernel: may defer

    def update(self, index, weight, grad, state):
        weight, grad, lr, wd, t = self._begin(index, weight, grad)
        lr /= 1.0 - self.beta1 ** t
        _ADAMAX(weight, grad, state, **self._hp(lr, wd, beta1=self.beta1, beta2=self.beta2))


@register
class Nadam(_Betas):
    """Adam with Nesterov momentum (MXNet ``Nadam``).

    Parameters
    ----------
    learning_rate : float, default 0.001
    beta1 : float, default 0.9
    beta2 : float, default 0.999
    epsilon : float, default 1e-8
    schedule_decay : float, default 0.004
        Momentum schedule decay ``sd`` (>= 0).
    **kwargs
        See :class:`~ffnumba.optimizer.Optimizer`.

    State ``(mean, var)``; the momentum product ``m_schedule`` lives on the
    optimizer and is shared by all parameters (MXNet's behaviour).
    """

    _clip_rule = 'not_none'

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 schedule_decay=0.004, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self._betas(beta1, beta2)
        self.epsilon = check_nonneg('Nadam', 'epsilon', epsilon)
        self.schedule_decay = check_nonneg('Nadam', 'schedule_decay', schedule_decay)
        self.m_schedule = 1.0

    _one_kernel_update = True     # update() ends in its one fused kernel: may defer

    def update(self, index, weight, grad, state):
        weight, grad, lr, wd, t = self._begin(index, weight, grad)
        mu_t = self.beta1 * (1.0 - 0.5 * pow(0.96, t * self.schedule_decay))
        mu_t1 = self.beta1 * (1.0 - 0.5 * pow(0.96, (t + 1) * self.schedule_decay))
        self.m_schedule = self.m_schedule * mu_t
        m_next = self.m_schedule * mu_t1
        _NADAM(weight, grad, state, **self._hp(
            lr, wd, beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon, mu_t=mu_t,
            mu_t1=mu_t1, one_m_schedule=1.0 - self.m_schedule, one_m_next=1.0 - m_next,
            c2=1.0 - pow(self.beta2, t)))

    def _extra_state(self):
        return {'m_schedule': self.m_schedule}


@register
class FTML(_Betas):
    """Follow the moving leader (MXNet ``FTML``).

    Parameters
    ----------
    beta1 : float, default 0.6
    beta2 : float, default 0.999
    epsilon : float, default 1e-8
    **kwargs
        See :class:`~ffnumba.optimizer.Optimizer`.

    State ``(d, v, z)``.
    """

    def __init__(self, beta1=0.6, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(**kwargs)
        self._betas(beta1, beta2)
        self.epsilon = check_nonneg('FTML', 'epsilon', epsilon)

    def create_state(self, index, weight):
        return (_zeros(weight), _zeros(weight), _zeros(weight))

    _one_kernel_update = True     # update() ends in its one fused kernel: may defer

    def update(self, index, weight, grad, state):
        weight, grad, lr, wd, t = self._begin(index, weight, grad)
        _FTML(weight, grad, state, **self._hp(lr, wd, beta1=self.beta1, beta2=self.beta2,
                                              epsilon=self.epsilon, c1=1.0 - self.beta1 ** t,
                                              c2=1.0 - self.beta2 ** t))
