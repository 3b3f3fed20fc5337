"""Plain numpy references for the convolution and pooling tests.

Deliberately naive: explicit loops over output positions, one
``np.tensordot`` per position and group. They define what the ops mean and
share no code with the kernels.
"""
import numpy as np


def _defaults(nd, stride, pad, dilate):
    return (tuple(stride) or (1,) * nd, tuple(pad) or (0,) * nd, tuple(dilate) or (1,) * nd)


def _windows(in_sp, kernel, stride, pad, dilate):
    """Yield (output index, slices into the padded input) for every output position."""
    nd = len(kernel)
    out_sp = tuple((in_sp[a] + 2 * pad[a] - dilate[a] * (kernel[a] - 1) - 1) // stride[a] + 1
                   for a in range(nd))
    for o in np.ndindex(*out_sp):
        yield o, tuple(slice(o[a] * stride[a], o[a] * stride[a] + dilate[a] * (kernel[a] - 1) + 1,
                             dilate[a]) for a in range(nd))


def conv_forward(x, w, b, kernel, stride=(), pad=(), dilate=(), num_group=1):
    """Reference convolution ``(N, C, *i) x (F, C/G, *k) -> (N, F, *o)``."""
    nd = len(kernel)
    stride, pad, dilate = _defaults(nd, stride, pad, dilate)
    N, C = x.shape[:2]
    F = w.shape[0]
    G = num_group
    Cg, Fg = C // G, F // G
    xp = np.pad(x, [(0, 0), (0, 0)] + [(q, q) for q in pad])
    out_sp = tuple((x.shape[2 + a] + 2 * pad[a] - dilate[a] * (kernel[a] - 1) - 1) // stride[a] + 1
                   for a in range(nd))
    out = np.zeros((N, F) + out_sp, dtype=np.float64)
    axes = list(range(1, nd + 2))
    for o, sl in _windows(x.shape[2:], kernel, stride, pad, dilate):
        win = xp[(slice(None), slice(None)) + sl]
        for g in range(G):
            out[(slice(None), slice(g * Fg, (g + 1) * Fg)) + o] = np.tensordot(
                win[:, g * Cg:(g + 1) * Cg], w[g * Fg:(g + 1) * Fg], axes=(axes, axes))
    if b is not None:
        out += np.reshape(b, (1, F) + (1,) * nd)
    return out


def conv_backward(x, w, dy, kernel, stride=(), pad=(), dilate=(), num_group=1):
    """Reference gradients ``(dx, dw, db)`` of :func:`conv_forward` for head gradient ``dy``."""
    nd = len(kernel)
    stride, pad, dilate = _defaults(nd, stride, pad, dilate)
    C = x.shape[1]
    F = w.shape[0]
    G = num_group
    Cg, Fg = C // G, F // G
    xp = np.pad(x, [(0, 0), (0, 0)] + [(q, q) for q in pad]).astype(np.float64)
    dxp = np.zeros_like(xp)
    dw = np.zeros(w.shape, np.float64)
    for o, sl in _windows(x.shape[2:], kernel, stride, pad, dilate):
        win = xp[(slice(None), slice(None)) + sl]
        for g in range(G):
            gy = dy[(slice(None), slice(g * Fg, (g + 1) * Fg)) + o]          # (N, Fg)
            idx = (slice(None), slice(g * Cg, (g + 1) * Cg)) + sl
            dxp[idx] += np.tensordot(gy, w[g * Fg:(g + 1) * Fg], axes=(1, 0))
            dw[g * Fg:(g + 1) * Fg] += np.tensordot(gy, win[:, g * Cg:(g + 1) * Cg], axes=(0, 0))
    inner = (slice(None), slice(None)) + tuple(slice(q, q + n) for q, n in zip(pad, x.shape[2:]))
    db = dy.reshape(dy.shape[0], F, -1).sum(axis=(0, 2))
    return dxp[inner], dw, db


