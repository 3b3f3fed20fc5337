"""Two threads with and without the executor's branch schedule, one thread beside them: prints numbers.

    python benchmarks/branches.py --nets googlenet,inception_bn --steps 6

One process per net. Each round runs one training step (forward, backward; the
SGD update is left out) in each mode, interleaved, so all modes see the same phases of
a shared machine: ``1t`` (numba and BLAS on one thread), ``2t split`` (two
threads, every node split over the kernel pool, ``FFNUMBA_BRANCHES=0``'s path)
and ``2t branches`` (the branch schedule of :mod:`ffnumba._executor_branches`).
With ``--model`` it times nothing and prints the cost model's two-thread over
one-thread ratio of each net's training pass with every node split and with the
branch schedule (the model of :mod:`ffnumba._executor_branches`, whose split
figures match the quiet-machine 2t/1t of the zoo nets within about 0.05).
With ``--idle`` it runs only the branch schedule and prints, per pass, where the
two threads' time goes: the wall clock against the model's estimate, the calls
that split (measured against the model) and those on one thread (wall, thread
CPU time, model), how long both threads were inside a call, how long neither
was (hand-offs between calls: the model charges none), and each thread's busy
time (the run with the shortest wall of ``--steps``).
Figures are the minima over ``--steps`` rounds of each pass (a step: their sum); the schedule's model estimate
is printed beside them. Asserts nothing.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--nets', default='googlenet,inception_bn')
    p.add_argument('--batch', type=int, default=32)
    p.add_argument('--steps', type=int, default=6)
    p.add_argument('--model', action='store_true', help="the cost model's ratios only")
    p.add_argument('--idle', action='store_true',
                   help="per pass: each thread's busy and idle time under the branch schedule")
    args = p.parse_args()
    if args.model:
        return model(args)
    if args.idle:
        return idle(args)
    sys.path.insert(0, HERE)
    import numba
    import numpy as np
    import ffnumba as ff
    from ffnumba import _executor_run
    from ffnumba.blas_threads import numba_blas_single_thread
    from zoo_nets import NETS
    print('%-14s %9s %9s %11s %7s %7s   (ms per step, min of %d; model: branches/split)'
          % ('net', '1t', '2t split', '2t branches', '2t/1t', 'br/1t', args.steps))
    for net in args.nets.split(','):
        build, shape = NETS[net]
        sym = build(ff.sym)
        ex = sym.simple_bind(ff.cpu(), data=(args.batch,) + shape,
                             softmax_label=(args.batch,))
        rng = np.random.default_rng(0)
        for n, a in ex.arg_dict.items():
            a[:] = (rng.integers(0, 10, a.shape) if n == 'softmax_label'
                    else rng.normal(0, 0.05, a.shape))
        calls = ex._calls
        plain = _executor_run.CallPlan._schedule

        def step():
            tic = time.perf_counter()
            ex.forward(is_train=True)
            mid = time.perf_counter()
            ex.backward()
            return mid - tic, time.perf_counter() - mid

        def one():
            numba.set_num_threads(1)
            with numba_blas_single_thread():
                return step()

        def split():
            numba.set_num_threads(2)
            calls._schedule = lambda what: None
            try:
                return step()
            finally:
                del calls._schedule

        def branches():
            numba.set_num_threads(2)
            return step()

        modes = [one, split, branches]
        for m in modes:          # compile, and make the schedules
            m()
            m()
        fwd, bwd = [float('inf')] * 3, [float('inf')] * 3
        for _ in range(args.steps):
            for k, m in enumerate(modes):
                f, b = m()
                fwd[k], bwd[k] = min(fwd[k], f), min(bwd[k], b)
        best = [f + b for f, b in zip(fwd, bwd)]
        est = ['%.2f' % (s.estimate / s.serial) if s else '-'
               for s in (calls._sched.get('forward'), calls._sched.get('backward'))]
        for what, t in (('step', best), ('  forward', fwd), ('  backward', bwd)):
            print('%-14s %9.1f %9.1f %11.1f %7.2f %7.2f'
                  % (net if what == 'step' else what, t[0] * 1e3, t[1] * 1e3, t[2] * 1e3,
                     t[0] / t[1], t[0] / t[2]))
        print('  model (branches / split): forward %s, backward %s' % tuple(est))
        del plain


def _timed_runs(br):
    """Wrap ``Schedule.run`` to log ``(thread, call, start, end, cpu)`` of each call.

    Returns ``{id(schedule): [(schedule, start, end, log), ...]}``, filled as passes run.
    """
    import collections
    import threading
    runs = collections.defaultdict(list)
    real = br.Schedule.run

    def run(self, call):
        log = []

        def timed(j):
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return call(j)
            finally:
                log.append((threading.get_ident(), j, t0, time.perf_counter(),
                            time.thread_time() - c0))
        t0 = time.perf_counter()
        out = real(self, timed)
        runs[id(self)].append((self, t0, time.perf_counter(), log))
        return out
    br.Schedule.run = run
    return runs


def _overlap(log, t0, t1):
    """Seconds with both threads inside a call, and with neither."""
    edges = sorted([(rec[2], 1) for rec in log] + [(rec[3], -1) for rec in log])
    both = neither = 0.0
    inside, last = 0, t0
    for t, d in edges:
        both += (t - last) * (inside >= 2)
        neither += (t - last) * (inside == 0)
        inside, last = inside + d, t
    return both, neither + (t1 - last)


def idle(args):
    """Per pass of the branch schedule: where the two threads' time goes (see the docstring)."""
    sys.path.insert(0, HERE)
    import numba
    import numpy as np
    import ffnumba as ff
    from ffnumba import _executor_branches as br
    from zoo_nets import NETS
    numba.set_num_threads(2)
    runs = _timed_runs(br)
    print('ms per pass (the run with the shortest wall of %d)' % args.steps)
    for net in args.nets.split(','):
        build, shape = NETS[net]
        ex = build(ff.sym).simple_bind(ff.cpu(), data=(args.batch,) + shape,
                                       softmax_label=(args.batch,))
        rng = np.random.default_rng(0)
        for n, a in ex.arg_dict.items():
            a[:] = (rng.integers(0, 10, a.shape) if n == 'softmax_label'
                    else rng.normal(0, 0.05, a.shape))
        calls = ex._calls
        for _ in range(2):               # compile, and make the schedules
            ex.forward(is_train=True)
            ex.backward()
        runs.clear()
        for _ in range(args.steps):
            ex.forward(is_train=True)
            ex.backward()
        cost = {}
        for what in ('forward', 'backward'):
            sched = calls._sched.get(what)
            if sched is None:
                print('%-14s %-8s no branch schedule' % (net, what))
                continue
            plan, nids = ((calls._fwd, calls._fwd_nids) if what == 'forward'
                          else (calls._bwd, calls._bwd_nids))
            cost = [br.estimate(calls._nodes[nid].op.name,
                                br._shapes(rec[3] if what == 'forward' else rec[4]),
                                br._shapes(rec[4] if what == 'forward' else rec[5]),
                                what == 'backward')
                    for rec, nid in zip(plan, nids)]
            _, t0, t1, log = min(runs[id(sched)], key=lambda r: r[2] - r[1])
            split = [rec for rec in log if sched._split[rec[1]]]
            single = [rec for rec in log if not sched._split[rec[1]]]
            both, neither = _overlap(log, t0, t1)
            busy = {}
            for rec in log:
                busy[rec[0]] = busy.get(rec[0], 0.0) + rec[3] - rec[2]
            print('%-14s %-8s wall %7.2f (model %7.2f) | %3d split calls %7.2f (model %7.2f) | '
                  '%3d one-thread calls %7.2f, cpu %7.2f (model %7.2f) | both busy %6.2f, '
                  'neither %6.2f | per thread %s'
                  % (net, what, (t1 - t0) * 1e3, sched.estimate * 1e3, len(split),
                     sum(r[3] - r[2] for r in split) * 1e3,
                     sum(br._split_cost(cost[r[1]]) for r in split) * 1e3, len(single),
                     sum(r[3] - r[2] for r in single) * 1e3, sum(r[4] for r in single) * 1e3,
                     sum(cost[r[1]] for r in single) * 1e3, both * 1e3, neither * 1e3,
                     ' '.join('%.2f' % (b * 1e3) for b in sorted(busy.values()))))


