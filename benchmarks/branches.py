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
    args = p.parse_args()
    if args.model:
        return model(args)
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
