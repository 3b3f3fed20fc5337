"""Spatial border ops: ``Pad`` (alias ``pad``) and MXNet's legacy ``Crop``.

Both read every output element from at most one input element, so they run
on the axis-map gather of :mod:`ffnumba.ops.tensor._axismap` (CPU ``@njit``
loop, ``@cuda.jit`` twin); the backward scatters the head gradient back
(edge and reflect padding add several border gradients into one input
element; a constant border gets no gradient).

Pad maps output index ``i`` of an axis padded by ``(before, after)`` to
``j = i - before`` and then, outside ``[0, n)``:

========  ========================================================
mode      source index
========  ========================================================
constant  none: the element is ``constant_value``
edge      ``clip(j, 0, n - 1)`` (numpy ``pad(mode='edge')``)
reflect   ``-j`` before, ``2 (n - 1) - j`` after (numpy ``'reflect'``)
========  ========================================================

Shapes
------
====  ======================================  ======================================
op    inputs, params                          output
====  ======================================  ======================================
Pad   ``data`` 4-D or 5-D, pad_width (2*ndim)  each axis ``before + n + after``
Crop  ``arg0`` (N, C, H, W) [, ``arg1``]       (N, C, h, w): h_w, or arg1's (H, W)
====  ======================================  ======================================

As in MXNet 1.9.1, Pad accepts only 4-D and 5-D inputs, no padding on the
first two axes, and reflect padding smaller than the axis; Crop's offset is
``offset`` or, with ``center_crop``, ``((H - h) // 2, (W - w) // 2)``.

Source: MXNet 1.x ``Pad`` and ``Crop`` documentation, checked against
MXNet 1.9.1.
"""
import numpy as np

from ...base import ParamError, ShapeError
from ..params import Field, Params, Shape
from ..registry import OpDef, register_op
from ._axismap import Plan, cstrides, first_type, make_gather_op

__all__ = ['PadParam', 'CropParam']


# ------------------------------------------------------------------------- Pad
class PadParam(Params):
    """Parameters of :func:`Pad`."""

    mode = Field(str, doc='Padding: constant, edge or reflect.',
                 choices=('constant', 'edge', 'reflect'))
    pad_width = Field(Shape, doc='(before, after) per axis, flattened: 2 * ndim entries; the '
                                 'first four must be 0.', low=0)
    constant_value = Field(float, 0.0, 'Value of the border in constant mode.')


def _pad_check(p, d):
    d = tuple(d)
    if len(d) not in (4, 5):
        raise ShapeError('Pad: only 4-D or 5-D inputs are supported (as in MXNet). Received: '
                         'input shape %s' % (d,))
    if len(p.pad_width) != 2 * len(d):
        raise ShapeError('Pad: pad_width=%s must have 2 * ndim = %d entries for input shape %s'
                         % (tuple(p.pad_width), 2 * len(d), d))
    if any(p.pad_width[:4]):
        raise ShapeError('Pad: padding on the first two axes must be 0 (as in MXNet). Received: '
                         'pad_width=%s' % (tuple(p.pad_width),))
    for a, n in enumerate(d):
        b, e = p.pad_width[2 * a], p.pad_width[2 * a + 1]
        if p.mode == 'reflect' and (b >= n or e >= n) and (b or e):
            raise ShapeError('Pad: reflect padding (%d, %d) of axis %d must be smaller than its '
                             'size %d (input shape %s)' % (b, e, a, n, d))
        if p.mode == 'edge' and n == 0 and (b or e):
            raise ShapeError('Pad: edge padding of the empty axis %d (input shape %s) has no '
                             'edge to copy' % (a, d))
    return tuple(n + p.pad_width[2 * a] + p.pad_width[2 * a + 1] for a, n in enumerate(d))


def _pad_map(mode, n, before, after):
    j = np.arange(-before, n + after)
    if mode == 'constant':
        return np.where((j >= 0) & (j < n), j, -1)
    if mode == 'edge':
        return np.clip(j, 0, n - 1)
    j = np.where(j < 0, -j, j)
    return np.where(j >= n, 2 * (n - 1) - j, j)


def _pad_plan(p, shapes):
    d = tuple(shapes[0])
    _pad_check(p, d)
    return Plan([_pad_map(p.mode, n, p.pad_width[2 * a], p.pad_width[2 * a + 1])
                 for a, n in enumerate(d)], cstrides(d))


def _pad_infer(p, in_shapes, aux_shapes, out_shapes):
    d = in_shapes[0]
    return list(in_shapes), [None if d is None else _pad_check(p, d)], list(aux_shapes)


