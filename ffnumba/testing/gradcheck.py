"""Numeric checks of symbols: forward values, backward values, gradients.

These are the helpers MXNet users know from ``mx.test_utils``, run through
the public Symbol/Executor API so that a passing check means the whole stack
(inference, binding, kernels) is right.

The gradient check works in float64 and is *directional* (after Chainer's
``check_backward``): for each checked argument ``x`` it draws a random
direction ``d`` and compares ``<dL/dx, d>`` from ``backward`` with the central
difference ``(L(x + eps d) - L(x - eps d)) / (2 eps)``, so each argument costs
two forward passes whatever its size. ``L`` is ``sum_i <out_i, h_i>`` for
fixed random head gradients ``h_i``; for loss heads, whose backward ignores
head gradients, pass ``loss=`` the scalar the head's gradient belongs to.
"""
import numpy as np

from ..base import FFError
from ..context import cpu
from .. import ndarray as nd

__all__ = ['assert_almost_equal', 'check_numeric_gradient', 'check_symbolic_forward',
           'check_symbolic_backward', 'check_consistency', 'default_context', 'bind_numpy']


def default_context():
    """The context tests run on (``cpu(0)``)."""
    return cpu(0)


def assert_almost_equal(a, b, rtol=1e-5, atol=1e-20, names=('a', 'b'), equal_nan=False):
    """Assert ``|a - b| <= atol + rtol * |b|`` elementwise, with a useful message.

    Parameters
    ----------
    a, b : array_like or NDArray
    rtol, atol : float
    names : (str, str)
        How to call the two sides in the error.

    Raises
    ------
    AssertionError
        Naming the worst element, its index and both values.
    """
    a = np.asarray(a.asnumpy() if isinstance(a, nd.NDArray) else a, dtype=np.float64)
    b = np.asarray(b.asnumpy() if isinstance(b, nd.NDArray) else b, dtype=np.float64)
    if a.shape != b.shape:
        raise AssertionError('shape mismatch: %s %s vs %s %s' % (names[0], a.shape, names[1], b.shape))
    if np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan):
        return
    err = np.abs(a - b) - (atol + rtol * np.abs(b))
    err = np.where(np.isnan(err), np.inf, err)
    idx = np.unravel_index(np.argmax(err), a.shape) if a.ndim else ()
    raise AssertionError(
        'Items are not equal (rtol=%g, atol=%g): worst at index %s: %s=%r, %s=%r; '
        'max abs error %g' % (rtol, atol, idx, names[0], a[idx], names[1], b[idx],
                              float(np.nanmax(np.abs(a - b)))))


def _as_dict(sym, values, names):
    if values is None:
        return {}
    if isinstance(values, dict):
        return dict(values)
    values = list(values)
    if len(values) != len(names):
        raise FFError('expected %d arrays for %s, got %d' % (len(names), names, len(values)))
    return dict(zip(names, values))


def _np(v):
    return v.asnumpy() if isinstance(v, nd.NDArray) else np.asarray(v)


def bind_numpy(sym, location, aux_states=None, grad_req='write', dtype=None, ctx=None,
               grads=None):
    """Bind ``sym`` with numpy inputs; returns the Executor.

    ``location`` (dict or list in ``list_arguments()`` order) gives every
    argument; ``grad_req`` a str or dict; ``grads`` optional initial
    gradient arrays (for ``'add'``).
    """
    ctx = ctx or default_context()
    arg_names = sym.list_arguments()
    aux_names = sym.list_auxiliary_states()
    loc = _as_dict(sym, location, arg_names)
    missing = [n for n in arg_names if n not in loc]
    if missing:
        raise FFError('bind_numpy: no value for arguments %s' % missing)
    aux = _as_dict(sym, aux_states, aux_names)
    dt = lambda v: np.dtype(dtype) if dtype is not None else _np(v).dtype
    args = {n: nd.array(_np(loc[n]), ctx=ctx, dtype=dt(loc[n])) for n in arg_names}
    aux_arrays = {}
    for n in aux_names:
        if n not in aux:
            raise FFError('bind_numpy: no value for auxiliary state %s' % n)
        aux_arrays[n] = nd.array(_np(aux[n]), ctx=ctx, dtype=dt(aux[n]))
    if isinstance(grad_req, str):
        req = {n: grad_req for n in arg_names}
    else:
        req = {n: grad_req.get(n, 'null') for n in arg_names}
    args_grad = {}
    for n in arg_names:
        if req[n] != 'null':
            init = grads[n] if grads is not None and n in grads else np.zeros_like(_np(args[n]))
            args_grad[n] = nd.array(_np(init), ctx=ctx, dtype=args[n].dtype)
    return sym.bind(ctx, args=args, args_grad=args_grad, grad_req=req, aux_states=aux_arrays)


