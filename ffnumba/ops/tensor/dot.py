"""Matrix products: ``dot`` and ``batch_dot``.

Math
----
``dot`` contracts one axis of ``lhs`` with one axis of ``rhs``:

* ``lhs`` is read as a matrix ``(prod(lhs.shape[:-1]), lhs.shape[-1])``, or with
  ``transpose_a`` as the transpose of ``(lhs.shape[0], prod(lhs.shape[1:]))``
  (so the contracted axis is ``lhs``'s first);
* ``rhs`` is read as ``(rhs.shape[0], prod(rhs.shape[1:]))``, or with
  ``transpose_b`` as the transpose of ``(prod(rhs.shape[:-1]), rhs.shape[-1])``
  (the contracted axis is ``rhs``'s last);
* ``out = A @ B`` reshaped to the free axes of ``lhs`` followed by those of
  ``rhs``. With A = op(lhs), B = op(rhs): ``dA = dOut @ B^T``, ``dB = A^T @ dOut``.

``batch_dot`` does one matrix product per leading index:
``out[i] = op(lhs[i]) @ op(rhs[i])`` where ``op`` transposes the last two axes
when the flag is set.

Shapes
------
=====================================  =============================
dot (2, 3) x (3, 4)                    (2, 4)
dot (2, 3, 4) x (4, 5, 6)              (2, 3, 5, 6)
dot (4, 3, 2) x (4, 5, 6), transpose_a (3, 2, 5, 6)
dot (2, 3, 4) x (6, 5, 4), transpose_b (2, 3, 6, 5)
dot (3,) x (3,)                        (1,)
batch_dot (B, n, k) x (B, k, m)        (B, n, m); leading axes may be several
=====================================  =============================

The CPU products run through BLAS (``np.dot`` inside ``@njit``) on 2-D views; the GPU
kernel computes one output element per thread, reading transposes through strides.

Source: MXNet 1.x ``dot`` / ``batch_dot`` documentation, checked against
MXNet 1.9.1.
"""
import numpy as np
from numba import njit

from ...base import ShapeError
from ..params import Field, Params
from ..registry import OpDef, register_op
from .._float_compute import float64_compute
from .. import gemm_cuda
from ..templates import JIT, _down, _up

__all__ = ['DotParam', 'dot_shape', 'batch_dot_shape']


class DotParam(Params):
    """Parameters of :func:`dot` and :func:`batch_dot`."""

    transpose_a = Field(bool, False, 'Contract over the first axis of lhs (transpose it).')
    transpose_b = Field(bool, False, 'Contract over the last axis of rhs (transpose it).')
    _ignored = ('forward_stype',)


@njit(**JIT)
def _mm(x, y, out, add):
    if add:
        out += np.dot(x, y)
    else:
        np.dot(x, y, out)


@njit(**JIT)
def _gemm(x, tx, y, ty, out, add):
    """``out (+)= op(x) @ op(y)`` for 2-D arrays; ``op`` transposes when its flag is set."""
    if tx:
        if ty:
            _mm(x.T, y.T, out, add)
        else:
            _mm(x.T, y, out, add)
    else:
        if ty:
            _mm(x, y.T, out, add)
        else:
            _mm(x, y, out, add)


@njit(**JIT)
def _batch_gemm(x, tx, y, ty, out, add):
    for i in range(x.shape[0]):
        _gemm(x[i], tx, y[i], ty, out[i], add)


