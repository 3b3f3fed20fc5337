"""The child process: runs trials read from stdin, one JSON line of result per trial.

Protocol (stdout, one JSON object per line, flushed): ``{"start": i}`` before
trial ``i`` runs and ``{"done": i, "status": ..., "msg": ...}`` after. A
trial that starts but never finishes crashed the process or hung; the
parent sees which one from the last ``start``.
"""
import json
import resource
import sys
import traceback
import warnings

import numpy as np

FLT_MAX = float(np.finfo(np.float32).max)


def _values(rng, shape, dtype, mode, inst, p, name):
    if mode in ('nan', 'inf', '-inf', 'max') and np.dtype(dtype).kind == 'f':
        v = {'nan': np.nan, 'inf': np.inf, '-inf': -np.inf, 'max': FLT_MAX}[mode]
        return np.full(shape, v, dtype)
    x = None
    if inst is not None:
        try:
            x = inst.inputs(rng, p, {name: shape}).get(name)
        except Exception:
            x = None
    if x is None or np.shape(x) != tuple(shape):
        x = rng.uniform(-1, 1, shape)
    if np.dtype(dtype).kind in 'iub':
        x = np.round(np.asarray(x) * 3)
        if np.dtype(dtype).kind in 'ub':
            x = np.abs(x)
    with np.errstate(all='ignore'):
        return np.asarray(x).astype(dtype)


def run_op(trial):
    import ffnumba as ff
    from ffnumba.ops import get_op
    from ffnumba.testing.gradcheck import bind_numpy
    from .trials import op_seeds
    seed = op_seeds()[trial['op']]
    mut = trial['mut']
    p, shapes, dtype, mode = dict(seed.params), dict(seed.shapes), 'float32', 'uniform'
    kind = mut[0]
    if kind == 'zero':
        s = list(shapes[mut[1]])
        s[mut[2]] = 0
        shapes[mut[1]] = tuple(s)
    elif kind == 'zeroall':
        shapes = {k: (0,) + tuple(v[1:]) if len(v) else v for k, v in shapes.items()}
    elif kind == 'grow':
        s = list(shapes[mut[1]])
        s[mut[2]] += 1
        shapes[mut[1]] = tuple(s)
    elif kind == 'rank':
        shapes[mut[1]] = (2,) * mut[2]
    elif kind == 'dtype':
        dtype = mut[1]
    elif kind == 'value':
        mode = mut[1]
    elif kind == 'field':
        p[mut[1]] = tuple(mut[2]) if isinstance(mut[2], list) else mut[2]
    inst = seed.instance()
    sym = seed.make_symbol(p)
    arg_shapes, out_shapes, aux_shapes = sym.infer_shape(**shapes)
    if arg_shapes is None:
        return 'ok', 'shape inference incomplete'
    rng = np.random.default_rng(0)
    args = dict(zip(sym.list_arguments(), arg_shapes))
    total = sum(float(np.prod(s, dtype=np.float64)) for s in list(arg_shapes) + list(aux_shapes))
    if total > 2e7:
        # too big for numpy inputs made here: let the library allocate (and refuse) them
        exe = sym.simple_bind(ff.cpu(), grad_req='write', **args)
        exe.forward(is_train=True)
        return 'ok', 'large shapes bound'

    loc = {n: _values(rng, s, dtype, mode, inst, p, n) for n, s in args.items()}
    aux_sh = dict(zip(sym.list_auxiliary_states(), aux_shapes))
    aux = None
    if inst is not None:
        try:
            aux = {n: np.asarray(v).astype(dtype) for n, v in
                   inst.aux_inputs(rng, p, aux_sh).items()}
        except Exception:
            aux = None
    if aux is None or set(aux) != set(aux_sh):
        aux = {n: (np.zeros(s, dtype) if n.endswith('mean') else np.ones(s, dtype))
               for n, s in aux_sh.items()}
    exe = bind_numpy(sym, loc, aux, grad_req='write')
    exe.forward(is_train=False)     # the OpCase references describe inference
    outs = [o.asnumpy() for o in exe.outputs]
    got = [o.shape for o in outs]
    if got != [tuple(s) for s in out_shapes][:len(got)]:
        return 'wrong', 'output shapes %s, inferred %s' % (got, out_shapes)
    finite_in = mode == 'uniform' and all(np.isfinite(v).all() for v in loc.values()
                                          if v.dtype.kind == 'f')
    if finite_in:
        for o in outs:
            if o.dtype.kind == 'f' and o.size and (np.abs(o.astype(np.float64)) == FLT_MAX).any():
                return 'wrong', 'output holds -FLT_MAX/FLT_MAX for finite inputs'
    if inst is not None and kind in ('base', 'zero', 'zeroall') and finite_in:
        ref = None
        with warnings.catch_warnings(), np.errstate(all='ignore'):
            warnings.simplefilter('ignore')
            try:
                ref = inst.reference(p, **{n: v.astype(np.float64) for n, v in loc.items()})
            except Exception:
                ref = None      # the numpy reference does not cover this input
        if ref is not None:
            for i, (o, r) in enumerate(zip(outs, ref)):
                r = np.asarray(r)
                if o.shape != r.shape and o.size == r.size == 0:
                    continue
                if o.shape != r.shape or not np.allclose(o.astype(np.float64), r, rtol=1e-3,
                                                         atol=1e-4, equal_nan=True):
                    return 'wrong', 'output %d differs from the numpy reference' % i
    exe.forward(is_train=True)
    heads = None
    if not get_op(trial['op']).is_loss:
        heads = [ff.nd.ones(o.shape, dtype=o.dtype) for o in exe.outputs]
    exe.backward(heads)
    for n, g in exe.grad_dict.items():
        if g is not None and g.shape != tuple(args[n]):
            return 'wrong', 'gradient of %s has shape %s, argument %s' % (n, g.shape, args[n])
    return 'ok', ''


def _selftest(name):
    """Trials that misbehave on purpose, to test the runner itself."""
    if name == 'segfault':
        import ctypes
        ctypes.string_at(0)
    elif name == 'hang':
        import time
        time.sleep(3600)
    raise KeyError('selftest')


def run_trial(trial):
    """``(status, message)``: ``ok``, ``fferror``, ``nonff`` or ``wrong``."""
    from ffnumba.base import FFError
    from .api_cases import run_api
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            if trial['kind'] == 'op':
                return run_op(trial)
            if trial['kind'] == 'selftest':
                return _selftest(trial['name'])
            return run_api(trial)
    except FFError as e:
        return 'fferror', '%s: %s' % (type(e).__name__, e)
    except RecursionError:
        return 'nonff', 'RecursionError'
    except Exception as e:
        tb = traceback.extract_tb(e.__traceback__)[-1]
        return 'nonff', '%s: %s (%s:%s)' % (type(e).__name__, str(e)[:300], tb.filename,
                                            tb.lineno)


def main():
    mem = int(float(sys.argv[1])) if len(sys.argv) > 1 else 6 << 30
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    trials = json.loads(sys.stdin.read())
    out = sys.stdout
    sys.stdout = sys.stderr     # prints of the code under test must not mix with the protocol
    for i, t in enumerate(trials):
        out.write(json.dumps({'start': i}) + '\n')
        out.flush()
        status, msg = run_trial(t)
        out.write(json.dumps({'done': i, 'status': status, 'msg': str(msg)[:2000]}) + '\n')
        out.flush()


if __name__ == '__main__':
    main()
