"""Imperative operator functions: ``ff.nd.<Op>`` (MXNet ``mx.nd.sum``, ``mx.nd.dot``...).

Every registered operator (and alias) is callable on NDArrays. A call
validates the params (``OpDef.parse_params``), infers the output shapes and
dtypes with the operator's own inference, allocates the outputs and calls the
registry's forward kernel for the arrays' device directly (inference mode),
so the imperative results are the symbolic kernels' results without building
a Symbol or an Executor. Inputs go by position or keyword as in ``ff.sym``;
as in MXNet, positional values after the NDArray inputs fill the params in
declaration order (``ff.nd.clip(x, 0, 1)``). ``out=`` copies the result into
an existing array (or list of arrays) and returns it. Random operators
(``Dropout`` in training...) draw from the global generator that
``ff.random.seed`` seeds.

The elementwise helpers ``maximum``, ``minimum``, ``power``, ``add``,
``subtract``, ``multiply``, ``divide``, ``modulo``, ``equal``,
``not_equal``, ``greater``, ``greater_equal``, ``lesser`` and
``lesser_equal``, ``hypot``, ``logical_and``, ``logical_or``, ``logical_xor`` take two NDArrays (broadcast) or an NDArray and a number.
"""
import math

import numpy as np

from ..base import FFError, ParamError, ShapeError, _Null
from ..ops.registry import OpContext
from .. import random as _random
from .ndarray import NDArray

__all__ = ['make_function', 'maximum', 'minimum', 'power', 'add', 'subtract', 'multiply',
           'divide', 'modulo', 'equal', 'not_equal', 'greater', 'greater_equal', 'lesser',
           'lesser_equal', 'hypot', 'logical_and', 'logical_or', 'logical_xor']


def _split_args(fname, op, args, kwargs):
    """``(inputs by position, NDArray keyword inputs, params)`` of one call."""
    pos_inputs, pos_params = [], []
    for i, a in enumerate(args):
        if isinstance(a, NDArray) or (a is None and not pos_params):
            if pos_params:
                raise ParamError('%s: NDArray input at position %d follows a param value'
                                 % (fname, i))
            pos_inputs.append(a)
        else:
            pos_params.append(a)
    kw_inputs, params = {}, {}
    for k, v in kwargs.items():
        if isinstance(v, NDArray):
            kw_inputs[k] = v
        elif v is not _Null and not (k.startswith('__') and k.endswith('__')):
            params[k] = v
    if op.variadic and op.variadic not in params:
        params[op.variadic] = len(pos_inputs)
    if pos_params:
        names = [k for k in op.params._fields if not (op.variadic and k == op.variadic)]
        if len(pos_params) > len(names):
            raise ParamError('%s: takes at most %d param values by position (%s), got %d'
                             % (fname, len(names), ', '.join(names), len(pos_params)))
        for k, v in zip(names, pos_params):
            if k in params:
                raise ParamError('%s: got param `%s` both by position and by keyword'
                                 % (fname, k))
            params[k] = v
    return pos_inputs, kw_inputs, params


def _parse_ctx(fname, text):
    """The Context named by ``text`` (``'cpu(0)'``, ``'gpu'``), or the current one."""
    from ..context import Context, current_context
    if not text:
        return current_context()
    name, _, rest = text.partition('(')
    try:
        return Context(name.strip(), int(rest.rstrip(')') or 0))
    except (ValueError, FFError) as e:
        raise ParamError('%s: `ctx` must be a Context or a string such as cpu(0). '
                         'Received: ctx=%r' % (fname, text)) from e


def _alloc(shape, dtype, ctx):
    if ctx.device_type == 'gpu':
        from .ndarray import zeros
        return zeros(shape, ctx=ctx, dtype=dtype)._data
    return np.zeros(shape, dtype=dtype)


