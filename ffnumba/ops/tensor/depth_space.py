"""``depth_to_space`` and ``space_to_depth``: move ``block_size**2`` channels into
``block_size x block_size`` spatial blocks and back (MXNet names, NCHW layout).

Math (``b`` = ``block_size``, ``C' = C / b**2``)
------------------------------------------------
::

    depth_to_space:  y[n, c, h*b + i, w*b + j] = x[n, (i*b + j)*C' + c, h, w]
    space_to_depth:  y[n, (i*b + j)*C + c, h, w] = x[n, c, h*b + i, w*b + j]

Each is a permutation of the elements, so the gradient is the inverse
permutation of the head gradient (the other op). Both run on the axis-map
gather of :mod:`ffnumba.ops.tensor._axismap` (CPU ``@njit`` loop,
``@cuda.jit`` twin): the source offset is a sum of one term per output axis.

Shapes
------
===============  ======================  =================================
op               data                    output
===============  ======================  =================================
depth_to_space   ``(N, C, H, W)``        ``(N, C / b**2, H*b, W*b)``
space_to_depth   ``(N, C, H, W)``        ``(N, C*b**2, H / b, W / b)``
===============  ======================  =================================

Errors: ``block_size < 1`` is a ParamError; data not 4-D, a zero dimension, or
``C`` (depth_to_space) / ``H``, ``W`` (space_to_depth) not divisible is a
ShapeError, as MXNet checks.

Source: MXNet 1.9.1 ``depth_to_space`` / ``space_to_depth`` documentation
(``src/operator/tensor/matrix_op.cc``).
"""
import functools

import numpy as np

from ...base import ShapeError
from ..params import Field, Params
from ..registry import OpDef, register_op
from ._axismap import Plan, cstrides, gather_backward, gather_forward

__all__ = ['DepthSpaceParam']


class DepthSpaceParam(Params):
    """Parameters of depth_to_space and space_to_depth."""

    block_size = Field(int, doc='Side of the spatial blocks (>= 1).', low=1)


def _check(name, d, b):
    if len(d) != 4:
        raise ShapeError('%s: data must be 4-D (N, C, H, W). Received: data shape %s'
                         % (name, tuple(d)))
    if any(x == 0 for x in d):
        raise ShapeError('%s: data has a zero dimension. Received: data shape %s'
                         % (name, tuple(d)))
    n, c, h, w = d
    if name == 'depth_to_space' and c % (b * b):
        raise ShapeError('depth_to_space: the channels (%d) must be divisible by '
                         'block_size**2 = %d. Received: data shape %s' % (c, b * b, tuple(d)))
    if name == 'space_to_depth' and (h % b or w % b):
        raise ShapeError('space_to_depth: height and width must be divisible by block_size '
                         '= %d. Received: data shape %s' % (b, tuple(d)))


def _out_shape(name, d, b):
    n, c, h, w = d
    if name == 'depth_to_space':
        return (n, c // (b * b), h * b, w * b)
    return (n, c * b * b, h // b, w // b)


@functools.lru_cache(maxsize=64)
def _plan(name, d, b):
    """The gather reading the output of op ``name`` from data of shape ``d``."""
    n, c, h, w = d
    sn, sc, sh, sw = cstrides(d)
    o = _out_shape(name, d, b)
    k, y, x = np.arange(o[1]), np.arange(o[2]), np.arange(o[3])
    if name == 'depth_to_space':
        cp = c // (b * b)        # y[n, k, Y, X] = x[n, ((Y%b)*b + X%b)*C' + k, Y//b, X//b]
        maps = [np.arange(n) * sn, k * sc, (y % b) * b * cp * sc + (y // b) * sh,
                (x % b) * cp * sc + (x // b) * sw]
    else:
        blk, ch = k // c, k % c  # y[n, k, Y, X] = x[n, k%C, Y*b + (k//C)//b, X*b + (k//C)%b]
        maps = [np.arange(n) * sn, ch * sc + (blk // b) * sh + (blk % b) * sw,
                y * b * sh, x * b * sw]
    return Plan(maps, [1, 1, 1, 1])


def _make(name, inverse):
    def infer_shape(p, in_shapes, aux_shapes, out_shapes):
        ins = list(in_shapes)
        d = ins[0]
        if d is None:
            return ins, [None], []
        _check(name, d, p.block_size)
        return ins, [_out_shape(name, d, p.block_size)], []

    def forward(ctx, p, inputs, outputs, aux):
        gather_forward(_plan(name, tuple(inputs[0].shape), p.block_size), inputs[0], outputs[0])

    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        gather_backward(_plan(name, tuple(inputs[0].shape), p.block_size), out_grads[0],
                        in_grads[0], req[0])

    register_op(OpDef(
        name=name, arguments=['data'], backward_reads=(), infer_shape=infer_shape,
        forward={'cpu': forward, 'gpu': forward}, backward={'cpu': backward, 'gpu': backward},
        params=DepthSpaceParam,
        doc='%s (the inverse of %s); see the module docs for the formula.\n\n%s'
            % (name, inverse, __doc__),
        input_docs={'data': '4-D array (N, C, H, W).'}))


_make('depth_to_space', 'space_to_depth')
_make('space_to_depth', 'depth_to_space')
