"""Write tests/data/update_ops_golden.npz: MXNet 1.9.1's imperative optimizer update ops.

Run with MXNet 1.9.1 (never a dependency of ffnumba):

    MXNET_MKLDNN_ENABLED=0 /work/mxref/bin/python tools/make_update_op_fixtures.py

For each case: inputs drawn from a fixed seed, three in-place steps
(``out=weight``, as training loops call them), and the weight and every
state after each step. Keys: ``<case>/in/<name>``, ``<case>/step<k>/<name>``;
the case list with its params is stored as JSON under ``cases``.
"""
import json
import os

import numpy as np
import mxnet as mx

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, '..', 'tests', 'data', 'update_ops_golden.npz')

CASES = [
    ('sgd_update', [], dict(lr=0.1, wd=0.01)),
    ('sgd_update', [], dict(lr=0.05, rescale_grad=0.5, clip_gradient=0.3)),
    ('sgd_mom_update', ['mom'], dict(lr=0.1, momentum=0.9, wd=0.01)),
    ('nag_mom_update', ['mom'], dict(lr=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5)),
    ('adam_update', ['mean', 'var'], dict(lr=0.01, wd=0.01, clip_gradient=0.5)),
    ('adam_update', ['mean', 'var'], dict(lr=0.02, beta1=0.8, beta2=0.99, epsilon=1e-6)),
    ('rmsprop_update', ['n'], dict(lr=0.01, gamma1=0.9, wd=0.01, clip_weights=1.5)),
    ('rmspropalex_update', ['n', 'g', 'delta'], dict(lr=0.01, gamma1=0.9, gamma2=0.8)),
    ('ftrl_update', ['z', 'n'], dict(lr=0.1, lamda1=0.01, beta=1.0, wd=0.01)),
    ('signsgd_update', [], dict(lr=0.1, wd=0.01)),
    ('signum_update', ['mom'], dict(lr=0.1, momentum=0.9, wd=0.01, wd_lh=0.02)),
    ('mp_sgd_update', ['weight32'], dict(lr=0.1, wd=0.01)),
    ('mp_sgd_mom_update', ['mom', 'weight32'], dict(lr=0.1, momentum=0.9, wd=0.01)),
]


def main():
    rs = np.random.RandomState(7)
    data, meta = {}, []
    for i, (op, states, params) in enumerate(CASES):
        key = 'c%d' % i
        mp = op.startswith('mp_')
        wdt = 'float16' if mp else 'float64'
        w = rs.randn(7).astype(wdt)
        vals = {'weight': w}
        for s in states:
            if s == 'weight32':
                vals[s] = w.astype('float32')
            elif s in ('n', 'var'):
                vals[s] = rs.uniform(0.1, 1.0, 7).astype('float32' if mp else wdt)
            else:
                vals[s] = (0.1 * rs.randn(7)).astype('float32' if mp else wdt)
        grads = [rs.randn(7).astype(wdt) for _ in range(3)]
        for n, v in vals.items():
            data['%s/in/%s' % (key, n)] = v
        for k, g in enumerate(grads):
            data['%s/grad%d' % (key, k)] = g
        nds = {n: mx.nd.array(v, dtype=v.dtype) for n, v in vals.items()}
        for k, g in enumerate(grads):
            args = [nds['weight'], mx.nd.array(g, dtype=g.dtype)] + [nds[s] for s in states]
            getattr(mx.nd, op)(*args, out=nds['weight'], **params)
            for n, v in nds.items():
                data['%s/step%d/%s' % (key, k, n)] = v.asnumpy()
        meta.append(dict(key=key, op=op, states=states, params=params))
    data['cases'] = np.array(json.dumps(meta))
    np.savez(OUT, **data)
    print('wrote', OUT, len(meta), 'cases')


if __name__ == '__main__':
    main()
