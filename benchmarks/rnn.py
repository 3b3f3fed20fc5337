"""LSTM training speed: ffnumba's fused RNN op vs MXNet 1.9.1's CPU RNN op and PyTorch (not a test).

The classic PTB "small" setting: T=35 steps, batch N=32, hidden 200 (input 200,
2 layers, as MXNet's ``example/rnn``). One training step = forward and backward of
the fused ``RNN`` op (data, parameters and state gradients), i.e. what
``Module.fit`` pays per batch for the recurrent part (PyTorch: ``nn.LSTM``
forward + ``backward`` with every gradient). Prints samples/s (sequences per
second) for each framework. Every round starts one fresh process per framework,
one after the other (interleaved, so a shared machine's load hits all alike),
with the same thread settings; the summary gives the best and the median round::

    python benchmarks/rnn.py [--rounds 3] [--repeat 20] [--threads 1 2]
        [--mxnet /path/to/mxref/bin/python] [--torch /path/to/torchref/bin/python]

MXNet and PyTorch are only oracles here (their interpreters are named by
``--mxnet`` / ``--torch``; skipped when absent). MXNet's CPU ``RNN`` op runs
with oneDNN (its default): with ``MXNET_MKLDNN_ENABLED=0`` MXNet 1.9.1's
reference LSTM backward fails a check. ``--cpu-time`` reports process CPU time
instead of wall time (steadier on a loaded machine, but it counts every
thread's time). On a shared machine the numbers are indicative only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CHILD = r'''
import json, sys, time
T, N, H, L, repeat, which, cpu = json.loads(sys.argv[1])
clock = time.process_time if cpu else time.perf_counter
if which == 'torch':
    import torch
    torch.manual_seed(0)
    net = torch.nn.LSTM(H, H, num_layers=L)
    x = torch.empty(T, N, H).uniform_(-0.1, 0.1).requires_grad_()
    h0 = torch.zeros(L, N, H, requires_grad=True)
    c0 = torch.zeros(L, N, H, requires_grad=True)
    head = torch.empty(T, N, H).uniform_(-1, 1)

    def step():
        for t in (x, h0, c0, *net.parameters()):
            t.grad = None
        y, _ = net(x, (h0, c0))
        y.backward(head)
else:
    import numpy as np
    rng = np.random.default_rng(0)
    if which == 'ffnumba':
        import ffnumba as m
    else:
        import mxnet as m
    data = m.sym.Variable('data')
    net = m.sym.RNN(data, state_size=H, num_layers=L, mode='lstm', name='lstm')
    exe = net.simple_bind(m.cpu(), data=(T, N, H), grad_req='write')
    for k, v in exe.arg_dict.items():
        v[:] = rng.uniform(-0.1, 0.1, v.shape).astype('float32')
    head = m.nd.array(rng.uniform(-1, 1, exe.outputs[0].shape).astype('float32'))

    def step():
        exe.forward(is_train=True)
        exe.backward([head])
        exe.grad_dict['lstm_parameters'].asnumpy()          # wait for the work (MXNet is async)

for _ in range(3):
    step()
times = []
for _ in range(repeat):
    t0 = clock()
    step()
    times.append(clock() - t0)
times.sort()
print(json.dumps({'median_s': times[len(times) // 2], 'best_s': times[0]}))
'''


def run(python, which, args, env):
    cfg = json.dumps([args.T, args.N, args.hidden, args.layers, args.repeat, which,
                      args.cpu_time])
    proc = subprocess.run([python, '-c', CHILD, cfg], capture_output=True, text=True, env=env,
                          timeout=1800)
    if proc.returncode != 0:
        return None, proc.stderr.strip().splitlines()[-1:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--T', type=int, default=35)
    parser.add_argument('--N', type=int, default=32)
    parser.add_argument('--hidden', type=int, default=200)
    parser.add_argument('--layers', type=int, default=2)
    parser.add_argument('--repeat', type=int, default=20, help='timed steps per process')
    parser.add_argument('--rounds', type=int, default=3, help='interleaved rounds')
    parser.add_argument('--threads', type=int, nargs='+', default=[1],
                        help='BLAS/OpenMP/numba thread counts to run')
    parser.add_argument('--cpu-time', action='store_true', help='time with process CPU time')
    parser.add_argument('--mxnet', default='/work/mxref/bin/python',
                        help="MXNet 1.9.1's Python interpreter")
    parser.add_argument('--torch', default='/work/torchref/bin/python',
                        help="PyTorch's Python interpreter")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    targets = [('ffnumba', sys.executable)]
    for which, python in (('mxnet', args.mxnet), ('torch', args.torch)):
        if os.path.exists(python):
            targets.append((which, python))
        else:
            print('%s: skipped (no interpreter at %s)' % (which, python))
    for threads in args.threads:
        env = dict(os.environ)
        for var in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS',
                    'NUMBA_NUM_THREADS'):
            env[var] = str(threads)
        env.setdefault('MXNET_STORAGE_FALLBACK_LOG_VERBOSE', '0')
        env['PYTHONPATH'] = root + os.pathsep + env.get('PYTHONPATH', '')
        print('LSTM training step (forward + backward): T=%d, N=%d, hidden=%d, layers=%d, '
              '%d thread(s), %d round(s), %s time' % (args.T, args.N, args.hidden, args.layers,
                                                    threads, args.rounds,
                                                    'CPU' if args.cpu_time else 'wall'))
        rates = {which: [] for which, _ in targets}
        for r in range(args.rounds):
            for which, python in targets:
                res, err = run(python, which, args, env)
                if res is None:
                    print('  round %d %-8s failed: %s' % (r, which, err))
                    continue
                rates[which].append(args.N / res['median_s'])
                print('  round %d %-8s %8.1f samples/s (median step %.1f ms, best %.1f ms)'
                      % (r, which, args.N / res['median_s'], res['median_s'] * 1e3,
                         res['best_s'] * 1e3))
        print('  %-8s %12s %12s' % ('', 'best', 'median'))
        for which, vals in rates.items():
            if vals:
                print('  %-8s %12.1f %12.1f samples/s' % (which, max(vals),
                                                          statistics.median(vals)))


if __name__ == '__main__':
    main()
