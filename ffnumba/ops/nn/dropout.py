"""Dropout: randomly zero inputs in training (MXNet ``Dropout``).

Math
----
In training (or always, with ``mode='always'``)::

    mask = bernoulli(1 - p) / (1 - p)        (shape of data, size 1 on `axes`)
    y = x * mask                             (mask broadcast along `axes`)
    dx = dy * mask

Otherwise ``y = x`` and ``dx = dy``. With ``axes`` the same mask value is
shared along those axes (variational dropout).

Shapes
------
=======  ================
data     any shape
output   same as ``data``
=======  ================

MXNet's Dropout has a second, hidden output (the mask); here the mask lives
in the node's ``ctx.state`` and is reused across calls (no allocation once
the shape is known). The mask is drawn from the executor's generator
``ctx.rng`` (seeded by ``ff.random.seed``).

Source: Srivastava et al., "Dropout: A Simple Way to Prevent Neural Networks
from Overfitting", JMLR 2014; MXNet 1.x ``Dropout`` documentation.
"""
import numpy as np
from numba import njit

from ...base import ParamError, ShapeError
from ..params import Field, Params, Shape
from ..registry import OpDef, register_op, same_shape
from ..templates import JIT, LazyCudaKernel, import_cuda

__all__ = ['DropoutParam']

cuda = None  # bound by import_cuda(globals()) on first GPU use


class DropoutParam(Params):
    """Parameters of :func:`Dropout`."""

    p = Field(float, 0.5, 'Fraction of the input that gets dropped, in [0, 1).', low=0.0, high=1.0)
    mode = Field(str, 'training', 'Apply dropout only in training, or always.',
                 choices=('training', 'always'))
    axes = Field(Shape, Shape(), 'Axes along which one mask value is shared.')
    cudnn_off = Field(bool, False, 'Accepted for MXNet compatibility (no effect).', optional=True)

    def validate(self):
        if not self.p < 1.0:
            raise ParamError('Dropout: `p` must be a float >= 0.0 and < 1.0. Received: p=%r'
                             % self.p)


@njit(**JIT)
def _make_mask(u, mask, keep, scale):
    for i in range(u.size):
        mask[i] = scale if u[i] < keep else 0.0


@njit(**JIT)
def _apply(x, mask, out, add):
    if add:
        for i in range(x.size):
            out[i] += x[i] * mask[i]
    else:
        for i in range(x.size):
            out[i] = x[i] * mask[i]


def _mask_shape(p, shape):
    ms = list(shape)
    for a in p.axes:
        ax = a + len(shape) if a < 0 else a
        if not 0 <= ax < len(shape):
            raise ShapeError('Dropout: axis %d is out of range for data of shape %s'
                             % (a, tuple(shape)))
        ms[ax] = 1
    return tuple(ms)


def _draw_mask(ctx, p, shape):
    """Draw a fresh float32 mask of ``shape`` (full size) into ``ctx.state``."""
    st = ctx.state
    ms = _mask_shape(p, shape)
    u = st.get('dropout_u')
    if u is None or u.shape != ms:
        u = st['dropout_u'] = np.empty(ms, np.float32)
        st['dropout_small'] = np.empty(ms, np.float32)
    mask = st.get('dropout_mask')
    if mask is None or mask.shape != tuple(shape):
        mask = st['dropout_mask'] = np.empty(shape, np.float32)
    ctx.rng.random(dtype=np.float32, out=u)
    keep = 1.0 - p.p
    if ms == tuple(shape):
        _make_mask(u.reshape(-1), mask.reshape(-1), keep, 1.0 / keep)
    else:
        small = st['dropout_small']
        _make_mask(u.reshape(-1), small.reshape(-1), keep, 1.0 / keep)
        np.copyto(mask, np.broadcast_to(small, mask.shape))
    return mask


def _active(ctx, p):
    return (ctx.is_train or p.mode == 'always') and p.p > 0.0


def _flat(a):
    return a.reshape(-1)


def _forward_cpu(ctx, p, inputs, outputs, aux):
    x, out = inputs[0], outputs[0]
    ctx.state['dropout_active'] = active = _active(ctx, p)
    if not active:
        out[...] = x
        return
    mask = _draw_mask(ctx, p, x.shape)
    if x.dtype == np.float16:
        np.multiply(x, mask, out=out, casting='unsafe')
    else:
        _apply(_flat(x), _flat(mask), _flat(out), False)


def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    og, ig = out_grads[0], in_grads[0]
    add = req[0] == 'add'
    if not ctx.state.get('dropout_active', False):
        if add:
            ig += og
        else:
            ig[...] = og
        return
    mask = ctx.state['dropout_mask']
    if og.dtype == np.float16:
        g = (og * mask).astype(np.float16)
        if add:
            ig += g
        else:
            ig[...] = g
    else:
        _apply(_flat(og), _flat(mask), _flat(ig), add)


# ------------------------------------------------------------------ GPU kernels

def _build_apply():
    import_cuda(globals())

    @cuda.jit
    def k(x, mask, out, add, use_mask):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, x.size, stride):
            v = x[i] * mask[i] if use_mask else x[i]
            if add:
                out[i] += v
            else:
                out[i] = v
    return k


_gpu_apply = LazyCudaKernel(_build_apply)


def _forward_gpu(ctx, p, inputs, outputs, aux):
    import_cuda(globals())
    x, out = _flat(inputs[0]), _flat(outputs[0])
    ctx.state['dropout_active'] = active = _active(ctx, p)
    if not active:
        _gpu_apply.launch(x.size, x, x, out, False, False)
        return
    host = _draw_mask(ctx, p, inputs[0].shape)
    dev = ctx.state.get('dropout_mask_dev')
    if dev is None or dev.size != host.size:
        dev = ctx.state['dropout_mask_dev'] = cuda.to_device(_flat(host))
    else:
        dev.copy_to_device(_flat(host))
    _gpu_apply.launch(x.size, x, dev, out, False, True)


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    og, ig = _flat(out_grads[0]), _flat(in_grads[0])
    active = ctx.state.get('dropout_active', False)
    mask = ctx.state['dropout_mask_dev'] if active else og
    _gpu_apply.launch(og.size, og, mask, ig, req[0] == 'add', active)


register_op(OpDef(
    name='Dropout',
    backward_reads=(),   # dx = dy * mask; the mask lives in the node's state
    float_only=True,
    arguments=['data'],
    infer_shape=same_shape,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    params=DropoutParam,
    num_hidden_outputs=1,
    doc=__doc__,
    input_docs={'data': 'Input array.'},
))