_PAD_F, _PAD_B = make_gather_op(_pad_plan, fill_of=lambda p: p.constant_value)

register_op(OpDef(
    name='Pad',
    backward_reads=(),   # dx gathers dy (reflect/edge add the mirrored parts)
    aliases=('pad',),
    arguments=['data'],
    infer_shape=_pad_infer,
    forward=_PAD_F,
    backward=_PAD_B,
    params=PadParam,
    doc='Pad a 4-D or 5-D array on its spatial axes.\n\nmode=constant fills '
        '`constant_value`; edge repeats the border element; reflect mirrors without '
        'repeating the border (numpy.pad modes). (2, 1, 5, 6) with pad_width=(0, 0, 0, 0, '
        '2, 1, 1, 2) -> (2, 1, 8, 9).\n\nRaises ShapeError for other ranks, padding on '
        'the first two axes, or reflect padding not smaller than the axis.\n\nSource: '
        'MXNet 1.x ``Pad``.\n',
    input_docs={'data': 'Input array, 4-D or 5-D.'},
))


# ------------------------------------------------------------------------ Crop
class CropParam(Params):
    """Parameters of :func:`Crop`."""

    num_args = Field(int, doc='Number of inputs: 1 (crop to h_w) or 2 (crop like arg1).',
                     low=1, high=2)
    offset = Field(Shape, (0, 0), 'Crop offset (y, x).', low=0)
    h_w = Field(Shape, (0, 0), 'Crop height and width (h, w) (num_args=1).', low=0)
    center_crop = Field(bool, False, 'Centre the crop instead of using `offset`.')

    def validate(self):
        if len(self.offset) != 2 or len(self.h_w) != 2:
            raise ParamError('Crop: `offset` and `h_w` must have 2 entries. Received: '
                             'offset=%s, h_w=%s' % (tuple(self.offset), tuple(self.h_w)))


def _crop_box(p, shapes):
    d = tuple(shapes[0])
    if len(d) != 4:
        raise ShapeError('Crop: input must be 4-D (N, C, H, W). Received: arg0 shape %s' % (d,))
    if p.num_args == 2:
        like = tuple(shapes[1])
        if len(like) < 2:
            raise ShapeError('Crop: arg1 must have at least 2 axes. Received: arg1 shape %s'
                             % (like,))
        h, w = like[-2], like[-1]
    else:
        h, w = p.h_w
    if h > d[2] or w > d[3] or (p.num_args == 1 and (h == 0 or w == 0)):
        raise ShapeError('Crop: crop size (%d, %d) must be positive and fit the input (H, W) = '
                         '(%d, %d) (input shape %s)' % (h, w, d[2], d[3], d))
    y, x = ((d[2] - h) // 2, (d[3] - w) // 2) if p.center_crop else tuple(p.offset)
    if y + h > d[2] or x + w > d[3]:
        raise ShapeError('Crop: offset (%d, %d) + size (%d, %d) exceeds the input (H, W) = '
                         '(%d, %d) (input shape %s)' % (y, x, h, w, d[2], d[3], d))
    return d, y, x, h, w


def _crop_infer(p, in_shapes, aux_shapes, out_shapes):
    if any(s is None for s in in_shapes):
        return list(in_shapes), [None], list(aux_shapes)
    d, _, _, h, w = _crop_box(p, in_shapes)
    return list(in_shapes), [(d[0], d[1], h, w)], list(aux_shapes)


def _crop_plan(p, shapes):
    d, y, x, h, w = _crop_box(p, shapes)
    return Plan([np.arange(d[0]), np.arange(d[1]), np.arange(y, y + h), np.arange(x, x + w)],
                cstrides(d))


_CROP_F, _CROP_B = make_gather_op(_crop_plan)

register_op(OpDef(
    name='Crop',
    backward_reads=(),
    arguments=lambda p: ['arg%d' % i for i in range(p.num_args)],
    infer_shape=_crop_infer,
    infer_type=first_type,
    forward=_CROP_F,
    backward=_CROP_B,
    params=CropParam,
    variadic='num_args',
    doc='Crop the spatial axes of an (N, C, H, W) array.\n\nWith num_args=1 the crop is '
        '`h_w`; with 2 it is the last two axes of arg1 (arg1 gets a zero gradient). The '
        'crop starts at `offset` (y, x), or is centred with center_crop=True.\n\n'
        'Source: MXNet 1.x legacy ``Crop``.\n',
    input_docs={'data': 'arg0: the array to crop; arg1 (optional): the array whose (H, W) '
                        'gives the crop size.'},
))
