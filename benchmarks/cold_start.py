"""Cold start: seconds from ``import ffnumba`` to the first finished training batch.

    python benchmarks/cold_start.py                          # mlp, lenet, resnet18_v1_32
    python benchmarks/cold_start.py --rounds 3 --roots /tmp/old,.   # old tree vs this one
    python benchmarks/cold_start.py --nets lenet --detail    # which kernels compiled
    python benchmarks/cold_start.py --nets resnet18_v1_32 --timeline   # who compiled what, when

Every figure comes from a fresh child process, with Python's bytecode cache
on (``PYTHONPYCACHEPREFIX`` under the temporary folder; a pip-installed
package has its ``.pyc`` files, so only numba's cache is cold). ``import`` is ``import ffnumba``
alone. ``cold`` is a child with an empty ``NUMBA_CACHE_DIR`` (a new temporary
folder): every kernel the first batch needs is compiled. ``warm`` is a second
child with that same folder, now filled: kernels load from numba's disk cache.
``numba-floor`` is numba's own floor: ``import numpy, numba``
and the first call of a one-line ``@njit(cache=True)`` function (numba
initialises its CPU target on the first compile or cache load). Each child
times, from just before ``import ffnumba``, the import, building the
symbol, ``Module.bind``/``init_params``/``init_optimizer`` (SGD, momentum 0.9)
and one ``forward_backward`` + ``update`` on random data (batch ``--batch``),
ending when the outputs are read back. ``step`` is a second batch in the
warm child, timed on its own: the arithmetic every batch pays, so ``warm -
step`` is what starting costs beyond it. ``cpu`` is the cold child's own CPU time up to the end of its first
batch: on a loaded machine, where wall times swing, it stands for the cold
start a quiet machine would see without a compile-ahead child (see
``ffnumba._compile_ahead``; with one it counts neither the child's CPU nor the
time the parent waits for the child's kernels). The warm
child's ``cpu`` is the same figure for a warm start (all its threads: the first
batch's arithmetic on two threads counts twice).
``--rounds`` repeats everything; with
several ``--roots`` (source trees, each put first on ``PYTHONPATH``) the trees
alternate inside each round so a busy phase of the machine hits all of them,
and the table shows the best (smallest) of the rounds.

Each round's line also counts the kernels each child compiled (the helpers compiled
inside a kernel not counted): a warm child that compiles any is flagged under the
table (numba's cache lost entries, or a kernel does not cache).
``--detail`` lists, for the cold child, every numba compilation by function
and how many signatures it compiled, and the total compile time (numba's
``numba:compile`` events; nested compiles count toward their caller's time),
with the compile-ahead child off (``FFNUMBA_COMPILE_AHEAD=0``) so that every
kernel compiles in the process that lists it. ``--detail --ahead force``
keeps the child on instead: the list is then what the parent still compiled
itself (the child's kernels it loaded from the cache or waited for; claims
keep the two from compiling the same kernel).
``--timeline`` prints, for each cold child, the compile-ahead claims' timeline
(``FFNUMBA_AHEAD_TRACE``, :mod:`ffnumba._compile_claims`): when the parent and
the child claimed, saved, waited for, loaded, skipped or deferred each kernel
and helper, seconds from the first event; then per process the kernels it
compiled and when its last compile ended, and every kernel both compiled
(none, unless one gave up waiting).
Goal (issue 13): cold <= 10 s for LeNet and ResNet-18, warm <= 0.5 s for all.
Prints numbers, asserts nothing.
"""
import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NETS = 'mlp,lenet,resnet18_v1_32'


