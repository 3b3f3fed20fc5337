"""The Optimizer base class, the registry, and the Updater (MXNet ``mx.optimizer``).

An optimizer owns the hyper-parameters shared by every update rule and the
bookkeeping MXNet does around them:

* the learning rate: ``learning_rate`` (default 0.01 when there is no
  scheduler), or ``lr_scheduler(num_update)``; an explicit ``learning_rate``
  overwrites the scheduler's ``base_lr``;
* per-parameter multipliers ``lr_mult``/``wd_mult``, from the symbol's
  ``__lr_mult__``/``__wd_mult__`` attributes and :meth:`set_lr_mult` /
  :meth:`set_wd_mult`; with ``param_idx2name`` every name that does not end in
  ``_weight`` or ``_gamma`` gets ``wd_mult = 0``;
* update counting: each call of an update increments a per-index counter
  (kept per device id) and ``num_update`` is the largest counter; the rate is
  read after the increment; ``begin_num_update`` is the starting count;
* ``rescale_grad`` multiplies the raw gradient; ``clip_gradient`` clips the
  rescaled gradient to ``[-c, c]`` (only when truthy, as MXNet's fused
  updates; the rules MXNet writes in Python clip whenever it is not None);
* ``multi_precision``: a float16 weight keeps a float32 master copy in its
  state and is updated through it.

Source: MXNet 1.x ``python/mxnet/optimizer/optimizer.py`` (behaviour checked
against MXNet 1.9.1).
"""
import math
import warnings

import numpy as np

from ..base import FFError, ParamError
from ..ndarray.ndarray import NDArray, zeros
from ..registry import get_create_func, get_register_func, get_registry
from . import _deferred

__all__ = ['Optimizer', 'register', 'create', 'get_registry_names', 'check_unit',
           'check_nonneg', 'as_nd']


def as_nd(a):
    """An NDArray for ``a`` (numpy arrays are wrapped without a copy)."""
    if isinstance(a, NDArray):
        return a
    if isinstance(a, np.ndarray):
        return NDArray(a)
    raise ParamError('optimizer: expected an NDArray, got %s' % type(a).__name__)


def _bad(opt, field, rule, value):
    return ParamError('%s: `%s` must be %s. Received: %s=%r' % (opt, field, rule, field, value))


