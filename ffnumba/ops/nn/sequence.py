"""Sequence ops: SequenceMask, SequenceLast, SequenceReverse.

``data`` holds a batch of padded sequences: ``(T, N, ...)`` with ``axis=0``
(time major, MXNet's default) or ``(N, T, ...)`` with ``axis=1``. With
``use_sequence_length=True`` a second input ``sequence_length`` of shape
``(N,)`` gives each sequence's length ``L[n]`` (stored as floats, as MXNet
does; ``1 <= L[n] <= T``); without it every sequence has length ``T`` and the
op takes ``data`` only.

=================  ==========================================  =======================
op                 ``out``                                      shape
=================  ==========================================  =======================
SequenceMask       ``data[t, n]`` for ``t < L[n]``, else value  as ``data``
SequenceLast       ``data[L[n] - 1, n]``                        ``data`` without ``axis``
SequenceReverse    ``data[L[n] - 1 - t, n]`` for ``t < L[n]``,  as ``data``
                   ``data[t, n]`` after (padding stays put)
=================  ==========================================  =======================

Gradients route the head gradient back through the same index map (masked
positions get 0). ``sequence_length`` gets a zero gradient, as in MXNet.

Every kernel walks flat arrays with one index map, ``_pos``, shared by the
``@njit`` CPU kernels and the ``@cuda.jit`` GPU kernels.

Source: MXNet 1.x operator documentation of SequenceMask, SequenceLast and
SequenceReverse.
"""
import numpy as np
from numba import njit

from ...base import FFError, ShapeError
from ...jit import gpu_body
from ..params import Field, Params
from ..registry import OpDef, register_op, shape_assign
from ..templates import JIT, LazyCudaKernel, f16_safe, fill_gpu, import_cuda

__all__ = ['SequenceParam']

cuda = None  # bound by import_cuda(globals()) on first GPU use

_MASK, _LAST, _REVERSE = 0, 1, 2


class SequenceParam(Params):
    """Parameters of SequenceMask, SequenceLast and SequenceReverse."""

    use_sequence_length = Field(bool, False, 'Take the lengths from the `sequence_length` '
                                             'input (False: every sequence has length T).')
    value = Field(float, 0.0, 'SequenceMask only: the value of masked positions.')
    axis = Field(int, 0, 'The time axis: 0 for (T, N, ...) or 1 for (N, T, ...).',
                 low=0, high=1)


class SequenceLastParam(Params):
    """Parameters of SequenceLast and SequenceReverse (no `value`)."""

    use_sequence_length = SequenceParam._fields['use_sequence_length']
    axis = SequenceParam._fields['axis']


def _args(p):
    return ['data', 'sequence_length'] if p.use_sequence_length else ['data']


def _make_infer(kind):
    def infer(p, in_shapes, aux_shapes, out_shapes):
        ins = list(in_shapes)
        d = ins[0]
        if d is None:
            return ins, [None], list(aux_shapes)
        if len(d) < 2:
            raise ShapeError('%s: `data` must have at least 2 axes (T, N, ...). Received: '
                             'data shape %s' % (_NAMES[kind], tuple(d)))
        if kind == _LAST and d[p.axis] == 0 and d[1 - p.axis] > 0:
            raise ShapeError('SequenceLast: the sequence axis %d of `data` has length 0, so '
                             'there is no last element. Received: data shape %s'
                             % (p.axis, tuple(d)))
        if p.use_sequence_length:
            shape_assign(ins, 1, (d[1 - p.axis],), 'sequence_length')
        out = tuple(d[:p.axis]) + tuple(d[p.axis + 1:]) if kind == _LAST else tuple(d)
        return ins, [out], list(aux_shapes)
    return infer


_NAMES = {_MASK: 'SequenceMask', _LAST: 'SequenceLast', _REVERSE: 'SequenceReverse'}


@njit
def _pos(t, n, d, T, N, D, tmajor):
    """Flat index of element (time t, sequence n, feature d)."""
    if tmajor:
        return (t * N + n) * D + d
    return (n * T + t) * D + d


@njit
def _src(kind, t, L):
    """Source time step of output step ``t`` (-1: masked), sequence length ``L``."""
    if kind == _MASK:
        return t if t < L else -1
    if kind == _REVERSE:
        return L - 1 - t if t < L else t
    return L - 1


@njit
def _fwd_at(kind, x, lens, use, value, out, T, N, D, tmajor, t, n, d):
    """Output element (step ``t``, sequence ``n``, feature ``d``); CPU and GPU kernels call it."""
    L = int(lens[n]) if use else T
    s = _src(kind, t, L)
    o = n * D + d if kind == _LAST else _pos(t, n, d, T, N, D, tmajor)
    if s < 0:
        out[o] = value
    else:
        out[o] = x[_pos(s, n, d, T, N, D, tmajor)]


@njit
def _bwd_at(kind, og, lens, use, ig, add, T, N, D, tmajor, t, n, d):
    """Input gradient element ``(t, n, d)``: every input has at most one output reading it."""
    L = int(lens[n]) if use else T
    g = 0.0
    if kind == _MASK:
        if t < L:
            g = og[_pos(t, n, d, T, N, D, tmajor)]
    elif kind == _REVERSE:
        g = og[_pos(_src(kind, t, L), n, d, T, N, D, tmajor)]
    elif t == L - 1:
        g = og[n * D + d]
    j = _pos(t, n, d, T, N, D, tmajor)
    if add:
        ig[j] += g
    else:
        ig[j] = g


@njit(**JIT)
def _fwd_cpu(kind, x, lens, use, value, out, T, N, D, tmajor):
    for n in range(N):
        for t in range(1 if kind == _LAST else T):
            for d in range(D):
                _fwd_at(kind, x, lens, use, value, out, T, N, D, tmajor, t, n, d)


