"""Replicating and reordering ops: tile, repeat, broadcast_to / broadcast_axis /
broadcast_like, reverse (``flip``) and SwapAxis (``swapaxes``).

Each output element is a copy of one input element, so all run on the
axis-map gather of :mod:`ffnumba.ops.tensor._axismap` (CPU ``@njit`` loop,
``@cuda.jit`` twin). Where an input element is copied several times (tile,
repeat, broadcasting) its gradient is the sum of the copies' head gradients.

Shapes
------
===============  ===========================  =========================================
op               params                       output
===============  ===========================  =========================================
tile             reps                         ``d * r`` per axis (shorter side padded
                                              with leading 1s)
repeat           repeats, axis (None: flat)   ``axis`` size times ``repeats``
broadcast_to     shape (0: keep)              ``shape``; input axes must be 1 or equal
broadcast_axis   axis, size                   those axes (of size 1) become ``size``
broadcast_like   lhs_axes, rhs_axes           ``lhs`` broadcast to ``rhs``'s shape
reverse          axis (tuple)                 same shape, those axes reversed
SwapAxis         dim1, dim2                   those two axes exchanged
===============  ===========================  =========================================

Source: MXNet 1.x operator documentation, checked against MXNet 1.9.1.
"""
import numpy as np

from ...base import ShapeError
from ..params import Field, Params, Shape
from ..registry import OpDef, register_op
from ._axismap import Plan, cstrides, first_type, make_gather_op
from .shape import _axis

__all__ = ['TileParam', 'RepeatParam', 'BroadcastToParam', 'BroadcastAxisParam',
           'BroadcastLikeParam', 'ReverseParam', 'SwapAxisParam']


def _register(name, params, infer, plan, doc, aliases=(), args=('data',), docs=None):
    fwd, bwd = make_gather_op(plan)
    register_op(OpDef(name=name, aliases=aliases, arguments=list(args), infer_shape=infer,
                      infer_type=first_type,
                      backward_reads=(),   # an index map: dx sums dy back, reading no values
                      forward=fwd, backward=bwd, params=params, doc=doc,
                      input_docs=docs or {'data': 'Input array.'}))


def _one_input(out_fn):
    def infer(p, in_shapes, aux_shapes, out_shapes):
        d = in_shapes[0]
        return list(in_shapes), [None if d is None else tuple(out_fn(p, tuple(d)))], \
            list(aux_shapes)
    return infer


# ------------------------------------------------------------------------ tile
class TileParam(Params):
    """Parameters of :func:`tile`."""

    reps = Field(Shape, doc='Repetitions per axis (aligned to the last axes), each >= 1 '
                            '(MXNet 1.x rejects 0); () keeps the input.', low=1)


def _tile_shapes(p, d):
    k = max(len(d), len(p.reps))
    d2 = (1,) * (k - len(d)) + tuple(d)
    r2 = (1,) * (k - len(p.reps)) + tuple(p.reps)
    return d2, r2


def _tile_plan(p, shapes):
    d2, r2 = _tile_shapes(p, shapes[0])
    return Plan([np.arange(n * r) % max(n, 1) for n, r in zip(d2, r2)], cstrides(d2))


_register('tile', TileParam,
          _one_input(lambda p, d: tuple(n * r for n, r in zip(*_tile_shapes(p, d)))),
          _tile_plan,
          'Repeat the whole array `reps` times along each axis.\n\n(3, 4) with reps=(2,) -> '
          '(3, 8); reps=(2, 1, 1) -> (2, 3, 4) (a leading axis added). The gradient sums '
          'over the copies.\n\nSource: MXNet 1.x ``tile`` (numpy.tile semantics).\n')


# ---------------------------------------------------------------------- repeat
class RepeatParam(Params):
    """Parameters of :func:`repeat`."""

    repeats = Field(int, doc='Copies of each element.', low=0)
    axis = Field(int, None, 'Axis to repeat along (None: the flattened array).')


def _repeat_out(p, d):
    if p.axis is None:
        return (int(np.prod(d)) * p.repeats,)
    a = _axis(p.axis, len(d), 'axis', 'repeat', d)
    return tuple(d[:a]) + (d[a] * p.repeats,) + tuple(d[a + 1:])