def model(args):
    """Print the cost model's 2t/1t ratio per net: every node split, and with branches."""
    sys.path.insert(0, HERE)
    import ffnumba as ff
    from ffnumba import _executor_branches as br
    from zoo_nets import NETS
    print('%-14s %8s %11s   (model 2t/1t, training pass, batch %d)'
          % ('net', 'split', 'branches', args.batch))
    for net in args.nets.split(','):
        build, shape = NETS[net]
        ex = build(ff.sym).simple_bind(ff.cpu(), data=(args.batch,) + shape,
                                       softmax_label=(args.batch,))
        calls = ex._calls
        one = split = branches = 0.0
        for what, plan, nids in (('forward', calls._fwd, calls._fwd_nids),
                                 ('backward', calls._bwd, calls._bwd_nids)):
            cost = []
            for rec, nid in zip(plan, nids):
                ins, outs = (rec[3], rec[4]) if what == 'forward' else (rec[4], rec[5])
                cost.append(br.estimate(calls._nodes[nid].op.name, br._shapes(ins),
                                        br._shapes(outs), what == 'backward'))
            sched = calls._make_schedule(what)
            s = sum(br._split_cost(c) for c in cost)
            one, split = one + sum(cost), split + s
            branches += sched.estimate if sched else s
        print('%-14s %8.2f %11.2f' % (net, one / split, one / branches))


if __name__ == '__main__':
    main()
