"""Spatial upsampling of (N, C, H, W) maps (``UpSampling``).

``sample_type='nearest'`` takes ``num_args`` inputs ``arg0 .. arg{k-1}``. The
output is ``(H0 * scale, W0 * scale)`` (``H0, W0`` of the first input); input
``i`` is repeated by ``Ho / H_i`` (which must divide exactly) along both axes::

    up_i[n, c, y, x] = in_i[n, c, y // s_i, x // s_i]
    concat: out = concat_c(up_0, ..., up_{k-1});   sum: out = up_0 + ... + up_{k-1}

Its gradient sums the head gradient over each ``s_i x s_i`` block.

``sample_type='bilinear'`` takes ``data`` and a learnable ``weight`` of shape
``(C, 1, K, K)``, ``K = 2s - s % 2``, and is a per-channel transposed
convolution with stride ``s`` and pad ``p = ceil((s - 1) / 2)``::

    out[n, c, y*s - p + ky, x*s - p + kx] += data[n, c, y, x] * weight[c, 0, ky, kx]

(MXNet initialises that weight with the ``Bilinear`` initializer.)

Shapes
------
=========  ===========================  ==========================================
input      shape                        note
=========  ===========================  ==========================================
arg_i      (N, C_i, H_i, W_i)           nearest; sum mode needs equal C_i
data       (N, C, H, W)                 bilinear
weight     (C, 1, K, K)                 bilinear, auto-created; num_filter = C
output     (N, C_out, H0*s, W0*s)       C_out = sum C_i (concat) or C
=========  ===========================  ==========================================

Source: MXNet 1.9.1 UpSampling documentation and observed shapes; bilinear
as Long et al., "Fully Convolutional Networks" (2015).
"""
from numba import njit

from ...base import ShapeError
from ...jit import gpu_body
from ..params import Params, Field
from ..registry import OpDef, register_op, shape_assign
from ..templates import JIT, LazyCudaKernel, f16_safe, import_cuda, launch_1d
from ._conv_cuda import unravel4

cuda = None  # bound by import_cuda(globals()) on first GPU use
__all__ = ['UpSamplingParam']


class UpSamplingParam(Params):
    """Parameters of UpSampling."""

    scale = Field(int, doc='Up-sampling factor of the first input (>= 1).', low=1)
    sample_type = Field(str, doc="'nearest' or 'bilinear'.", choices=('bilinear', 'nearest'))
    num_filter = Field(int, 0, 'Channels for bilinear (must equal C when given).', low=0)
    multi_input_mode = Field(str, 'concat', "Nearest with several inputs: 'concat' or 'sum'.",
                             choices=('concat', 'sum'))
    num_args = Field(int, 1, 'Number of inputs (nearest: 1..N; bilinear: data + weight).',
                     low=1)
    workspace = Field(int, 512, 'Ignored (MXNet temporary memory, MB).', low=0)


def _arguments(p):
    if p.sample_type == 'bilinear':
        return ['data', 'weight']
    return ['arg%d' % i for i in range(p.num_args)]


def _kernel_pad(s):
    return 2 * s - s % 2, s // 2      # pad = ceil((s - 1) / 2)


