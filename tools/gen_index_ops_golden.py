"""Write tests/data/index_ops_mxnet.json: MXNet 1.9.1 results for the index and shape ops.

Run with real MXNet 1.9.1 (never a dependency of ffnumba)::

    MXNET_MKLDNN_ENABLED=0 /path/to/mxnet-1.9.1/bin/python tools/gen_index_ops_golden.py

For each case it builds the symbol with MXNet's own Python API, saves its
JSON, binds it in float64 with ``grad_req='write'``, runs forward
(``is_train=True``) and backward with fixed head gradients, and records the
inputs, outputs and gradients (``null`` where MXNet has no gradient).
``tests/ops/tensor/test_index_mxnet_golden.py`` loads the JSON into ffnumba
and compares. Arrays are small so the fixture stays a few tens of KB. Values are
distinct multiples of 1/8 and head gradients have 2 decimals
(short JSON numbers; no ties for the ordering ops).
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, '..', 'tests', 'data', 'index_ops_mxnet.json')

P4 = (0, 0, 0, 0, 1, 2, 2, 1)

# (op, params, input shapes, integer-valued inputs {position: (low, high)})
CASES = [
    ('slice', dict(begin=(None, 1), end=(None, None), step=(-1, 2)), [(4, 5)], {}),
    ('slice', dict(begin=(1, -3), end=(3, -1)), [(4, 5, 2)], {}),
    ('crop', dict(begin=(1,), end=(3,)), [(4, 3)], {}),
    ('slice_like', dict(axes=(0, -1)), [(4, 5, 6), (2, 3, 4)], {}),
    ('split_v2', dict(indices_or_sections=(1, 3), axis=1), [(2, 5)], {}),
    ('split_v2', dict(indices_or_sections=2), [(4, 3)], {}),
    ('tile', dict(reps=(2, 1, 3)), [(2, 3)], {}),
    ('repeat', dict(repeats=2, axis=-1), [(2, 3)], {}),
    ('repeat', dict(repeats=3), [(2, 2)], {}),
    ('broadcast_to', dict(shape=(3, 0, 4)), [(1, 2, 1)], {}),
    ('broadcast_axis', dict(axis=(0, 2), size=(3, 2)), [(1, 2, 1)], {}),
    ('broadcast_axes', dict(axis=(0,), size=(3,)), [(1, 2)], {}),
    ('broadcast_like', {}, [(1, 3), (4, 3)], {}),
    ('broadcast_like', dict(lhs_axes=(0,), rhs_axes=(2,)), [(1, 3), (4, 3, 5)], {}),
    ('reverse', dict(axis=(0, 1)), [(3, 4)], {}),
    ('flip', dict(axis=1), [(3, 4)], {}),
    ('SwapAxis', dict(dim1=0, dim2=2), [(2, 3, 4)], {}),
    ('swapaxes', dict(dim1=1), [(2, 3)], {}),
    ('Pad', dict(mode='constant', pad_width=P4, constant_value=0.5), [(1, 2, 3, 3)], {}),
    ('Pad', dict(mode='edge', pad_width=P4), [(1, 2, 3, 3)], {}),
    ('pad', dict(mode='reflect', pad_width=P4), [(1, 2, 3, 3)], {}),
    ('Pad', dict(mode='reflect', pad_width=(0, 0, 0, 0, 1, 1, 0, 2, 1, 0)), [(1, 1, 3, 3, 2)], {}),
    ('Crop', dict(num_args=1, offset=(1, 0), h_w=(2, 2)), [(2, 1, 4, 3)], {}),
    ('Crop', dict(num_args=2, center_crop=True), [(1, 2, 5, 6), (1, 1, 2, 3)], {}),
    ('take', dict(axis=1, mode='wrap'), [(2, 4, 3), (2, 3)], {1: (-5, 9)}),
    ('take', {}, [(4, 3), (6,)], {1: (-2, 6)}),
    ('pick', dict(axis=1, keepdims=True), [(2, 4, 3), (2, 3)], {1: (-1, 5)}),
    ('pick', dict(axis=0, mode='wrap'), [(3, 4), (4,)], {1: (-4, 7)}),
    ('one_hot', dict(depth=4, on_value=2.0, off_value=-1.0), [(3, 2)], {0: (-1, 5)}),
    ('argmax', dict(axis=1), [(3, 5, 2)], {}),
    ('argmin', dict(axis=0, keepdims=True), [(3, 4)], {}),
    ('argmax', {}, [(3, 4)], {}),
    ('argmax_channel', {}, [(3, 4)], {}),
    ('topk', dict(k=2, ret_typ='both', axis=0), [(5, 3)], {}),
    ('topk', dict(k=3, ret_typ='mask', is_ascend=True), [(2, 5)], {}),
    ('topk', dict(k=2, ret_typ='value', axis=None), [(3, 4)], {}),
    ('topk', dict(k=2), [(3, 4)], {}),
    ('sort', dict(is_ascend=False), [(3, 6)], {}),      # MXNet: backward broken (axis='')
    ('sort', dict(axis=1, is_ascend=False), [(3, 6)], {}),
    ('sort', dict(axis=None), [(2, 3)], {}),
    ('argsort', dict(axis=0), [(4, 3)], {}),
    ('squeeze', {}, [(2, 1, 3)], {}),
    ('squeeze', dict(axis=(0,)), [(1, 1, 3)], {}),
    ('reshape_like', {}, [(2, 3), (3, 2)], {}),
    ('reshape_like', dict(lhs_begin=1, rhs_begin=1), [(2, 3, 4), (6, 4, 3)], {}),
    ('identity', {}, [(2, 3)], {}),
    ('add_n', {}, [(2, 3)] * 3, {}),
    ('ElementWiseSum', {}, [(2, 3)] * 2, {}),
    ('shape_array', {}, [(2, 3, 4)], {}),
    ('size_array', {}, [(2, 3, 4)], {}),
]


def main():
    import mxnet as mx
    rng = np.random.default_rng(7)
    rows = []
    for op, params, shapes, ints in CASES:
        names = ['in%d' % i for i in range(len(shapes))]
        kw = dict(params) if op == 'split_v2' else dict(params, name='op')
        sym = getattr(mx.sym, op)(*[mx.sym.var(n) for n in names], **kw)
        args = sym.list_arguments()
        values = {}
        for i, (n, s) in enumerate(zip(args, shapes)):
            if i in ints:
                values[n] = rng.integers(ints[i][0], ints[i][1], s).astype(np.float64)
            else:
                values[n] = rng.permutation(np.prod(s, dtype=int)).reshape(s) / 8.0 - 1.0
        exe, dtype, req = None, 'float64', 'write'
        for dtype, req in (('float64', 'write'), ('float32', 'write'), ('float64', 'null')):
            try:            # Crop runs in float32 only; argmax_channel has no gradient
                exe = sym.simple_bind(mx.cpu(), grad_req=req, type_dict={n: dtype for n in args},
                                      **{n: v.shape for n, v in values.items()})
                break
            except RuntimeError:
                continue
        for n, v in values.items():
            exe.arg_dict[n][:] = v
        outs = exe.forward(is_train=True)
        heads = [np.round(rng.standard_normal(o.shape), 2) for o in outs]
        grads = None
        try:
            if req == 'null':
                raise mx.base.MXNetError('not differentiable in MXNet')
            exe.backward([mx.nd.array(h, dtype=o.dtype) for h, o in zip(heads, outs)])
            grads = {n: exe.grad_dict[n].asnumpy().tolist() for n in args}
        except mx.base.MXNetError as e:
            print('%s %s: no backward (%s)' % (op, params, str(e).splitlines()[0][:80]),
                  file=sys.stderr)
        rows.append(dict(op=op, dtype=dtype, params={k: repr(v) for k, v in params.items()},
                         symbol=json.dumps(json.loads(sym.tojson()), separators=(',', ':')),
                         inputs={n: v.tolist() for n, v in values.items()},
                         heads=[h.tolist() for h in heads],
                         outputs=[o.asnumpy().tolist() for o in outs],
                         out_dtypes=[np.dtype(o.dtype).name for o in outs], grads=grads))
    with open(OUT, 'w') as f:
        json.dump(dict(mxnet=mx.__version__, cases=rows), f, separators=(',', ':'))
    print('wrote %d cases to %s' % (len(rows), os.path.normpath(OUT)))


if __name__ == '__main__':
    main()