def _repeat_plan(p, shapes):
    d = shapes[0]
    if p.axis is None:
        return Plan([np.arange(int(np.prod(d)) * p.repeats) // max(p.repeats, 1)], [1])
    a = _axis(p.axis, len(d), 'axis', 'repeat', d)
    maps = [np.arange(n) for n in d]
    maps[a] = np.arange(d[a] * p.repeats) // max(p.repeats, 1)
    return Plan(maps, cstrides(d))


_register('repeat', RepeatParam, _one_input(_repeat_out), _repeat_plan,
          'Repeat each element `repeats` times along `axis`.\n\n(2, 3), repeats=2, axis=-1 '
          '-> (2, 6) as [a, a, b, b, ...]; axis=None flattens first -> (12,).\n\n'
          'Source: MXNet 1.x ``repeat`` (numpy.repeat semantics).\n')


# ------------------------------------------------------------------- broadcast
def _bcast_plan_to(d, out, op):
    """Plan broadcasting input shape ``d`` to ``out`` (same ndim; 1s expand)."""
    d, out = tuple(d), tuple(out)
    if len(d) != len(out) or any(a != b and a != 1 for a, b in zip(d, out)):
        raise ShapeError('%s: cannot broadcast input shape %s to %s (each input axis must be '
                         '1 or equal)' % (op, d, out))
    return Plan([np.zeros(o, np.int64) if a == 1 else np.arange(o) for a, o in zip(d, out)],
                cstrides(d))


class BroadcastToParam(Params):
    """Parameters of :func:`broadcast_to`."""

    shape = Field(Shape, (), 'Target shape; 0 keeps the input size of that axis.', low=0)


def _bto_out(p, d):
    if len(p.shape) != len(d):
        raise ShapeError('broadcast_to: shape=%s must have as many axes as the input shape %s'
                         % (tuple(p.shape), tuple(d)))
    out = tuple(n if s == 0 else s for n, s in zip(d, p.shape))
    _bcast_plan_to(d, out, 'broadcast_to')
    return out


_register('broadcast_to', BroadcastToParam, _one_input(_bto_out),
          lambda p, s: _bcast_plan_to(s[0], _bto_out(p, s[0]), 'broadcast_to'),
          'Broadcast an array to a new shape.\n\n(2, 1, 3) with shape=(0, 4, 0) -> (2, 4, 3). '
          'Input axes must be 1 or equal to the target. The gradient sums over the copies.\n\n'
          'Source: MXNet 1.x ``broadcast_to``.\n')


class BroadcastAxisParam(Params):
    """Parameters of :func:`broadcast_axis`."""

    axis = Field(Shape, (), 'Axes to broadcast (each of size 1 in the input).')
    size = Field(Shape, (), 'Target size of each axis in `axis`.', low=0)

    def validate(self):
        if len(self.axis) != len(self.size):
            from ...base import ParamError
            raise ParamError('broadcast_axis: `axis` and `size` must have the same length. '
                             'Received: axis=%s, size=%s' % (tuple(self.axis), tuple(self.size)))


def _bax_out(p, d):
    out, seen = list(d), set()
    for a, n in zip(p.axis, p.size):
        ax = _axis(a, len(d), 'axis', 'broadcast_axis', d)
        if ax in seen:
            raise ShapeError('broadcast_axis: axis %d is listed twice in axis=%s (input shape '
                             '%s)' % (ax, tuple(p.axis), tuple(d)))
        seen.add(ax)
        if d[ax] != 1 and d[ax] != n:
            raise ShapeError('broadcast_axis: axis %d of input shape %s must be 1 to broadcast '
                             'to size %d' % (ax, tuple(d), n))
        out[ax] = n
    return tuple(out)


_register('broadcast_axis', BroadcastAxisParam, _one_input(_bax_out),
          lambda p, s: _bcast_plan_to(s[0], _bax_out(p, s[0]), 'broadcast_axis'),
          'Broadcast axes of size 1 to `size`.\n\n(2, 1, 1) with axis=(1, 2), size=(3, 4) -> '
          '(2, 3, 4).\n\nSource: MXNet 1.x ``broadcast_axis``.\n', aliases=('broadcast_axes',))


class BroadcastLikeParam(Params):
    """Parameters of :func:`broadcast_like`."""

    lhs_axes = Field(Shape, None, 'Axes of lhs to broadcast (None: all axes).')
    rhs_axes = Field(Shape, None, 'Axes of rhs giving the sizes (None: all axes).')


def _blike_out(p, d, like):
    d, like = tuple(d), tuple(like)
    if p.lhs_axes is None or p.rhs_axes is None:
        if len(d) != len(like):
            raise ShapeError('broadcast_like: lhs shape %s and rhs shape %s must have the same '
                             'number of axes' % (d, like))
        return like
    if not p.lhs_axes or not p.rhs_axes:   # as MXNet: an empty tuple is not "all axes"
        raise ShapeError('broadcast_like: empty axes tuple is not allowed (lhs_axes=%s, '
                         'rhs_axes=%s); leave both out to broadcast over all axes'
                         % (tuple(p.lhs_axes), tuple(p.rhs_axes)))
    if len(p.lhs_axes) != len(p.rhs_axes):
        raise ShapeError('broadcast_like: lhs_axes=%s and rhs_axes=%s differ in length'
                         % (tuple(p.lhs_axes), tuple(p.rhs_axes)))
    out = list(d)
    for la, ra in zip(p.lhs_axes, p.rhs_axes):
        out[_axis(la, len(d), 'lhs_axes', 'broadcast_like', d)] = \
            like[_axis(ra, len(like), 'rhs_axes', 'broadcast_like', like)]
    return tuple(out)


def _blike_infer(p, in_shapes, aux_shapes, out_shapes):
    d, like = in_shapes
    if d is None or like is None:
        return list(in_shapes), [None], list(aux_shapes)
    out = _blike_out(p, d, like)
    _bcast_plan_to(d, out, 'broadcast_like')
    return list(in_shapes), [out], list(aux_shapes)


_register('broadcast_like', BroadcastLikeParam, _blike_infer,
          lambda p, s: _bcast_plan_to(s[0], _blike_out(p, s[0], s[1]), 'broadcast_like'),
          'Broadcast `lhs` to the shape of `rhs` (or to its sizes on `rhs_axes`).\n\n'
          '(1, 3) like (4, 3, 5) with lhs_axes=(0,), rhs_axes=(2,) -> (5, 3). `rhs` gets a '
          'zero gradient.\n\nSource: MXNet 1.x ``broadcast_like``.\n',
          args=('lhs', 'rhs'), docs={'lhs': 'Array to broadcast.',
                                     'rhs': 'Array whose shape is used.'})


# --------------------------------------------------------------------- reverse
class ReverseParam(Params):
    """Parameters of :func:`reverse`."""

    axis = Field(Shape, doc='Axes to reverse.')


def _reverse_plan(p, shapes):
    d = shapes[0]
    maps = [np.arange(n) for n in d]
    for a in p.axis:      # an axis listed twice is reversed twice (as MXNet 1.9.1 does)
        ax = _axis(a, len(d), 'axis', 'reverse', d)
        maps[ax] = maps[ax][::-1]
    return Plan(maps, cstrides(d))


def _reverse_out(p, d):
    for a in p.axis:
        _axis(a, len(d), 'axis', 'reverse', d)
    return d


_register('reverse', ReverseParam, _one_input(_reverse_out), _reverse_plan,
          'Reverse the order of elements along `axis`.\n\n[[0, 1], [2, 3]] with axis=1 -> '
          '[[1, 0], [3, 2]]. An axis listed twice is reversed twice (MXNet 1.9.1); negative '
          'axes count from the end (MXNet rejects them).\n\nSource: MXNet 1.x ``reverse`` (alias ``flip``).\n',
          aliases=('flip',))


# -------------------------------------------------------------------- SwapAxis
class SwapAxisParam(Params):
    """Parameters of :func:`SwapAxis`."""

    dim1 = Field(int, 0, 'The first axis to swap.')
    dim2 = Field(int, 0, 'The second axis to swap.')


def _swap_perm(p, d):
    a = _axis(p.dim1, len(d), 'dim1', 'SwapAxis', d)
    b = _axis(p.dim2, len(d), 'dim2', 'SwapAxis', d)
    perm = list(range(len(d)))
    perm[a], perm[b] = b, a
    return perm


def _swap_plan(p, shapes):
    d = shapes[0]
    perm, st = _swap_perm(p, d), cstrides(d)
    return Plan([np.arange(d[k]) for k in perm], [st[k] for k in perm])


_register('SwapAxis', SwapAxisParam,
          _one_input(lambda p, d: tuple(d[k] for k in _swap_perm(p, d))), _swap_plan,
          'Exchange two axes.\n\n(2, 3, 4) with dim1=0, dim2=2 -> (4, 3, 2).\n\nSource: MXNet '
          '1.x ``SwapAxis`` (alias ``swapaxes``).\n', aliases=('swapaxes',))
