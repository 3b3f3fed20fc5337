"""Training and inference speed of MXNet's classic networks: prints numbers, asserts nothing.

    python benchmarks/zoo.py                                   # a quick subset, ffnumba only
    python benchmarks/zoo.py --nets lenet,resnet18_v1_32 --batch 1,32 --threads 1,2
    python benchmarks/zoo.py --mxnet /path/to/mxnet-venv/bin/python   # MXNet 1.9.1 beside it
    python benchmarks/zoo.py --torch /path/to/torch-venv/bin/python    # and/or PyTorch CPU
    python benchmarks/zoo.py --nets resnet18_v1_32 --profile   # per-operator time, train + infer
    python benchmarks/zoo.py --baseline /tmp/old-checkout --rounds 3   # before/after, best of 3
    python benchmarks/zoo.py --variant openblas:FFNUMBA_GEMM=openblas  # a switch, same run
    python benchmarks/zoo.py --infer --threads 1 --baseline /tmp/old --mxnet PY  # inference only
    python benchmarks/zoo.py --threads 1 --cpu-time ...   # process CPU time: a loaded machine
    python benchmarks/zoo.py --threads 1,2 --compete 1         # beside a busy process

Each network of ``zoo_nets.NETS`` (the same builder code makes the ffnumba and the MXNet
graph) is measured in its own child process per (framework, net, batch, threads), and
the frameworks alternate for each configuration (interleaved), so a slow phase of the
machine hits both. Training is one Module step (forward, backward, SGD-momentum update)
on random data; inference is ``forward(is_train=False)``. Each figure is the median
samples/s of ``--steps`` timed steps after ``--warmup`` untimed ones (numba compiles
and MXNet's first-call set-up are excluded). Threads are set for the child through
``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS``/``MKL_NUM_THREADS``/``NUMBA_NUM_THREADS``
and ffnumba's ``FFNUMBA_BLAS_THREADS`` (PyTorch also gets ``torch.set_num_threads``).
PyTorch runs the same builders through ``_torch_sym`` (lazy modules; the step is
cross-entropy on the logits, backward, SGD-momentum; inference is ``eval()`` under
``no_grad``).

MXNet's pip build uses MKL-DNN kernels unless ``MXNET_MKLDNN_ENABLED=0`` (``--mxnet-ref``).
Neither MXNet nor PyTorch is a dependency: they run from the interpreter you name.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
QUICK = 'mlp,lenet,resnet18_v1_32,mobilenet_v1'
#: Environment variable naming the checkout a worker imports ffnumba from (``--baseline``).
ROOT_ENV = 'FFNUMBA_ZOO_ROOT'


def _modes(args):
    """The measured modes: training step and inference forward, or with ``--infer`` the
    latter only."""
    return ('infer',) if args.infer else ('train', 'infer')


def torch_worker(args):
    """The PyTorch twin of :func:`worker`: same builders, data, steps and timing."""
    import numpy as np
    import torch
    sys.path.insert(0, HERE)
    import _torch_sym
    from zoo_nets import NETS
    torch.set_num_threads(args.one_threads)
    build, shape = NETS[args.net]
    batch = args.one_batch
    rng = np.random.default_rng(0)
    data = torch.from_numpy(rng.uniform(0, 1, (batch,) + shape).astype(np.float32))
    label = torch.from_numpy(rng.integers(0, 10, batch).astype(np.int64))
    result = {'framework': 'torch', 'net': args.net, 'batch': batch,
              'threads': args.one_threads}
    for mode in _modes(args):
        net = _torch_sym.build(build(_torch_sym), data)
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        net.train(mode == 'train')
        times = []
        clock = time.process_time if args.cpu_time else time.perf_counter
        for i in range(args.warmup + args.steps):
            tic = clock()
            if mode == 'train':
                opt.zero_grad()
                out = net(data)
                torch.nn.functional.cross_entropy(out, label).backward()
                opt.step()
            else:
                with torch.no_grad():
                    out = torch.softmax(net(data), dim=1)
            if i >= args.warmup:
                times.append(clock() - tic)
        assert torch.isfinite(out).all()
        result[mode] = batch / float(np.median(times))
    print(json.dumps(result))


def worker(args):
    """Run one configuration in this process and print one JSON line."""
    if args.framework == 'torch':
        return torch_worker(args)
    import numpy as np
    sys.path.insert(0, HERE)
    from zoo_nets import NETS
    if args.framework == 'mxnet':
        import mxnet as fw
    else:           # this checkout, or the baseline's (ROOT_ENV)
        sys.path.insert(0, os.environ.get(ROOT_ENV) or os.path.dirname(HERE))
        import ffnumba as fw
    import logging
    logging.disable(logging.WARNING)
    build, shape = NETS[args.net]
    sym = build(fw.sym)
    batch = args.one_batch
    rng = np.random.default_rng(0)
    data = fw.nd.array(rng.uniform(0, 1, (batch,) + shape).astype(np.float32))
    label = fw.nd.array(rng.integers(0, 10, batch).astype(np.float32))
    result = {'framework': args.framework, 'net': args.net, 'batch': batch,
              'threads': args.one_threads, 'module': os.path.dirname(fw.__file__)}
    for mode in _modes(args):
        mod = fw.mod.Module(sym, context=fw.cpu())
        mod.bind([('data', (batch,) + shape)], [('softmax_label', (batch,))],
                 for_training=mode == 'train')
        mod.init_params(fw.init.Xavier(magnitude=2.0))
        if mode == 'train':
            mod.init_optimizer(optimizer='sgd', optimizer_params={'learning_rate': 0.01,
                                                                  'momentum': 0.9})
        batch_obj = fw.io.DataBatch([data], [label])
        times = []
        clock = time.process_time if args.cpu_time else time.perf_counter
        for i in range(args.warmup + args.steps):
            tic = clock()
            if mode == 'train':
                mod.forward_backward(batch_obj)
                mod.update()
            else:
                mod.forward(batch_obj, is_train=False)
            out = mod.get_outputs()[0].asnumpy()     # waits for MXNet's async engine
            if i >= args.warmup:
                times.append(clock() - tic)
        assert np.isfinite(out).all()
        result[mode] = batch / float(np.median(times))
    if args.profile and args.framework == 'ffnumba':
        from _profile import op_profile
        feed = {'data': data.asnumpy(), 'softmax_label': label.asnumpy()}
        if not args.infer:
            result['profile'] = op_profile(fw, sym, feed)
        result['profile_infer'] = op_profile(fw, sym, feed, train=False)
    print(json.dumps(result))


def run_one(python, framework, net, batch, threads, args, ref=False, script=None, extra=None):
    env = dict(os.environ)
    env.update(extra or {})
    for var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS',
                'NUMBA_NUM_THREADS', 'FFNUMBA_BLAS_THREADS'):
        env[var] = str(threads)
    if ref:
        env['MXNET_MKLDNN_ENABLED'] = '0'
    cmd = [python, script or os.path.abspath(__file__), '--worker', '--framework', framework,
           '--net', net, '--one-batch', str(batch), '--one-threads', str(threads),
           '--steps', str(args.steps), '--warmup', str(args.warmup)]
    if args.profile:
        cmd.append('--profile')
    if args.infer:
        cmd.append('--infer')
    if args.cpu_time:
        cmd.append('--cpu-time')
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    for line in proc.stdout.splitlines()[::-1]:
        if line.startswith('{'):
            return json.loads(line)
    sys.stderr.write('%s %s batch %d: failed\n%s\n' % (framework, net, batch,
                                                       proc.stderr[-2000:]))
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--nets', default=QUICK, help="comma list of zoo_nets.NETS names, or 'all'")
    p.add_argument('--batch', default='32', help='comma list of batch sizes')
    p.add_argument('--threads', default='1,2', help='comma list of thread counts')
    p.add_argument('--steps', type=int, default=5)
    p.add_argument('--warmup', type=int, default=2)
    p.add_argument('--mxnet', help='python interpreter that imports mxnet 1.9.1')
    p.add_argument('--torch', help='python interpreter that imports PyTorch (CPU)')
    p.add_argument('--mxnet-ref', action='store_true',
                   help='MXNet with MXNET_MKLDNN_ENABLED=0 (its reference kernels)')
    p.add_argument('--baseline', help='another ffnumba checkout (e.g. a git worktree of an older '
                                      'commit) to run interleaved (this script\'s workers, '
                                      'importing its ffnumba); prints new/baseline ratios')
    p.add_argument('--variant', action='append', default=[], metavar='NAME:VAR=VALUE[,VAR=VALUE]',
                   help='this checkout again with environment overrides, interleaved and printed '
                        'as NAME (e.g. openblas:FFNUMBA_GEMM=openblas); repeatable')
    p.add_argument('--rounds', type=int, default=1,
                   help='repeat every configuration this often (interleaved); keep the best')
    p.add_argument('--profile', action='store_true', help='per-operator time (ffnumba)')
    p.add_argument('--infer', action='store_true',
                   help='measure the inference forward only (no training step)')
    p.add_argument('--cpu-time', action='store_true',
                   help='time each step by the CPU time of the whole process (all its '
                        'threads) instead of the wall clock, in every framework: steadier '
                        'on a loaded machine; with --threads 1 it is the work done, with '
                        'more it sums the threads')
    p.add_argument('--timeout', type=int, default=1800)
    p.add_argument('--compete', type=int, default=0, metavar='N',
                   help='run N busy processes (while 1: pass) for the whole measurement: '
                        'throughput should drop by about the cores they take, not collapse')
    p.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    p.add_argument('--framework', default='ffnumba', help=argparse.SUPPRESS)
    p.add_argument('--net', help=argparse.SUPPRESS)
    p.add_argument('--one-batch', type=int, help=argparse.SUPPRESS)
    p.add_argument('--one-threads', type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    sys.path.insert(0, HERE)
    from zoo_nets import NETS
    nets = list(NETS) if args.nets == 'all' else args.nets.split(',')
    unknown = [n for n in nets if n not in NETS]
    if unknown:
        p.error('unknown nets %s; choose from %s' % (unknown, ', '.join(NETS)))
    frameworks = [('ffnumba', sys.executable, None, None)]
    variants = []
    for spec in args.variant:
        name, _, assigns = spec.partition(':')
        pairs = [a.split('=', 1) for a in assigns.split(',') if a]
        if not name or not pairs or any(len(a) != 2 for a in pairs):
            p.error('--variant wants NAME:VAR=VALUE[,VAR=VALUE], got %r' % spec)
        variants.append(name)
        frameworks.append((name, sys.executable, None, dict(pairs)))
    if args.baseline:       # this script and its nets, the baseline's ffnumba
        frameworks.append(('base', sys.executable, None,
                           {ROOT_ENV: os.path.abspath(args.baseline)}))
    if args.mxnet:
        frameworks.append(('mxnet', args.mxnet, None, None))
    if args.torch:
        frameworks.append(('torch', args.torch, None, None))
    busy = [subprocess.Popen([sys.executable, '-c', 'while 1: pass'])
            for _ in range(args.compete)]
    try:
        table(args, nets, frameworks, variants)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()


def table(args, nets, frameworks, variants):
    """Run every configuration (interleaved over ``frameworks``) and print its row."""
    width = 10 + 19 * (len(frameworks) - 1)
    print('%-16s %5s %3s | %-*s | %-*s' % ('net', 'batch', 'thr', width, 'train samples/s',
                                           width, 'infer samples/s'))
    if args.rounds > 1:
        print('(best of %d interleaved rounds per figure)' % args.rounds)
    if os.environ.get('OPENBLAS_CORETYPE'):
        print('(OPENBLAS_CORETYPE=%s is set: OpenBLAS runs that CPU type\'s kernels, not the best '
              'for this one; `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE` measures what a user '
              'of this CPU gets)' % os.environ['OPENBLAS_CORETYPE'])
    for net in nets:
        for batch in (int(b) for b in args.batch.split(',')):
            for threads in (int(t) for t in args.threads.split(',')):
                res = {}
                for _ in range(args.rounds):
                    for fw, py, script, extra in frameworks:
                        kind = fw if fw in ('mxnet', 'torch') else 'ffnumba'
                        one = run_one(py, kind, net, batch, threads, args, ref=args.mxnet_ref,
                                      script=script, extra=extra)
                        best = res.get(fw)
                        if one is None:
                            continue
                        if best is None:
                            res[fw] = one
                        else:           # each mode's best round
                            for mode in _modes(args):
                                best[mode] = max(best[mode], one[mode])
                mine = res.get('ffnumba')
                if mine is None:
                    continue
                cells = [] if not args.infer else ['%9s' % '-']
                for mode in _modes(args):
                    cell = '%9.1f' % mine[mode]
                    for fw, tag in ([(v, v) for v in variants] +
                                    [('base', 'base'), ('mxnet', 'mx'), ('torch', 'pt')]):
                        other = res.get(fw)
                        if other:
                            cell += ' %s %8.1f (%.2fx)' % (tag, other[mode],
                                                          mine[mode] / other[mode])
                    cells.append(cell)
                print('%-16s %5d %3d | %-*s | %-*s' % (net, batch, threads, width, cells[0],
                                                      width, cells[1]), flush=True)
                for key, title in (('profile', 'training step'),
                                   ('profile_infer', 'inference forward')):
                    if args.profile and key in mine:
                        print('    %s:' % title)
                        for name, kind, share, ms in mine[key]:
                            print('      %-22s %-8s %5.1f%% %8.2f ms' % (name, kind, share, ms))


if __name__ == '__main__':
    main()
