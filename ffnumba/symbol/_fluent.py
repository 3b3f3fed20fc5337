"""Symbol's fluent methods (``x.reshape(...)``, ``x.exp()``, ``x.astype(...)``).

A name in MXNet's fluent lists resolves when first used to the registered
operator of that name, so operators registered later get their method and a
listed name without an operator is an ``AttributeError``.
"""
from ..base import FFError
from ..ops.registry import get_op
from .symbol import make_op_symbol

__all__ = ['install']


#: MXNet's fluent methods: ``x.reshape(shape=(2, -1))`` is ``ff.sym.reshape(x, shape=...)``.
_FLUENT = ('reshape', 'reshape_like', 'zeros_like', 'ones_like', 'broadcast_axes', 'repeat', 'pad',
           'swapaxes', 'split', 'slice', 'slice_axis', 'slice_like', 'take', 'one_hot', 'pick',
           'sort', 'topk', 'argsort', 'argmax', 'argmin', 'clip', 'abs', 'sign', 'flatten',
           'expand_dims', 'broadcast_to', 'broadcast_like', 'tile', 'transpose', 'flip', 'sum',
           'nansum', 'prod', 'mean', 'max', 'min', 'norm', 'round', 'rint', 'fix', 'floor',
           'ceil', 'trunc', 'sin', 'cos', 'tan', 'sinh', 'cosh', 'tanh', 'exp', 'expm1', 'log',
           'log10', 'log2', 'log1p', 'sqrt', 'rsqrt', 'cbrt', 'square', 'reciprocal', 'relu',
           'sigmoid', 'softmax', 'log_softmax', 'squeeze')


def _fluent(opname):
    def method(self, *args, **kwargs):
        name = kwargs.pop('name', None)
        attr = kwargs.pop('attr', None)
        op = get_op(opname)
        hint = op.hint if op.name == opname else opname.lower()
        return make_op_symbol(op, [self] + list(args), kwargs, name=name, attr=attr, hint=hint)
    method.__name__ = opname
    method.__doc__ = 'Fluent form of ``ff.sym.%s(self, ...)``.' % opname
    return method


def _fluent_lookup(self, name):
    """A fluent method resolved when first used: a name in MXNet's fluent list whose
    operator is registered (so operators registered later get theirs)."""
    from ..ndarray._mixin import FLUENT
    if name.startswith('_') or (name not in _FLUENT and name not in FLUENT):
        raise AttributeError("'Symbol' object has no attribute %r" % name)
    try:
        get_op(name)
    except FFError:
        raise AttributeError("'Symbol' object has no attribute %r (no operator %s is "
                             "registered)" % (name, name)) from None
    return _fluent(name).__get__(self, type(self))




def _astype(self, dtype, **kwargs):
    """Fluent form of ``ff.sym.Cast(self, dtype=dtype)``."""
    name = kwargs.pop('name', None)
    return make_op_symbol(get_op('Cast'), [self], dict(kwargs, dtype=dtype), name=name,
                          hint='cast')


def install(cls):
    """Give ``cls`` (Symbol) its fluent-method lookup and ``astype``."""
    cls.__getattr__ = _fluent_lookup
    cls.astype = _astype
