"""Python cost per graph node of a training step: small batches, deep graphs.

    python benchmarks/step_overhead.py                      # resnet18/50 at batch 1 and 2
    python benchmarks/step_overhead.py --roots /tmp/old,. --rounds 3   # old tree vs this one

One training step is ``Module.forward_backward`` + ``update`` (SGD, momentum)
on one CPU context, one thread. Times are the thread's CPU time
(``time.thread_time``), not wall time, so other processes competing for the
cores (a shared machine) hardly move them. ``step`` is the best of ``--steps`` steps.
``compute`` is the time spent inside compiled code during a step: every numba
kernel and every numpy C function, measured with cProfile (which times C calls
without inflating them). ``python`` = step - compute is what the executor, the
operators' Python wrappers, the module and the optimizer cost; ``per node`` divides it by
the calls one step makes (forward nodes + backward nodes + parameters
updated). ``py funcs`` counts the Python function calls one step makes
(cProfile's count, deterministic: the least noisy measure of Python work).
Each (tree, net, batch) runs in its own child process, trees
alternating within a round; the table shows the best of the rounds. Prints
numbers, asserts nothing.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _compiled_keys():
    """cProfile keys of every numba dispatcher alive in this process."""
    import gc
    from numba.core.dispatcher import Dispatcher
    keys = set()
    for obj in gc.get_objects():
        if isinstance(obj, Dispatcher):
            code = obj.py_func.__code__
            keys.add((code.co_filename, code.co_firstlineno, code.co_name))
    return keys


def worker(args):
    import cProfile
    import pstats
    import numpy as np
    import ffnumba as ff
    sys.path.insert(0, HERE)
    from zoo_nets import NETS
    import logging
    logging.disable(logging.WARNING)
    build, shape = NETS[args.net]
    batch = args.batch
    mod = ff.mod.Module(build(ff.sym), context=ff.cpu())
    mod.bind([('data', (batch,) + shape)], [('softmax_label', (batch,))])
    mod.init_params(ff.init.Xavier(magnitude=2.0))
    mod.init_optimizer(optimizer='sgd', optimizer_params={'learning_rate': 0.01,
                                                          'momentum': 0.9})
    rng = np.random.default_rng(0)
    data = ff.io.DataBatch([ff.nd.array(rng.uniform(0, 1, (batch,) + shape))],
                           [ff.nd.array(rng.integers(0, 10, batch))])

    def step():
        mod.forward_backward(data)
        mod.update()

    for _ in range(3):
        step()
    times = []
    for _ in range(args.steps):
        tic = time.thread_time()
        step()
        times.append(time.thread_time() - tic)
    prof = cProfile.Profile(time.thread_time)
    prof.enable()
    for _ in range(args.steps):
        step()
    prof.disable()
    stats = pstats.Stats(prof).stats
    kernels = _compiled_keys()
    compute, pycalls = 0.0, 0
    for key, (cc, _, tottime, _, _) in stats.items():
        if key in kernels or (key[0] == '~' and 'numpy' in key[2]):
            compute += tottime
        elif key[0] != '~':
            pycalls += cc
    exe = mod._exec_group.execs[0]
    sym = exe._symbol
    nodes = sum(1 for n in json.loads(sym.tojson())['nodes'] if n['op'] != 'null')
    n_params = len(mod._exec_group.param_names)
    out = {'step': min(times), 'median': float(np.median(times)),
           'compute': compute / args.steps, 'nodes': nodes, 'params': n_params,
           'pycalls': pycalls / args.steps}
    print(json.dumps(out))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--nets', default='resnet18_v1_32,resnet50_v1_32')
    p.add_argument('--batch', default='1,2')
    p.add_argument('--steps', type=int, default=10)
    p.add_argument('--rounds', type=int, default=1)
    p.add_argument('--roots', default=os.path.dirname(HERE))
    p.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    p.add_argument('--net', help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        args.batch = int(args.batch)
        return worker(args)
    roots = args.roots.split(',')
    best = {}
    for rnd in range(args.rounds):
        for net in args.nets.split(','):
            for batch in args.batch.split(','):
                for root in roots:
                    env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
                    for var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'NUMBA_NUM_THREADS'):
                        env.setdefault(var, '1')
                    proc = subprocess.run(
                        [sys.executable, os.path.abspath(__file__), '--worker', '--net', net,
                         '--batch', batch, '--steps', str(args.steps)],
                        env=env, capture_output=True, text=True, cwd=HERE)
                    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('{')]
                    if not lines:
                        sys.stderr.write('%s %s failed:\n%s\n' % (root, net, proc.stderr[-2000:]))
                        continue
                    r = json.loads(lines[-1])
                    r['python'] = max(r['step'] - r['compute'], 0.0)
                    print('round %d %-16s batch %s %-22s step %7.2f ms  compute %7.2f ms  '
                          'python %6.2f ms' % (rnd + 1, net, batch, root[-22:], 1e3 * r['step'],
                                               1e3 * r['compute'], 1e3 * r['python']), flush=True)
                    key = (root, net, batch)
                    if key not in best:
                        best[key] = r
                    else:
                        for k in ('step', 'python', 'compute', 'pycalls'):
                            best[key][k] = min(best[key][k], r[k])
    print('\nbest of %d round(s), ms per training step (1 CPU context, 1 thread):' % args.rounds)
    print('%-22s %-16s %5s %9s %9s %9s %6s %11s %9s' % ('tree', 'net', 'batch', 'step', 'compute',
                                                       'python', 'calls', 'us per call',
                                                       'py funcs'))
    for (root, net, batch), r in best.items():
        calls = 2 * r['nodes'] + r['params']
        print('%-22s %-16s %5s %9.2f %9.2f %9.2f %6d %11.1f %9d'
              % (root[-22:], net, batch, 1e3 * r['step'], 1e3 * r['compute'],
                 1e3 * r['python'], calls, 1e6 * r['python'] / calls, r.get('pycalls', -1)))


if __name__ == '__main__':
    main()
