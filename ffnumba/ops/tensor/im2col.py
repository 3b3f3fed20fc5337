"""``im2col`` and ``col2im``: unfold image patches into columns and fold them back
(MXNet ``mx.nd.im2col`` / ``mx.nd.col2im``; 1-D and 2-D kernels, NCW / NCHW).

Math (2-D; a 1-D kernel is the 2-D case with height 1)
------------------------------------------------------
With kernel ``(KH, KW)``, stride ``s``, dilation ``d``, padding ``p`` and output
grid ``OH = (H + 2 p_h - d_h (KH - 1) - 1) // s_h + 1`` (same for ``OW``)::

    im2col:  col[n, (c KH + i) KW + j, oy OW + ox] = x[n, c, oy s_h - p_h + i d_h,
                                                        ox s_w - p_w + j d_w]   (0 outside)
    col2im:  x[n, c, y, x] = sum of the col entries that im2col reads from (y, x)

so ``col2im`` is the adjoint of ``im2col`` (overlapping patches add up); each
op's gradient is the other op applied to the head gradient.

Shapes: im2col ``(N, C, H, W) -> (N, C KH KW, OH OW)``; col2im
``(N, C KH KW, L) -> (N, C, *output_size)`` with ``L = OH OW``.
CPU: ``@njit`` loops; GPU: ``@cuda.jit`` twins (atomic adds in col2im).

Errors: a kernel of rank other than 1 or 2 (MXNet also takes 3-D kernels; not
ported), parameters of mismatched ranks, an empty output grid, or a column
count not matching are ParamError/ShapeError.

Source: MXNet 1.9.1 ``src/operator/nn/im2col.cc`` documentation.
"""
import numpy as np
from numba import njit

from ...base import ParamError, ShapeError
from ..params import Field, Params, Shape
from ..registry import OpDef, register_op
from ..templates import LazyCudaKernel, import_cuda, launch_1d

__all__ = ['Im2colParam', 'Col2imParam']

cuda = None  # bound by import_cuda(globals()) on first GPU use


def _validate(self):
    k = len(self.kernel)
    if k not in (1, 2):
        raise ParamError('%s: `kernel` must have 1 or 2 entries (3-D is not supported). '
                         'Received: kernel=%s' % (self._op, tuple(self.kernel)))
    for nm in ('stride', 'dilate', 'pad') + (('output_size',) if self._op == 'col2im' else ()):
        v = getattr(self, nm)
        if len(v) not in ((k,) if nm == 'output_size' else (0, k)):
            raise ParamError('%s: `%s` must %shave %d entries like `kernel`. Received: %s=%s'
                             % (self._op, nm, '' if nm == 'output_size' else 'be empty or ',
                                k, nm, tuple(v)))


def _geometry_fields():
    return dict(
        kernel=Field(Shape, doc='Kernel size (kh, kw) or (k,).', low=1),
        stride=Field(Shape, Shape(), 'Stride per axis (default 1).', low=1),
        dilate=Field(Shape, Shape(), 'Dilation per axis (default 1).', low=1),
        pad=Field(Shape, Shape(), 'Zero padding per axis (default 0).', low=0))


# MXNet's declaration order (positional params): col2im takes output_size first
Im2colParam = type('Im2colParam', (Params,), dict(
    _geometry_fields(), _op='im2col', validate=_validate,
    __doc__='Parameters of im2col.'))
Col2imParam = type('Col2imParam', (Params,), dict(
    dict(output_size=Field(Shape, doc='Spatial size of the image (H, W) or (W,).', low=1)),
    **_geometry_fields(), _op='col2im', validate=_validate, __doc__='Parameters of col2im.'))