def _prod(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _dot_split(lshape, rshape, ta, tb):
    """(m, k) of lhs as stored, (k, n) of rhs as stored, and the free axes."""
    if ta:
        a2, lfree, ka = (lshape[0], _prod(lshape[1:])), tuple(lshape[1:]), lshape[0]
    else:
        a2, lfree, ka = (_prod(lshape[:-1]), lshape[-1]), tuple(lshape[:-1]), lshape[-1]
    if tb:
        b2, rfree, kb = (_prod(rshape[:-1]), rshape[-1]), tuple(rshape[:-1]), rshape[-1]
    else:
        b2, rfree, kb = (rshape[0], _prod(rshape[1:])), tuple(rshape[1:]), rshape[0]
    return a2, b2, lfree, rfree, ka, kb


def dot_shape(lshape, rshape, ta, tb):
    """Output shape of ``dot``.

    Raises
    ------
    ShapeError
        When the contracted axes differ in length or an input is 0-D.
    """
    if len(lshape) == 0 or len(rshape) == 0:
        raise ShapeError('dot: inputs must have at least 1 dimension. Received: lhs %s, rhs %s'
                         % (tuple(lshape), tuple(rshape)))
    _, _, lfree, rfree, ka, kb = _dot_split(lshape, rshape, ta, tb)
    if ka != kb:
        raise ShapeError('dot: shape mismatch, lhs %s x rhs %s (transpose_a=%s, transpose_b=%s) '
                         'contracts an axis of %d with one of %d'
                         % (tuple(lshape), tuple(rshape), ta, tb, ka, kb))
    return (lfree + rfree) or (1,)


def _dot_infer(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    if ins[0] is None or ins[1] is None:
        return ins, [None], list(aux_shapes)
    return ins, [dot_shape(ins[0], ins[1], p.transpose_a, p.transpose_b)], list(aux_shapes)


def _dot_views(p, a, b, out):
    a2, b2, lfree, rfree, _, _ = _dot_split(tuple(a.shape), tuple(b.shape), p.transpose_a,
                                            p.transpose_b)
    return a.reshape(a2), b.reshape(b2), out.reshape(_prod(lfree), _prod(rfree))


def _dot_forward(ctx, p, inputs, outputs, aux):
    a, b, c = _dot_views(p, _up(inputs[0]), _up(inputs[1]), _up(outputs[0]))
    _gemm(a, p.transpose_a, b, p.transpose_b, c, False)
    _down(outputs[0], c)


def _cpu_backward(gemm, views, p, out_grads, inputs, in_grads, req):
    """float16 arrays run in float32 twins (BLAS has no float16)."""
    grads = [None if g is None else _up(g, r == 'add') for g, r in zip(in_grads, req)]
    a, b, dc = views(_up(inputs[0]), _up(inputs[1]), _up(out_grads[0]))
    _backward_with(gemm, p, a, b, dc, grads, req)
    for g, g32 in zip(in_grads, grads):
        if g is not None:
            _down(g, g32)


def _backward_with(gemm, p, a, b, dc, in_grads, req):
    """Gradients of ``C = op(A) @ op(B)`` with a gemm ``(x, tx, y, ty, out, add)``."""
    ta, tb = p.transpose_a, p.transpose_b
    if req[0] != 'null':
        da = in_grads[0].reshape(a.shape)
        if ta:      # d(lhs) = op(B) @ dC^T
            gemm(b, tb, dc, True, da, req[0] == 'add')
        else:       # d(lhs) = dC @ op(B)^T
            gemm(dc, False, b, not tb, da, req[0] == 'add')
    if req[1] != 'null':
        db = in_grads[1].reshape(b.shape)
        if tb:      # d(rhs) = dC^T @ op(A)
            gemm(dc, True, a, ta, db, req[1] == 'add')
        else:       # d(rhs) = op(A)^T @ dC
            gemm(a, not ta, dc, False, db, req[1] == 'add')


def _dot_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    _cpu_backward(_gemm, lambda a, b, dc: _dot_views(p, a, b, dc), p, out_grads, inputs,
                  in_grads, req)


def batch_dot_shape(lshape, rshape, ta, tb):
    """Output shape of ``batch_dot``.

    Raises
    ------
    ShapeError
        For inputs of fewer than 3 axes, different ranks or leading axes, or
        contracted axes of different lengths.
    """
    if len(lshape) < 3 or len(lshape) != len(rshape):
        raise ShapeError('batch_dot: lhs and rhs must have the same rank >= 3. Received: '
                         'lhs %s, rhs %s' % (tuple(lshape), tuple(rshape)))
    if tuple(lshape[:-2]) != tuple(rshape[:-2]):
        raise ShapeError('batch_dot: the leading (batch) axes must be equal. Received: '
                         'lhs %s, rhs %s' % (tuple(lshape), tuple(rshape)))
    n, ka = (lshape[-1], lshape[-2]) if ta else (lshape[-2], lshape[-1])
    m, kb = (rshape[-2], rshape[-1]) if tb else (rshape[-1], rshape[-2])
    if ka != kb:
        raise ShapeError('batch_dot: shape mismatch, lhs %s x rhs %s (transpose_a=%s, '
                         'transpose_b=%s) contracts an axis of %d with one of %d'
                         % (tuple(lshape), tuple(rshape), ta, tb, ka, kb))
    return tuple(lshape[:-2]) + (n, m)


def _bdot_infer(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    if ins[0] is None or ins[1] is None:
        return ins, [None], list(aux_shapes)
    return ins, [batch_dot_shape(ins[0], ins[1], p.transpose_a, p.transpose_b)], list(aux_shapes)


def _as3(x):
    return x.reshape((-1,) + tuple(x.shape)[-2:])


def _bdot_forward(ctx, p, inputs, outputs, aux):
    c = _up(outputs[0])
    _batch_gemm(_as3(_up(inputs[0])), p.transpose_a, _as3(_up(inputs[1])), p.transpose_b,
                _as3(c), False)
    _down(outputs[0], c)


def _bdot_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    _cpu_backward(_batch_gemm, lambda a, b, dc: (_as3(a), _as3(b), _as3(dc)), p, out_grads,
                  inputs, in_grads, req)


# ------------------------------------------------------------------------- GPU
def _gemm_gpu(x, tx, y, ty, out, add):
    """GPU ``out (+)= op(x) @ op(y)`` for matrices or stacks ``(B, r, c)`` (C order).

    The tiled shared-memory GEMM of :mod:`ffnumba.ops.gemm_cuda`.
    """
    gemm_cuda.gemm(x, y, out, 1.0, 1.0 if add else 0.0, tx, ty)


def _dot_forward_gpu(ctx, p, inputs, outputs, aux):
    a, b, c = _dot_views(p, inputs[0], inputs[1], outputs[0])
    _gemm_gpu(a, p.transpose_a, b, p.transpose_b, c, False)


def _dot_backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    a, b, dc = _dot_views(p, inputs[0], inputs[1], out_grads[0])
    _backward_with(_gemm_gpu, p, a, b, dc, in_grads, req)


def _bdot_forward_gpu(ctx, p, inputs, outputs, aux):
    _gemm_gpu(_as3(inputs[0]), p.transpose_a, _as3(inputs[1]), p.transpose_b,
              _as3(outputs[0]), False)


def _bdot_backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    _backward_with(_gemm_gpu, p, _as3(inputs[0]), _as3(inputs[1]), _as3(out_grads[0]),
                   in_grads, req)


# int/bool operands are multiplied in float64 and cast back (ops._float_compute): the
# BLAS kernels are typed for floats only
_DOT_FWD, _DOT_BWD = float64_compute({'cpu': _dot_forward, 'gpu': _dot_forward_gpu},
                                     {'cpu': _dot_backward, 'gpu': _dot_backward_gpu})
_BDOT_FWD, _BDOT_BWD = float64_compute({'cpu': _bdot_forward, 'gpu': _bdot_forward_gpu},
                                       {'cpu': _bdot_backward, 'gpu': _bdot_backward_gpu})

register_op(OpDef(
    name='dot',
    backward_reads=('lhs', 'rhs'),
    arguments=['lhs', 'rhs'],
    infer_shape=_dot_infer,
    forward=_DOT_FWD,
    backward=_DOT_BWD,
    params=DotParam,
    doc='Dot product of two arrays (matrix product over one axis).\n\n'
        'Contracts the last axis of lhs (its first with transpose_a) with the first axis '
        'of rhs (its last with transpose_b); the output has the free axes of lhs, then '
        'those of rhs: (2, 3) x (3, 4) -> (2, 4); (2, 3, 4) x (4, 5, 6) -> (2, 3, 5, 6); '
        '(3,) x (3,) -> (1,).\n\nSource: MXNet 1.x ``dot`` documentation.\n',
    input_docs={'lhs': 'First input.', 'rhs': 'Second input.'},
))

register_op(OpDef(
    name='batch_dot',
    backward_reads=('lhs', 'rhs'),
    arguments=['lhs', 'rhs'],
    infer_shape=_bdot_infer,
    forward=_BDOT_FWD,
    backward=_BDOT_BWD,
    params=DotParam,
    doc='Batched matrix product: out[i] = op(lhs[i]) @ op(rhs[i]).\n\n'
        'See ``ffnumba.ops.tensor.dot`` for the shapes.\n',
    input_docs={'lhs': 'Input of shape (..., n, k), or (..., k, n) with transpose_a.',
                'rhs': 'Input of shape (..., k, m), or (..., m, k) with transpose_b.'},
))
