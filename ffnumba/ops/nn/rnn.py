"""The fused recurrent operator ``RNN`` (MXNet ``mx.sym.RNN``).

A stack of ``num_layers`` recurrent layers, each optionally bidirectional,
over time-major data. Per layer ``l`` and direction ``d`` (``G`` gates of
``H = state_size`` units, MXNet's gate order):

==========  ==  ===============================================================
mode        G   step (``x`` the layer input at time t, ``h, c`` the state)
==========  ==  ===============================================================
rnn_relu    1   ``h' = relu(Wx x + bx + Wh h + bh)``
rnn_tanh    1   ``h' = tanh(Wx x + bx + Wh h + bh)``
lstm        4   ``i, f, o = sigmoid(.)``, ``g = tanh(.)`` (blocks i, f, g, o);
                ``c' = f c + i g`` (clipped to [lstm_state_clip_min, max] when
                given); ``h' = o tanh(c')``
gru         3   ``r, z = sigmoid(.)`` (blocks r, z, n);
                ``n = tanh(Wx_n x + bx_n + r (Wh_n h + bh_n))``;
                ``h' = (1 - z) n + z h``
==========  ==  ===============================================================

The backward direction walks time from ``T - 1`` to ``0``; its outputs are
the second half of the feature axis. Layer ``l > 0`` reads the previous
layer's output (``D * H`` features), through Dropout ``p`` in training.

Packed ``parameters`` (MXNet's layout, so an MXNet checkpoint loads): first
every weight, for ``l`` in layers, ``d`` in directions: ``Wx (G*H, I_l)``
then ``Wh (G*H, H)``; then every bias in the same order: ``bx (G*H,)`` then
``bh (G*H,)``. ``I_0 = C``, ``I_l = D * H``. Length
``sum_l D * (G*H*(I_l + H) + 2*G*H)``.

Shapes
------
=================  ==========================  ==============================
input / output     shape                       when
=================  ==========================  ==============================
data               ``(T, N, C)``
parameters         ``(P,)``                    P as above
state              ``(L*D, N, H)``             initial h
state_cell         ``(L*D, N, H)``             lstm only: initial c
output             ``(T, N, D*H)``
state_output       ``(L*D, N, H)``             state_outputs: final h
statecell_output   ``(L*D, N, H)``             state_outputs and lstm: final c
=================  ==========================  ==============================

CPU: one ``@njit`` call per layer and direction (:mod:`._rnn_kernels`): one
BLAS GEMM projects every time step's input at once, one GEMM per step does
the recurrent part, the gate math runs in a fused loop; the backward mirrors
it (three GEMMs for the weight and input gradients of the whole sequence).
GPU: the same step math in ``@cuda.jit`` kernels, the products through the
GPU GEMM of :mod:`ffnumba.ops.tensor.dot`.

Source: MXNet 1.x ``RNN`` operator documentation and ``src/operator/rnn-inl.h``
(parameter layout, gate order, GRU formula); LSTM: Hochreiter & Schmidhuber
1997; GRU: Cho et al. 2014 (cuDNN's variant, as MXNet).
"""
import numpy as np

from ...base import ParamError, ShapeError
from .. import gemm_cuda
from ..params import Field, Params
from ..registry import OpDef, register_op, shape_assign
from ..templates import f16_safe
from . import _rnn_kernels as K

__all__ = ['RNNParam', 'rnn_param_size', 'rnn_param_layout']

_MODES = {'rnn_relu': K.RELU, 'rnn_tanh': K.TANH, 'lstm': K.LSTM, 'gru': K.GRU}
_GATES = {'rnn_relu': 1, 'rnn_tanh': 1, 'lstm': 4, 'gru': 3}


