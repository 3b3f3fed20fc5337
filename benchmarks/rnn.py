"""LSTM training speed: ffnumba's fused RNN op vs MXNet 1.9.1's CPU RNN op (not a test).

The classic PTB "small" setting: T=35 steps, batch N=32, hidden 200 (input 200,
2 layers, as MXNet's ``example/rnn``). One training step = forward and backward of
the fused ``RNN`` op (data, parameters and state gradients), i.e. what
``Module.fit`` pays per batch for the recurrent part. Prints samples/s
(sequences per second) for each framework, run one after the other in fresh
processes with the same thread settings::

    python benchmarks/rnn.py [--repeat 20] [--layers 2] [--mxnet /path/to/mxref/bin/python]

MXNet is only an oracle here (``--mxnet`` names its interpreter; skipped when
absent). Its CPU ``RNN`` op runs with oneDNN (its default): with
``MXNET_MKLDNN_ENABLED=0`` MXNet 1.9.1's reference LSTM backward fails a check.
On a shared machine the numbers are indicative only.
"""
import argparse
import json
import os
import subprocess
import sys
import time

CHILD = r'''
import json, os, sys, time
import numpy as np
T, N, H, L, repeat, which = json.loads(sys.argv[1])
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
    t0 = time.perf_counter()
    step()
    times.append(time.perf_counter() - t0)
times.sort()
print(json.dumps({'median_s': times[len(times) // 2], 'best_s': times[0]}))
'''


def run(python, which, args, env):
    cfg = json.dumps([args.T, args.N, args.hidden, args.layers, args.repeat, which])
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
    parser.add_argument('--repeat', type=int, default=20)
    parser.add_argument('--threads', type=int, default=1, help='BLAS/OpenMP threads')
    parser.add_argument('--mxnet', default='/work/mxref/bin/python',
                        help="MXNet 1.9.1's Python interpreter")
    args = parser.parse_args()
    env = dict(os.environ)
    for var in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS',
                'NUMBA_NUM_THREADS'):
        env[var] = str(args.threads)
    env.setdefault('MXNET_STORAGE_FALLBACK_LOG_VERBOSE', '0')
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env['PYTHONPATH'] = root + os.pathsep + env.get('PYTHONPATH', '')
    print('LSTM training step (forward + backward of the fused RNN op): T=%d, N=%d, hidden=%d, '
          'layers=%d, %d thread(s)' % (args.T, args.N, args.hidden, args.layers, args.threads))
    targets = [('ffnumba', sys.executable)]
    if os.path.exists(args.mxnet):
        targets.append(('mxnet', args.mxnet))
    else:
        print('mxnet: skipped (no interpreter at %s)' % args.mxnet)
    for which, python in targets:
        tic = time.time()
        res, err = run(python, which, args, env)
        if res is None:
            print('%-8s failed: %s' % (which, err))
            continue
        print('%-8s %8.1f samples/s (median step %.1f ms, best %.1f ms; %.0f s total)'
              % (which, args.N / res['median_s'], res['median_s'] * 1e3, res['best_s'] * 1e3,
                 time.time() - tic))


if __name__ == '__main__':
    main()
