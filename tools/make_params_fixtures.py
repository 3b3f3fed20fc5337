"""Write small ``.params`` files with real MXNet 1.9.1 for ffnumba's codec tests.

Run with the reference install (never imported by the package or the tests)::

    MXNET_MKLDNN_ENABLED=0 /work/mxref/bin/python tools/make_params_fixtures.py

Outputs go to ``tests/data/params/``: one ``.params`` file per case and
``expected.npz`` holding the values every file must decode to, keyed
``<case>|<index or name>`` (plus ``<case>|<key>|shape`` for sparse arrays,
stored densified).
"""
import os

import numpy as np
import mxnet as mx

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'data', 'params')


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(7)
    expected = {}

    def put(case, data):
        mx.nd.save(os.path.join(OUT, case + '.params'), data)
        items = data.items() if isinstance(data, dict) else enumerate(
            data if isinstance(data, list) else [data])
        for k, v in items:
            expected['%s|%s' % (case, k)] = v.asnumpy()

    f32 = rng.randn(2, 3).astype(np.float32)
    put('list', [mx.nd.array(f32), mx.nd.array(np.arange(5), dtype='int32')])
    put('single', mx.nd.array(rng.randn(4).astype(np.float32)))
    put('checkpoint', {
        'arg:fc1_weight': mx.nd.array(rng.randn(3, 4).astype(np.float32)),
        'arg:fc1_bias': mx.nd.array(rng.randn(3).astype(np.float32)),
        'aux:bn_moving_mean': mx.nd.array(rng.randn(7).astype(np.float16), dtype='float16'),
    })
    put('small', {'arg:w': mx.nd.array(np.arange(6).reshape(2, 3), dtype='float32'),
                  'aux:m': mx.nd.array(np.arange(7), dtype='float16')})
    dt = {}
    for name in ('float16', 'float32', 'float64', 'int32', 'int64', 'uint8', 'int8', 'bool'):
        if name == 'bool':
            host = rng.rand(2, 3) > 0.5
        elif name.startswith('float'):
            host = rng.randn(2, 3).astype(name)
        else:
            info = np.iinfo(name)
            host = rng.randint(max(info.min, -100), min(info.max, 100), (2, 3)).astype(name)
        dt[name] = mx.nd.array(host, dtype=name)
    dt['int64_big'] = mx.nd.array(np.array([2 ** 40, -2 ** 40 + 3], np.int64), dtype='int64')
    dt['rank4'] = mx.nd.array(rng.randn(1, 2, 3, 2).astype(np.float32))
    put('dtypes', dt)
    put('empty', [mx.nd.array([])])
    put('empty_list', [])
    put('unicode_names', {'arg:poids_é': mx.nd.ones((2,)), '': mx.nd.zeros((1,))})

    # numpy-shape semantics (V3 magic): 0-d scalars and zero-size dims.
    mx.npx.set_np()
    try:
        data = {'s': mx.np.array(3.5), 'e': mx.np.zeros((0, 3)), 'v': mx.np.ones((2,))}
        mx.npx.save(os.path.join(OUT, 'npshape.params'), data)
        for k, v in data.items():
            expected['npshape|%s' % k] = v.asnumpy()
    finally:
        mx.npx.reset_np()

    # Sparse storage: readers densify it.
    dense = np.zeros((4, 3), np.float32)
    dense[1] = [1, 2, 3]
    dense[3] = [4, 5, 6]
    rsp = mx.nd.array(dense).tostype('row_sparse')
    csr = mx.nd.array(dense).tostype('csr')
    zero_rsp = mx.nd.zeros((3, 2)).tostype('row_sparse')
    sp = {'rsp': rsp, 'csr': csr, 'zero_rsp': zero_rsp}
    mx.nd.save(os.path.join(OUT, 'sparse.params'), sp)
    for k, v in sp.items():
        expected['sparse|%s' % k] = v.tostype('default').asnumpy()

    np.savez(os.path.join(OUT, 'expected.npz'), **expected)
    for f in sorted(os.listdir(OUT)):
        print(f, os.path.getsize(os.path.join(OUT, f)))


if __name__ == '__main__':
    main()