def _geom(p, spatial):
    """(KH, KW, SH, SW, DH, DW, PH, PW, H, W, OH, OW) with 1-D lifted to height 1."""
    k = len(p.kernel)
    two = (lambda v, dflt: tuple(v) if v else (dflt,) * k)
    ker, st, dl, pd = (two(p.kernel, 1), two(p.stride, 1), two(p.dilate, 1), two(p.pad, 0))
    sp = tuple(spatial)
    if k == 1:
        ker, st, dl, pd, sp = (1,) + ker, (1,) + st, (1,) + dl, (0,) + pd, (1,) + sp
    out = tuple((sp[a] + 2 * pd[a] - dl[a] * (ker[a] - 1) - 1) // st[a] + 1 for a in range(2))
    if min(out) < 1:
        raise ShapeError('%s: the kernel %s (dilate %s) does not fit the padded input %s'
                         % (p._op, tuple(p.kernel), dl, tuple(spatial)))
    return ker + st + dl + pd + sp + out


@njit(cache=True, nogil=True)
def _walk_cpu(img, col, g, to_col):
    kh, kw, sh, sw, dh, dw, ph, pw, h, w, oh, ow = g
    for n in range(img.shape[0]):
        for c in range(img.shape[1]):
            for i in range(kh):
                for j in range(kw):
                    row = (c * kh + i) * kw + j
                    for oy in range(oh):
                        y = oy * sh - ph + i * dh
                        for ox in range(ow):
                            x = ox * sw - pw + j * dw
                            inside = 0 <= y < h and 0 <= x < w
                            if to_col:
                                col[n, row, oy * ow + ox] = img[n, c, y, x] if inside else 0.0
                            elif inside:
                                img[n, c, y, x] += col[n, row, oy * ow + ox]


def _build_gpu():
    import_cuda(globals())

    @cuda.jit
    def walk(img, col, g, to_col):
        kh, kw, sh, sw, dh, dw = g[0], g[1], g[2], g[3], g[4], g[5]
        ph, pw, h, w, oh, ow = g[6], g[7], g[8], g[9], g[10], g[11]
        rows, ncol = col.shape[1], col.shape[2]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for t in range(start, col.size, stride):
            n = t // (rows * ncol)
            row = (t // ncol) % rows
            q = t % ncol
            c, i, j = row // (kh * kw), (row // kw) % kh, row % kw
            y = (q // ow) * sh - ph + i * dh
            x = (q % ow) * sw - pw + j * dw
            inside = 0 <= y < h and 0 <= x < w
            if to_col:
                col[n, row, q] = img[n, c, y, x] if inside else 0
            elif inside:
                cuda.atomic.add(img, (n, c, y, x), col[n, row, q])

    return walk


_GPU = LazyCudaKernel(_build_gpu)


def _img4(a, g):
    return a.reshape(a.shape[0], a.shape[1], g[8], g[9])


def _run(dev, img, col, g, to_col, req='write'):
    """to_col: col <- im2col(img); else img (+)= col2im(col), by req."""
    img4 = _img4(img, g)
    if dev == 'cpu':
        work = (lambda a: a.astype(np.float32)) if img.dtype == np.float16 else (lambda a: a)
        if to_col:
            tmp = np.empty(col.shape, np.float32) if col.dtype == np.float16 else col
            _walk_cpu(work(img4), tmp, np.array(g, np.int64), True)
            if tmp is not col:
                col[...] = tmp
        else:
            acc = work(img4).copy() if req == 'add' else np.zeros(img4.shape, work(img4).dtype)
            _walk_cpu(acc, work(col), np.array(g, np.int64), False)
            img4[...] = acc
        return
    from numba import cuda as _cuda
    if not to_col and req == 'write':
        img.copy_to_device(np.zeros(img.shape, img.dtype))
    if col.size:
        launch_1d(_GPU.kernel, col.size, img4, col, _cuda.to_device(np.array(g, np.int64)),
                  to_col)


def _im2col_shape(p, in_shapes, aux_shapes, out_shapes):
    d = in_shapes[0]
    if d is None:
        return [None], [None], []
    if len(d) != 2 + len(p.kernel):
        raise ShapeError('im2col: data must be (N, C, *spatial) with %d spatial axes. '
                         'Received: shape %s' % (len(p.kernel), tuple(d)))
    g = _geom(p, d[2:])
    return [tuple(d)], [(d[0], d[1] * g[0] * g[1], g[10] * g[11])], []


def _col2im_shape(p, in_shapes, aux_shapes, out_shapes):
    d = in_shapes[0]
    if d is None:
        return [None], [None], []
    g = _geom(p, p.output_size)
    kk = g[0] * g[1]
    if len(d) != 3 or d[1] % kk or d[2] != g[10] * g[11]:
        raise ShapeError('col2im: data must be (N, C*%d, %d) for kernel %s and output_size '
                         '%s. Received: shape %s' % (kk, g[10] * g[11], tuple(p.kernel),
                                                     tuple(p.output_size), tuple(d)))
    return [tuple(d)], [(d[0], d[1] // kk) + tuple(p.output_size)], []


def _im2col(dev):
    def forward(ctx, p, inputs, outputs, aux):
        _run(dev, inputs[0], outputs[0], _geom(p, inputs[0].shape[2:]), True)

    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if req[0] != 'null':
            _run(dev, in_grads[0], out_grads[0], _geom(p, inputs[0].shape[2:]), False, req[0])
    return forward, backward


def _col2im(dev):
    def forward(ctx, p, inputs, outputs, aux):
        _run(dev, outputs[0], inputs[0], _geom(p, p.output_size), False)

    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if req[0] == 'null':
            return
        g = _geom(p, p.output_size)
        if req[0] == 'write':
            _run(dev, out_grads[0], in_grads[0], g, True)
            return
        if dev == 'cpu':
            tmp = np.empty_like(in_grads[0])
            _run(dev, out_grads[0], tmp, g, True)
            in_grads[0] += tmp
        else:
            from numba import cuda as _cuda
            tmp = _cuda.device_array(in_grads[0].shape, in_grads[0].dtype)
            _run(dev, out_grads[0], tmp, g, True)
            in_grads[0].copy_to_device(in_grads[0].copy_to_host() + tmp.copy_to_host())
    return forward, backward


for _name, _make, _shape, _params, _doc in (
        ('im2col', _im2col, _im2col_shape, Im2colParam, 'Image (N, C, *spatial).'),
        ('col2im', _col2im, _col2im_shape, Col2imParam, 'Columns (N, C*prod(kernel), L).')):
    _fb = {d: _make(d) for d in ('cpu', 'gpu')}
    register_op(OpDef(
        name=_name, arguments=['data'], backward_reads=(), infer_shape=_shape,
        forward={d: f for d, (f, _) in _fb.items()},
        backward={d: b for d, (_, b) in _fb.items()}, params=_params,
        doc='%s; see the module docs.\n\n%s' % (_name, __doc__), input_docs={'data': _doc}))
