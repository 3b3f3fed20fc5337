"""Slicing ops: ``slice`` (alias ``crop``), ``slice_like`` and ``_split_v2`` (``split_v2``).

Every output element is read from one input element, so these ops run on
the axis-map gather of :mod:`ffnumba.ops.tensor._axismap` (CPU ``@njit``
loop, ``@cuda.jit`` twin); the backward scatters the head gradient back and
leaves 0 outside the slice.

Shapes
------
==========  ========================================  ==================================
op          inputs, params                            output(s)
==========  ========================================  ==================================
slice       ``data``, begin, end, step (None: default)  ``len(range(b, e, s))`` per axis
slice_like  ``data``, ``shape_like``, axes             ``data`` cut to ``shape_like``
_split_v2   ``data``, indices or sections, axis        one part per section
==========  ========================================  ==================================

``slice``: ``begin``/``end``/``step`` have one entry per leading axis (later
axes are kept whole); ``None`` means the default (0 / size for a positive
step, size-1 / "before 0" for a negative one); negatives count from the
end; out-of-range values are clipped like Python slices, and an empty
range gives a zero-size axis (MXNet 1.9.1: ``begin=3, end=1`` -> size 0). A
step of 0 (ParamError) or more entries than axes (ShapeError) are refused,
as in MXNet 1.9.1.

Source: MXNet 1.x ``slice``, ``slice_like`` and ``split_v2`` documentation,
checked against MXNet 1.9.1.
"""
import ast
import functools

import numpy as np

from ...base import ParamError, ShapeError
from ..params import Field, Params, Shape
from ..registry import OpDef, register_op
from ._axismap import (Plan, cstrides, first_type, gather_backward, gather_forward,
                       make_gather_op, zero)
from .shape import _axis

__all__ = ['OptShape', 'SliceParam', 'SliceLikeParam', 'SplitV2Param']


class OptShape(Field):
    """A tuple field whose entries are ints or ``None`` (``begin=(0, None)``)."""

    def __init__(self, default=(), doc=''):
        super().__init__(Shape, default, doc)

    def rule(self):
        return 'a tuple of ints or None'

    def parse(self, op_name, value):
        v = value
        if isinstance(v, str):
            try:
                v = ast.literal_eval(v.strip()) if v.strip() else ()
            except (ValueError, SyntaxError):
                v = 'bad'
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            v = (int(v),)
        if v is None:
            v = ()
        if not isinstance(v, (tuple, list)) or any(
                x is not None and (isinstance(x, bool) or not isinstance(x, (int, np.integer)))
                for x in v):
            raise ParamError('%s: `%s` must be %s. Received: %s=%r'
                             % (op_name, self.name, self.rule(), self.name, value))
        return tuple(None if x is None else int(x) for x in v)


# ----------------------------------------------------------------------- slice
class SliceParam(Params):
    """Parameters of :func:`slice`."""

    begin = OptShape(doc='First index per axis (None: default; negative counts from the end).')
    end = OptShape(doc='Stop index per axis, exclusive (None: default).')
    step = OptShape((), 'Step per axis (None or omitted: 1; negative walks backwards).')

    def validate(self):
        if len(self.begin) != len(self.end):
            raise ParamError('slice: `begin` and `end` must have the same length. Received: '
                             'begin=%s, end=%s' % (self.begin, self.end))
        if len(self.step) and len(self.step) != len(self.begin):
            raise ParamError('slice: `step` must be empty or as long as `begin`. Received: '
                             'begin=%s, step=%s' % (self.begin, self.step))
        if any(s == 0 for s in self.step):
            raise ParamError('slice: `step` entries cannot be 0. Received: step=%s'
                             % (self.step,))


def slice_ranges(p, shape, op='slice'):
    """``range`` objects of ``slice`` params ``p`` on ``shape`` (one per axis)."""
    shape = tuple(shape)
    if len(p.begin) > len(shape):
        raise ShapeError('%s: begin=%s has %d entries but the input shape %s has %d axes'
                         % (op, p.begin, len(p.begin), shape, len(shape)))
    out = []
    for d, n in enumerate(shape):
        if d >= len(p.begin):
            out.append(range(n))
            continue
        s = p.step[d] if len(p.step) and p.step[d] is not None else 1
        out.append(range(n)[slice(p.begin[d], p.end[d], s)])
    return out


def _slice_plan(p, shapes):
    rs = slice_ranges(p, shapes[0])
    st = cstrides(shapes[0])
    return Plan([np.arange(r.start, r.stop, r.step) for r in rs], st)


def _slice_infer(p, in_shapes, aux_shapes, out_shapes):
    d = in_shapes[0]
    out = None if d is None else tuple(len(r) for r in slice_ranges(p, d))
    return list(in_shapes), [out], list(aux_shapes)


