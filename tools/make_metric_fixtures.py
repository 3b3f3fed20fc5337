"""Generate golden numbers from real MXNet 1.9.1 for the data helpers' tests.

Run with the reference install (never imported by the package or the tests)::

    MXNET_MKLDNN_ENABLED=0 /work/mxref/bin/python tools/make_metric_fixtures.py

Writes ``tests/data/mx_metric_golden.json`` (metric inputs and values),
``tests/data/mx_io_golden.json`` (NDArrayIter/CSVIter batch orders and pads)
and ``tests/data/mx_init_golden.json`` (deterministic initializers).
"""
import json
import os
import tempfile

import mxnet as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, '..', 'tests', 'data')


def _batches(rng, kind, nbatch=3):
    out = []
    for b in range(nbatch):
        if kind == 'cls':
            n, c = 8, 4
            p = rng.rand(n, c)
            p /= p.sum(1, keepdims=True)
            out.append((rng.randint(0, c, n).astype('float32'), p.astype('float32')))
        elif kind == 'bin':
            n = 10
            p = rng.rand(n, 2)
            p /= p.sum(1, keepdims=True)
            out.append((rng.randint(0, 2, n).astype('float32'), p.astype('float32')))
        elif kind == 'reg':
            out.append((rng.randn(6).astype('float32'), rng.randn(6).astype('float32')))
        elif kind == 'reg2':
            out.append((rng.randn(5, 3).astype('float32'), rng.randn(5, 3).astype('float32')))
        elif kind == 'seq':
            p = rng.rand(6, 5)
            p /= p.sum(-1, keepdims=True)
            out.append((rng.randint(0, 5, (2, 3)).astype('float32'), p.astype('float32')))
        elif kind == 'cls3':
            n = 12
            out.append((rng.randint(0, 3 + b, n).astype('float32'),
                        rng.rand(n, 3 + b).astype('float32')))
    return out


CASES = [
    ('acc', {}, 'cls'), ('top_k_accuracy', {'top_k': 2}, 'cls'),
    ('top_k_accuracy', {'top_k': 3}, 'cls'), ('f1', {}, 'bin'),
    ('f1', {'average': 'micro'}, 'bin'), ('mcc', {}, 'bin'), ('mcc', {'average': 'micro'}, 'bin'),
    ('perplexity', {'ignore_label': None}, 'cls'), ('perplexity', {'ignore_label': 0}, 'cls'),
    ('perplexity', {'ignore_label': 1}, 'seq'), ('mae', {}, 'reg'), ('mse', {}, 'reg'),
    ('rmse', {}, 'reg'), ('rmse', {}, 'reg2'), ('ce', {}, 'cls'), ('nll_loss', {}, 'cls'),
    ('pearsonr', {}, 'reg'), ('pearsonr', {'average': 'micro'}, 'reg'), ('pcc', {}, 'cls3'),
    ('loss', {}, 'reg'), ('acc', {}, 'cls3'),
]


def metric_golden():
    rng = np.random.RandomState(42)
    cases = []
    for name, kwargs, kind in CASES:
        batches = _batches(rng, kind)
        m = mx.metric.create(name, **kwargs)
        steps = []
        for i, (label, pred) in enumerate(batches):
            m.update([mx.nd.array(label)], [mx.nd.array(pred)])
            steps.append({'get': m.get()[1], 'global': m.get_global()[1]})
            if i == 1:
                m.reset_local()
                steps[-1]['after_reset_local'] = [m.get()[1], m.get_global()[1]]
        cases.append({'metric': name, 'kwargs': kwargs, 'name': m.get()[0],
                      'batches': [[lb.tolist(), p.tolist()] for lb, p in batches],
                      'steps': steps})
    comp = mx.metric.create(['acc', 'ce'])
    label, pred = _batches(rng, 'cls', 1)[0]
    comp.update([mx.nd.array(label)], [mx.nd.array(pred)])
    composite = {'batch': [label.tolist(), pred.tolist()], 'get': comp.get()}
    return {'cases': cases, 'composite': composite}


def io_golden():
    out = {'ndarray': [], 'csv': []}
    for n in (1, 5, 7, 10):
        for bs in (1, 3, 4, 12):
            for handle in ('pad', 'discard', 'roll_over'):
                it = mx.io.NDArrayIter(np.arange(n, dtype='float32'), np.arange(n) * 10.,
                                       batch_size=bs, last_batch_handle=handle)
                epochs = []
                try:
                    for _ in range(3):
                        epochs.append([[b.data[0].asnumpy().astype(int).tolist(), b.pad]
                                       for b in it])
                        it.reset()
                except mx.base.MXNetError:   # MXNet fails on some tiny roll_over cases
                    continue
                out['ndarray'].append({'n': n, 'bs': bs, 'handle': handle, 'epochs': epochs})
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'd.csv')
        for n in (5, 10):
            np.savetxt(path, np.arange(n * 2).reshape(n, 2), delimiter=',', fmt='%d')
            for bs in (3, 4, 12):
                for rb in (True, False):
                    try:
                        it = mx.io.CSVIter(data_csv=path, data_shape=(2,), batch_size=bs,
                                           round_batch=rb)
                    except mx.base.MXNetError:
                        continue
                    epochs = []
                    try:
                        for _ in range(4):
                            ep = []
                            for b in it:
                                rows = (b.data[0].asnumpy()[:, 0] / 2).astype(int).tolist()
                                keep = bs - b.pad if not rb else bs   # stale slots: undefined
                                ep.append([rows[:keep], b.pad])
                            epochs.append(ep)
                            it.reset()
                    except mx.base.MXNetError:   # MXNet needs n >= bs - (n % bs) here
                        continue
                    out['csv'].append({'n': n, 'bs': bs, 'round_batch': rb, 'epochs': epochs})
    return out


def init_golden():
    out = {}
    w = mx.nd.zeros((2, 3, 4, 5))
    mx.init.Bilinear()._init_weight('w', w)
    out['bilinear_2x3x4x5'] = w.asnumpy().tolist()
    b = mx.nd.zeros((8,))
    mx.init.LSTMBias(forget_bias=2.0)._init_weight('b', b)
    out['lstmbias_8'] = b.asnumpy().tolist()
    out['dumps'] = {
        'xavier': mx.init.Xavier(rnd_type='gaussian', magnitude=2).dumps(),
        'msraprelu': mx.init.MSRAPrelu().dumps(), 'uniform': mx.init.Uniform().dumps(),
        'normal': mx.init.Normal(0.5).dumps(), 'zero': mx.init.Zero().dumps(),
        'constant': mx.init.Constant(3.0).dumps(), 'orthogonal': mx.init.Orthogonal().dumps(),
    }
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    for fname, data in (('mx_metric_golden.json', metric_golden()),
                        ('mx_io_golden.json', io_golden()),
                        ('mx_init_golden.json', init_golden())):
        with open(os.path.join(OUT, fname), 'w') as f:
            json.dump(data, f, separators=(',', ':'))
        print('wrote', fname, os.path.getsize(os.path.join(OUT, fname)), 'bytes')


if __name__ == '__main__':
    main()
