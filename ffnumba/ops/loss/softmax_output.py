"""SoftmaxOutput: softmax forward, cross-entropy gradient backward (MXNet ``SoftmaxOutput``).

Math
----
The data is viewed as ``(n, K, S)``: ``n`` rows of ``K`` classes at ``S``
positions (``S = 1`` unless ``multi_output``). Forward::

    out[i, :, s] = softmax(data[i, :, s])

Backward ignores the head gradient (a loss head) and writes::

    grad[i, k, s] = (out[i, k, s] - t[i, k, s]) * grad_scale / norm

where ``t`` is the one-hot target of ``label[i*S + s]``; with
``smooth_alpha`` (not in multi_output mode) ``t`` is ``1 - alpha`` on the label
class and ``alpha / (K - 1)`` elsewhere. ``norm`` is

* ``'null'``: 1; ``'batch'``: the label count (``label.size`` for the 2-D
  view, the batch size ``N`` in multi_output mode); ``'valid'``: the number
  of labels different from ``ignore_label`` (at least 1);
* in multi_output mode also multiplied by ``S`` unless ``'valid'``.

With ``use_ignore`` the rows whose label equals ``ignore_label`` get a zero
gradient. A label equal to ``ignore_label`` without ``use_ignore`` has no
target class (its gradient is ``out`` itself, as in MXNet). Any other label
outside ``[0, K)`` raises :class:`~ffnumba.base.ParamError`.

When ``label.shape == data.shape`` the labels are probabilities and
``grad = (out - label) * grad_scale`` (no normalization). ``out_grad=True``
multiplies the gradient by the head gradient.

Shapes
------
===================  ======================  ============================  ===========
mode                 data                    label                         softmax over
===================  ======================  ============================  ===========
default              ``(N, d1, ..., dk)``    ``(N,)`` for 2-D data         ``d1*...*dk``
preserve_shape       ``(d0, ..., dk)``       ``(d0, ..., d(k-1))``         last axis
multi_output         ``(N, C, s1, ...)``     ``(N, s1*...)``, ``(N, s1, ...)``  axis 1
                                             or ``(N, 1, s1, ...)``
probability labels   any                     ``data.shape``                as above
===================  ======================  ============================  ===========

The output has the shape of ``data``. Alias: ``Softmax``.

Source: MXNet 1.x ``SoftmaxOutput`` operator documentation; numbers checked
against MXNet 1.9.1.
"""
import math

import numpy as np
from numba import njit

from ...base import ParamError, ShapeError
from ...jit import gpu_body
from ..params import Field, Params
from ..registry import OpDef, register_op, shape_assign
from ..nn import softmax as softmax_kernels
from ..templates import JIT, LazyCudaKernel, f16_safe, fill_gpu, import_cuda

__all__ = ['SoftmaxOutputParam']

cuda = None  # bound by import_cuda(globals()) on first GPU use


class SoftmaxOutputParam(Params):
    """Parameters of :func:`SoftmaxOutput`."""

    grad_scale = Field(float, 1.0, 'Scale applied to the gradient.')
    ignore_label = Field(float, -1.0, 'Label value ignored by `use_ignore` and by `valid` counts.')
    multi_output = Field(bool, False, 'Softmax over axis 1 at every spatial position (N, C, ...).')
    use_ignore = Field(bool, False, 'Give a zero gradient to samples labelled `ignore_label`.')
    preserve_shape = Field(bool, False, 'Softmax over the last axis, keeping every other axis.')
    normalization = Field(str, 'null', 'How the gradient is normalized: not at all, by the '
                                       'batch (label count), or by the non-ignored labels.',
                          choices=('null', 'batch', 'valid'))
    out_grad = Field(bool, False, 'Multiply the gradient by the head gradient.')
    smooth_alpha = Field(float, 0.0, 'Label smoothing: weight moved from the label class '
                                     'to the others (ignored in multi_output mode).',
                         low=0.0, high=1.0)


def _view(p, shape):
    """``(n, K, S)`` of the softmax view of a data shape."""
    shape = tuple(int(d) for d in shape)   # (the CUDA simulator's shape type: no [-1])
    size = math.prod(shape)                # (np.prod cost microseconds of every small forward)
    if p.multi_output:
        n, K = shape[0], (shape[1] if len(shape) > 1 else 1)
        return n, K, size // max(n * K, 1)
    if p.preserve_shape:
        K = shape[-1]
        return size // max(K, 1), K, 1
    n = shape[0]
    return n, size // max(n, 1), 1


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    d, lab = ins[0], ins[1]
    if d is None:
        return ins, [None], list(aux_shapes)
    d = tuple(d)
    if len(d) == 0:
        raise ShapeError('SoftmaxOutput: data must have at least 1 dimension')
    if lab is not None and tuple(lab) == d:
        return ins, [d], list(aux_shapes)   # probability labels
    if p.multi_output:
        n = d[0]
        spatial = d[2:]
        flat = (n, int(np.prod(spatial, dtype=np.int64)))
        accepted = (flat, (n,) + spatial, (n, 1) + spatial)
        if lab is not None and tuple(lab) in accepted:
            return ins, [d], list(aux_shapes)
        shape_assign(ins, 1, flat, 'label')
    else:
        shape_assign(ins, 1, d[:-1], 'label')
    return ins, [d], list(aux_shapes)