_SLICE_F, _SLICE_B = make_gather_op(_slice_plan)

register_op(OpDef(
    name='slice',
    backward_reads=(),
    aliases=('crop',),
    arguments=['data'],
    infer_shape=_slice_infer,
    forward=_SLICE_F,
    backward=_SLICE_B,
    params=SliceParam,
    doc='Slice a region of an array: ``data[b0:e0:s0, b1:e1:s1, ...]``.\n\n'
        'One begin/end/step entry per leading axis; None takes the default, negatives count '
        'from the end, out-of-range values clip as in Python (an empty range gives size 0). '
        '(4, 5): begin=(None, 1), '
        'end=(None, None), step=(-1, 2) -> rows reversed, columns 1 and 3. The gradient '
        'outside the region is 0.\n\nRaises ParamError for mismatched lengths or a 0 step, '
        'ShapeError for more entries than axes.\n\nSource: MXNet 1.x ``slice``.\n',
    input_docs={'data': 'Input array.'},
))


# ------------------------------------------------------------------ slice_like
class SliceLikeParam(Params):
    """Parameters of :func:`slice_like`."""

    axes = Field(Shape, (), 'Axes to cut (negative counts from the end); () cuts every axis.')


def _like_sizes(p, d, like):
    d, like = tuple(d), tuple(like)
    if not len(p.axes):
        if len(like) != len(d):
            raise ShapeError('slice_like: `shape_like` %s must have as many axes as `data` %s '
                             'when axes=()' % (like, d))
        axes = range(len(d))
    else:
        axes = [_axis(a, len(d), 'axes', 'slice_like', d) for a in p.axes]
        for a, orig in zip(axes, p.axes):
            _axis(orig, len(like), 'axes', 'slice_like', like)
    out = list(d)
    for a in axes:
        if like[a] > d[a]:
            raise ShapeError('slice_like: axis %d of `shape_like` %s is longer than that of '
                             '`data` %s' % (a, like, d))
        out[a] = like[a]
    return tuple(out)


def _slice_like_infer(p, in_shapes, aux_shapes, out_shapes):
    d, like = in_shapes
    out = None if d is None or like is None else _like_sizes(p, d, like)
    return list(in_shapes), [out], list(aux_shapes)


def _slice_like_plan(p, shapes):
    out = _like_sizes(p, shapes[0], shapes[1])
    return Plan([np.arange(n) for n in out], cstrides(shapes[0]))


_LIKE_F, _LIKE_B = make_gather_op(_slice_like_plan)

register_op(OpDef(
    name='slice_like',
    backward_reads=(),
    arguments=['data', 'shape_like'],
    infer_shape=_slice_like_infer,
    infer_type=first_type,
    forward=_LIKE_F,
    backward=_LIKE_B,
    params=SliceLikeParam,
    doc='Cut `data` to the shape of `shape_like` on `axes` (from index 0).\n\n'
        '(4, 5, 6) like (2, 3, 4) with axes=(0, -1) -> (2, 5, 4). `shape_like` only gives '
        'a shape: its gradient is 0.\n\nSource: MXNet 1.x ``slice_like``.\n',
    input_docs={'data': 'Input array.', 'shape_like': 'Array whose shape is used.'},
))


# ------------------------------------------------------------------- split_v2
class _IntOrTuple(Field):
    """split_v2's ``indices_or_sections``: an int or a tuple of ints, kept as given."""

    def __init__(self, doc):
        super().__init__(Shape, None, doc)

    def rule(self):
        return 'an int or a tuple of ints'

    def parse(self, op_name, value):
        if isinstance(value, str):
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                raise ParamError('%s: `indices_or_sections` must be an int or a tuple of ints. '
                                 'Received: %r' % (op_name, value)) from None
        return value


