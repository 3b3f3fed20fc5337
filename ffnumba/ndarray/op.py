"""Imperative operator functions: ``ff.nd.<Op>`` (MXNet ``mx.nd.sum``, ``mx.nd.dot``...).

Every registered operator (and alias) is callable on NDArrays. A call builds
the one-node symbol ``Op(inputs, **params)``, binds it to the given arrays
(``grad_req='null'``), runs ``forward(is_train=False)`` and returns the
output(s), so the imperative results are the symbolic kernels' results.
Inputs go by position or keyword as in ``ff.sym``; as in MXNet, positional
values after the NDArray inputs fill the params in declaration order
(``ff.nd.clip(x, 0, 1)``). ``out=`` copies the result into an existing array.

The elementwise helpers ``maximum``, ``minimum``, ``power``, ``add``,
``subtract``, ``multiply``, ``divide``, ``modulo``, ``equal``,
``not_equal``, ``greater``, ``greater_equal``, ``lesser`` and
``lesser_equal`` take two NDArrays (broadcast) or an NDArray and a number.
"""
import numpy as np

from ..base import ParamError, _Null
from .ndarray import NDArray, array

__all__ = ['make_function', 'maximum', 'minimum', 'power', 'add', 'subtract', 'multiply',
           'divide', 'modulo', 'equal', 'not_equal', 'greater', 'greater_equal', 'lesser',
           'lesser_equal']


def _invoke(fname, op, args, kwargs):
    from .. import symbol as _sym
    out = kwargs.pop('out', None)
    kwargs.pop('name', None)
    arrays, sym_args, sym_kw, params = {}, [], {}, {}
    positional_params = []
    for i, a in enumerate(args):
        if isinstance(a, NDArray):
            if positional_params:
                raise ParamError('%s: NDArray input at position %d follows a param value'
                                 % (fname, i))
            vname = '_in%d' % i
            arrays[vname] = a
            sym_args.append(_sym.Variable(vname))
        elif a is None and not positional_params:
            sym_args.append(None)
        else:
            positional_params.append(a)
    for k, v in kwargs.items():
        if isinstance(v, NDArray):
            arrays['_kw_' + k] = v
            sym_kw[k] = _sym.Variable('_kw_' + k)
        elif v is not _Null:
            params[k] = v
    if positional_params:
        names = [k for k in op.params._fields if not (op.variadic and k == op.variadic)]
        if len(positional_params) > len(names):
            raise ParamError('%s: takes at most %d param values by position (%s), got %d'
                             % (fname, len(names), ', '.join(names), len(positional_params)))
        for k, v in zip(names, positional_params):
            if k in params:
                raise ParamError('%s: got param `%s` both by position and by keyword'
                                 % (fname, k))
            params[k] = v
    if not arrays:
        raise ParamError('%s: needs at least one NDArray input' % fname)
    node = getattr(_sym, fname)(*sym_args, name='_imperative', **sym_kw, **params)
    missing = [n for n in node.list_arguments() + node.list_auxiliary_states()
               if n not in arrays]
    if missing:
        raise ParamError('%s: missing NDArray input(s) %s' % (fname, missing))
    ctx = next(iter(arrays.values())).context
    aux = {n: arrays[n] for n in node.list_auxiliary_states()}
    exe = node.bind(ctx, {n: arrays[n] for n in node.list_arguments()}, grad_req='null',
                    aux_states=aux or None)
    outs = exe.forward(is_train=False)
    outs = [array(o.asnumpy(), ctx=ctx, dtype=o.dtype) if o._data.base is not None else o
            for o in outs]
    if out is not None:
        for dst, src in zip(out if isinstance(out, (list, tuple)) else [out], outs):
            dst[:] = src
        return out
    return outs[0] if len(outs) == 1 else outs


def make_function(fname):
    """The imperative ``ff.nd`` function for operator (or alias) ``fname``."""
    from ..ops.registry import get_op
    from ..symbol.op_functions import build_doc
    op = get_op(fname)

    def fn(*args, **kwargs):
        return _invoke(fname, op, args, kwargs)

    fn.__name__ = fn.__qualname__ = fname
    fn.__module__ = 'ffnumba.ndarray'
    fn.__doc__ = build_doc(op, fname).replace('Symbol', 'NDArray')
    return fn


def _ufunc(lhs, rhs, array_op, scalar_op, rscalar_op, py_op):
    from .. import symbol  # noqa: F401  (registers every operator)
    if isinstance(lhs, NDArray) and isinstance(rhs, NDArray):
        return make_function(array_op)(lhs, rhs)
    if isinstance(lhs, NDArray):
        return make_function(scalar_op)(lhs, scalar=float(rhs))
    if isinstance(rhs, NDArray):
        return make_function(rscalar_op)(rhs, scalar=float(lhs))
    return py_op(lhs, rhs)


def _helper(fname, array_op, scalar_op, rscalar_op, py_op, what):
    def fn(lhs, rhs):
        return _ufunc(lhs, rhs, array_op, scalar_op, rscalar_op, py_op)
    fn.__name__ = fn.__qualname__ = fname
    fn.__doc__ = ('%s of two NDArrays (broadcast) or of an NDArray and a number '
                  '(MXNet ``mx.nd.%s``).' % (what, fname))
    return fn


maximum = _helper('maximum', 'broadcast_maximum', '_maximum_scalar', '_maximum_scalar',
                  max, 'Elementwise maximum')
minimum = _helper('minimum', 'broadcast_minimum', '_minimum_scalar', '_minimum_scalar',
                  min, 'Elementwise minimum')
power = _helper('power', 'broadcast_power', '_power_scalar', '_rpower_scalar',
                pow, '``lhs ** rhs``')
add = _helper('add', 'broadcast_add', '_plus_scalar', '_plus_scalar',
              lambda a, b: a + b, 'Sum')
subtract = _helper('subtract', 'broadcast_sub', '_minus_scalar', '_rminus_scalar',
                   lambda a, b: a - b, 'Difference')
multiply = _helper('multiply', 'broadcast_mul', '_mul_scalar', '_mul_scalar',
                   lambda a, b: a * b, 'Product')
divide = _helper('divide', 'broadcast_div', '_div_scalar', '_rdiv_scalar',
                 lambda a, b: a / b, 'Quotient')
modulo = _helper('modulo', '_mod', '_mod_scalar', '_rmod_scalar',
                 lambda a, b: a % b, "Remainder (two arrays: same shape)")
equal = _helper('equal', 'broadcast_equal', '_equal_scalar', '_equal_scalar',
                lambda a, b: float(a == b), '``lhs == rhs`` as 1/0')
not_equal = _helper('not_equal', 'broadcast_not_equal', '_not_equal_scalar',
                    '_not_equal_scalar', lambda a, b: float(a != b), '``lhs != rhs`` as 1/0')
greater = _helper('greater', 'broadcast_greater', '_greater_scalar', '_lesser_scalar',
                  lambda a, b: float(a > b), '``lhs > rhs`` as 1/0')
greater_equal = _helper('greater_equal', 'broadcast_greater_equal', '_greater_equal_scalar',
                        '_lesser_equal_scalar', lambda a, b: float(a >= b),
                        '``lhs >= rhs`` as 1/0')
lesser = _helper('lesser', 'broadcast_lesser', '_lesser_scalar', '_greater_scalar',
                 lambda a, b: float(a < b), '``lhs < rhs`` as 1/0')
lesser_equal = _helper('lesser_equal', 'broadcast_lesser_equal', '_lesser_equal_scalar',
                       '_greater_equal_scalar', lambda a, b: float(a <= b),
                       '``lhs <= rhs`` as 1/0')
