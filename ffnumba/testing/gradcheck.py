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
import numbers

import numpy as np

from ..base import FFError
from .. import ndarray as nd
from .mx_utils import assert_almost_equal, default_context, default_numeric_eps

__all__ = ['assert_almost_equal', 'check_numeric_gradient', 'check_symbolic_forward',
           'check_symbolic_backward', 'check_consistency', 'default_context', 'bind_numpy']


def _as_dict(sym, values, names):
    if values is None:
        return {}
    if isinstance(values, dict):
        return dict(values)
    values = list(values)
    if len(values) != len(names):
        raise FFError('expected %d arrays for %s, got %d' % (len(names), names, len(values)))
    return dict(zip(names, values))


def _as_list_in_order(sym, values):
    """Head gradients given as a list, or as a dict by output name, in output order."""
    if isinstance(values, dict):
        return [values[n] for n in sym.list_outputs()]
    return list(values)


def _np(v):
    return v.asnumpy() if isinstance(v, nd.NDArray) else np.asarray(v)


def bind_numpy(sym, location, aux_states=None, grad_req='write', dtype=None, ctx=None,
               grads=None):
    """Bind ``sym`` with numpy inputs; returns the Executor.

    ``location`` (dict or list in ``list_arguments()`` order) gives every
    argument; ``grad_req`` a str or dict; ``grads`` optional initial
    gradient arrays (for ``'add'``). ``dtype`` None or ``'asnumpy'`` (MXNet's
    spelling) keeps each value's own dtype; a dtype casts every value to it.
    """
    ctx = ctx or default_context()
    if isinstance(dtype, str) and dtype == 'asnumpy':
        dtype = None
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
                           ctx=None, dtype=None, is_train=False, equal_nan=False):
    """Run ``sym`` forward and compare each output with ``expected`` (list or dict).

    ``rtol``/``atol`` ``None`` take MXNet's per-dtype defaults; ``equal_nan``
    counts NaN against NaN as equal.

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
            assert_almost_equal(out, _np(exp[name]), rtol, atol, names=(name, 'expected'),
                                equal_nan=equal_nan)
    return outs


def check_symbolic_backward(sym, location, out_grads, expected, rtol=1e-4, atol=1e-6,
                            aux_states=None, grad_req='write', ctx=None, dtype=None,
                            is_train=True, grad_stypes=None, equal_nan=False):
    """Run forward and backward and compare argument gradients with ``expected``.

    ``grad_stypes`` is accepted for MXNet compatibility and must be dense
    (``None`` or every value ``'default'``).

    ``expected`` is a dict by argument name (or a list in argument order);
    ``out_grads`` a list (or None for loss heads).

    Returns
    -------
    dict of numpy.ndarray
        The gradients by argument name.
    """
    if grad_stypes and any(v != 'default' for v in grad_stypes.values()):
        raise FFError('check_symbolic_backward: sparse gradients are not supported. '
                      'Received: grad_stypes=%r' % (grad_stypes,))
    arg_names = sym.list_arguments()
    exp = _as_dict(sym, expected, arg_names)
    if isinstance(grad_req, str):
        grad_req = {n: (grad_req if n in exp else 'null') for n in arg_names}
    exe = bind_numpy(sym, location, aux_states, grad_req=grad_req, dtype=dtype, ctx=ctx)
    exe.forward(is_train=is_train)
    if out_grads is not None:  # extra head gradients are ignored, as in MXNet
        out_grads = [nd.array(_np(g), ctx=o.context, dtype=o.dtype)
                     for g, o in zip(_as_list_in_order(sym, out_grads), exe.outputs)]
    exe.backward(out_grads)
    got = {n: exe.grad_dict[n].asnumpy() for n in arg_names if exe.grad_dict.get(n) is not None}
    for n, v in exp.items():
        if n not in got:  # grad_req 'null': nothing to compare (as MXNet)
            continue
        assert_almost_equal(got[n], _np(v), rtol, atol, names=('grad of ' + n, 'expected'),
                            equal_nan=equal_nan)
    return got


def check_numeric_gradient(sym, location, aux_states=None, numeric_eps=None, rtol=None,
                           atol=None, grad_nodes=None, use_forward_train=None, ctx=None,
                           grad_stype_dict=None, dtype=None, loss=None, is_train=True, seed=0):
    """Compare backward with a central-difference directional derivative.

    The check runs in float64 unless ``dtype`` names a lower precision
    (MXNet's ``dtype=``): then the executor is bound in that dtype, the step
    defaults to :func:`default_numeric_eps` and the tolerances to rtol 1e-2,
    atol 1e-4 (float32) or 1e-1, 1e-2 (float16). MXNet's own default dtype is
    float32; ffnumba's is float64, the stricter check.

    Parameters
    ----------
    sym : Symbol
    location : dict or list
        Value of every argument (cast to float64).
    aux_states : dict or list, optional
    numeric_eps : float, optional
        Step along the direction (float64: 1e-6).
    rtol, atol : float, optional
        Tolerance on each argument's directional derivative (float64: 1e-4, 1e-6).
    grad_nodes : list of str, optional
        Arguments to check (default: every argument).
    loss : callable(outputs, location) -> float, optional
        The scalar a loss head differentiates (its backward ignores head
        gradients). Default: ``sum_i <out_i, h_i>`` with random ``h_i``.
    is_train, use_forward_train : bool, default True
        Mode of the forward passes (``use_forward_train`` is MXNet's name).
    grad_stype_dict : dict, optional
        Accepted for MXNet compatibility; dense only.
    dtype : float dtype, optional
        See above (default float64).

    Raises
    ------
    AssertionError
        Naming the argument whose analytic and numeric derivatives differ.
    """
    if use_forward_train is not None:
        is_train = bool(use_forward_train)
    dt = np.dtype(dtype if dtype is not None else np.float64)
    low = {np.dtype(np.float32): (1e-2, 1e-4), np.dtype(np.float16): (1e-1, 1e-2)}
    if dt in low:
        rtol = low[dt][0] if rtol is None else rtol
        atol = low[dt][1] if atol is None else atol
        numeric_eps = default_numeric_eps()[dt] if numeric_eps is None else numeric_eps
    elif dt != np.dtype(np.float64):
        raise FFError('check_numeric_gradient: dtype must be float16, float32 or float64. '
                      'Received: dtype=%s' % dt)
    rtol = 1e-4 if rtol is None else rtol
    atol = 1e-6 if atol is None else atol
    numeric_eps = 1e-6 if numeric_eps is None else numeric_eps
    rng = np.random.default_rng(seed)
    arg_names = sym.list_arguments()
    loc = {n: np.asarray(_np(v), dtype=np.float64) for n, v in
           _as_dict(sym, location, arg_names).items()}
    aux = {n: np.asarray(_np(v), dtype=np.float64) for n, v in
           _as_dict(sym, aux_states, sym.list_auxiliary_states()).items()}
    nodes = list(grad_nodes) if grad_nodes is not None else list(arg_names)
    exe = bind_numpy(sym, loc, aux, grad_req={n: 'write' for n in nodes}, dtype=dt, ctx=ctx)
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
                 [nd.array(h, ctx=exe.outputs[0].context, dtype=dt) for h in heads])
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


def check_consistency(sym, ctx_list, location=None, aux_states=None, rtol=None, atol=None,
                      grad_req='write', is_train=True, seed=0, scale=1.0, arg_params=None,
                      aux_params=None, raise_on_err=True, ground_truth=None, equal_nan=False,
                      use_uniform=False, rand_type=np.float64):
    """Run ``sym`` on every entry of ``ctx_list``; outputs and gradients must agree.

    Two forms:

    * ffnumba's: ``ctx_list`` a list of Contexts and ``location`` the argument
      values (dict or list); every context is compared with the first.
    * MXNet's: ``ctx_list`` a list of dicts ``{'ctx': cpu(0), '<arg>': shape,
      'type_dict': {'<arg>': np.float32}}``; inputs are drawn once (normal with
      std ``scale``, or uniform with ``use_uniform``; ``arg_params`` and
      ``aux_params`` override), every entry runs forward (training) and
      backward with the same head gradients, and each is compared with the
      most precise entry (or ``ground_truth``) at the looser dtype's default
      tolerance. ``location`` given as a number is ``scale`` (MXNet's third
      positional argument).

    Returns
    -------
    list
        ffnumba form: ``(outputs, grads)`` per context (numpy). MXNet form:
        the ground truth, a dict of output and gradient arrays.

    Raises
    ------
    AssertionError
        Naming the output or gradient and the context that differ (with
        ``raise_on_err=False`` the MXNet form prints instead).
    """
    if ctx_list and isinstance(ctx_list[0], dict):
        if isinstance(location, numbers.Number):
            scale = location
        return _check_consistency_mx(sym, ctx_list, scale, grad_req, arg_params, aux_params,
                                     rtol, atol, raise_on_err, ground_truth, equal_nan,
                                     use_uniform, rand_type)
    rtol = 1e-4 if rtol is None else rtol
    atol = 1e-5 if atol is None else atol
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


def _check_consistency_mx(sym, ctx_list, scale, grad_req, arg_params, aux_params, rtol, atol,
                          raise_on_err, ground_truth, equal_nan, use_uniform, rand_type):
    syms = sym if isinstance(sym, (list, tuple)) else [sym] * len(ctx_list)
    exes = []
    for s, spec in zip(syms, ctx_list):
        spec = dict(spec)
        ctx = spec.pop('ctx')
        types = spec.pop('type_dict', None)
        exes.append(s.simple_bind(ctx, grad_req=grad_req, type_dict=types, **spec))
    first = exes[0]
    arg_params = dict(arg_params or {})
    aux_params = dict(aux_params or {})
    for n, arr in first.arg_dict.items():
        if n not in arg_params:
            arg_params[n] = (np.random.uniform(-scale, scale, arr.shape) if use_uniform
                             else np.random.normal(size=arr.shape, scale=scale)).astype(rand_type)
    for n, arr in first.aux_dict.items():
        aux_params.setdefault(n, np.zeros(arr.shape))
    prec = [max(np.dtype(a.dtype).itemsize for a in e.arg_arrays) if e.arg_arrays else 0
            for e in exes]
    for e in exes:
        for n, arr in e.arg_dict.items():
            arr[:] = _np(arg_params[n]).astype(arr.dtype)
        for n, arr in e.aux_dict.items():
            arr[:] = _np(aux_params[n]).astype(arr.dtype)
    heads = None
    results = []
    for e in exes:
        e.forward(is_train=True)
        if heads is None:
            heads = [np.random.normal(size=o.shape) for o in e.outputs]
        if grad_req != 'null':
            e.backward([nd.array(h, ctx=o.context, dtype=o.dtype)
                        for h, o in zip(heads, e.outputs)])
        res = {'output %d' % i: o.asnumpy() for i, o in enumerate(e.outputs)}
        res.update({'grad of ' + n: g.asnumpy() for n, g in e.grad_dict.items()
                    if g is not None})
        results.append(res)
    gt_i = int(np.argmax(prec))
    gt = ground_truth if ground_truth is not None else results[gt_i]
    for i, res in enumerate(results):
        if ground_truth is None and i == gt_i:
            continue
        for key, val in res.items():
            if key not in gt:
                continue
            try:
                assert_almost_equal(val, gt[key], rtol, atol, equal_nan=equal_nan,
                                    names=('%s on %s' % (key, ctx_list[i]), 'ground truth'))
            except AssertionError as err:
                if raise_on_err:
                    raise
                print(err)
    return gt
