"""Reductions over axes: sum, mean, max, min, prod.

Math
----
For each group ``G`` of input elements that share the kept axes:

=====  ====================  =================================================
op     y = f(x_G)            dy/dx_i
=====  ====================  =================================================
sum    sum x_i               1
mean   sum x_i / n           1 / n
max    max x_i               1 where x_i == y (every tied maximum gets it)
min    min x_i               1 where x_i == y (every tied minimum gets it)
prod   prod x_i              prod_{j != i} x_j, exact when some x_j are 0
=====  ====================  =================================================

``max``/``min`` send the full head gradient to every element equal to the
result, as MXNet 1.9.1 does (no splitting among ties). ``prod``'s gradient is
the product of the other elements, computed without dividing by zero (MXNet
1.9.1 returns ``nan`` where an element is 0; this is the true derivative).

Parameters
----------
axis : int, tuple of int or None
    Axes to reduce; negative values count from the end. ``None`` or ``()``
    reduces every axis.
keepdims : bool
    Keep reduced axes with size 1.
exclude : bool
    Reduce the axes *not* listed in ``axis``.

Shapes
------
``(2, 3, 4)``: ``axis=1`` -> ``(2, 4)``; ``axis=1, keepdims=1`` ->
``(2, 1, 4)``; ``axis=1, exclude=1`` -> ``(3,)``; ``axis=None`` -> ``(1,)``
(MXNet's rule: a full reduction gives shape ``(1,)``, not ``()``).

Source: MXNet 1.x ``sum``/``mean``/``max``/``min``/``prod`` documentation.
"""
from numba import njit

from ...base import ShapeError
from ..params import Field, Params, Shape
from ..registry import OpDef, register_op
from ..broadcast_templates import make_reduce

__all__ = ['ReduceParam', 'reduce_axes', 'reduce_shape']

_scalar = njit(error_model='numpy')


class ReduceParam(Params):
    """Parameters of the reductions."""

    axis = Field(Shape, None, 'Axes to reduce (None or (): all; negatives count from the end).')
    keepdims = Field(bool, False, 'Keep the reduced axes with size 1.')
    exclude = Field(bool, False, 'Reduce the axes not listed in `axis`.')


def reduce_axes(p, shape):
    """The sorted, non-negative axes of ``shape`` that ``p`` reduces.

    Raises
    ------
    ShapeError
        For an axis outside ``[-ndim, ndim)`` or a repeated axis.
    """
    nd = len(shape)
    if not p.axis:
        return tuple(range(nd))
    axes = []
    for a in p.axis:
        b = a + nd if a < 0 else a
        if not 0 <= b < nd:
            raise ShapeError('%s: reduction axis %d is out of range for input shape %s'
                             % (p.op_name, a, tuple(shape)))
        if b in axes:
            raise ShapeError('%s: reduction axes have duplicates: axis=%s for input shape %s'
                             % (p.op_name, tuple(p.axis), tuple(shape)))
        axes.append(b)
    if p.exclude:
        return tuple(d for d in range(nd) if d not in axes)
    return tuple(sorted(axes))


def reduce_shape(p, shape):
    """Output shape of a reduction of ``shape`` (``(1,)`` when nothing is left)."""
    axes = reduce_axes(p, shape)
    if p.keepdims:
        out = tuple(1 if d in axes else s for d, s in enumerate(shape))
    else:
        out = tuple(s for d, s in enumerate(shape) if d not in axes)
    return out if out else (1,)


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    if ins[0] is None:
        return ins, [None], list(aux_shapes)
    return ins, [reduce_shape(p, ins[0])], list(aux_shapes)


def _infer_shape_nonempty(p, in_shapes, aux_shapes, out_shapes):
    """Shape inference of max/min: a zero-length reduced axis has no value (numpy refuses too)."""
    res = _infer_shape(p, in_shapes, aux_shapes, out_shapes)
    shape = in_shapes[0]
    if shape is not None and any(shape[d] == 0 for d in reduce_axes(p, shape)):
        raise ShapeError('%s: cannot reduce over a zero-length axis (no identity): input '
                         'shape %s, axis=%s' % (p.op_name, tuple(shape), p.axis))
    return res


@_scalar
def _add(acc, v):
    return acc + v


@_scalar
def _mul(acc, v):
    return acc * v


@_scalar
def _max(acc, v):
    return acc if (acc >= v or acc != acc) else v  # NaN propagates, as in MXNet


@_scalar
def _min(acc, v):
    return acc if (acc <= v or acc != acc) else v  # NaN propagates, as in MXNet


@_scalar
def _same(acc, n):
    return acc


@_scalar
def _divide(acc, n):
    return acc / n


@_scalar
def _one(x, y, n, s1, s2):
    return 1.0


@_scalar
def _inv_n(x, y, n, s1, s2):
    return 1.0 / n


@_scalar
def _is_result(x, y, n, s1, s2):
    return 1.0 if x == y else 0.0


@_scalar
def _prod_pre(v, s1, s2):
    if v == 0:
        return s1, s2 + 1.0
    return s1 * v, s2


@_scalar
def _prod_grad(x, y, n, s1, s2):
    # s1: product of the non-zero elements, s2: number of zeros in the group.
    if s2 == 0:
        return s1 / x
    if s2 == 1 and x == 0:
        return s1
    return 0.0


_REDUCE = {
    # name: (combine, finalize, grad, pre, aliases, empty, summary); ``empty``: the value
    # over a zero-length axis (numpy's), None: refused in shape inference
    'sum': (_add, _same, _one, None, ('sum_axis',), 0.0,
            'Sum of array elements over the given axes.'),
    'mean': (_add, _divide, _inv_n, None, (), float('nan'),
             'Mean of array elements over the given axes.'),
    'max': (_max, _same, _is_result, None, ('max_axis',), None,
            'Maximum of array elements over the given axes.'),
    'min': (_min, _same, _is_result, None, ('min_axis',), None,
            'Minimum of array elements over the given axes.'),
    'prod': (_mul, _same, _prod_grad, _prod_pre, (), 1.0,
             'Product of array elements over the given axes.'),
}

for _name, (_comb, _fin, _grad, _pre, _aliases, _empty, _summary) in _REDUCE.items():
    _fwd, _bwd = make_reduce(_comb, _fin, _grad, reduce_axes, pre=_pre,
                             empty=0.0 if _empty is None else _empty)
    register_op(OpDef(
        name=_name,
        aliases=_aliases,
        arguments=['data'],
        backward_reads={'sum': (), 'mean': (), 'nansum': ('data',)}.get(
            _name, ('inputs', 'outputs')),
        infer_shape=_infer_shape if _empty is not None else _infer_shape_nonempty,
        forward=_fwd,
        backward=_bwd,
        params=ReduceParam,
        doc='%s\n\n`axis` None or () reduces every axis and gives shape (1,) (MXNet\'s rule); '
            'negative axes count from the end; `exclude` reduces the axes not listed; '
            '`keepdims` keeps reduced axes as 1. (2, 3, 4) with axis=1 -> (2, 4), with '
            'exclude=True -> (3,). Over a zero-length axis sum gives 0, prod 1, mean NaN '
            '(numpy\'s values); max and min raise ShapeError.\n\nSource: MXNet 1.x reduction operators.\n' % _summary,
        input_docs={'data': 'Input array.'},
    ))