def pool_forward_backward(x, dy, kernel, pool_type='max', stride=(), pad=(), convention='valid',
                          count_include_pad=True, p_value=2, global_pool=False):
    """Reference pooling: ``(out, dx)`` for head gradient ``dy`` (``dy=None``: no dx)."""
    nd = x.ndim - 2
    if global_pool:
        kernel, stride, pad = x.shape[2:], (1,) * nd, (0,) * nd
    stride = tuple(stride) or (1,) * nd
    pad = tuple(pad) or (0,) * nd
    sp = x.shape[2:]
    out_sp = []
    for i, k, s, q in zip(sp, kernel, stride, pad):
        num = i + 2 * q - k
        if convention == 'same':
            out_sp.append(-(-i // s))
        else:
            out_sp.append((-(-num // s) if convention == 'full' else num // s) + 1)
    N, C = x.shape[:2]
    out = np.zeros((N, C) + tuple(out_sp))
    dx = np.zeros(x.shape)
    lowest = -np.inf      # max over an empty window (MXNet: -FLT_MAX; see ops/nn/pooling.py)
    for o in np.ndindex(*out_sp):
        start = [o[a] * stride[a] - pad[a] for a in range(nd)]
        end_pad = [min(start[a] + kernel[a], sp[a] + pad[a]) for a in range(nd)]
        lo = [max(v, 0) for v in start]
        hi = [min(e, n) for e, n in zip(end_pad, sp)]
        sl = (slice(None), slice(None)) + tuple(slice(a, max(a, b)) for a, b in zip(lo, hi))
        win = x[sl].reshape(N, C, -1).astype(np.float64)
        idx = (slice(None), slice(None)) + o
        empty = win.shape[2] == 0
        if pool_type == 'max':
            out[idx] = lowest if empty else win.max(axis=2)
        elif pool_type in ('sum', 'lp'):
            out[idx] = win.sum(axis=2) if pool_type == 'sum' else np.sum(win ** p_value, axis=2)
            if pool_type == 'lp':
                out[idx] = np.sign(out[idx]) * np.abs(out[idx]) ** (1.0 / p_value)
        else:
            size = (np.prod([e - s for s, e in zip(start, end_pad)]) if count_include_pad
                    else np.prod([max(0, b - a) for a, b in zip(lo, hi)]))
            out[idx] = win.sum(axis=2) / size if size > 0 else 0.0
        if dy is None or empty:
            continue
        g = dy[idx].astype(np.float64)                       # (N, C)
        dwin = np.zeros(win.shape)
        if pool_type == 'max':
            first = win.argmax(axis=2)                        # first maximum
            np.put_along_axis(dwin, first[..., None], g[..., None], axis=2)
        elif pool_type == 'sum' or (pool_type == 'lp' and p_value == 1):
            dwin += g[..., None]
        elif pool_type == 'lp':
            ov = out[idx][..., None]
            with np.errstate(divide='ignore', invalid='ignore'):
                dwin = np.where(ov != 0, g[..., None] * (win / ov) ** (p_value - 1), 0.0)
        else:
            dwin += g[..., None] / size
        dx[sl] += dwin.reshape(x[sl].shape)
    return out, dx


def deconv_forward(x, w, b, kernel, stride, pad, dilate, adj, num_group=1):
    """Reference transposed convolution: each input pixel scatters ``x * w``; crop ``pad``."""
    nd = len(kernel)
    N, C = x.shape[:2]
    G = num_group
    Cg, Fg = C // G, w.shape[1]
    F = Fg * G
    full = tuple(stride[a] * (x.shape[2 + a] - 1) + dilate[a] * (kernel[a] - 1) + 1 + adj[a]
                 for a in range(nd))
    y = np.zeros((N, F) + full)
    for i in np.ndindex(*x.shape[2:]):
        sl = tuple(slice(i[a] * stride[a], i[a] * stride[a] + dilate[a] * (kernel[a] - 1) + 1,
                         dilate[a]) for a in range(nd))
        for g in range(G):
            contrib = np.tensordot(x[(slice(None), slice(g * Cg, (g + 1) * Cg)) + i],
                                   w[g * Cg:(g + 1) * Cg], axes=(1, 0))      # (N, Fg, *k)
            y[(slice(None), slice(g * Fg, (g + 1) * Fg)) + sl] += contrib
    out = tuple(f - 2 * q for f, q in zip(full, pad))
    y = y[(slice(None), slice(None)) + tuple(slice(q, q + o) for q, o in zip(pad, out))]
    if b is not None:
        y = y + np.reshape(b, (1, F) + (1,) * nd)
    return y


def assert_same_results(on, off, rtol=1e-4, atol=1e-4):
    """Two ``(output, [gradients])`` results of two CPU paths: the same NaN and inf
    positions, and the finite values within the tolerance."""
    for a, b in zip([on[0]] + on[1], [off[0]] + off[1]):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        np.testing.assert_array_equal(np.isposinf(a), np.isposinf(b))
        np.testing.assert_array_equal(np.isneginf(a), np.isneginf(b))
        ok = np.isfinite(b)
        np.testing.assert_allclose(a[ok], b[ok], rtol=rtol, atol=atol)
