"""Write tests/data/norm_ops_golden.npz: MXNet 1.9.1 forward and gradients of the
per-sample normalisation ops (LayerNorm, GroupNorm, InstanceNorm, L2Normalization).

Run with MXNet 1.9.1 (never a dependency of ffnumba):

    MXNET_MKLDNN_ENABLED=0 /work/mxref/bin/python tools/make_norm_fixtures.py

float32 (some of these MXNet kernels have no float64). Keys: ``<case>|<k>`` for
k = inputs (data, gamma, beta), head, output, grad of each input; ``cases``
holds ``[[case, op, params, [input names]], ...]`` as JSON.
"""
import json
import os

import numpy as np
import mxnet as mx
from mxnet import autograd

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, '..', 'tests', 'data', 'norm_ops_golden.npz')

CASES = [
    ('layer_axis1', 'LayerNorm', dict(axis=1), (2, 4, 3), 4),
    ('layer_last', 'LayerNorm', dict(eps=1e-3), (3, 5), 5),
    ('group2', 'GroupNorm', dict(num_groups=2), (2, 4, 3), 2),
    ('instance', 'InstanceNorm', dict(eps=1e-4), (2, 3, 2, 2), 3),
    ('l2_channel', 'L2Normalization', dict(mode='channel'), (2, 4, 3), 0),
    ('l2_spatial', 'L2Normalization', dict(mode='spatial'), (2, 3, 2, 2), 0),
    ('l2_instance', 'L2Normalization', dict(mode='instance', eps=1e-3), (3, 4), 0),
]


def main():
    rs = np.random.RandomState(5)
    data, meta = {}, []
    for case, op, params, shape, c in CASES:
        names = ['data'] + (['gamma', 'beta'] if c else [])
        vals = [rs.randn(*shape)] + ([rs.uniform(0.5, 1.5, c), rs.randn(c)] if c else [])
        vals = [v.astype('float32') for v in vals]
        head = rs.randn(*shape).astype('float32')
        arrs = [mx.nd.array(v) for v in vals]
        for a in arrs:
            a.attach_grad()
        with autograd.record():
            y = getattr(mx.nd, op)(*arrs, **params)
        y.backward(mx.nd.array(head))
        for n, v, a in zip(names, vals, arrs):
            data['%s|%s' % (case, n)] = v
            data['%s|grad_%s' % (case, n)] = a.grad.asnumpy()
        data[case + '|head'] = head
        data[case + '|output'] = y.asnumpy()
        meta.append([case, op, params, names])
    data['cases'] = np.array(json.dumps(meta))
    np.savez(OUT, **data)
    print('wrote', OUT)


if __name__ == '__main__':
    main()