def _check4(name, shape):
    if len(shape) != 4:
        raise ShapeError('UpSampling: input `%s` must be 4-D (N, C, H, W). Received: %s'
                         % (name, tuple(shape)))


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    names = _arguments(p)
    d0 = ins[0]
    if d0 is None:
        return ins, [None], list(aux_shapes)
    _check4(names[0], d0)
    n, c, h, w = d0
    oh, ow = h * p.scale, w * p.scale
    if p.sample_type == 'bilinear':
        if p.num_filter not in (0, c):
            raise ShapeError('UpSampling: bilinear `num_filter`=%d must equal the channels '
                             'of data (%d)' % (p.num_filter, c))
        k, _ = _kernel_pad(p.scale)
        shape_assign(ins, 1, (c, 1, k, k), 'weight')
        return ins, [(n, c, oh, ow)], list(aux_shapes)
    c_out = c
    for i in range(1, len(ins)):
        s = ins[i]
        if s is None:
            return ins, [None], list(aux_shapes)
        _check4(names[i], s)
        if s[0] != n or s[2] == 0 or s[3] == 0 or oh % s[2] or ow % s[3] or \
                oh // s[2] != ow // s[3]:
            raise ShapeError('UpSampling: input `%s` of shape %s cannot be scaled to the '
                             'output size (%d, %d) of input `%s` %s'
                             % (names[i], tuple(s), oh, ow, names[0], tuple(d0)))
        if p.multi_input_mode == 'sum':
            if s[1] != c:
                raise ShapeError('UpSampling: sum mode needs equal channels; `%s` has %d, '
                                 '`%s` has %d' % (names[i], s[1], names[0], c))
        else:
            c_out += s[1]
    return ins, [(n, c_out, oh, ow)], list(aux_shapes)


# ----------------------------------------------------------------- element bodies
# One output element per call, written once: the CPU kernels loop over the
# elements, the GPU kernels give each thread one (grid-stride). All gather, so
# no element is written twice and ``add`` is a flag.

@njit
def _put4(a, i, j, k, m, v, add):
    """``a[i, j, k, m] (+)= v``."""
    if add:
        a[i, j, k, m] += v
    else:
        a[i, j, k, m] = v


