"""Per-layer im2col vs Winograd F(2x2, 3x3) vs F(4x4, 3x3) on the zoo's 3x3 layers (not a test).

Prints milliseconds per forward and per backward call (data and weight
gradients, bias) for every distinct stride-1 3x3 convolution of the zoo's
``vgg11`` and ``resnet18_v1_32`` (32x32 input) and the larger ones of
``googlenet`` and ``inception_bn`` (64x64 input), the three paths interleaved
round by round in one process (best of the rounds)::

    NUMBA_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/conv_winograd.py \\
        [--batch 32] [--rounds 5] [--repeat 5] [--dtype float32] [--error] [--cpu-time]

``im2col`` is the path with ``FFNUMBA_CONV_WINOGRAD=0``; ``f23`` / ``f43``
force F(2x2, 3x3) / F(4x4, 3x3) on every layer (``FFNUMBA_CONV_WINOGRAD=2`` /
``4``, ignoring the dispatch rule), so the table shows where the rules in
``ffnumba.ops.nn._winograd.faster`` and ``_winograd4.faster`` should pick which.
``--error`` prints instead each path's max relative error (``max |a - r| /
max |r|``) of the output, data gradient and weight gradient against the
float64 im2col result ``r`` (inputs uniform in [-1, 1], batch 8).
"""
import argparse
import os
import time

import numpy as np

from ffnumba.ops.nn import _winograd as wg
from ffnumba.ops.nn import _winograd4 as w4
from ffnumba.ops.registry import OpContext, get_op

#: (name, C, F, H=W) of the stride-1 3x3 pad-1 layers (VGG-11 and ResNet-18 on 32x32,
#: the larger ones of GoogLeNet and Inception-BN on 64x64).
LAYERS = [
    ('vgg s0   3->64   @32', 3, 64, 32),
    ('vgg s1  64->128  @16', 64, 128, 16),
    ('vgg s2 128->256  @8', 128, 256, 8),
    ('vgg s2 256->256  @8', 256, 256, 8),
    ('vgg s3 256->512  @4', 256, 512, 4),
    ('vgg s3 512->512  @4', 512, 512, 4),
    ('vgg s4 512->512  @2', 512, 512, 2),
    ('res stem 3->64   @32', 3, 64, 32),
    ('res s0  64->64   @32', 64, 64, 32),
    ('res s1 128->128  @16', 128, 128, 16),
    ('res s2 256->256  @8', 256, 256, 8),
    ('res s3 512->512  @4', 512, 512, 4),
    ('goog 64->192     @16', 64, 192, 16),
    ('goog 96->128     @8', 96, 128, 8),
    ('goog 128->192    @8', 128, 192, 8),
    ('goog 160->320    @4', 160, 320, 4),
    ('goog 192->384    @2', 192, 384, 2),
    ('incbn 64->96     @8', 64, 96, 8),
    ('incbn 96->96     @8', 96, 96, 8),
    ('incbn 96->128    @4', 96, 128, 4),
]


#: The clock: wall time, or the process's CPU time with ``--cpu-time`` (one thread).
CLOCK = [time.perf_counter]


def _time(fn, repeat):
    best = float('inf')
    for _ in range(repeat):
        t0 = CLOCK[0]()
        fn()
        best = min(best, CLOCK[0]() - t0)
    return 1e3 * best


def _layers(op, only):
    """``(name, C, F, S, params)`` of each distinct layer whose name holds ``only``."""
    seen = set()
    for name, C, F, S in LAYERS:
        if only in name and (C, F, S) not in seen:
            seen.add((C, F, S))
            yield name, C, F, S, op.parse_params(dict(kernel=(3, 3), pad=(1, 1), num_filter=F))


PATHS = (('im2col', '0'), ('f23', '2'), ('f43', '4'))


def _call(op, p, path, vals, dy, dtype):
    """Forward and backward by one path: ``[y, dx, dw]`` in ``dtype``."""
    fwd, bwd = op.compute('cpu')
    os.environ['FFNUMBA_CONV_WINOGRAD'] = dict(PATHS)[path]
    x, w, b = (v.astype(dtype) for v in vals)
    y = np.empty(dy.shape, dtype)
    ctx = OpContext(True, None, {}, np.random.default_rng(0), 'Convolution')
    fwd(ctx, p, [x, w, b], [y], [])
    grads = [np.empty_like(x), np.empty_like(w), np.empty_like(b)]
    bwd(ctx, p, [dy.astype(dtype)], [x, w, b], [y], grads, ['write'] * 3, [])
    return [y, grads[0], grads[1]]