def _real(opt, field, value, allow_inf=False):
    """``value`` as a float; NaN always refused, +-inf unless ``allow_inf`` (a NaN or inf
    hyper-parameter turns every weight into NaN/inf on the first update)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or math.isnan(float(value)):
        raise _bad(opt, field, 'a real number', value)
    if not allow_inf and math.isinf(float(value)):
        raise _bad(opt, field, 'a finite real number (not inf)', value)
    return float(value)


def _mult_dict(opt, field, value):
    """``value`` checked as a dict of index or name -> real multiplier."""
    if not isinstance(value, dict):
        raise _bad(opt, field, 'a dict of index or name -> float', value)
    return {k: _real(opt, '%s[%r]' % (field, k), v) for k, v in value.items()}


def check_unit(opt, field, value):
    """``value`` as a float in ``[0, 1)`` (momentum, betas, decay rates)."""
    v = _real(opt, field, value)
    if not 0.0 <= v < 1.0:
        raise _bad(opt, field, 'in [0, 1)', value)
    return v


def check_nonneg(opt, field, value, allow_inf=False):
    """``value`` as a finite float ``>= 0`` (``allow_inf``: inf accepted too)."""
    v = _real(opt, field, value, allow_inf)
    if v < 0.0:
        raise _bad(opt, field, '>= 0', value)
    return v



class _SchedulerOwnsRate(FFError, UserWarning):
    """``set_learning_rate`` while a scheduler owns the rate (MXNet raises UserWarning)."""

class Optimizer:
    """Base class of every optimizer (MXNet ``mx.optimizer.Optimizer``).

    Parameters
    ----------
    rescale_grad : float, default 1.0
        Multiplies the raw gradient (usually ``1 / batch_size``).
    param_idx2name : dict int -> str, optional
        Parameter names; also sets ``wd_mult = 0`` for names not ending in
        ``_weight``/``_gamma``.
    wd : float, default 0.0
        L2 weight decay.
    clip_gradient : float, optional
        Clip the rescaled gradient to ``[-clip_gradient, clip_gradient]`` (>= 0).
    learning_rate : float, optional
        Per-update step size (>= 0); 0.01 when neither it nor a scheduler is given.
    lr_scheduler : LRScheduler, optional
        Gives the rate from ``num_update``.
    sym : Symbol, optional
        Its ``attr_dict()`` supplies ``__lr_mult__``/``__wd_mult__`` per argument.
    begin_num_update : int, default 0
        Starting value of the update counters.
    multi_precision : bool, default False
        Keep a float32 master copy of float16 weights.
    param_dict : dict, optional
        index -> object with ``lr_mult``/``wd_mult`` attributes (takes precedence).

    Raises
    ------
    ParamError
        For a negative learning rate or clip_gradient, non-numeric values.
    """

    #: 'truthy': clip only when clip_gradient is truthy (fused MXNet updates);
    #: 'not_none': clip whenever it is not None (updates MXNet writes in Python).
    _clip_rule = 'truthy'
    #: True where MXNet stores the multi-precision state as (state, master).
    _mp_master_last = False

    def __init__(self, rescale_grad=1., param_idx2name=None, wd=0., clip_gradient=None,
                 learning_rate=None, lr_scheduler=None, sym=None, begin_num_update=0,
                 multi_precision=False, param_dict=None):
        name = type(self).__name__
        self.rescale_grad = _real(name, 'rescale_grad', rescale_grad)
        if lr_scheduler is not None and not (callable(lr_scheduler)
                                             and hasattr(lr_scheduler, 'base_lr')):
            raise _bad(name, 'lr_scheduler', 'an LRScheduler (or None)', lr_scheduler)
        self.lr_scheduler = lr_scheduler
        if learning_rate is not None:
            check_nonneg(name, 'learning_rate', learning_rate)
        if lr_scheduler is None and learning_rate is None:
            learning_rate = 0.01
        self.lr = learning_rate
        if lr_scheduler is not None and learning_rate is not None and \
                lr_scheduler.base_lr != learning_rate:
            warnings.warn('learning rate from ``lr_scheduler`` has been overwritten by '
                          '``learning_rate`` in optimizer.')
            lr_scheduler.base_lr = learning_rate
        self.wd = _real(name, 'wd', wd)
        self.lr_mult = {}
        self.wd_mult = {}
        if isinstance(begin_num_update, bool) or not isinstance(begin_num_update, int) \
                or begin_num_update < 0:
            raise _bad(name, 'begin_num_update', 'an int >= 0', begin_num_update)
        self.begin_num_update = begin_num_update
        self.num_update = begin_num_update
        self._all_index_update_counts = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        if clip_gradient is not None:
            check_nonneg(name, 'clip_gradient', clip_gradient, allow_inf=True)  # inf: no clip
        self.clip_gradient = clip_gradient
        self.multi_precision = bool(multi_precision)
        if param_idx2name is None:
            param_idx2name = {}
        if not isinstance(param_idx2name, dict):
            raise _bad(name, 'param_idx2name', 'a dict of parameter indices to names',
                       param_idx2name)
        self.idx2name = param_idx2name.copy()
        self.sym_info = (sym.attr_dict(), sym.list_arguments()) if sym is not None else ()
        self.param_dict = param_dict if param_dict else {}
        self.set_lr_mult({})
        self.set_wd_mult({})

    # ------------------------------------------------------------- learning rate
    @property
    def learning_rate(self):
        """The current rate: the scheduler's at ``num_update``, else ``lr``."""
        if self.lr_scheduler is not None:
            return self.lr_scheduler(self.num_update)
        return self.lr

    def set_learning_rate(self, lr):
        """Set the rate of an optimizer without a scheduler.

        Raises
        ------
        FFError
            If a scheduler owns the rate (also a ``UserWarning``, the class MXNet
            raises here).
        """
        if self.lr_scheduler is not None:
            raise _SchedulerOwnsRate('%s: set_learning_rate cannot change the rate while an '
                                     'lr_scheduler is defined' % type(self).__name__)
        self.lr = check_nonneg(type(self).__name__, 'learning_rate', lr)

    def set_lr_mult(self, args_lr_mult):
        """Per-parameter rate multipliers: symbol ``__lr_mult__`` attrs, then ``args_lr_mult``.

        Parameters
        ----------
        args_lr_mult : dict
            index or name -> multiplier.
        """
        self.lr_mult = {}
        if self.sym_info:
            attr, arg_names = self.sym_info
            for n in arg_names:
                if n in attr and '__lr_mult__' in attr[n]:
                    self.lr_mult[n] = float(attr[n]['__lr_mult__'])
        self.lr_mult.update(_mult_dict(type(self).__name__, 'args_lr_mult', args_lr_mult))

    def set_wd_mult(self, args_wd_mult):
        """Per-parameter decay multipliers.

        0 for every ``param_idx2name`` name not ending in ``_weight``/``_gamma``,
        then the symbol's ``__wd_mult__`` attrs, then ``args_wd_mult``.
        """
        self.wd_mult = {}
        for n in self.idx2name.values():
            if not (n.endswith('_weight') or n.endswith('_gamma')):
                self.wd_mult[n] = 0.0
        if self.sym_info:
            attr, arg_names = self.sym_info
            for n in arg_names:
                if n in attr and '__wd_mult__' in attr[n]:
                    self.wd_mult[n] = float(attr[n]['__wd_mult__'])
        self.wd_mult.update(_mult_dict(type(self).__name__, 'args_wd_mult', args_wd_mult))

    def _set_current_context(self, device_id):
        """Switch the update counters to those of device ``device_id``."""
        self._index_update_count = self._all_index_update_counts.setdefault(device_id, {})

    def _update_count(self, index):
        """Count one update of ``index`` (or of each index in a list)."""
        for idx in index if isinstance(index, (list, tuple)) else [index]:
            c = self._index_update_count.get(idx, self.begin_num_update) + 1
            self._index_update_count[idx] = c
            self.num_update = max(c, self.num_update)

    def _mult(self, index, mults, attr):
        if index in self.param_dict:
            return getattr(self.param_dict[index], attr)
        if index in mults:
            return mults[index]
        if index in self.idx2name:
            return mults.get(self.idx2name[index], 1.0)
        return 1.0

    def _get_lrs(self, indices):
        lr = self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr
        return [lr * self._mult(i, self.lr_mult, 'lr_mult') for i in indices]

    def _get_lr(self, index):
        """The rate for ``index``: current rate times its lr multiplier."""
        return self._get_lrs([index])[0]

    def _get_wds(self, indices):
        return [self.wd * self._mult(i, self.wd_mult, 'wd_mult') for i in indices]

    def _get_wd(self, index):
        """The weight decay for ``index``: ``wd`` times its wd multiplier."""
        return self._get_wds([index])[0]

    def _clip(self):
        """clip_gradient as a kernel argument (< 0: no clipping)."""
        c = self.clip_gradient
        if self._clip_rule == 'truthy':
            return float(c) if c else -1.0
        return float(c) if c is not None else -1.0

    def _hp(self, lr, wd, **extra):
        """The hyper-parameters every update kernel reads, by name, plus ``extra``.

        ``lr``/``wd`` are the per-parameter rate and decay; ``rescale_grad``
        and ``clip_gradient`` (as :meth:`_clip`) come from the optimizer.
        The fused kernel checks the names against its record
        (:func:`~ffnumba.optimizer.kernels.hp_record`).
        """
        return dict(lr=lr, wd=wd, rescale_grad=self.rescale_grad, clip_gradient=self._clip(),
                    **extra)

    # ------------------------------------------------------------------ states
    def create_state(self, index, weight):
        """The optimizer state of one parameter: None, an NDArray or a tuple of them."""
        return None

    def create_state_multi_precision(self, index, weight):
        """Like :meth:`create_state`, adding a float32 master copy for float16 weights.

        The state is ``(master, state)`` (``(state, master)`` for SGD and NAG,
        as MXNet).
        """
        weight = as_nd(weight)
        if self.multi_precision and weight.dtype is np.float16:
            master = weight.astype(np.float32)
            inner = self.create_state(index, master)
            return (inner, master) if self._mp_master_last else (master, inner)
        if weight.dtype is np.float16:
            warnings.warn('Accumulating with float16 in optimizer can lead to poor accuracy '
                          'or slow convergence. Consider using multi_precision=True option '
                          'of the %s optimizer' % type(self).__name__)
        return self.create_state(index, weight)

    def update(self, index, weight, grad, state):
        """Update ``weight`` in place from ``grad`` and ``state`` (one fused kernel)."""
        raise NotImplementedError('%s must define update()' % type(self).__name__)

    def update_multi_precision(self, index, weight, grad, state):
        """:meth:`update`, through the float32 master copy for float16 weights."""
        weight, grad = as_nd(weight), as_nd(grad)
        if self.multi_precision and weight.dtype is np.float16 and \
                isinstance(state, (tuple, list)):
            inner, master = state if self._mp_master_last else state[::-1]
            grad32 = grad.astype(np.float32)
            self.update(index, master, grad32, inner)
            _deferred.flush()       # the master's kernel runs before the copy reads it
            weight._copy_from(master)
        else:
            self.update(index, weight, grad, state)

    # ---------------------------------------------- state-file hooks (states.py)
    def _extra_state(self):
        """Optimizer-wide scalars the update rule keeps (e.g. Nadam's m_schedule)."""
        return {}

    def _load_extra_state(self, extra):
        for k, v in extra.items():
            setattr(self, k, v)

    def __getstate__(self):
        ret = self.__dict__.copy()
        ret.pop('param_dict', None)
        return ret

    def __setstate__(self, state):
        self.__dict__ = state
        self.param_dict = {}


def _zeros(weight, dtype=None):
    """Zeros of the weight's shape and context (its dtype unless given)."""
    return zeros(weight.shape, weight.context, dtype=dtype or weight.dtype)


register = get_register_func(Optimizer, 'optimizer')
_create = get_create_func(Optimizer, 'optimizer')


def create(*args, **kwargs):
    """Create an optimizer by name (any case), JSON spec or instance.

    Parameters
    ----------
    name : str or Optimizer
        A registered name such as ``'sgd'``; an instance is returned as is.
    **kwargs
        Hyper-parameters of that optimizer.

    Returns
    -------
    Optimizer

    Raises
    ------
    ParamError
        For an unknown name, a hyper-parameter the optimizer does not take,
        or a bad value.
    """
    try:
        return _create(*args, **kwargs)
    except TypeError as e:
        if 'unexpected keyword argument' not in str(e):
            raise
        name = args[0] if args else kwargs.get('optimizer')
        raise ParamError('optimizer %r: %s' % (name, str(e).split('() ', 1)[-1])) from None


def get_registry_names():
    """The registered optimizer names (lower case)."""
    return sorted(get_registry(Optimizer))
