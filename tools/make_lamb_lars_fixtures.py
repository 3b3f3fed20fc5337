"""Write tests/data/optimizer/lamb_lars_golden.npz: MXNet 1.9.1 LAMB and LARS trajectories.

Run with MXNet 1.9.1 (never a dependency of ffnumba):

    MXNET_MKLDNN_ENABLED=0 /work/mxref/bin/python tools/make_lamb_lars_fixtures.py

Each case: two float32 parameters (names from ``IDX2NAME``), four steps in
which the Updater gets both indices in one call (as Module does). Keys:
``<case>|w0``, ``<case>|g<k>``, ``<case>|w<k+1>``; the cases (optimizer
name and keyword arguments) are stored as JSON under ``cases``.
"""
import json
import os

import numpy as np
import mxnet as mx

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, '..', 'tests', 'data', 'optimizer', 'lamb_lars_golden.npz')
IDX2NAME = {0: 'fc_weight', 1: 'fc_bias'}
STEPS = 4

CASES = {
    'lamb_default': ('lamb', dict()),
    'lamb_wd_clip': ('lamb', dict(learning_rate=0.01, wd=0.1, rescale_grad=0.5,
                                  clip_gradient=0.4)),
    'lamb_bounds_nobc': ('lamb', dict(learning_rate=0.02, lower_bound=1.5, upper_bound=2.0,
                                      bias_correction=False, beta1=0.8, beta2=0.95,
                                      epsilon=1e-4)),
    'lars_plain': ('lars', dict(learning_rate=0.1, eta=0.01)),
    'lars_momentum': ('lars', dict(learning_rate=0.1, momentum=0.9, wd=0.01, eta=0.02,
                                   eps=1e-3, rescale_grad=0.5)),
    'lars_sched': ('lars', dict(learning_rate=0.1, momentum=0.9, wd=0.01, clip_gradient=0.5,
                                sched=0.5)),
}


def main():
    rs = np.random.RandomState(11)
    data = {}
    for case, (name, kw) in CASES.items():
        kw = dict(kw)
        sched = kw.pop('sched', None)
        if sched:
            kw['lr_scheduler'] = mx.lr_scheduler.FactorScheduler(step=1, factor=sched,
                                                                 base_lr=kw['learning_rate'])
        o = mx.optimizer.create(name, param_idx2name=IDX2NAME, **kw)
        u = mx.optimizer.get_updater(o)
        w0 = [rs.randn(3, 4).astype('float32'), rs.randn(4).astype('float32')]
        ws = [mx.nd.array(w) for w in w0]
        data[case + '|w0'] = np.concatenate([w.ravel() for w in w0])
        for k in range(STEPS):
            gs = [rs.randn(*w.shape).astype('float32') for w in w0]
            data['%s|g%d' % (case, k)] = np.concatenate([g.ravel() for g in gs])
            u([0, 1], [mx.nd.array(g) for g in gs], ws)
            data['%s|w%d' % (case, k + 1)] = np.concatenate([w.asnumpy().ravel() for w in ws])
    data['cases'] = np.array(json.dumps(CASES))
    np.savez(OUT, **data)
    print('wrote', OUT)


if __name__ == '__main__':
    main()