def check_symbolic_forward(sym, location, expected, rtol=1e-4, atol=1e-6, aux_states=None,
                           ctx=None, dtype=None, is_train=False):
    """Run ``sym`` forward and compare each output with ``expected`` (list or dict).

    Returns
    -------
    list of numpy.ndarray
        The outputs.
    """
    exe = bind_numpy(sym, location, aux_states, grad_req='null', dtype=dtype, ctx=ctx)
    exe.forward(is_train=is_train)
    outs = [o.asnumpy() for o in exe.outputs]
    exp = _as_dict(sym, expected, sym.list_outputs())
    for name, out in zip(sym.list_outputs(), outs):
        if name in exp:
            assert_almost_equal(out, _np(exp[name]), rtol, atol, names=(name, 'expected'))
    return outs


def check_symbolic_backward(sym, location, out_grads, expected, rtol=1e-4, atol=1e-6,
                            aux_states=None, grad_req='write', ctx=None, dtype=None,
                            is_train=True):
    """Run forward and backward and compare argument gradients with ``expected``.

    ``expected`` is a dict by argument name (or a list in argument order);
    ``out_grads`` a list (or None for loss heads).

    Returns
    -------
    dict of numpy.ndarray
        The gradients by argument name.
    """
    arg_names = sym.list_arguments()
    exp = _as_dict(sym, expected, arg_names)
    if isinstance(grad_req, str):
        grad_req = {n: (grad_req if n in exp else 'null') for n in arg_names}
    exe = bind_numpy(sym, location, aux_states, grad_req=grad_req, dtype=dtype, ctx=ctx)
    exe.forward(is_train=is_train)
    if out_grads is not None:
        out_grads = [nd.array(_np(g), ctx=exe.outputs[0].context, dtype=exe.outputs[i].dtype)
                     for i, g in enumerate(out_grads)]
    exe.backward(out_grads)
    got = {n: exe.grad_dict[n].asnumpy() for n in arg_names if exe.grad_dict.get(n) is not None}
    for n, v in exp.items():
        assert_almost_equal(got[n], _np(v), rtol, atol, names=('grad of ' + n, 'expected'))
    return got


