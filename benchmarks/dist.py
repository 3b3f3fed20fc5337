"""Benchmark of kvstore 'dist_sync' over MPI (not a test).

Launches ``mpirun -np R python -m mpi4py benchmarks/dist.py --worker`` for
R in ``--ranks`` (default 1 2 4; more ranks than cores oversubscribe them),
with the per-node BLAS thread cap on (default: cores // ranks per node) and
off (``FFNUMBA_BLAS_THREADS=0``), and with one all-reduce per key
against the default buckets and float16 transport (pushpull of the trained
model's gradients, the three modes interleaved). Each worker trains
an MLP 784-512-512-10 (0.67 M parameters) with Module.fit on synthetic data,
``--batch`` samples per rank per step. Prints global samples/s, the time a
step spends in the data all-reduces and in the agreement checks (which also
absorb the waits for slower ranks). On a shared machine the numbers are
noisy: compare rows of one run only::

    python benchmarks/dist.py [--ranks 1 2 4] [--steps 40] [--batch 64]
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def push_modes(ff, kv, mod, rounds=4, reps=10):
    """ms per pushpull of the model's gradients: buckets, one all-reduce per key, fp16.

    The three modes alternate in rounds so that they see the same machine load.
    """
    if kv.num_workers == 1:
        return {}
    g = mod._exec_group
    names = list(g.param_names)
    grads = [[a.copy() for a in devs] for devs in g.grad_arrays]
    keys = ['bench_%s' % n for n in names]
    kv.init(keys, [d[0] for d in grads])
    modes = {'push_bucketed_ms': (8 << 20, False), 'push_per_key_ms': (0, False),
             'push_fp16_ms': (8 << 20, True)}
    times = {m: 0.0 for m in modes}
    for _ in range(rounds):
        for m, (bucket, fp16) in modes.items():
            kv._bucket_bytes, kv._fp16 = bucket, fp16
            kv._plans.clear()
            kv.pushpull(keys, grads)        # warm: plan and buffers
            kv.barrier()
            tic = time.perf_counter()
            for _ in range(reps):
                kv.pushpull(keys, grads)
            times[m] += time.perf_counter() - tic
    return {m: 1e3 * t / (rounds * reps) for m, t in times.items()}


def worker(args):
    sys.path.insert(0, ROOT)
    import ffnumba as ff
    kv = ff.kv.create('dist_sync')
    data = ff.sym.Variable('data')
    net = data
    for i, n in enumerate((512, 512)):
        net = ff.sym.Activation(ff.sym.FullyConnected(net, num_hidden=n, name='fc%d' % i),
                                act_type='relu')
    net = ff.sym.SoftmaxOutput(ff.sym.FullyConnected(net, num_hidden=10, name='out'),
                               name='softmax')
    rng = np.random.RandomState(kv.rank)
    n = args.batch * args.steps
    it = ff.io.NDArrayIter(rng.rand(n, 784).astype('float32'),
                           rng.randint(0, 10, n).astype('float32'), batch_size=args.batch)
    mod = ff.mod.Module(net, context=ff.cpu())
    mod.fit(it, kvstore=kv, optimizer='sgd', optimizer_params={'learning_rate': 0.01},
            num_epoch=1)                               # warm-up: compiles, first touches
    kv.barrier()
    comm0, agree0, push0 = kv.stats['comm_s'], kv.stats['agree_s'], kv.stats['pushes']
    tic = time.perf_counter()
    mod.fit(it, kvstore=kv, optimizer='sgd', optimizer_params={'learning_rate': 0.01},
            num_epoch=1, force_init=False)
    kv.barrier()
    took = time.perf_counter() - tic
    pushes = kv.stats['pushes'] - push0
    agree = kv.stats['agree_s'] - agree0
    comm = kv.stats['comm_s'] - comm0
    push = push_modes(ff, kv, mod)
    if kv.rank == 0:
        print('RESULT samples_per_s=%.1f allreduce_ms=%.2f agree_ms=%.2f %s'
              % (n * kv.num_workers / took, 1e3 * (comm - agree) / pushes,
                 1e3 * agree / pushes, ' '.join('%s=%.2f' % kv_ for kv_ in push.items())),
              flush=True)


def launch(ranks, env_extra, args):
    exe = os.path.join(os.path.dirname(sys.executable), 'mpiexec')
    cmd = [exe, '-np', str(ranks), sys.executable, '-m', 'mpi4py', os.path.abspath(__file__),
           '--worker', '--steps', str(args.steps), '--batch', str(args.batch)]
    env = dict(os.environ, PYTHONPATH=ROOT, **env_extra)
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    for line in (res.stdout + res.stderr).splitlines():
        if line.startswith('RESULT'):
            return dict(kv.split('=') for kv in line.split()[1:])
    raise SystemExit('run failed:\n' + res.stdout[-2000:] + res.stderr[-2000:])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--ranks', type=int, nargs='+', default=[1, 2, 4])
    p.add_argument('--steps', type=int, default=40)
    p.add_argument('--batch', type=int, default=64)
    p.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    print('cores: %d; MLP 784-512-512-10, batch %d per rank, %d steps'
          % (len(os.sched_getaffinity(0)), args.batch, args.steps))
    print('%-6s %-9s %10s %11s %9s  | pushpull ms: %8s %8s %6s'
          % ('ranks', 'BLAS cap', 'samples/s', 'allreduce', 'agree', 'buckets', 'per key',
             'fp16'))
    configs = [('on', {}), ('off', {'FFNUMBA_BLAS_THREADS': '0'})]
    for ranks in args.ranks:
        for cap, env in configs:
            r = launch(ranks, env, args)
            print('%-6d %-9s %10s %8s ms %6s ms  |              %8s %8s %6s'
                  % (ranks, cap, r['samples_per_s'], r['allreduce_ms'], r['agree_ms'],
                     r.get('push_bucketed_ms', '-'), r.get('push_per_key_ms', '-'),
                     r.get('push_fp16_ms', '-')))


if __name__ == '__main__':
    main()