class SplitV2Param(Params):
    """Parameters of :func:`_split_v2` (``split_v2``).

    ``split_v2(x, indices_or_sections)`` is MXNet's Python wrapper of the
    ``_split_v2`` operator: :meth:`validate` turns ``indices_or_sections`` into
    the operator's ``indices`` (with a leading 0) or ``sections`` and stores
    those in the JSON attrs, as MXNet's wrapper does.
    """

    indices_or_sections = _IntOrTuple('split_v2 convenience: an int k (k equal sections) '
                                      'or a tuple of split points.')
    axis = Field(int, 1, 'Axis to split (negative counts from the end); split_v2 passes 0 '
                         'by default.')
    squeeze_axis = Field(bool, False, 'Drop the split axis (each part must have size 1).')
    indices = Field(Shape, (), 'Start index of each part (the first is 0).')
    sections = Field(int, 0, 'Number of equal parts (0: use indices).', low=0)

    def validate(self):
        ios = self._values['indices_or_sections']
        if ios is None:
            if not self.sections and not len(self.indices):
                raise ParamError('_split_v2: give `indices_or_sections` (or `indices` / '
                                 '`sections`)')
            return
        if isinstance(ios, (int, np.integer)) and not isinstance(ios, bool):
            if ios < 1:
                raise ParamError('split_v2: `indices_or_sections` as an int must be >= 1. '
                                 'Received: %r' % ios)
            self._values.update(sections=int(ios), indices=Shape())
        elif isinstance(ios, (tuple, list)) and all(
                isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in ios):
            self._values.update(sections=0, indices=Shape((0,) + tuple(int(i) for i in ios)))
        else:
            raise ParamError('split_v2: `indices_or_sections` must be an int or a tuple of '
                             'ints. Received: %r' % (ios,))
        self._values['indices_or_sections'] = None
        raw = self._raw
        raw.pop('indices_or_sections', None)
        raw.update(indices=str(list(self.indices)), sections=str(self.sections))
        if 'axis' not in raw:      # split_v2's default axis is 0 (the op's own is 1)
            self._values['axis'] = 0
            raw['axis'] = '0'
        raw.setdefault('squeeze_axis', str(self.squeeze_axis))


def _split_bounds(p, shape):
    shape = tuple(shape)
    a = _axis(p.axis, len(shape), 'axis', '_split_v2', shape)
    n = shape[a]
    if p.sections:
        if n % p.sections:
            raise ShapeError('split_v2: cannot split axis %d of input shape %s into %d equal '
                             'sections' % (a, shape, p.sections))
        starts = [i * (n // p.sections) for i in range(p.sections)]
    else:
        starts = list(p.indices)
    ends = starts[1:] + [n]
    for b, e in zip(starts, ends):
        if not 0 <= b <= e <= n:
            raise ShapeError('split_v2: indices %s must be increasing and within axis %d of '
                             'size %d (input shape %s)' % (tuple(starts), a, n, shape))
    if p.squeeze_axis and any(e - b != 1 for b, e in zip(starts, ends)):
        raise ShapeError('split_v2: squeeze_axis=True needs parts of size 1 along axis %d; '
                         'input shape %s, indices %s' % (a, shape, tuple(starts)))
    return a, list(zip(starts, ends))


def _n_parts(p):
    return p.sections if p.sections else len(p.indices)


def _split_outputs(p):
    return ['output%d' % i for i in range(_n_parts(p))]


def _split_infer(p, in_shapes, aux_shapes, out_shapes):
    d = in_shapes[0]
    if d is None:
        return list(in_shapes), [None] * _n_parts(p), list(aux_shapes)
    a, parts = _split_bounds(p, d)
    outs = []
    for b, e in parts:
        outs.append(tuple(d[:a]) + (() if p.squeeze_axis else (e - b,)) + tuple(d[a + 1:]))
    return list(in_shapes), outs, list(aux_shapes)


@functools.lru_cache(maxsize=256)
def _part_plans(p, shape):
    """One gather plan per output part (cached per params and input shape)."""
    a, parts = _split_bounds(p, shape)
    st = cstrides(shape)
    plans = []
    for b, e in parts:
        maps = [np.arange(n) for n in shape]
        maps[a] = np.arange(b, e)
        plans.append(Plan(maps, st))
    return plans


def _split_forward(ctx, p, inputs, outputs, aux):
    for plan, out in zip(_part_plans(p, tuple(int(d) for d in inputs[0].shape)), outputs):
        gather_forward(plan, inputs[0], out)


def _split_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    if req[0] == 'write':
        zero(in_grads[0])
    for plan, og in zip(_part_plans(p, tuple(int(d) for d in inputs[0].shape)), out_grads):
        if og is not None:
            gather_backward(plan, og, in_grads[0], 'add')


register_op(OpDef(
    name='_split_v2',
    backward_reads=(),
    aliases=('split_v2',),
    arguments=['data'],
    outputs=_split_outputs,
    infer_shape=_split_infer,
    forward={'cpu': _split_forward, 'gpu': _split_forward},
    backward={'cpu': _split_backward, 'gpu': _split_backward},
    params=SplitV2Param,
    doc='Split an array along `axis` at given indices or into equal sections.\n\n'
        '``split_v2(x, 3)``: three equal parts; ``split_v2(x, (1, 3), axis=1)``: parts '
        '[0:1], [1:3], [3:] of axis 1 (stored in JSON as ``_split_v2`` with '
        'indices=[0, 1, 3], sections=0, as MXNet does).\n\nSource: MXNet 1.x '
        '``split_v2``.\n',
    input_docs={'data': 'Input array.'},
))