def check_numeric_gradient(sym, location, aux_states=None, numeric_eps=1e-6, rtol=1e-4,
                           atol=1e-6, grad_nodes=None, ctx=None, loss=None, is_train=True,
                           seed=0):
    """Compare backward with a float64 central-difference directional derivative.

    Parameters
    ----------
    sym : Symbol
    location : dict or list
        Value of every argument (cast to float64).
    aux_states : dict or list, optional
    numeric_eps : float, default 1e-6
        Step along the direction.
    rtol, atol : float
        Tolerance on each argument's directional derivative.
    grad_nodes : list of str, optional
        Arguments to check (default: every argument).
    loss : callable(outputs, location) -> float, optional
        The scalar a loss head differentiates (its backward ignores head
        gradients). Default: ``sum_i <out_i, h_i>`` with random ``h_i``.
    is_train : bool, default True
        Mode of the forward passes.

    Raises
    ------
    AssertionError
        Naming the argument whose analytic and numeric derivatives differ.
    """
    rng = np.random.default_rng(seed)
    arg_names = sym.list_arguments()
    loc = {n: np.asarray(_np(v), dtype=np.float64) for n, v in
           _as_dict(sym, location, arg_names).items()}
    aux = {n: np.asarray(_np(v), dtype=np.float64) for n, v in
           _as_dict(sym, aux_states, sym.list_auxiliary_states()).items()}
    nodes = list(grad_nodes) if grad_nodes is not None else list(arg_names)
    exe = bind_numpy(sym, loc, aux, grad_req={n: 'write' for n in nodes}, dtype='float64',
                     ctx=ctx)
    exe.forward(is_train=is_train)
    heads = [rng.standard_normal(o.shape) for o in exe.outputs]

    def objective(values):
        for n, v in values.items():
            exe.arg_dict[n][:] = v
        for n, v in aux.items():
            exe.aux_dict[n][:] = v
        exe.forward(is_train=is_train)
        outs = [o.asnumpy() for o in exe.outputs]
        if loss is not None:
            return float(loss(outs, values))
        return float(sum(np.sum(o * h) for o, h in zip(outs, heads)))

    objective(loc)
    exe.backward(None if loss is not None else
                 [nd.array(h, ctx=exe.outputs[0].context, dtype='float64') for h in heads])
    analytic = {n: exe.grad_dict[n].asnumpy().copy() for n in nodes}
    for n in nodes:
        d = rng.standard_normal(loc[n].shape)
        plus = dict(loc)
        plus[n] = loc[n] + numeric_eps * d
        minus = dict(loc)
        minus[n] = loc[n] - numeric_eps * d
        numeric = (objective(plus) - objective(minus)) / (2 * numeric_eps)
        got = float(np.sum(analytic[n] * d))
        scale = max(abs(numeric), abs(got), np.sqrt(np.sum(analytic[n] ** 2)) * 1e-3)
        if not abs(got - numeric) <= atol + rtol * scale:
            raise AssertionError(
                'gradient check failed for argument %r: analytic directional derivative %r, '
                'numeric %r (eps=%g, rtol=%g, atol=%g)' % (n, got, numeric, numeric_eps, rtol, atol))
    objective(loc)


def check_consistency(sym, ctx_list, location, aux_states=None, rtol=1e-4, atol=1e-5,
                      grad_req='write', is_train=True, seed=0):
    """Run ``sym`` on every context in ``ctx_list``; outputs and gradients must agree.

    Returns
    -------
    list of (outputs, grads)
        One entry per context, numpy arrays.
    """
    rng = np.random.default_rng(seed)
    results = []
    heads = None
    for ctx in ctx_list:
        exe = bind_numpy(sym, location, aux_states, grad_req=grad_req, ctx=ctx)
        exe.forward(is_train=is_train)
        if heads is None:
            heads = [rng.standard_normal(o.shape) for o in exe.outputs]
        exe.backward([nd.array(h, ctx=ctx, dtype=o.dtype) for h, o in zip(heads, exe.outputs)])
        outs = [o.asnumpy() for o in exe.outputs]
        grads = {n: g.asnumpy() for n, g in exe.grad_dict.items() if g is not None}
        results.append((outs, grads))
    ref_outs, ref_grads = results[0]
    for ctx, (outs, grads) in zip(ctx_list[1:], results[1:]):
        for i, (a, b) in enumerate(zip(outs, ref_outs)):
            assert_almost_equal(a, b, rtol, atol, names=('output %d on %s' % (i, ctx),
                                                         'on %s' % ctx_list[0]))
        for n in ref_grads:
            assert_almost_equal(grads[n], ref_grads[n], rtol, atol,
                                names=('grad of %s on %s' % (n, ctx), 'on %s' % ctx_list[0]))
    return results