class RNNParam(Params):
    """Parameters of :func:`RNN`."""

    state_size = Field(int, doc='Hidden units H per layer and direction.', low=1)
    num_layers = Field(int, doc='Number of stacked layers L.', low=1, high=1000)
    mode = Field(str, doc='Cell type.', choices=tuple(_MODES))
    bidirectional = Field(bool, False, 'Add a backward-in-time direction per layer (D = 2).')
    p = Field(float, 0.0, 'Dropout rate on the inputs of layers after the first (training '
                          'only).', low=0.0, high=1.0)
    state_outputs = Field(bool, False, 'Also return the final states.')
    projection_size = Field(int, None, 'LSTMP projection size (not supported: must be None).')
    lstm_state_clip_min = Field(float, None, 'Lower bound of the LSTM cell state (with max).')
    lstm_state_clip_max = Field(float, None, 'Upper bound of the LSTM cell state (with min).')
    lstm_state_clip_nan = Field(bool, False, 'With clipping: a NaN cell state becomes the '
                                             'lower bound instead of propagating.')
    use_sequence_length = Field(bool, False, 'Variable-length sequences (not supported: must '
                                             'be False; mask the outputs with SequenceMask).')

    def validate(self):
        if self.p >= 1.0:
            raise ParamError('RNN: `p` must be in [0, 1). Received: p=%r' % self.p)
        if self.projection_size is not None:
            raise ParamError('RNN: `projection_size` (LSTMP) is not supported. Received: '
                             'projection_size=%r' % self.projection_size)
        if self.use_sequence_length:
            raise ParamError('RNN: `use_sequence_length=True` is not supported; pad the batch '
                             'and use SequenceMask / SequenceLast. Received: '
                             'use_sequence_length=True')
        lo, hi = self.lstm_state_clip_min, self.lstm_state_clip_max
        if (lo is None) != (hi is None) or (lo is not None and lo > hi):
            raise ParamError('RNN: `lstm_state_clip_min` and `lstm_state_clip_max` must be given '
                             'together with min <= max. Received: lstm_state_clip_min=%r, '
                             'lstm_state_clip_max=%r' % (lo, hi))


def _dirs(p):
    return 2 if p.bidirectional else 1


def rnn_param_layout(mode, num_layers, bidirectional, input_size, state_size):
    """Offsets into the packed parameter vector.

    Returns
    -------
    list of (wx_off, wh_off, bx_off, bh_off, in_size), total_size
        One entry per ``(layer, direction)`` in the order ``l * D + d``.
    """
    G, H, D = _GATES[mode], state_size, 2 if bidirectional else 1
    entries, off = [], 0
    for l in range(num_layers):
        i = input_size if l == 0 else D * H
        for _ in range(D):
            entries.append([off, off + G * H * i, 0, 0, i])
            off += G * H * (i + H)
    for e in entries:
        e[2], e[3] = off, off + G * H
        off += 2 * G * H
    return [tuple(e) for e in entries], off


def rnn_param_size(mode, num_layers, bidirectional, input_size, state_size):
    """Length of the packed parameter vector (see the module docstring)."""
    return rnn_param_layout(mode, num_layers, bidirectional, input_size, state_size)[1]


def _arguments(p):
    return ['data', 'parameters', 'state'] + (['state_cell'] if p.mode == 'lstm' else [])


