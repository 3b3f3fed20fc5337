"""One CPU context vs two, with and without a process competing for a core.

    python benchmarks/contexts.py                                # lenet, batch 32/64/128
    python benchmarks/contexts.py --nets lenet,mlp --rounds 3
    python benchmarks/contexts.py --roots /tmp/old,.             # old tree vs this one

Training samples/s of ``Module(..., context=[cpu(0)])`` and
``context=[cpu(0), cpu(1)]`` (forward_backward + update, SGD with momentum,
random data) at each batch size, each configuration in its own child process
(kernels loaded from numba's cache, ``--warmup`` untimed steps, then the median of
``--steps`` steps). ``competitor`` runs one busy Python process
(``while 1: pass``) for the whole measurement: throughput should drop by
about the core it takes, not collapse. Configurations alternate inside each
round (and trees, with several ``--roots``); the table shows the best of the
rounds. On a machine shared with other work every figure is noisy: compare
only within one run. Prints numbers, asserts nothing.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(args):
    import numpy as np
    import ffnumba as ff
    sys.path.insert(0, HERE)
    from zoo_nets import NETS
    import logging
    logging.disable(logging.WARNING)
    build, shape = NETS[args.net]
    batch = args.one_batch
    ctx = [ff.cpu(i) for i in range(args.nctx)]
    mod = ff.mod.Module(build(ff.sym), context=ctx)
    mod.bind([('data', (batch,) + shape)], [('softmax_label', (batch,))])
    mod.init_params(ff.init.Xavier(magnitude=2.0))
    mod.init_optimizer(optimizer='sgd', optimizer_params={'learning_rate': 0.01,
                                                          'momentum': 0.9})
    rng = np.random.default_rng(0)
    data = ff.io.DataBatch([ff.nd.array(rng.uniform(0, 1, (batch,) + shape))],
                           [ff.nd.array(rng.integers(0, 10, batch))])
    times, cpu = [], []
    for i in range(args.warmup + args.steps):
        tic, ctic = time.perf_counter(), time.process_time()
        mod.forward_backward(data)
        mod.update()
        mod.get_outputs()[0].asnumpy()
        if i >= args.warmup:
            times.append(time.perf_counter() - tic)
            cpu.append(time.process_time() - ctic)
    print(json.dumps({'samples_s': batch / float(np.median(times)),
                      'cpu_ms_per_sample': 1e3 * float(np.median(cpu)) / batch}))


def run(root, net, batch, nctx, competitor, args):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
    comp = None
    if competitor:
        comp = subprocess.Popen([sys.executable, '-c', 'while 1: pass'])
        time.sleep(0.2)
    try:
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), '--worker', '--net', net,
             '--one-batch', str(batch), '--nctx', str(nctx), '--steps', str(args.steps),
             '--warmup', str(args.warmup)],
            env=env, capture_output=True, text=True, cwd=HERE, timeout=args.timeout)
    finally:
        if comp is not None:
            comp.kill()
            comp.wait()
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('{')]
    if not lines:
        sys.stderr.write('%s %s batch %d %d ctx failed:\n%s\n'
                         % (root, net, batch, nctx, proc.stderr[-2000:]))
        return None
    return json.loads(lines[-1])['samples_s']


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--nets', default='lenet')
    p.add_argument('--batch', default='32,64,128')
    p.add_argument('--rounds', type=int, default=1)
    p.add_argument('--steps', type=int, default=10)
    p.add_argument('--warmup', type=int, default=3)
    p.add_argument('--roots', default=os.path.dirname(HERE))
    p.add_argument('--no-competitor', action='store_true', help='skip the competing process')
    p.add_argument('--timeout', type=int, default=900)
    p.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    p.add_argument('--net', help=argparse.SUPPRESS)
    p.add_argument('--one-batch', type=int, help=argparse.SUPPRESS)
    p.add_argument('--nctx', type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    roots = args.roots.split(',')
    comps = (False,) if args.no_competitor else (False, True)
    best = {}
    for rnd in range(args.rounds):
        for net in args.nets.split(','):
            for batch in [int(b) for b in args.batch.split(',')]:
                for comp in comps:
                    for nctx in (1, 2):
                        for root in roots:
                            v = run(root, net, batch, nctx, comp, args)
                            if v is None:
                                continue
                            key = (root, net, batch, comp, nctx)
                            best[key] = max(best.get(key, 0.0), v)
                            print('round %d %-22s %-8s batch %4d %s %d ctx: %8.0f samples/s'
                                  % (rnd + 1, root[-22:], net, batch,
                                     'competitor' if comp else '          ', nctx, v), flush=True)
    print('\nbest of %d round(s), training samples/s (os.cpu_count() = %s):'
          % (args.rounds, os.cpu_count()))
    print('%-22s %-8s %5s %-10s %9s %9s %7s' % ('tree', 'net', 'batch', '', '1 ctx', '2 ctx',
                                               '2/1'))
    for root in roots:
        for net in args.nets.split(','):
            for batch in [int(b) for b in args.batch.split(',')]:
                for comp in comps:
                    one = best.get((root, net, batch, comp, 1), float('nan'))
                    two = best.get((root, net, batch, comp, 2), float('nan'))
                    print('%-22s %-8s %5d %-10s %9.0f %9.0f %7.2f'
                          % (root[-22:], net, batch, 'competitor' if comp else '', one, two,
                             two / one))


if __name__ == '__main__':
    main()