# ------------------------------------------------------------------ CPU kernels

@njit(inline='always')
def _is_ignored(lab, ignore):
    """Whether label value ``lab`` truncates to ``ignore`` (NaN and huge values never do)."""
    return lab == lab and abs(lab) < 2.0 ** 62 and math.trunc(lab) == ignore


@njit(inline='always')
def _label_grad(o, lab, k, K, scale, ignore, use_ignore, alpha):
    """Gradient of class ``k`` with softmax output ``o`` and label ``lab`` (no head grad).

    ``(o - t) * scale`` with ``t`` the (smoothed) one-hot target; 0 for an
    ignored label under ``use_ignore``; no target class for a label outside
    ``[0, K)``.
    """
    if use_ignore and _is_ignored(lab, ignore):
        return 0.0
    hit = lab >= 0 and lab < K and int(lab) == k
    if alpha > 0.0:
        t = 1.0 - alpha if hit else (alpha / (K - 1) if K > 1 else 0.0)
    else:
        t = 1.0 if hit else 0.0
    return (o - t) * scale


@njit(**JIT)
def _check_labels(label, rows, K, ignore, use_ignore_or_count):
    """Validate the used labels; return (index of a bad label or -1, #valid labels).

    A label is valid when ``0 <= l < K`` or when it equals ``ignore`` after
    truncation. The valid count is over every label entry (MXNet counts the
    whole label array), excluding those equal to ``ignore``.
    """
    bad = -1
    for r in range(rows):
        lab = label[r]
        if not (lab >= 0 and lab < K) and not _is_ignored(lab, ignore):
            bad = r
            break
    cnt = 0
    if use_ignore_or_count:
        for r in range(label.size):
            if not _is_ignored(label[r], ignore):
                cnt += 1
    return bad, cnt


@njit(error_model='numpy', inline='always')
def _grad_at(out, label, grad, ograd, scale, ignore, use_ignore, alpha, add, has_og, i, k, s):
    """Gradient element ``(i, k, s)`` of the softmax outputs ``out`` (n, K, S)."""
    g = _label_grad(out[i, k, s], label[i * out.shape[2] + s], k, out.shape[1], scale, ignore,
                    use_ignore, alpha)
    if has_og:
        g *= ograd[i, k, s]
    if add:
        grad[i, k, s] += g
    else:
        grad[i, k, s] = g


@njit(error_model='numpy', inline='always')
def _prob_at(out, label, grad, ograd, scale, add, has_og, i):
    """Gradient element ``i`` against a probability label of the output's shape."""
    g = (out[i] - label[i]) * scale
    if has_og:
        g *= ograd[i]
    if add:
        grad[i] += g
    else:
        grad[i] = g


@njit(**JIT)
def _softmax_grad_cpu(out, label, grad, ograd, scale, ignore, use_ignore, alpha, add, has_og):
    n, K, S = out.shape
    for i in range(n):
        for s in range(S):
            for k in range(K):
                _grad_at(out, label, grad, ograd, scale, ignore, use_ignore, alpha, add, has_og,
                         i, k, s)


@njit(**JIT)
def _prob_grad_cpu(out, label, grad, ograd, scale, add, has_og):
    for i in range(out.size):
        _prob_at(out, label, grad, ograd, scale, add, has_og, i)


@f16_safe
def _forward_cpu(ctx, p, inputs, outputs, aux):
    v = _view(p, inputs[0].shape)
    softmax_kernels.cpu_forward(inputs[0].reshape(v), 1.0, False, outputs[0].reshape(v))