@njit(**JIT)
def _bwd_cpu(kind, og, lens, use, ig, add, T, N, D, tmajor):
    for n in range(N):
        for t in range(T):
            for d in range(D):
                _bwd_at(kind, og, lens, use, ig, add, T, N, D, tmajor, t, n, d)


def _build_fwd():
    import_cuda(globals())
    fwd_at = gpu_body(_fwd_at)

    @cuda.jit
    def k(kind, x, lens, use, value, out, T, N, D, tmajor):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        steps = 1 if kind == _LAST else T
        for i in range(start, steps * N * D, stride):
            fwd_at(kind, x, lens, use, value, out, T, N, D, tmajor, i // (D * N), (i // D) % N,
                   i % D)
    return k


def _build_bwd():
    import_cuda(globals())
    bwd_at = gpu_body(_bwd_at)

    @cuda.jit
    def k(kind, og, lens, use, ig, add, T, N, D, tmajor):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, T * N * D, stride):
            bwd_at(kind, og, lens, use, ig, add, T, N, D, tmajor, i // (D * N), (i // D) % N,
                   i % D)
    return k


_fwd_gpu = LazyCudaKernel(_build_fwd)
_bwd_gpu = LazyCudaKernel(_build_bwd)


def _dims(p, shape):
    shape = tuple(shape)
    T, N = (shape[0], shape[1]) if p.axis == 0 else (shape[1], shape[0])
    D = 1
    for s in shape[2:]:
        D *= int(s)
    return int(T), int(N), D


def _lens(ctx, kind, p, inputs, T):
    """The lengths as a flat array, checked to lie in [1, T] (MXNet leaves 0 undefined)."""
    if not p.use_sequence_length:
        return None
    lens = inputs[1]
    host = lens.copy_to_host() if hasattr(lens, 'copy_to_host') else np.asarray(lens)
    host = host.reshape(-1)
    if host.size and (host.min() < 1 or host.max() > T or np.any(host != np.floor(host))):
        raise FFError('Error in operator %s: %s: every sequence_length must be an integer in '
                      '[1, %d] (the time axis). Received: %s'
                      % (ctx.node_name, _NAMES[kind], T, host.tolist()))
    return lens.reshape(-1)


def _make_compute(kind):
    @f16_safe
    def forward(ctx, p, inputs, outputs, aux):
        x = inputs[0]
        T, N, D = _dims(p, x.shape)
        lens = _lens(ctx, kind, p, inputs, T)
        use = lens is not None
        value = p.value if kind == _MASK else 0.0
        _fwd_cpu(kind, x.reshape(-1), lens if use else np.zeros(1, x.dtype), use, value,
                 outputs[0].reshape(-1), T, N, D, p.axis == 0)

    @f16_safe
    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        x = inputs[0]
        T, N, D = _dims(p, x.shape)
        lens = _lens(ctx, kind, p, inputs, T)
        use = lens is not None
        if len(req) > 1 and req[1] == 'write':
            in_grads[1][...] = 0
        if req[0] == 'null':
            return
        _bwd_cpu(kind, out_grads[0].reshape(-1), lens if use else np.zeros(1, x.dtype), use,
                 in_grads[0].reshape(-1), req[0] == 'add', T, N, D, p.axis == 0)

    def forward_gpu(ctx, p, inputs, outputs, aux):
        x = inputs[0]
        T, N, D = _dims(p, x.shape)
        lens = _lens(ctx, kind, p, inputs, T)
        use = lens is not None
        lens = lens if use else x.reshape(-1)
        steps = 1 if kind == _LAST else T
        value = p.value if kind == _MASK else 0.0
        _fwd_gpu.launch(max(1, steps * N * D), kind, x.reshape(-1), lens, use, value,
                        outputs[0].reshape(-1), T, N, D, p.axis == 0)

    def backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        x = inputs[0]
        T, N, D = _dims(p, x.shape)
        lens = _lens(ctx, kind, p, inputs, T)
        use = lens is not None
        if len(req) > 1 and req[1] == 'write':
            fill_gpu.launch(in_grads[1].size, in_grads[1].reshape(-1), 0)
        if req[0] == 'null':
            return
        lens = lens if use else x.reshape(-1)
        _bwd_gpu.launch(max(1, T * N * D), kind, out_grads[0].reshape(-1), lens, use,
                        in_grads[0].reshape(-1), req[0] == 'add', T, N, D, p.axis == 0)

    return {'cpu': forward, 'gpu': forward_gpu}, {'cpu': backward, 'gpu': backward_gpu}


_DOCS = {
    _MASK: 'Set the positions after each sequence\'s length to `value`.\n\n'
           '(T, N, ...) data with lengths L: out[t, n] = data[t, n] for t < L[n], else value.\n',
    _LAST: 'The last valid element of each sequence.\n\n(T, N, ...) data -> (N, ...): '
           'out[n] = data[L[n] - 1, n].\n',
    _REVERSE: 'Reverse the first L[n] steps of each sequence; padding stays in place.\n\n'
              'out[t, n] = data[L[n] - 1 - t, n] for t < L[n], else data[t, n].\n',
}

for _kind, _name in _NAMES.items():
    _fwd, _bwd = _make_compute(_kind)
    register_op(OpDef(
        name=_name,
        arguments=_args,
        infer_shape=_make_infer(_kind),
        forward=_fwd, backward=_bwd,
        params=SequenceParam if _kind == _MASK else SequenceLastParam,
        float_only=('data',),
        doc=_DOCS[_kind],
        input_docs={'data': 'Padded sequences, (T, N, ...) with axis=0 or (N, T, ...) with '
                            'axis=1.',
                    'sequence_length': 'Lengths (N,), integers in [1, T] stored as floats.'},
    ))
