"""Times single MXNet 1.9.1 operators at given shapes (run by ``net_ops.py --mxnet``).

Runs under MXNet's interpreter, never imports ffnumba. Reads one JSON job per line on
stdin, ``{"op": name, "params": {...}, "shape": [...], "infer": bool, "repeat": int,
"best": bool, "cpu_time": bool}``, and answers each with one line ``[fwd ms, bwd ms]``
(medians, or minima with ``best``), so the caller can interleave its own timings with
MXNet's layer by layer. Each layer is one symbol ``op(data)`` bound with ``simple_bind``
(``grad_req='write'``, or ``'null'`` for inference); forward and backward are each waited
for before the clock stops. ``cpu_time`` times with the process's CPU time (MXNet runs
operators on its engine threads, not the caller's).
"""
import json
import sys
import time

import numpy as np


def time_layer(mx, op, params, dshape, infer, repeat, best=False, cpu_time=False):
    sym = getattr(mx.sym, op)(mx.sym.Variable('data'), name='op', **params)
    exe = sym.simple_bind(mx.cpu(), data=tuple(dshape), grad_req='null' if infer else 'write')
    rng = np.random.default_rng(0)
    for arr in exe.arg_dict.values():
        arr[:] = rng.uniform(-1, 1, arr.shape).astype(np.float32)
    for arr in exe.aux_dict.values():
        arr[:] = 1
    dy = mx.nd.array(rng.uniform(-1, 1, exe.outputs[0].shape).astype(np.float32))
    clock = time.process_time if cpu_time else time.perf_counter
    tf, tb = [], []
    for i in range(repeat + 1):
        t0 = clock()
        exe.forward(is_train=not infer)
        exe.outputs[0].wait_to_read()
        t1 = clock()
        if not infer:
            exe.backward([dy])
            mx.nd.waitall()
        t2 = clock()
        if i:
            tf.append(t1 - t0)
            tb.append(t2 - t1)
    stat = np.min if best else np.median
    return [1e3 * float(stat(tf)), 1e3 * float(stat(tb))]


def main():
    import mxnet as mx
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        res = time_layer(mx, job['op'], job['params'], job['shape'], job['infer'],
                         job['repeat'], job.get('best', False), job.get('cpu_time', False))
        sys.stdout.write(json.dumps(res) + '\n')
        sys.stdout.flush()


if __name__ == '__main__':
    main()