def _invoke(fname, op, args, kwargs):
    """Run operator ``op`` on NDArrays: validate, infer, allocate, call the kernel."""
    out = kwargs.pop('out', None)
    kwargs.pop('name', None)
    kwargs.pop('attr', None)
    ctx = kwargs.pop('ctx', None)
    if 'ctx' in op.params._fields and ctx is not None:
        kwargs['ctx'] = str(ctx)
    pos_inputs, kw_inputs, params = _split_args(fname, op, args, kwargs)
    p = op.parse_params(params)
    arg_names = list(op.list_arguments(p))
    in_names = arg_names + list(op.list_aux(p))
    if len(pos_inputs) > len(in_names):
        raise ParamError('%s: takes at most %d inputs (%s), got %d'
                         % (fname, len(in_names), ', '.join(in_names), len(pos_inputs)))
    inputs = pos_inputs + [None] * (len(in_names) - len(pos_inputs))
    for k, v in kw_inputs.items():
        if k not in in_names:
            raise ParamError('%s: unknown input `%s`. Inputs: %s'
                             % (fname, k, ', '.join(in_names)))
        i = in_names.index(k)
        if inputs[i] is not None:
            raise ParamError('%s: input `%s` given twice' % (fname, k))
        inputs[i] = v
    missing = [n for n, a in zip(in_names, inputs) if a is None]
    if missing:
        raise ParamError('%s: missing NDArray input(s) %s' % (fname, missing))
    if inputs:
        ctx = inputs[0].context
    elif ctx is None or isinstance(ctx, str):  # a creation op: MXNet's ``ctx=`` argument
        ctx = _parse_ctx(fname, ctx)
    for n, a in zip(in_names, inputs):
        if a.context != ctx:
            raise FFError('%s: input `%s` is on %s but `%s` is on %s'
                          % (fname, n, a.context, in_names[0], ctx))
    nargs = len(arg_names)
    shapes = [a.shape for a in inputs]
    got_s = op.infer_shape(p, shapes[:nargs], shapes[nargs:], [None] * len(op.list_outputs(p)))
    for n, given, inferred in zip(in_names, shapes, list(got_s[0]) + list(got_s[2])):
        if inferred is not None and tuple(inferred) != given:
            raise ShapeError('%s: input `%s` has shape %s; expected %s'
                             % (fname, n, given, tuple(inferred)))
    types = [np.dtype(a.dtype) for a in inputs]
    got_t = op.infer_type(p, types[:nargs], types[nargs:])
    out_shapes, out_types = list(got_s[1]), list(got_t[1])
    if out_types and len(out_types) < len(out_shapes):  # one dtype stands for every output
        out_types += [out_types[-1]] * (len(out_shapes) - len(out_types))
    if any(s is None for s in out_shapes) or any(t is None for t in out_types):
        raise ShapeError('%s: cannot infer the output shape or type from inputs %s'
                         % (fname, shapes))
    outs = [_alloc(s, t, ctx) for s, t in zip(out_shapes, out_types)]
    fwd, _ = op.compute(ctx.device_type)
    octx = OpContext(False, ctx, {}, _random.generator(), fname)
    try:
        fwd(octx, p, [a._data for a in inputs[:nargs]], outs, [a._data for a in inputs[nargs:]])
    except FFError:
        raise
    except Exception as e:  # never leak a bare kernel traceback
        raise FFError('%s: %s: %s' % (fname, type(e).__name__, e)) from e
    results = [NDArray(o, ctx) for o in outs]
    if out is not None:
        dsts = out if isinstance(out, (list, tuple)) else [out]
        for dst, src in zip(dsts, results):
            if dst.shape != src.shape:
                raise ShapeError('%s: `out` has shape %s; the result has %s'
                                 % (fname, dst.shape, src.shape))
            dst[:] = src
        return out
    return results[0] if len(results) == 1 else results


def make_function(fname):
    """The imperative ``ff.nd`` function for operator (or alias) ``fname``."""
    from ..ops.registry import get_op
    from ..ops.doc import build_doc
    op = get_op(fname)

    def fn(*args, **kwargs):
        return _invoke(fname, op, args, kwargs)

    fn.__name__ = fn.__qualname__ = fname
    fn.__module__ = 'ffnumba.ndarray'
    fn.__doc__ = build_doc(op, fname).replace('Symbol', 'NDArray')
    return fn


def _ufunc(lhs, rhs, array_op, scalar_op, rscalar_op, py_op):
    from .. import ops  # noqa: F401  (registers every operator)
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
modulo = _helper('modulo', 'broadcast_mod', '_mod_scalar', '_rmod_scalar',
                 lambda a, b: a % b, "Remainder (sign of rhs)")
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
hypot = _helper('hypot', 'broadcast_hypot', '_hypot_scalar', '_hypot_scalar',
                math.hypot, '``sqrt(lhs^2 + rhs^2)``')


def _logical(fname, what):
    def fn(lhs, rhs):
        from .. import ops  # noqa: F401  (registers every operator)
        if not isinstance(lhs, NDArray) and not isinstance(rhs, NDArray):
            return float(py[fname](lhs, rhs))
        like = lhs if isinstance(lhs, NDArray) else rhs
        # a number operand becomes a broadcast array of ones-shape
        as_nd = [v if isinstance(v, NDArray) else
                 NDArray(np.full((1,) * like.ndim, v, dtype=like.dtype), like.context)
                 .as_in_context(like.context) for v in (lhs, rhs)]
        return make_function('broadcast_' + fname)(*as_nd)
    py = {'logical_and': lambda a, b: bool(a) and bool(b),
          'logical_or': lambda a, b: bool(a) or bool(b),
          'logical_xor': lambda a, b: bool(a) != bool(b)}
    fn.__name__ = fn.__qualname__ = fname
    fn.__doc__ = ('%s of two NDArrays (broadcast) or of an NDArray and a number, as 1/0 '
                  '(MXNet ``mx.nd.%s``).' % (what, fname))
    return fn


logical_and = _logical('logical_and', '``lhs and rhs``')
logical_or = _logical('logical_or', '``lhs or rhs``')
logical_xor = _logical('logical_xor', '``lhs xor rhs``')
