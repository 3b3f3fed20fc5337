"""Golden optimizer trajectories, scheduler sequences and a pickled ``.states`` from MXNet 1.9.1.

Run with the reference install (never imported by the package or the tests)::

    MXNET_MKLDNN_ENABLED=0 /work/mxref/bin/python tools/make_optimizer_fixtures.py

Writes ``tests/data/optimizer/``:

* ``golden.npz``: for each case ``<case>|w0`` / ``<case>|g<step>`` (inputs for two
  parameters stacked) and ``<case>|w<step>`` (weights after each step);
* ``cases.json``: case -> [optimizer name, kwargs, dtype];
* ``schedulers.json``: learning-rate sequences for n = 0..N;
* ``sgd_momentum.states``/``adam.states``: MXNet's pickled updater states, with
  ``states_expected.npz`` holding their arrays.
"""
import json
import os

import numpy as np
import mxnet as mx

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'data',
                   'optimizer')
STEPS = 4
BASE = dict(wd=0.05, rescale_grad=0.5, clip_gradient=0.8)
CASES = {
    'sgd': ('sgd', dict(BASE, learning_rate=0.1)),
    'sgd_mom': ('sgd', dict(BASE, learning_rate=0.1, momentum=0.9)),
    'sgd_mom_noclip': ('sgd', dict(learning_rate=0.1, momentum=0.5, wd=0.01)),
    'nag_mom': ('nag', dict(BASE, learning_rate=0.1, momentum=0.9)),
    'signum': ('signum', dict(BASE, learning_rate=0.05, wd_lh=0.01)),
    'signsgd': ('signum', dict(BASE, learning_rate=0.05, momentum=0.0)),
    'dcasgd': ('dcasgd', dict(BASE, learning_rate=0.1)),
    'adam': ('adam', dict(BASE, learning_rate=0.01)),
    'adamax': ('adamax', dict(BASE, learning_rate=0.01)),
    'nadam': ('nadam', dict(BASE, learning_rate=0.01)),
    'ftml': ('ftml', dict(BASE, learning_rate=0.01)),
    'adagrad': ('adagrad', dict(BASE, learning_rate=0.1)),
    'rmsprop': ('rmsprop', dict(BASE, learning_rate=0.01, clip_weights=0.9)),
    'rmsprop_centered': ('rmsprop', dict(BASE, learning_rate=0.01, centered=True)),
    'adadelta': ('adadelta', dict(BASE, rho=0.8)),
    'ftrl': ('ftrl', dict(BASE, learning_rate=0.1, lamda1=0.02)),
    'sgd_mp16': ('sgd', dict(BASE, learning_rate=0.1, momentum=0.9, multi_precision=True)),
    'adam_mp16': ('adam', dict(BASE, learning_rate=0.01, multi_precision=True)),
}


def run_case(name, kwargs, dtype, rng, out):
    shape = (2, 5)
    w0 = [rng.uniform(-1, 1, shape).astype(dtype) for _ in range(2)]
    grads = [[rng.uniform(-2, 2, shape).astype(dtype) for _ in range(2)] for _ in range(STEPS)]
    opt = mx.optimizer.create(name, param_idx2name={0: 'a_weight', 1: 'b_weight'}, **kwargs)
    upd = mx.optimizer.get_updater(opt)
    ws = [mx.nd.array(w, dtype=dtype) for w in w0]
    out['w0'] = np.stack(w0)
    for s in range(STEPS):
        for i in range(2):
            upd(i, mx.nd.array(grads[s][i], dtype=dtype), ws[i])
        out['g%d' % s] = np.stack(grads[s])
        out['w%d' % (s + 1)] = np.stack([w.asnumpy() for w in ws])