def errors(args):
    """Max relative error of each path's output and gradients against float64 im2col."""
    op = get_op('Convolution')
    print('max relative error vs float64 im2col, batch 8, %s: y dx dw per path' % args.dtype)
    for name, C, F, S, p in _layers(op, args.only):
        rng = np.random.default_rng(1)
        vals = [rng.uniform(-1, 1, s) for s in ((8, C, S, S), (F, C, 3, 3), (F,))]
        dy = rng.uniform(-1, 1, (8, F, S, S))
        ref = _call(op, p, 'im2col', vals, dy, np.float64)
        row = []
        for path, _ in PATHS:
            got = _call(op, p, path, vals, dy, args.dtype)
            row.append('%s %s' % (path, ' '.join('%.1e' % (np.abs(g - r).max() / np.abs(r).max())
                                                 for g, r in zip(got, ref))))
        print('  %-22s %s' % (name, ' | '.join(row)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--repeat', type=int, default=3)
    ap.add_argument('--dtype', default='float32')
    ap.add_argument('--only', default='', help='substring filter on the layer names')
    ap.add_argument('--error', action='store_true', help='print float32 errors, not times')
    ap.add_argument('--cpu-time', action='store_true',
                    help='time by process CPU time (one thread; less swayed by a loaded machine)')
    args = ap.parse_args()
    if args.cpu_time:
        CLOCK[0] = time.process_time
    if args.error:
        wg.faster = lambda *a: True
        return errors(args)
    op = get_op('Convolution')
    fwd, bwd = op.compute('cpu')
    real_faster = wg.faster
    print('batch %d, %s, ms per call (best of %d x %d), im2col | f23 | f43 (ratios to im2col);'
          ' rule says' % (args.batch, args.dtype, args.rounds, args.repeat))
    tot = np.zeros(6)
    for name, C, F, S, p in _layers(op, args.only):
        rng = np.random.default_rng(0)
        x = rng.uniform(-1, 1, (args.batch, C, S, S)).astype(args.dtype)
        w = rng.uniform(-1, 1, (F, C, 3, 3)).astype(args.dtype)
        b = rng.uniform(-1, 1, F).astype(args.dtype)
        y = np.empty((args.batch, F, S, S), args.dtype)
        dy = rng.uniform(-1, 1, y.shape).astype(args.dtype)
        grads = [np.empty_like(x), np.empty_like(w), np.empty_like(b)]
        reqs = ['null' if C == 3 else 'write', 'write', 'write']
        res = {}
        for r in range(args.rounds):
            for path, env in PATHS:
                os.environ['FFNUMBA_CONV_WINOGRAD'] = env
                wg.faster = lambda *a: True
                ctx = OpContext(True, None, {}, rng, 'Convolution')
                f = _time(lambda: fwd(ctx, p, [x, w, b], [y], []), args.repeat)
                g = _time(lambda: bwd(ctx, p, [dy], [x, w, b], [y], grads, reqs, []),
                          args.repeat)
                old = res.get(path, (f, g))
                res[path] = (min(f, old[0]), min(g, old[1]))
        wg.faster = real_faster
        os.environ['FFNUMBA_CONV_WINOGRAD'] = '1'
        t = [res[path][k] for k in (0, 1) for path, _ in PATHS]
        tot += t
        rule = ('f%d3' % w4.tile(x.shape, y.shape) if real_faster(x.shape, y.shape)
                else 'im2col')
        print('  %-22s fwd %7.2f | %7.2f | %7.2f (%4.2fx %4.2fx)   bwd %7.2f | %7.2f | %7.2f'
              ' (%4.2fx %4.2fx)   %s' % ((name,) + tuple(t[:3]) + (t[0] / t[1], t[0] / t[2])
                                         + tuple(t[3:]) + (t[3] / t[4], t[3] / t[5], rule)))
    print('  %-22s fwd %7.2f | %7.2f | %7.2f (%4.2fx %4.2fx)   bwd %7.2f | %7.2f | %7.2f'
          ' (%4.2fx %4.2fx)' % (('total',) + tuple(tot[:3]) + (tot[0] / tot[1], tot[0] / tot[2])
                                + tuple(tot[3:]) + (tot[3] / tot[4], tot[3] / tot[5])))


if __name__ == '__main__':
    main()