def _compile_listener():
    """Install a numba event listener; returns the per-function record it fills.

    ``calls``: function -> list of [signature, seconds] (seconds include the
    nested compiles of the helpers it calls; those are listed under their own
    names with depth > 0 and not counted in ``top_seconds``).
    """
    from numba.core import event
    record = {'calls': {}, 'top_seconds': 0.0}
    stack = []

    class Listener(event.Listener):
        def on_start(self, ev):
            d = ev.data['dispatcher']
            name = '%s.%s' % (d.py_func.__module__, d.py_func.__qualname__)
            entry = [str(ev.data['args']), 0.0, len(stack)]
            record['calls'].setdefault(name, []).append(entry)
            stack.append((entry, time.perf_counter()))

        def on_end(self, ev):
            entry, tic = stack.pop()
            entry[1] = time.perf_counter() - tic
            if not stack:
                record['top_seconds'] += entry[1]

    event.register('numba:compile', Listener())
    return record


def _plus_one(x):
    return x + 1


def floor():
    """numba's own floor: import numpy and numba, call a one-line cached kernel."""
    tic = time.perf_counter()
    import numpy as np
    import numba
    t_import = time.perf_counter() - tic
    numba.njit(cache=True)(_plus_one)(np.ones(3))
    print(json.dumps({'import': t_import, 'first_batch': time.perf_counter() - tic}))


def worker(args):
    """One child: time the import (and the first batch) and print one JSON line."""
    if args.net == 'numba-floor':
        return floor()
    tic = time.perf_counter()
    record = _compile_listener()     # cheap: numba's events fire only on a compile
    import ffnumba as ff
    t_import = time.perf_counter() - tic
    out = {'import': t_import}
    if args.net == 'import':
        out['numba_modules'] = sorted(m for m in sys.modules if m.startswith('numba.cuda'))[:3]
        print(json.dumps(out))
        return
    import numpy as np
    sys.path.insert(0, HERE)
    from zoo_nets import NETS as ZOO
    import logging
    logging.disable(logging.WARNING)
    build, shape = ZOO[args.net]
    batch = args.batch
    rng = np.random.default_rng(0)
    data = ff.nd.array(rng.uniform(0, 1, (batch,) + shape).astype(np.float32))
    label = ff.nd.array(rng.integers(0, 10, batch).astype(np.float32))
    mod = ff.mod.Module(build(ff.sym), context=ff.cpu())
    mod.bind([('data', (batch,) + shape)], [('softmax_label', (batch,))])
    mod.init_params(ff.init.Xavier(magnitude=2.0))
    mod.init_optimizer(optimizer='sgd', optimizer_params={'learning_rate': 0.01,
                                                          'momentum': 0.9})
    t_bound = time.perf_counter() - tic
    mod.forward_backward(ff.io.DataBatch([data], [label]))
    mod.update()
    res = mod.get_outputs()[0].asnumpy()
    out['first_batch'] = time.perf_counter() - tic
    out['cpu'] = time.process_time()    # this process's CPU seconds (a compile-ahead child's not)
    # kernels compiled here up to the first batch's end (helpers compiled inside them not
    # counted): a warm start should compile none
    out['kernels'] = sum(e[2] == 0 for v in record['calls'].values() for e in v)
    out['bind'] = t_bound - t_import
    out['finite'] = bool(np.isfinite(res).all())
    # one more batch, after the timing above: the steady-state step, so the table can
    # show what the first batch costs beyond the arithmetic every batch pays
    tic = time.perf_counter()
    mod.forward_backward(ff.io.DataBatch([data], [label]))
    mod.update()
    mod.get_outputs()[0].asnumpy()
    out['step'] = time.perf_counter() - tic
    if args.detail:
        out['compiles'] = record['calls']
        out['compile_seconds'] = record['top_seconds']
        out['cuda_imported'] = 'numba.cuda' in sys.modules
    print(json.dumps(out))