def _prepare(ctx, p, label_host, data_shape, out_shape):
    """Check the labels on the host and return ``(scale, prob)``."""
    if tuple(label_host.shape) == tuple(data_shape):
        return p.grad_scale, True
    n, K, S = _view(p, out_shape)
    rows = n * S
    lab = label_host.reshape(-1)
    if lab.size < rows:
        raise ShapeError('SoftmaxOutput (node %s): label has %d entries but the data has %d '
                         'rows; label shape %s' % (ctx.node_name, lab.size, rows,
                                                   tuple(label_host.shape)))
    if lab.dtype == np.float16:
        lab = lab.astype(np.float32)
    ignore = float(math.trunc(p.ignore_label))
    bad, cnt = _check_labels(lab, rows, K, ignore, p.normalization == 'valid')
    if bad >= 0:
        raise ParamError('SoftmaxOutput (node %s): label %r at index %d is out of range '
                         '[0, %d) (K = %d classes); use ignore_label=%r with use_ignore=True '
                         'to skip samples' % (ctx.node_name, float(lab[bad]), bad, K, K,
                                              p.ignore_label))
    if p.normalization == 'batch':
        norm = n if p.multi_output else lab.size
    elif p.normalization == 'valid':
        norm = max(cnt, 1)
    else:
        norm = 1
    if p.multi_output and p.normalization != 'valid':
        norm *= S
    return p.grad_scale / norm, False


def _zero_label_grad(in_grads, req):
    if req[1] == 'write':
        in_grads[1][...] = 0


def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    _zero_label_grad(in_grads, req)
    if req[0] == 'null':
        return
    scale, prob = _prepare(ctx, p, inputs[1], inputs[0].shape, outputs[0].shape)
    _grad_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, scale, prob)


@f16_safe
def _grad_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, scale, prob):
    out, label = outputs[0], inputs[1]
    has_og = p.out_grad and out_grads is not None and out_grads[0] is not None
    add = req[0] == 'add'
    og = out_grads[0] if has_og else out
    if prob:
        _prob_grad_cpu(out.reshape(-1), label.reshape(-1), in_grads[0].reshape(-1),
                       og.reshape(-1), scale, add, has_og)
    else:
        v = _view(p, out.shape)
        ignore = float(math.trunc(p.ignore_label))
        alpha = 0.0 if p.multi_output else p.smooth_alpha
        _softmax_grad_cpu(out.reshape(v), label.reshape(-1), in_grads[0].reshape(v),
                          og.reshape(v), scale, ignore, p.use_ignore, alpha, add, has_og)


# ------------------------------------------------------------------ GPU kernels

def _build_grad():
    import_cuda(globals())
    grad_at = gpu_body(_grad_at)

    @cuda.jit
    def k(out, label, grad, ograd, scale, ignore, use_ignore, alpha, add, has_og):
        K, S = out.shape[1], out.shape[2]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for t in range(start, out.size, stride):
            grad_at(out, label, grad, ograd, scale, ignore, use_ignore, alpha, add, has_og,
                    t // (K * S), (t // S) % K, t % S)
    return k


def _build_prob():
    import_cuda(globals())
    prob_at = gpu_body(_prob_at)

    @cuda.jit
    def k(out, label, grad, ograd, scale, add, has_og):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, stride):
            prob_at(out, label, grad, ograd, scale, add, has_og, i)
    return k


_gpu_grad = LazyCudaKernel(_build_grad)
_gpu_prob = LazyCudaKernel(_build_prob)


def _forward_gpu(ctx, p, inputs, outputs, aux):
    v = _view(p, inputs[0].shape)
    softmax_kernels.gpu_forward(inputs[0].reshape(v), 1.0, False, outputs[0].reshape(v))


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[1] == 'write':
        g1 = in_grads[1].reshape(-1)
        fill_gpu.launch(g1.size, g1, 0.0)
    if req[0] == 'null':
        return
    out, label = outputs[0], inputs[1]
    # labels are small: validate and count them on the host
    scale, prob = _prepare(ctx, p, label.copy_to_host(), inputs[0].shape, out.shape)
    has_og = p.out_grad and out_grads is not None and out_grads[0] is not None
    add = req[0] == 'add'
    og = out_grads[0] if has_og else out
    if prob:
        _gpu_prob.launch(out.size, out.reshape(-1), label.reshape(-1), in_grads[0].reshape(-1),
                         og.reshape(-1), scale, add, has_og)
    else:
        v = _view(p, out.shape)
        ignore = float(math.trunc(p.ignore_label))
        alpha = 0.0 if p.multi_output else p.smooth_alpha
        _gpu_grad.launch(out.size, out.reshape(v), label.reshape(-1), in_grads[0].reshape(v),
                         og.reshape(v), scale, ignore, p.use_ignore, alpha, add, has_og)


register_op(OpDef(
    name='SoftmaxOutput',
    backward_reads=('label', 'output'),   # dx = (y - onehot(label)) * scale
    float_only=True,
    aliases=('Softmax',),
    arguments=['data', 'label'],
    infer_shape=_infer_shape,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    params=SoftmaxOutputParam,
    is_loss=True,
    doc=__doc__,
    input_docs={'data': 'Input scores (logits).',
                'label': 'Class indices (float) or, with the shape of data, probabilities.'},
))
