"""Generate golden Convolution / Deconvolution / Pooling fixtures from real MXNet 1.9.1.

Run with the reference install (not part of the test suite)::

    MXNET_MKLDNN_ENABLED=0 /work/mxref/bin/python tools/make_conv_fixtures.py

Writes ``tests/data/conv_golden.npz``: for case ``i``, ``i/op`` and ``i/params``
(JSON), ``i/in/<arg>`` inputs, ``i/head`` the head gradient, ``i/out`` the
forward output and ``i/grad/<arg>`` the gradients (grad_req='write'). Inputs are
float32 drawn from a fixed seed. The non-MKLDNN backend is the reference: its
avg-pooling backward with 'full' matches its forward.
"""
import json
import os

import numpy as np

os.environ.setdefault('MXNET_MKLDNN_ENABLED', '0')
os.environ.setdefault('MXNET_STORAGE_FALLBACK_LOG_VERBOSE', '0')
import mxnet as mx  # noqa: E402

CASES = [
    ('Convolution', dict(kernel=(3, 3), num_filter=4), (2, 3, 6, 5)),
    ('Convolution', dict(kernel=(3, 2), num_filter=4, stride=(2, 1), pad=(1, 2), dilate=(2, 1)),
     (2, 2, 7, 6)),
    ('Convolution', dict(kernel=(3, 3), num_filter=6, num_group=3, pad=(1, 1), no_bias=True),
     (2, 3, 5, 5)),
    ('Convolution', dict(kernel=(3,), num_filter=3, stride=(2,), pad=(1,)), (2, 2, 9)),
    ('Deconvolution', dict(kernel=(4, 4), num_filter=3, stride=(2, 2), pad=(1, 1)), (2, 2, 4, 3)),
    ('Deconvolution', dict(kernel=(3, 3), num_filter=4, stride=(2, 2), adj=(1, 1), no_bias=False,
                           num_group=2), (2, 2, 3, 4)),
    ('Deconvolution', dict(kernel=(4, 3), num_filter=2, stride=(2, 3), target_shape=(9, 8)),
     (2, 3, 4, 3)),
    # dilate with stride 1 only: MXNet 1.x's CPU deconvolution is wrong for dilate > 1 together
    # with stride > 1 (apache/mxnet#11203, #11629); ffnumba computes the true transpose there.
    ('Deconvolution', dict(kernel=(3,), num_filter=2, stride=(1,), dilate=(2,), pad=(1,)), (2, 2, 5)),
    ('Pooling', dict(kernel=(2, 2), stride=(2, 2), pool_type='max'), (2, 3, 6, 6)),
    ('Pooling', dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='max',
                     pooling_convention='full'), (2, 2, 6, 7)),
    ('Pooling', dict(kernel=(3, 2), stride=(2, 2), pad=(1, 1), pool_type='avg',
                     pooling_convention='full'), (2, 2, 6, 7)),
    ('Pooling', dict(kernel=(3, 3), stride=(2, 1), pad=(1, 1), pool_type='avg',
                     count_include_pad=False), (2, 2, 5, 6)),
    ('Pooling', dict(kernel=(2, 3), stride=(1, 2), pool_type='sum', pooling_convention='full'),
     (2, 2, 5, 6)),
    ('Pooling', dict(kernel=(2,), stride=(2,), pad=(1,), pool_type='avg',
                     pooling_convention='full'), (2, 3, 7)),
    ('Pooling', dict(kernel=(2, 2), pool_type='lp', p_value=2), (2, 2, 4, 5)),
    ('Pooling', dict(kernel=(1, 1), pool_type='avg', global_pool=True), (2, 3, 4, 5)),
]


def main():
    rng = np.random.default_rng(20240601)
    out = {}
    for i, (op, params, dshape) in enumerate(CASES):
        s = getattr(mx.sym, op)(mx.sym.Variable('data'), name='op', **params)
        arg_shapes, out_shapes, _ = s.infer_shape(data=dshape)
        names = s.list_arguments()
        exe = s.simple_bind(mx.cpu(), grad_req='write', data=dshape)
        for n, shp in zip(names, arg_shapes):
            v = rng.uniform(-1, 1, shp).astype(np.float32)
            exe.arg_dict[n][:] = v
            out['%d/in/%s' % (i, n[3:] if n.startswith('op_') else n)] = v
        y = exe.forward(is_train=True)[0].asnumpy()
        head = rng.uniform(-1, 1, y.shape).astype(np.float32)
        exe.backward(mx.nd.array(head))
        out['%d/op' % i] = np.array(op)
        out['%d/params' % i] = np.array(json.dumps(params))
        out['%d/head' % i] = head
        out['%d/out' % i] = y
        for n in names:
            out['%d/grad/%s' % (i, n[3:] if n.startswith('op_') else n)] = exe.grad_dict[n].asnumpy()
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        'tests', 'data', 'conv_golden.npz')
    np.savez_compressed(path, **out)
    print('wrote %s (%d cases)' % (path, len(CASES)))


if __name__ == '__main__':
    main()