def timeline(lines):
    """The claims timeline (lines of ``ffnumba._compile_claims._trace``) as text: one row
    per event, seconds from the first, then a summary per process."""
    rows = [ln.split(' ', 5) for ln in lines if ln.count(' ') >= 5]
    if not rows:
        return '  timeline: no claims (no compile-ahead child ran)'
    t0 = float(rows[0][0])
    out = ['  %7.2f s  %-6s %-8s %-6s %s %s' % ((float(r[0]) - t0,) + tuple(r[1:]))
           for r in rows]
    saved = {}          # role -> [(seconds, top|nested, function, signature)] it compiled
    for r in rows:
        if r[2] == 'saved':
            saved.setdefault(r[1], []).append((float(r[0]) - t0,) + tuple(r[3:]))
    for role, done in sorted(saved.items()):
        kinds = collections.Counter(r[2] for r in rows if r[1] == role)
        top = sum(d[1] == 'top' for d in done)
        out.append('  %s: %d compiled (%d top, %d helpers), last at %.2f s; %d waits, %d '
                   'loaded, %d skipped, %d deferred'
                   % (role, len(done), top, len(done) - top, max(d[0] for d in done),
                      kinds['wait'], kinds['loaded'], kinds['skip'], kinds['defer']))
    keys = [set(d[2:] for d in done) for done in saved.values()]
    both = sorted(set.intersection(*keys)) if len(keys) > 1 else []
    out.append('  compiled by both: %s' % (', '.join('%s %s' % k for k in both) or 'none'))
    return '\n'.join(out)


