"""Per-operator time of one executor's forward+backward (benchmark-only instrumentation).

Used by ``lenet.py --profile`` and ``zoo.py --profile``.
"""
import collections
import json
import time


def fused_calls():
    """``[(module, attribute, (label, pass))]``: every fused call an executor binds.

    The one list of them: an inference executor runs ``Convolution -> BatchNorm ->
    relu`` chains as one call, a training executor ``Convolution -> relu`` forwards
    (the same call), ``BatchNorm -> relu | clip`` pairs and ``elemwise_add -> relu``
    pairs (:mod:`ffnumba._executor_train_fuse`, which looks the calls up when an
    executor is bound). None of them goes through an operator's compute table.
    """
    from ffnumba import _executor_train_fuse as tf_mod
    from ffnumba.ops.nn import _bn_act
    from ffnumba.ops.nn import _conv_epilogue as ep_mod
    from ffnumba.ops.nn import convolution as conv_mod
    return [(conv_mod, 'fused_forward_cpu', ('Convolution+BatchNorm/act (fused)', 'forward')),
            (ep_mod, 'add_relu_forward', ('elemwise_add+relu (fused)', 'forward')),
            (tf_mod, 'add_relu_forward', ('elemwise_add+relu (fused)', 'forward')),
            (_bn_act, 'relu_add_backward', ('elemwise_add+relu (fused)', 'backward')),
            (_bn_act, 'forward', ('BatchNorm+act (fused)', 'forward')),
            (_bn_act, 'backward', ('BatchNorm+act (fused)', 'backward'))]


def patch_fused(wrap):
    """Replace every :func:`fused_calls` entry by ``wrap(real, (label, pass))``; bind after.

    Returns
    -------
    callable
        Puts the real calls back.
    """
    patched = []
    for mod, attr, key in fused_calls():
        real = getattr(mod, attr, None)
        if real is None:
            continue
        patched.append((mod, attr, real))
        setattr(mod, attr, wrap(real, key))

    def restore():
        for mod, attr, real in patched:
            setattr(mod, attr, real)
    return restore


def op_profile(ff, sym, inputs, steps=10, train=True):
    """Share of forward+backward (or inference forward) time per (operator, pass).

    Wraps each operator's CPU forward/backward (and the fused inference calls of
    ``Convolution -> BatchNorm -> relu`` chains and ``elemwise_add -> relu`` pairs) with
    a timer before binding and
    restores them afterwards.

    Parameters
    ----------
    ff : module
        ``ffnumba``.
    sym : Symbol
    inputs : dict of str to numpy.ndarray
        Values for the data and label arguments (their shapes set the binding).
    steps : int, default 10
    train : bool, default True
        Time training steps (``forward(is_train=True)`` and ``backward``); False
        times the inference forward (``is_train=False``) of an executor bound
        without gradients.

    Returns
    -------
    list of (op name, 'forward' or 'backward', percent of the step, ms per step)
        Sorted by time, largest first, then a ``('(outside kernels)', '', %, ms)`` row.
    """
    import numpy as np
    from ffnumba.ops import get_op
    ops = sorted({n['op'] for n in json.loads(sym.tojson())['nodes'] if n['op'] != 'null'})
    totals = collections.Counter()
    saved = []
    guarded = []
    for name in ops:
        op = get_op(name)
        op.__dict__.pop('_guarded', None)     # the registry caches its wrapped kernels
        guarded.append(op)
        for kind, table in (('forward', op.forward), ('backward', op.backward)):
            fn = table['cpu']
            saved.append((table, fn))

            def timed(*args, _fn=fn, _key=(name, kind)):
                tic = time.perf_counter()
                _fn(*args)
                totals[_key] += time.perf_counter() - tic
            table['cpu'] = timed

    def timed_call(fn, key):
        def call(*args):
            tic = time.perf_counter()
            out = fn(*args)
            totals[key] += time.perf_counter() - tic
            return out
        return call
    restore = patch_fused(timed_call)
    try:
        exe = sym.simple_bind(ff.cpu(0), grad_req='write' if train else 'null',
                              **{k: v.shape for k, v in inputs.items()})
        rng = np.random.default_rng(0)
        for k, v in exe.arg_dict.items():
            if k in inputs:
                v[:] = inputs[k]
            elif k.endswith('weight'):
                v[:] = rng.uniform(-0.1, 0.1, v.shape)
        for i in range(steps + 1):
            if i == 1:
                totals.clear()
                tic = time.perf_counter()
            exe.forward(is_train=train)
            if train:
                exe.backward()
        whole = time.perf_counter() - tic
    finally:
        restore()
        for table, fn in saved:
            table['cpu'] = fn
        for op in guarded:
            op.__dict__.pop('_guarded', None)
    rows = [(name, kind, 100 * t / whole, 1000 * t / steps)
            for (name, kind), t in sorted(totals.items(), key=lambda kv: -kv[1])]
    outside = whole - sum(totals.values())
    rows.append(('(outside kernels)', '', 100 * outside / whole, 1000 * outside / steps))
    return rows