def schedulers():
    ls = mx.lr_scheduler
    make = {
        'factor': lambda: ls.FactorScheduler(step=2, factor=0.5, base_lr=1.0),
        'factor_stop': lambda: ls.FactorScheduler(step=1, factor=0.1, stop_factor_lr=1e-3,
                                                  base_lr=1.0),
        'factor_warm': lambda: ls.FactorScheduler(step=3, factor=0.5, base_lr=0.8,
                                                  warmup_steps=4, warmup_begin_lr=0.1),
        'multifactor': lambda: ls.MultiFactorScheduler(step=[2, 4], factor=0.1, base_lr=1.0),
        'multifactor_const': lambda: ls.MultiFactorScheduler(
            step=[5, 7], factor=0.5, base_lr=1.0, warmup_steps=3, warmup_begin_lr=0.2,
            warmup_mode='constant'),
        'poly': lambda: ls.PolyScheduler(max_update=8, base_lr=1.0, pwr=2, final_lr=0.1),
        'poly_warm': lambda: ls.PolyScheduler(max_update=10, base_lr=0.5, pwr=1.5,
                                              warmup_steps=3, warmup_begin_lr=0.05),
        'cosine': lambda: ls.CosineScheduler(max_update=8, base_lr=1.0, final_lr=0.1),
        'cosine_warm': lambda: ls.CosineScheduler(max_update=10, base_lr=0.5, warmup_steps=2,
                                                  warmup_begin_lr=0.1),
    }
    seqs = {}
    for k, f in make.items():
        sched = f()
        seqs[k] = [sched(n) for n in range(14)]             # one instance, in order
        seqs[k + '_fresh'] = [f()(n) for n in range(14)]    # a new instance per call
    # an optimizer with learning_rate overwriting the scheduler's base_lr
    sched = ls.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    opt = mx.optimizer.SGD(learning_rate=0.3, lr_scheduler=sched)
    upd = mx.optimizer.get_updater(opt)
    w = mx.nd.zeros((1,))
    lrs = []
    for _ in range(7):
        upd(0, mx.nd.ones((1,)), w)
        lrs.append(float(opt.learning_rate))
    seqs['sgd_lr_overrides_scheduler'] = lrs
    return seqs


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(11)
    golden, cases = {}, {}
    for case, (name, kwargs) in CASES.items():
        dtype = 'float16' if case.endswith('_mp16') else 'float32'
        out = {}
        run_case(name, kwargs, dtype, rng, out)
        for k, v in out.items():
            golden['%s|%s' % (case, k)] = v
        cases[case] = [name, kwargs, dtype]
    np.savez(os.path.join(OUT, 'golden.npz'), **golden)
    with open(os.path.join(OUT, 'cases.json'), 'w') as f:
        json.dump(cases, f, indent=1, sort_keys=True)
    with open(os.path.join(OUT, 'schedulers.json'), 'w') as f:
        json.dump(schedulers(), f, indent=1, sort_keys=True)

    expected = {}
    for fname, opt in (('sgd_momentum.states', mx.optimizer.SGD(momentum=0.9, wd=0.1)),
                       ('adam.states', mx.optimizer.Adam(multi_precision=True))):
        upd = mx.optimizer.get_updater(opt)
        w32 = mx.nd.array(rng.randn(2, 3))
        w16 = mx.nd.array(rng.randn(4), dtype='float16')
        for _ in range(2):
            upd(0, mx.nd.array(rng.randn(2, 3)), w32)
            upd(1, mx.nd.array(rng.randn(4), dtype='float16'), w16)
        with open(os.path.join(OUT, fname), 'wb') as f:
            f.write(upd.get_states(dump_optimizer=False))
        for idx, st in upd.states.items():
            flat = st if isinstance(st, tuple) else (st,)
            stack = list(flat)
            k = 0
            while stack:
                s = stack.pop(0)
                if isinstance(s, tuple):
                    stack = list(s) + stack
                    continue
                if s is not None:
                    expected['%s|%d|%d' % (fname, idx, k)] = s.asnumpy()
                k += 1
    np.savez(os.path.join(OUT, 'states_expected.npz'), **expected)
    for f in sorted(os.listdir(OUT)):
        print(f, os.path.getsize(os.path.join(OUT, f)))


if __name__ == '__main__':
    main()