def child(root, net, cache_dir, args, detail=False):
    """Run one worker on source tree ``root``; its JSON dict plus the process wall time."""
    env = dict(os.environ)
    trace = os.path.join(cache_dir, 'ffnumba-timeline.txt') if detail == 'timeline' else None
    if trace:
        env['FFNUMBA_AHEAD_TRACE'] = trace
        env.setdefault('FFNUMBA_COMPILE_AHEAD', 'force')     # the child even on a busy machine
    env['PYTHONPATH'] = os.path.abspath(root) + os.pathsep + env.get('PYTHONPATH', '')
    env['NUMBA_CACHE_DIR'] = cache_dir
    # Python's own bytecode cache on, in a folder of its own (as after a pip install,
    # whatever PYTHONDONTWRITEBYTECODE says here): a cold *numba* cache, not a cold Python
    env.pop('PYTHONDONTWRITEBYTECODE', None)
    env['PYTHONPYCACHEPREFIX'] = os.path.join(tempfile.gettempdir(), 'ffnumba_cold_start_pyc')
    for var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'):
        env.setdefault(var, '1')
    cmd = [sys.executable, os.path.abspath(__file__), '--worker', '--net', net,
           '--batch', str(args.batch)]
    if detail is True:
        cmd.append('--detail')
        # '0': every kernel compiles here, where it is listed; 'force': what the parent
        # still compiles beside the compile-ahead child
        env['FFNUMBA_COMPILE_AHEAD'] = args.ahead
    tic = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - tic
    for line in proc.stdout.splitlines()[::-1]:
        if line.startswith('{'):
            res = json.loads(line)
            res['process'] = wall
            if trace and os.path.exists(trace):
                with open(trace) as f:
                    res['timeline'] = f.read().splitlines()
            return res
    sys.stderr.write('%s %s failed:\n%s\n' % (root, net, proc.stderr[-3000:]))
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--nets', default=NETS, help='comma list of zoo_nets.NETS names')
    p.add_argument('--batch', type=int, default=32)
    p.add_argument('--rounds', type=int, default=1)
    p.add_argument('--roots', default=os.path.dirname(HERE),
                   help='comma list of source trees to compare (default: this one)')
    p.add_argument('--detail', action='store_true', help='list the kernels compiled cold')
    p.add_argument('--timeline', action='store_true',
                   help="print the compile-ahead claims' timeline of each cold start")
    p.add_argument('--ahead', default='0', choices=('0', 'force', 'wait'),
                   help='FFNUMBA_COMPILE_AHEAD of the --detail children (default 0: off)')
    p.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    p.add_argument('--net', help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    roots = args.roots.split(',')
    nets = args.nets.split(',')
    best = {}
    recompiled = {}     # (root, net) -> most kernels a warm child compiled (should be 0)
    nan = float('nan')

    def keep(key, value):
        if value is not None:
            best[key] = min(best.get(key, value), value)

    for rnd in range(args.rounds):
        for net in ['import', 'numba-floor'] + nets:
            for root in roots:
                tmp = tempfile.mkdtemp(prefix='ff_numba_cache_')
                try:
                    detail = net != 'import' and ('timeline' if args.timeline else args.detail)
                    cold = child(root, net, tmp, args, detail=detail)
                    if cold is None:
                        continue
                    if net == 'import':
                        keep((root, net, 'import'), cold['import'])
                        keep((root, net, 'process'), cold['process'])
                        continue
                    warm = child(root, net, tmp, args)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
                keep((root, net, 'cold'), cold['first_batch'])
                keep((root, net, 'cold_cpu'), cold.get('cpu'))
                keep((root, net, 'cold_process'), cold['process'])
                if warm is not None:
                    keep((root, net, 'warm'), warm['first_batch'])
                    keep((root, net, 'warm_cpu'), warm.get('cpu'))
                    keep((root, net, 'warm_import'), warm['import'])
                    keep((root, net, 'warm_process'), warm['process'])
                    keep((root, net, 'step'), warm.get('step'))
                if warm is not None:
                    recompiled[(root, net)] = max(recompiled.get((root, net), 0),
                                                  warm.get('kernels', 0))
                print('round %d  %-16s %-22s cold %6.2f s (cpu %6.2f, %s kernels compiled)   '
                      'warm %5.2f s (import %.2f, %s compiled)'
                      % (rnd + 1, net, root[-22:], cold['first_batch'], cold.get('cpu', nan),
                         cold.get('kernels', '-'), warm['first_batch'] if warm else float('nan'),
                         warm['import'] if warm else float('nan'),
                         warm.get('kernels', '-') if warm else '-'), flush=True)
                if args.timeline:
                    print(timeline(cold.get('timeline', [])), flush=True)
                if args.detail:
                    calls = cold.get('compiles', {})
                    print('  %d functions, %d signatures compiled, %.1f s compiling; '
                          'numba.cuda imported: %s'
                          % (len(calls), sum(len(v) for v in calls.values()),
                             cold.get('compile_seconds', 0), cold.get('cuda_imported')))
                    rows = sorted(calls.items(), key=lambda kv: -sum(e[1] for e in kv[1]))
                    for name, sigs in rows:
                        print('   %5.2f s %2d sig(s) %s%s'
                              % (sum(e[1] for e in sigs), len(sigs), name,
                                 '' if min(e[2] for e in sigs) == 0 else '  (nested)'))
                        for sig, _, _ in sigs if len(sigs) > 1 else ():
                            print('            %s' % sig[:150])
    print('\nbest of %d round(s), batch %d, seconds from `import ffnumba` to the first '
          'finished training batch (process wall time in brackets):' % (args.rounds, args.batch))
    for root in roots:
        print('%s' % root)
        print('  %-16s import alone %.2f s  [%.2f s]'
              % ('', best.get((root, 'import', 'import'), float('nan')),
                 best.get((root, 'import', 'process'), float('nan'))))
        for net in ['numba-floor'] + nets:
            nan = float('nan')
            step = best.get((root, net, 'step'), nan)
            warm = best.get((root, net, 'warm'), nan)
            print('  %-16s cold %6.2f s [%6.2f] (cpu %6.2f)   warm %5.2f s [%5.2f] (cpu %5.2f)   '
                  'step %5.2f s   warm - step %5.2f s'
                  % (net, best.get((root, net, 'cold'), nan),
                     best.get((root, net, 'cold_process'), nan),
                     best.get((root, net, 'cold_cpu'), nan), warm,
                     best.get((root, net, 'warm_process'), nan),
                     best.get((root, net, 'warm_cpu'), nan), step, warm - step))
            if recompiled.get((root, net)):
                print('  %-16s a warm start compiled %d kernel(s): the cache lost entries'
                      % ('', recompiled[(root, net)]))


if __name__ == '__main__':
    main()
