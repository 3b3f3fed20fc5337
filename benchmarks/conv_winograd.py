"""Per-layer Winograd F(2x2, 3x3) vs im2col on the 3x3 layers of VGG-11 and ResNet-18 (not a test).

Prints milliseconds per forward and per backward call (data and weight
gradients, bias) for every distinct stride-1 3x3 convolution of the zoo's
``vgg11`` and ``resnet18_v1_32`` (32x32 input), the two paths interleaved
round by round in one process (best of the rounds)::

    NUMBA_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/conv_winograd.py \\
        [--batch 32] [--rounds 5] [--repeat 5] [--dtype float32]

``im2col`` is the path with ``FFNUMBA_CONV_WINOGRAD=0``; ``winograd`` forces
F(2x2, 3x3) on every layer (ignoring the dispatch rule), so the table shows
where the rule in ``ffnumba.ops.nn._winograd.faster`` should pick which.
"""
import argparse
import os
import time

import numpy as np

from ffnumba.ops.nn import _winograd as wg
from ffnumba.ops.registry import OpContext, get_op

#: (name, C, F, H=W) of the stride-1 3x3 pad-1 layers (VGG-11 and ResNet-18 on 32x32).
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
]


def _time(fn, repeat):
    best = float('inf')
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--repeat', type=int, default=3)
    ap.add_argument('--dtype', default='float32')
    ap.add_argument('--only', default='', help='substring filter on the layer names')
    args = ap.parse_args()
    op = get_op('Convolution')
    fwd, bwd = op.compute('cpu')
    real_faster = wg.faster
    print('batch %d, %s, ms per call (best of %d x %d), im2col | winograd | ratio; rule says'
          % (args.batch, args.dtype, args.rounds, args.repeat))
    tot = np.zeros(4)
    seen = set()
    for name, C, F, S in LAYERS:
        if args.only not in name or (C, F, S) in seen:
            continue
        seen.add((C, F, S))
        p = op.parse_params(dict(kernel=(3, 3), pad=(1, 1), num_filter=F))
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
            for path in ('im2col', 'winograd'):
                os.environ['FFNUMBA_CONV_WINOGRAD'] = '0' if path == 'im2col' else '1'
                wg.faster = lambda *a: True
                ctx = OpContext(True, None, {}, rng, 'Convolution')
                f = _time(lambda: fwd(ctx, p, [x, w, b], [y], []), args.repeat)
                g = _time(lambda: bwd(ctx, p, [dy], [x, w, b], [y], grads, reqs, []),
                          args.repeat)
                old = res.get(path, (f, g))
                res[path] = (min(f, old[0]), min(g, old[1]))
        wg.faster = real_faster
        (fi, bi), (fw, bw) = res['im2col'], res['winograd']
        tot += (fi, bi, fw, bw)
        print('  %-22s fwd %7.2f | %7.2f | %4.2fx   bwd %7.2f | %7.2f | %4.2fx   %s'
              % (name, fi, fw, fi / fw, bi, bw, bi / bw,
                 'winograd' if real_faster(x.shape, y.shape) else 'im2col'))
    print('  %-22s fwd %7.2f | %7.2f | %4.2fx   bwd %7.2f | %7.2f | %4.2fx'
          % ('total', tot[0], tot[2], tot[0] / tot[2], tot[1], tot[3], tot[1] / tot[3]))


if __name__ == '__main__':
    main()
