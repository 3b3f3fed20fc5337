"""Times single MXNet 1.9.1 operators at given shapes (run by ``net_ops.py --mxnet``).

Runs under MXNet's interpreter, never imports ffnumba. Reads ``{"layers": [[op, params,
data shape], ...], "infer": bool, "repeat": int}`` as JSON on stdin and prints
``[[fwd ms, bwd ms], ...]`` (medians, or minima with ``"best": true``) as JSON on stdout. Each layer is one symbol
``op(data)`` bound with ``simple_bind`` (``grad_req='write'``, or ``'null'`` for
inference); forward and backward are each waited for before the clock stops.
"""
import json
import sys
import time

import numpy as np


def time_layer(mx, op, params, dshape, infer, repeat, best=False):
    sym = getattr(mx.sym, op)(mx.sym.Variable('data'), name='op', **params)
    exe = sym.simple_bind(mx.cpu(), data=tuple(dshape), grad_req='null' if infer else 'write')
    rng = np.random.default_rng(0)
    for name, arr in exe.arg_dict.items():
        arr[:] = rng.uniform(-1, 1, arr.shape).astype(np.float32)
    for arr in exe.aux_dict.values():
        arr[:] = 1
    dy = mx.nd.array(rng.uniform(-1, 1, exe.outputs[0].shape).astype(np.float32))
    tf, tb = [], []
    for i in range(repeat + 1):
        t0 = time.perf_counter()
        exe.forward(is_train=not infer)
        exe.outputs[0].wait_to_read()
        t1 = time.perf_counter()
        if not infer:
            exe.backward([dy])
            mx.nd.waitall()
        t2 = time.perf_counter()
        if i:
            tf.append(t1 - t0)
            tb.append(t2 - t1)
    stat = np.min if best else np.median
    return [1e3 * float(stat(tf)), 1e3 * float(stat(tb))]


def main():
    import mxnet as mx
    job = json.load(sys.stdin)
    out = [time_layer(mx, op, params, shape, job['infer'], job['repeat'], job.get('best'))
           for op, params, shape in job['layers']]
    json.dump(out, sys.stdout)


if __name__ == '__main__':
    main()