@njit(error_model='numpy')
def _nearest_fwd_at(x, s, c_off, add, out, n, c, y, xx):
    _put4(out, n, c_off + c, y, xx, x[n, c, y // s, xx // s], add)


@njit(error_model='numpy')
def _nearest_bwd_at(og, s, c_off, add, gx, n, c, y, xx):
    acc = 0.0
    for dy in range(s):
        for dx in range(s):
            acc += og[n, c_off + c, y * s + dy, xx * s + dx]
    _put4(gx, n, c, y, xx, acc, add)


@njit(error_model='numpy')
def _bilinear_fwd_at(x, wt, s, pad, out, n, c, oy, ox):
    """out[Y] sums x[y] * w[Y + pad - y*s] over the y that reach Y."""
    h, w = x.shape[2], x.shape[3]
    k = wt.shape[2]
    acc = 0.0
    for ky in range((oy + pad) % s, k, s):
        y = (oy + pad - ky) // s
        if y < 0 or y >= h:
            continue
        for kx in range((ox + pad) % s, k, s):
            xx = (ox + pad - kx) // s
            if 0 <= xx < w:
                acc += x[n, c, y, xx] * wt[c, 0, ky, kx]
    out[n, c, oy, ox] = acc


@njit(error_model='numpy')
def _bilinear_data_at(og, wt, s, pad, add, gx, n, c, y, xx):
    k = wt.shape[2]
    oh, ow = og.shape[2], og.shape[3]
    acc = 0.0
    for ky in range(k):
        oy = y * s - pad + ky
        if oy < 0 or oy >= oh:
            continue
        for kx in range(k):
            ox = xx * s - pad + kx
            if 0 <= ox < ow:
                acc += og[n, c, oy, ox] * wt[c, 0, ky, kx]
    _put4(gx, n, c, y, xx, acc, add)


@njit(error_model='numpy')
def _bilinear_weight_at(x, og, s, pad, add, gw, c, ky, kx):
    n_n, h, w = x.shape[0], x.shape[2], x.shape[3]
    oh, ow = og.shape[2], og.shape[3]
    acc = 0.0
    for n in range(n_n):
        for y in range(h):
            oy = y * s - pad + ky
            if oy < 0 or oy >= oh:
                continue
            for xx in range(w):
                ox = xx * s - pad + kx
                if 0 <= ox < ow:
                    acc += x[n, c, y, xx] * og[n, c, oy, ox]
    _put4(gw, c, 0, ky, kx, acc, add)


# ----------------------------------------------------------------- CPU kernels

@njit(**JIT)
def _nearest_fwd(x, s, c_off, add, out):
    n_n, n_c, h, w = x.shape
    for n in range(n_n):
        for c in range(n_c):
            for y in range(h * s):
                for xx in range(w * s):
                    _nearest_fwd_at(x, s, c_off, add, out, n, c, y, xx)


@njit(**JIT)
def _nearest_bwd(og, s, c_off, add, gx):
    n_n, n_c, h, w = gx.shape
    for n in range(n_n):
        for c in range(n_c):
            for y in range(h):
                for xx in range(w):
                    _nearest_bwd_at(og, s, c_off, add, gx, n, c, y, xx)


@njit(**JIT)
def _bilinear_fwd(x, wt, s, pad, out):
    n_n, n_c, oh, ow = out.shape
    for n in range(n_n):
        for c in range(n_c):
            for oy in range(oh):
                for ox in range(ow):
                    _bilinear_fwd_at(x, wt, s, pad, out, n, c, oy, ox)


@njit(**JIT)
def _bilinear_bwd(x, wt, og, s, pad, gx, mode_x, gw, mode_w):
    """mode: 0 null, 1 write, 2 add."""
    n_n, n_c, h, w = x.shape
    k = wt.shape[2]
    if mode_x != 0:
        for n in range(n_n):
            for c in range(n_c):
                for y in range(h):
                    for xx in range(w):
                        _bilinear_data_at(og, wt, s, pad, mode_x == 2, gx, n, c, y, xx)
    if mode_w != 0:
        for c in range(n_c):
            for ky in range(k):
                for kx in range(k):
                    _bilinear_weight_at(x, og, s, pad, mode_w == 2, gw, c, ky, kx)


_MODES = {'null': 0, 'write': 1, 'add': 2}


@f16_safe
def _forward_cpu(ctx, p, inputs, outputs, aux):
    out = outputs[0]
    if p.sample_type == 'bilinear':
        _, pad = _kernel_pad(p.scale)
        _bilinear_fwd(inputs[0], inputs[1], p.scale, pad, out)
        return
    oh = out.shape[2]
    c_off = 0
    for i, x in enumerate(inputs):
        add = p.multi_input_mode == 'sum' and i > 0
        _nearest_fwd(x, oh // x.shape[2], c_off, add, out)
        if p.multi_input_mode == 'concat':
            c_off += x.shape[1]


@f16_safe
def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    og = out_grads[0]
    if p.sample_type == 'bilinear':
        if req[0] == 'null' and req[1] == 'null':
            return
        _, pad = _kernel_pad(p.scale)
        gx = in_grads[0] if req[0] != 'null' else inputs[0]
        gw = in_grads[1] if req[1] != 'null' else inputs[1]
        _bilinear_bwd(inputs[0], inputs[1], og, p.scale, pad, gx, _MODES[req[0]],
                      gw, _MODES[req[1]])
        return
    oh = og.shape[2]
    c_off = 0
    for i, x in enumerate(inputs):
        if req[i] != 'null':
            _nearest_bwd(og, oh // x.shape[2], c_off, req[i] == 'add', in_grads[i])
        if p.multi_input_mode == 'concat':
            c_off += x.shape[1]


# ----------------------------------------------------------------- GPU kernels

def _build_gpu():
    import_cuda(globals())
    nf, nbw = gpu_body(_nearest_fwd_at), gpu_body(_nearest_bwd_at)
    bf, bd, bw = gpu_body(_bilinear_fwd_at), gpu_body(_bilinear_data_at), \
        gpu_body(_bilinear_weight_at)

    @cuda.jit
    def nearest_fwd(x, s, c_off, add, out):
        n_c, oh, ow = x.shape[1], x.shape[2] * s, x.shape[3] * s
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for e in range(start, x.shape[0] * n_c * oh * ow, stride):
            n, c, y, xx = unravel4(e, n_c, oh, ow)
            nf(x, s, c_off, add, out, n, c, y, xx)

    @cuda.jit
    def nearest_bwd(og, s, c_off, add, gx):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for e in range(start, gx.size, stride):
            n, c, y, xx = unravel4(e, gx.shape[1], gx.shape[2], gx.shape[3])
            nbw(og, s, c_off, add, gx, n, c, y, xx)

    @cuda.jit
    def bilinear_fwd(x, wt, s, pad, out):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for e in range(start, out.size, stride):
            n, c, oy, ox = unravel4(e, out.shape[1], out.shape[2], out.shape[3])
            bf(x, wt, s, pad, out, n, c, oy, ox)

    @cuda.jit
    def bilinear_bwd_data(og, wt, s, pad, add, gx):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for e in range(start, gx.size, stride):
            n, c, y, xx = unravel4(e, gx.shape[1], gx.shape[2], gx.shape[3])
            bd(og, wt, s, pad, add, gx, n, c, y, xx)

    @cuda.jit
    def bilinear_bwd_weight(x, og, s, pad, add, gw):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for e in range(start, gw.size, stride):
            _, c, ky, kx = unravel4(e, gw.shape[0], gw.shape[2], gw.shape[3])
            bw(x, og, s, pad, add, gw, c, ky, kx)

    return dict(nearest_fwd=nearest_fwd, nearest_bwd=nearest_bwd, bilinear_fwd=bilinear_fwd,
                bilinear_bwd_data=bilinear_bwd_data, bilinear_bwd_weight=bilinear_bwd_weight)


_GPU = LazyCudaKernel(_build_gpu)


def _forward_gpu(ctx, p, inputs, outputs, aux):
    k = _GPU.kernel
    out = outputs[0]
    if p.sample_type == 'bilinear':
        _, pad = _kernel_pad(p.scale)
        launch_1d(k['bilinear_fwd'], out.size, inputs[0], inputs[1], p.scale, pad, out)
        return
    oh = out.shape[2]
    c_off = 0
    for i, x in enumerate(inputs):
        s = oh // x.shape[2]
        add = p.multi_input_mode == 'sum' and i > 0
        launch_1d(k['nearest_fwd'], x.size * s * s, x, s, c_off, add, out)
        if p.multi_input_mode == 'concat':
            c_off += x.shape[1]


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    k = _GPU.kernel
    og = out_grads[0]
    if p.sample_type == 'bilinear':
        _, pad = _kernel_pad(p.scale)
        if req[0] != 'null':
            launch_1d(k['bilinear_bwd_data'], inputs[0].size, og, inputs[1], p.scale, pad,
                      req[0] == 'add', in_grads[0])
        if req[1] != 'null':
            launch_1d(k['bilinear_bwd_weight'], inputs[1].size, inputs[0], og, p.scale, pad,
                      req[1] == 'add', in_grads[1])
        return
    oh = og.shape[2]
    c_off = 0
    for i, x in enumerate(inputs):
        if req[i] != 'null':
            launch_1d(k['nearest_bwd'], x.size, og, oh // x.shape[2], c_off, req[i] == 'add',
                      in_grads[i])
        if p.multi_input_mode == 'concat':
            c_off += x.shape[1]


register_op(OpDef(
    name='UpSampling',
    backward_reads=lambda p: ('data', 'weight') if p.sample_type == 'bilinear' else (),
    float_only=True,
    arguments=_arguments,
    params=UpSamplingParam,
    infer_shape=_infer_shape,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    variadic='num_args',
    doc=__doc__,
    input_docs={'arg0': 'First input (nearest), (N, C, H, W).',
                'data': 'Input (bilinear), (N, C, H, W).',
                'weight': 'Bilinear kernel (C, 1, K, K).'},
))
