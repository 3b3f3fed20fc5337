"""where: pick elements from ``x`` or ``y`` by a condition.

Math
----
``out = x if condition != 0 else y``, elementwise when ``condition`` has the
shape of ``x``; when ``condition`` is 1-D of length ``x.shape[0]`` it selects
whole rows (``out[i] = x[i] if condition[i] != 0 else y[i]``).

Gradients go to ``x`` where the condition holds and to ``y`` elsewhere; the
condition gets a zero gradient.

Shapes
------
=========  ========================================
condition  ``x.shape``, or ``(x.shape[0],)``
x, y       the same shape
output     ``x.shape``
=========  ========================================

Types: ``x``, ``y`` and the output share one dtype; ``condition`` may have
any dtype.

Source: MXNet 1.x ``where`` documentation, checked against MXNet 1.9.1.
"""
from numba import njit

from ...base import DTypeError, ShapeError
from ..registry import OpDef, register_op, shape_assign
from ..templates import JIT, LazyCudaKernel, _down, _up, fill_gpu, import_cuda, launch_1d

__all__ = []

cuda = None  # bound by import_cuda(globals()) on first GPU use


@njit(**JIT)
def _where_fwd(cond, x, y, out):
    # x, y, out: (len(cond), inner)
    for i in range(x.shape[0]):
        if cond[i] != 0:
            for j in range(x.shape[1]):
                out[i, j] = x[i, j]
        else:
            for j in range(x.shape[1]):
                out[i, j] = y[i, j]


@njit(**JIT)
def _where_bwd(cond, og, gx, gy, mode_x, mode_y):
    # mode: 0 null, 1 write, 2 add
    for i in range(og.shape[0]):
        pick_x = cond[i] != 0
        for j in range(og.shape[1]):
            g = og[i, j]
            if mode_x == 1:
                gx[i, j] = g if pick_x else 0
            elif mode_x == 2 and pick_x:
                gx[i, j] += g
            if mode_y == 1:
                gy[i, j] = 0 if pick_x else g
            elif mode_y == 2 and not pick_x:
                gy[i, j] += g


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    for src in (1, 2):
        if ins[src] is not None:
            shape_assign(ins, 3 - src, ins[src], 'x' if src == 2 else 'y')
    xs = ins[1]
    c = ins[0]
    if xs is not None and c is not None:
        if tuple(c) != tuple(xs) and not (len(c) == 1 and len(xs) >= 1 and c[0] == xs[0]):
            raise ShapeError('where: condition must have the shape of x %s or be 1-D of length '
                             'x.shape[0]. Received: condition %s' % (tuple(xs), tuple(c)))
    return ins, [None if xs is None else tuple(xs)], list(aux_shapes)


def _infer_type(p, in_types, aux_types):
    ins = list(in_types)
    known = ins[1] if ins[1] is not None else ins[2]
    if known is not None:
        for i in (1, 2):
            if ins[i] is not None and ins[i] != known:
                raise DTypeError('where: x and y must have one dtype. Received: x %s, y %s'
                                 % (ins[1], ins[2]))
            ins[i] = known
    if ins[0] is None and known is not None:
        ins[0] = known
    return ins, [known], list(aux_types)


def _rows(cond, a):
    # the row length spelled out, not -1: numpy cannot infer -1 for an array of size 0
    return a.reshape(cond.size, a.size // cond.size if cond.size else 0)


def _forward(ctx, p, inputs, outputs, aux):
    cond, x, y = inputs
    c = _up(cond).reshape(-1)
    out = _up(outputs[0], False)
    _where_fwd(c, _rows(c, _up(x)), _rows(c, _up(y)), _rows(c, out))
    _down(outputs[0], out)


_MODES = {'null': 0, 'write': 1, 'add': 2}


def _backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    c = _up(inputs[0]).reshape(-1)
    og = _rows(c, _up(out_grads[0]))
    gx = _rows(c, _up(in_grads[1], req[1] == 'add')) if req[1] != 'null' else og
    gy = _rows(c, _up(in_grads[2], req[2] == 'add')) if req[2] != 'null' else og
    if req[1] != 'null' or req[2] != 'null':
        _where_bwd(c, og, gx, gy, _MODES[req[1]], _MODES[req[2]])
    for i, g in ((1, gx), (2, gy)):
        if req[i] != 'null':
            _down(in_grads[i], g)
    if req[0] == 'write':
        in_grads[0][...] = 0


def _build_fwd():
    import_cuda(globals())

    @cuda.jit
    def k(cond, x, y, out, inner):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, stride):
            out[i] = x[i] if cond[i // inner] != 0 else y[i]
    return k


def _build_bwd():
    import_cuda(globals())

    @cuda.jit
    def k(cond, og, gx, gy, inner, mode_x, mode_y):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, og.size, stride):
            pick_x = cond[i // inner] != 0
            g = og[i]
            if mode_x == 1:
                gx[i] = g if pick_x else 0
            elif mode_x == 2 and pick_x:
                gx[i] += g
            if mode_y == 1:
                gy[i] = 0 if pick_x else g
            elif mode_y == 2 and not pick_x:
                gy[i] += g
    return k


_fwd_gpu, _bwd_gpu = LazyCudaKernel(_build_fwd), LazyCudaKernel(_build_bwd)


def _forward_gpu(ctx, p, inputs, outputs, aux):
    cond, x, y = inputs
    out = outputs[0]
    c = cond.reshape(-1)
    launch_1d(_fwd_gpu.kernel, out.size, c, x.reshape(-1), y.reshape(-1), out.reshape(-1),
              out.size // c.size)


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    c = inputs[0].reshape(-1)
    og = out_grads[0].reshape(-1)
    gx = in_grads[1].reshape(-1) if req[1] != 'null' else og
    gy = in_grads[2].reshape(-1) if req[2] != 'null' else og
    if req[1] != 'null' or req[2] != 'null':
        launch_1d(_bwd_gpu.kernel, og.size, c, og, gx, gy, og.size // c.size,
                  _MODES[req[1]], _MODES[req[2]])
    if req[0] == 'write':
        g = in_grads[0].reshape(-1)
        fill_gpu.launch(g.size, g, 0)


register_op(OpDef(
    name='where',
    backward_reads=('condition',),
    arguments=['condition', 'x', 'y'],
    infer_shape=_infer_shape,
    infer_type=_infer_type,
    forward={'cpu': _forward, 'gpu': _forward_gpu},
    backward={'cpu': _backward, 'gpu': _backward_gpu},
    doc=__doc__,
    input_docs={'condition': 'Condition array (non-zero selects x).',
                'x': 'Values where the condition holds.',
                'y': 'Values elsewhere.'},
))
