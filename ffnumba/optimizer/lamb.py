"""Layer-wise adaptive optimizers: LAMB and LARS (MXNet 1.9.1 names, defaults, formulas).

Both scale a per-tensor step by a ratio of whole-tensor L2 norms.

* LAMB (You et al., 2019), MXNet's ``lamb_update_phase1/2``::

      g^ = clip(r g)                                   (clip when clip_gradient is set)
      m <- b1 m + (1 - b1) g^;   v <- b2 v + (1 - b2) g^2
      d = (m / c1) / (sqrt(v / c2) + eps) + wd w       c1 = 1 - b1^t, c2 = 1 - b2^t
                                                       (1 and 1 without bias_correction)
      r1 = ||w|| clamped to [lower_bound, upper_bound] (each bound only when set)
      r2 = ||d||
      w <- w - lr (r1 / r2) d                          (lr alone when r1 or r2 is 0)

* LARS (You et al., 2017), MXNet's ``multi_lars`` + SGD::

      lr_l = lr eta ||w|| / (r ||g|| + wd ||w|| + eps)  when ||w|| > 0 and ||g|| > 0, else lr
      then SGD (with momentum when > 0) at rate lr_l

  Parameters whose name (``param_idx2name``) ends in ``gamma``, ``beta`` or
  ``bias`` keep ``lr``; every name not ending in ``_weight`` gets
  ``wd_mult = 0`` (LARS's own rule). With ``momentum_correction`` the
  momentum is multiplied by ``lr_now / lr_previous`` when a scheduler
  changes the rate (Goyal et al., 2017); the ratio is taken once per update
  step (``num_update``), as MXNet's aggregated update applies it to every
  parameter of one step.

The elementwise parts run in fused kernels: LAMB's phase 1 is one new
scalar step; its phase 2 and all of LARS reuse the SGD steps of
:mod:`ffnumba.optimizer.sgd`. Norms are taken in float64 over the whole
tensor (on the host for GPU arrays).

Sources: Y. You et al., "Large batch optimization for deep learning:
training BERT in 76 minutes" (2019); Y. You, I. Gitman, B. Ginsburg, "Large
batch training of convolutional networks" (2017); MXNet 1.9.1
``python/mxnet/optimizer/optimizer.py`` and ``optimizer_op.cc``.
"""
import math

import numpy as np
from numba import njit

from .base import (Optimizer, register, check_unit, check_nonneg, as_nd, _zeros, _real,
                   _mult_dict)
from .kernels import clip, hp_record, make_update
from .sgd import _SGD, _SGD_MOM

__all__ = ['LAMB', 'LARS']


# c1 = 1 - beta1^t, c2 = 1 - beta2^t (1 and 1 without bias correction)
LAMBHP = hp_record('LAMBHP', 'lr wd rescale_grad clip_gradient beta1 beta2 epsilon c1 c2')


@njit(inline='always')
def _lamb_phase1_step(w, g, m, v, c, hp):
    gg = clip(hp.rescale_grad * g, hp.clip_gradient)
    m = hp.beta1 * m + (1.0 - hp.beta1) * gg
    v = hp.beta2 * v + (1.0 - hp.beta2) * gg * gg
    d = (m / hp.c1) / (math.sqrt(v / hp.c2) + hp.epsilon) + hp.wd * w
    return w, d, m, v, c


_LAMB1 = make_update(_lamb_phase1_step, 'LAMB', LAMBHP)


def _l2(a):
    """Whole-tensor L2 norm of an NDArray, in float64."""
    x = np.asarray(a._host(), np.float64).reshape(-1)
    return float(math.sqrt(np.dot(x, x)))


def _optional(name, field, value):
    return None if value is None else _real(name, field, value)