def _outputs(p):
    if not p.state_outputs:
        return ['output']
    return ['output', 'state_output'] + (['statecell_output'] if p.mode == 'lstm' else [])


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    outs = list(out_shapes) if out_shapes else [None] * len(_outputs(p))
    H, L, D = p.state_size, p.num_layers, _dirs(p)
    lstm = p.mode == 'lstm'
    d = ins[0]
    if d is None and outs[0] is not None and ins[1] is not None:
        # data from the output and the parameter length: solve for C
        T, N = outs[0][:2]
        rest = rnn_param_size(p.mode, L, p.bidirectional, 0, H)
        per = D * _GATES[p.mode] * H
        if (ins[1][0] - rest) % per or ins[1][0] <= rest:
            raise ShapeError('RNN: parameter length %d does not fit mode=%s, num_layers=%d, '
                             'state_size=%d, bidirectional=%s for any input size'
                             % (ins[1][0], p.mode, L, H, p.bidirectional))
        ins[0] = d = (T, N, (ins[1][0] - rest) // per)
    if d is None:
        return ins, [None] * len(outs), list(aux_shapes)
    if len(d) != 3:
        raise ShapeError('RNN: `data` must be 3-D (T, N, C), time major. Received: data shape %s'
                         % (tuple(d),))
    T, N, C = d
    shape_assign(ins, 1, (rnn_param_size(p.mode, L, p.bidirectional, C, H),), 'parameters')
    shape_assign(ins, 2, (L * D, N, H), 'state')
    if lstm:
        shape_assign(ins, 3, (L * D, N, H), 'state_cell')
    res = [(T, N, D * H)]
    if p.state_outputs:
        res += [(L * D, N, H)] * (2 if lstm else 1)
    return ins, res, list(aux_shapes)


def _clip(p):
    on = p.lstm_state_clip_min is not None and p.mode == 'lstm'
    return (float(p.lstm_state_clip_min or 0.0), float(p.lstm_state_clip_max or 0.0), on,
            bool(p.lstm_state_clip_nan))


def _views(p, w, C, k):
    """``Wx, Wh, bx, bh`` of layer/direction ``k`` as views into the flat ``w``."""
    G, H = _GATES[p.mode], p.state_size
    wx, wh, bx, bh, i = rnn_param_layout(p.mode, p.num_layers, p.bidirectional, C, H)[0][k]
    GH = G * H
    return (w[wx:wx + GH * i].reshape(GH, i), w[wh:wh + GH * H].reshape(GH, H),
            w[bx:bx + GH], w[bh:bh + GH], i)


def _dropout_mask(ctx, p, shape, dtype):
    keep = ctx.rng.random(shape) >= p.p
    return (keep / (1.0 - p.p)).astype(dtype)


# ------------------------------------------------------------------ CPU
def _run_forward(ctx, p, inputs, y_top, train):
    """Run every layer; returns the per-(layer, direction) records backward needs."""
    x, w, h0 = inputs[0], inputs[1], inputs[2]
    T, N, C = x.shape
    H, L, D, G = p.state_size, p.num_layers, _dirs(p), _GATES[p.mode]
    mode, (lo, hi, con, cnan) = _MODES[p.mode], _clip(p)
    c0 = inputs[3] if p.mode == 'lstm' else None
    recs, cur = [], x
    for l in range(L):
        y = y_top if l == L - 1 else np.empty((T, N, D * H), x.dtype)
        layer = {'x': cur, 'dirs': []}
        for d in range(D):
            k = l * D + d
            wx, wh, bx, bh, i = _views(p, w, C, k)
            hs = np.empty((T + 1, N, H), x.dtype)
            cs = np.zeros((T + 1, N, H), x.dtype)
            hs[0] = h0[k]
            if c0 is not None:
                cs[0] = c0[k]
            gates = np.empty((T, N, G * H), x.dtype)
            ghn = np.empty((T, N, H) if p.mode == 'gru' else (1, 1, 1), x.dtype)
            K.layer_forward(mode, cur.reshape(T * N, i), wx, wh, bx, bh, hs, cs, gates, ghn,
                            y, d * H, d == 1, lo, hi, con, cnan)
            layer['dirs'].append((hs, cs, gates, ghn))
        recs.append(layer)
        if l < L - 1 and train and p.p > 0:
            layer['mask'] = _dropout_mask(ctx, p, y.shape, x.dtype)
            y = y * layer['mask']
        cur = y
    return recs


def _final_states(p, recs, outputs):
    if not p.state_outputs:
        return
    D = _dirs(p)
    for l, layer in enumerate(recs):
        for d, (hs, cs, _, _) in enumerate(layer['dirs']):
            outputs[1][l * D + d] = hs[-1]
            if p.mode == 'lstm':
                outputs[2][l * D + d] = cs[-1]


@f16_safe
def _forward_cpu(ctx, p, inputs, outputs, aux):
    recs = _run_forward(ctx, p, inputs, outputs[0], ctx.is_train)
    _final_states(p, recs, outputs)
    ctx.state['rnn'] = recs if ctx.is_train else None


def _put(dst, src, req):
    if req == 'write':
        dst[...] = src
    elif req == 'add':
        dst += src


@f16_safe
def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x, w = inputs[0], inputs[1]
    T, N, C = x.shape
    H, L, D, G = p.state_size, p.num_layers, _dirs(p), _GATES[p.mode]
    mode, (lo, hi, con, _) = _MODES[p.mode], _clip(p)
    recs = ctx.state.get('rnn')
    if recs is None:   # backward without a training forward: recompute (no dropout)
        recs = _run_forward(ctx, p, inputs, np.empty((T, N, D * H), x.dtype), False)
    dw = np.zeros_like(w)
    dh0 = np.zeros((L * D, N, H), x.dtype)
    dc0 = np.zeros((L * D, N, H), x.dtype)
    og = list(out_grads) + [None] * 3
    dy = og[0] if og[0] is not None else np.zeros((T, N, D * H), x.dtype)
    dgx = np.empty((T * N, G * H), x.dtype)
    dgh = np.empty((T, N, G * H), x.dtype)
    dhp = np.zeros((N, H), x.dtype)
    for l in range(L - 1, -1, -1):
        layer = recs[l]
        xin = layer['x']
        i = xin.shape[2]
        dx = np.zeros((T, N, i), x.dtype)
        for d in range(D):
            k = l * D + d
            hs, cs, gates, ghn = layer['dirs'][d]
            wx, wh, _, _, _ = _views(p, w, C, k)
            dwx, dwh, dbx, dbh, _ = _views(p, dw, C, k)
            dh = og[1][k].copy() if p.state_outputs and og[1] is not None else \
                np.zeros((N, H), x.dtype)
            dc = og[2][k].copy() if p.state_outputs and p.mode == 'lstm' and og[2] is not None \
                else np.zeros((N, H), x.dtype)
            K.layer_backward(mode, np.ascontiguousarray(xin).reshape(T * N, i), wx, wh, hs, cs,
                             gates, ghn, dy, d * H, d == 1, dh, dc, dgx, dgh, dhp, dwx, dwh,
                             dbx, dbh, dx.reshape(T * N, i), lo, hi, con)
            dh0[k], dc0[k] = dh, dc
        if l > 0:
            prev = recs[l - 1]
            dy = dx * prev['mask'] if 'mask' in prev else dx
        else:
            _put(in_grads[0], dx, req[0])
    _put(in_grads[1], dw, req[1])
    _put(in_grads[2], dh0, req[2])
    if p.mode == 'lstm':
        _put(in_grads[3], dc0, req[3])


# ------------------------------------------------------------------ GPU
def _gpu_gemm(x, tx, y, ty, out, add):
    """``out (+)= op(x) @ op(y)`` on 2-D device arrays: the tiled GEMM of ``gemm_cuda``."""
    gemm_cuda.gemm(x, y, out, 1.0, 1.0 if add else 0.0, tx, ty)


def _dev(shape, dtype, zero=False):
    from numba import cuda
    a = cuda.device_array(shape, dtype)
    if zero:
        a.copy_to_device(np.zeros(shape, dtype))
    return a


def _gpu_put(dst, src, req):
    if req == 'null':
        return
    one = _dev(1, src.dtype)
    one.copy_to_device(np.ones(1, src.dtype))
    K.axpy_gpu.launch(dst.size, dst.reshape(-1), src.reshape(-1), one, req == 'add')


def _run_forward_gpu(ctx, p, inputs, y_top, train):
    x, w, h0 = inputs[0], inputs[1], inputs[2]
    T, N, C = tuple(x.shape)
    H, L, D, G = p.state_size, p.num_layers, _dirs(p), _GATES[p.mode]
    mode, (lo, hi, con, cnan) = _MODES[p.mode], _clip(p)
    c0 = inputs[3] if p.mode == 'lstm' else None
    dt = np.dtype(x.dtype)
    recs, cur = [], x
    for l in range(L):
        y = y_top if l == L - 1 else _dev((T, N, D * H), dt)
        layer = {'x': cur, 'dirs': []}
        for d in range(D):
            k = l * D + d
            wx, wh, bx, bh, i = _views(p, w, C, k)
            hs, cs = _dev((T + 1, N, H), dt), _dev((T + 1, N, H), dt, zero=True)
            hs[0].copy_to_device(h0[k])
            if c0 is not None:
                cs[0].copy_to_device(c0[k])
            gates, ghn = _dev((T, N, G * H), dt), _dev((T, N, H), dt)
            gx, gh = _dev((T * N, G * H), dt), _dev((N, G * H), dt)
            _gpu_gemm(cur.reshape(T * N, i), False, wx, True, gx, False)
            for s in range(T):
                t = T - 1 - s if d == 1 else s
                _gpu_gemm(hs[s], False, wh, True, gh, False)
                K.step_fwd_gpu.launch(N * H, mode, gx, t * N, bx, gh, bh, hs[s], cs[s], gates[s],
                                      hs[s + 1], cs[s + 1], ghn[s], y, t, d * H, lo, hi, con,
                                      cnan)
            layer['dirs'].append((hs, cs, gates, ghn))
        recs.append(layer)
        if l < L - 1 and train and p.p > 0:
            mask = _dropout_mask(ctx, p, (T, N, D * H), dt)
            layer['mask'] = _dev(mask.shape, dt)
            layer['mask'].copy_to_device(mask)
            dropped = _dev((T, N, D * H), dt)
            K.axpy_gpu.launch(y.size, dropped.reshape(-1), y.reshape(-1),
                              layer['mask'].reshape(-1), False)
            y = dropped
        cur = y
    return recs


def _forward_gpu(ctx, p, inputs, outputs, aux):
    recs = _run_forward_gpu(ctx, p, inputs, outputs[0], ctx.is_train)
    if p.state_outputs:
        D = _dirs(p)
        for l, layer in enumerate(recs):
            for d, (hs, cs, _, _) in enumerate(layer['dirs']):
                outputs[1][l * D + d].copy_to_device(hs[hs.shape[0] - 1])
                if p.mode == 'lstm':
                    outputs[2][l * D + d].copy_to_device(cs[cs.shape[0] - 1])
    ctx.state['rnn'] = recs if ctx.is_train else None


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x, w = inputs[0], inputs[1]
    T, N, C = tuple(x.shape)
    H, L, D, G = p.state_size, p.num_layers, _dirs(p), _GATES[p.mode]
    mode, (lo, hi, con, _) = _MODES[p.mode], _clip(p)
    dt = np.dtype(x.dtype)
    recs = ctx.state.get('rnn')
    if recs is None:
        recs = _run_forward_gpu(ctx, p, inputs, _dev((T, N, D * H), dt), False)
    dw = _dev(tuple(w.shape), dt, zero=True)
    dh0, dc0 = _dev((L * D, N, H), dt), _dev((L * D, N, H), dt, zero=True)
    og = list(out_grads) + [None] * 3
    dy = og[0] if og[0] is not None else _dev((T, N, D * H), dt, zero=True)
    dgx, dgh = _dev((T * N, G * H), dt), _dev((T, N, G * H), dt)
    dhp = _dev((N, H), dt)
    for l in range(L - 1, -1, -1):
        layer = recs[l]
        xin = layer['x']
        i = tuple(xin.shape)[2]
        dx = _dev((T, N, i), dt, zero=True)
        for d in range(D):
            k = l * D + d
            hs, cs, gates, ghn = layer['dirs'][d]
            wx, wh, _, _, _ = _views(p, w, C, k)
            dwx, dwh, dbx, dbh, _ = _views(p, dw, C, k)
            dh, dc = _dev((N, H), dt, zero=True), _dev((N, H), dt, zero=True)
            if p.state_outputs and og[1] is not None:
                dh.copy_to_device(og[1][k])
            if p.state_outputs and p.mode == 'lstm' and og[2] is not None:
                dc.copy_to_device(og[2][k])
            for s in range(T - 1, -1, -1):
                t = T - 1 - s if d == 1 else s
                K.step_bwd_gpu.launch(N * H, mode, gates[s], hs[s], cs[s], cs[s + 1], ghn[s], dy,
                                      t, d * H, dh, dc, dgx, t * N, dgh[s], dhp, lo, hi, con)
                dh.copy_to_device(dhp)
                _gpu_gemm(dgh[s], False, wh, False, dh, True)
            dg2 = dgh.reshape(T * N, G * H)
            _gpu_gemm(dg2, True, hs[0:T].reshape(T * N, H), False, dwh, True)
            _gpu_gemm(dgx, True, xin.reshape(T * N, i), False, dwx, True)
            _gpu_gemm(dgx, False, wx, False, dx.reshape(T * N, i), True)
            K.colsum_gpu.launch(G * H, dgx, dbx)
            K.colsum_gpu.launch(G * H, dg2, dbh)
            dh0[k].copy_to_device(dh)
            dc0[k].copy_to_device(dc)
        if l > 0:
            prev = recs[l - 1]
            if 'mask' in prev:
                masked = _dev((T, N, i), dt)
                K.axpy_gpu.launch(dx.size, masked.reshape(-1), dx.reshape(-1),
                                  prev['mask'].reshape(-1), False)
                dx = masked
            dy = dx
        else:
            _gpu_put(in_grads[0], dx, req[0])
    _gpu_put(in_grads[1], dw, req[1])
    _gpu_put(in_grads[2], dh0, req[2])
    if p.mode == 'lstm':
        _gpu_put(in_grads[3], dc0, req[3])


register_op(OpDef(
    name='RNN',
    arguments=_arguments,
    outputs=_outputs,
    infer_shape=_infer_shape,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    params=RNNParam,
    float_only=True,
    doc='Fused multi-layer (bidirectional) RNN, LSTM or GRU over time-major data.\n\n'
        'data (T, N, C) -> output (T, N, D*H); the weights of every layer and direction are '
        'packed in one `parameters` vector in MXNet\'s layout (all weights, then all biases; '
        'LSTM gates i, f, g, o; GRU gates r, z, n).\n',
    input_docs={'data': 'Input sequence (T, N, C), time major.',
                'parameters': 'Packed weights and biases (see the op docstring).',
                'state': 'Initial hidden state (L*D, N, H).',
                'state_cell': 'Initial LSTM cell state (L*D, N, H); lstm only.'},
))