@register
class LAMB(Optimizer):
    """LAMB: Adam directions scaled by the trust ratio ||w|| / ||d|| (MXNet ``LAMB``).

    See the module docstring for the formula.

    Parameters
    ----------
    learning_rate : float, default 0.001
    beta1, beta2 : float, default 0.9, 0.999
        Decay rates of the moment estimates, in [0, 1).
    epsilon : float, default 1e-6
        Added to sqrt(v) (>= 0).
    lower_bound, upper_bound : float, optional
        Clamp ||w|| from below/above (only when given and non-zero, as MXNet).
    bias_correction : bool, default True
        Divide the moments by ``1 - beta^t``.
    **kwargs
        See :class:`~ffnumba.optimizer.Optimizer`.

    State: ``(mean, var)`` in the weight's dtype (with multi_precision on
    float16: ``(float32 master, (mean, var))``, as MXNet).

    Raises
    ------
    ParamError
        For betas outside [0, 1), a negative or non-numeric epsilon or bound.
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 lower_bound=None, upper_bound=None, bias_correction=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = check_unit('LAMB', 'beta1', beta1)
        self.beta2 = check_unit('LAMB', 'beta2', beta2)
        self.epsilon = check_nonneg('LAMB', 'epsilon', epsilon)
        self.lower_bound = _optional('LAMB', 'lower_bound', lower_bound)
        self.upper_bound = _optional('LAMB', 'upper_bound', upper_bound)
        self.bias_correction = bool(bias_correction)

    def create_state(self, index, weight):
        return (_zeros(weight), _zeros(weight))

    def update(self, index, weight, grad, state):
        """Update ``weight`` and ``state = (mean, var)`` in place from ``grad``."""
        weight, grad = as_nd(weight), as_nd(grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        c1 = 1.0 - self.beta1 ** t if self.bias_correction else 1.0
        c2 = 1.0 - self.beta2 ** t if self.bias_correction else 1.0
        d = grad.copy()
        _LAMB1(weight, d, tuple(state), write_grad=True,
               **self._hp(lr, wd, beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon,
                          c1=c1, c2=c2))
        r1, r2 = _l2(weight), _l2(d)
        if self.lower_bound:
            r1 = max(r1, self.lower_bound)
        if self.upper_bound:
            r1 = min(r1, self.upper_bound)
        step = lr * r1 / r2 if (r1 != 0 and r2 != 0) else lr
        _SGD(weight, d, (), lr=step, wd=0.0, rescale_grad=1.0, clip_gradient=-1.0)


@register
class LARS(Optimizer):
    """LARS: SGD with a layer-wise rate eta ||w|| / (||g|| + wd ||w|| + eps) (MXNet ``LARS``).

    See the module docstring for the formula and the parameters it skips.

    Parameters
    ----------
    momentum : float, default 0.0
        In [0, 1).
    lazy_update : bool, default True
        Accepted for MXNet compatibility (dense arrays only here).
    eta : float, default 0.001
        LARS coefficient (>= 0).
    eps : float, default 0
        Added to the denominator (>= 0).
    momentum_correction : bool, default True
        Scale the momentum by the rate change of a scheduler.
    **kwargs
        See :class:`~ffnumba.optimizer.Optimizer`.

    State: None, or the momentum (weight's dtype); with multi_precision on
    float16: ``(momentum, float32 master)``, as MXNet.
    """

    _mp_master_last = True

    def __init__(self, momentum=0.0, lazy_update=True, eta=0.001, eps=0,
                 momentum_correction=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = check_unit('LARS', 'momentum', momentum)
        self.lazy_update = lazy_update
        self.eta = check_nonneg('LARS', 'eta', eta)
        self.eps = check_nonneg('LARS', 'eps', eps)
        self.momentum_correction = bool(momentum_correction)
        self.last_lr = self.cur_lr = None
        self._lr_step = None

    def set_wd_mult(self, args_wd_mult):
        """Per-parameter decay multipliers.

        As the base rule, except that LARS zeroes every ``param_idx2name`` name
        not ending in ``_weight`` (``_gamma`` included), then applies the
        symbol's ``__wd_mult__`` attrs and ``args_wd_mult``.
        """
        self.wd_mult = {n: 0.0 for n in self.idx2name.values() if not n.endswith('_weight')}
        if self.sym_info:
            attr, arg_names = self.sym_info
            for n in arg_names:
                if n in attr and '__wd_mult__' in attr[n]:
                    self.wd_mult[n] = float(attr[n]['__wd_mult__'])
        self.wd_mult.update(_mult_dict('LARS', 'args_wd_mult', args_wd_mult))

    def create_state(self, index, weight):
        return _zeros(weight) if self.momentum != 0.0 else None

    def _track_lr(self):
        """cur_lr/last_lr, advanced once per update step (num_update)."""
        if self._lr_step == self.num_update:
            return
        self._lr_step = self.num_update
        lr = self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr
        self.last_lr = lr if self.cur_lr is None else self.cur_lr
        self.cur_lr = lr

    def update(self, index, weight, grad, state):
        """Update ``weight`` (and the momentum ``state``) in place from ``grad``."""
        weight, grad = as_nd(weight), as_nd(grad)
        self._update_count(index)
        self._track_lr()
        lr, wd = self._get_lr(index), self._get_wd(index)
        name = self.idx2name.get(index, str(index))
        if not name.endswith(('gamma', 'beta', 'bias')):
            w_norm = _l2(weight)
            g_norm = _l2(grad) * self.rescale_grad
            if w_norm > 0.0 and g_norm > 0.0:
                lr = lr * self.eta * w_norm / (g_norm + wd * w_norm + self.eps)
        if state is None:
            _SGD(weight, grad, (), **self._hp(lr, wd))
            return
        mu = self.momentum
        if self.momentum_correction and self.last_lr:
            mu = mu * self.cur_lr / self.last_lr
        _SGD_MOM(weight, grad, (state,), **self._hp(lr, wd, momentum=mu))
