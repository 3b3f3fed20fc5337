"""predict from several threads on one model gives each thread its own rows (docs/guide/threads.md)."""
import threading

import numpy as np

import ffnumba as ff


def _model():
    data = ff.sym.Variable('data')
    net = ff.sym.FullyConnected(data, num_hidden=16, name='fc1')
    net = ff.sym.Activation(net, act_type='relu')
    net = ff.sym.FullyConnected(net, num_hidden=4, name='fc2')
    net = ff.sym.SoftmaxOutput(net, name='softmax')
    mod = ff.mod.Module(net, context=ff.cpu())
    mod.bind([('data', (8, 10))], [('softmax_label', (8,))], for_training=False)
    mod.init_params(ff.init.Xavier())
    return mod


def _run_threads(fn, n=4):
    results, errors = [None] * n, []

    def work(i):
        try:
            results[i] = fn(i)
        except Exception as e:      # reported below with the thread's index
            errors.append((i, e))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_predict_from_4_threads_matches_serial():
    mod = _model()
    rng = np.random.default_rng(0)
    # different sizes: batch 8 with padding, and whole-array predicts of other sizes
    datas = [rng.standard_normal((37 + 5 * i, 10)).astype(np.float32) for i in range(4)]
    iters = lambda i: ff.io.NDArrayIter(datas[i], batch_size=8)
    serial = [mod.predict(iters(i)).asnumpy() for i in range(4)]
    for _ in range(3):
        got = _run_threads(lambda i: mod.predict(iters(i)).asnumpy())
        for s, g in zip(serial, got):
            np.testing.assert_array_equal(g, s)


def test_predict_arrays_from_4_threads_matches_serial():
    mod = _model()
    rng = np.random.default_rng(1)
    datas = [rng.standard_normal((3 + i, 10)).astype(np.float32) for i in range(4)]
    serial = [mod.predict(d).asnumpy() for d in datas]
    for _ in range(5):
        got = _run_threads(lambda i: mod.predict(datas[i]).asnumpy())
        for s, g in zip(serial, got):
            np.testing.assert_array_equal(g, s)


def test_score_and_iter_predict_from_threads():
    mod = _model()
    rng = np.random.default_rng(2)
    x = rng.standard_normal((40, 10)).astype(np.float32)
    y = rng.integers(0, 4, 40).astype(np.float32)
    it = lambda: ff.io.NDArrayIter(x, y, batch_size=8)
    want = dict(mod.score(it(), 'acc'))
    got = _run_threads(lambda i: dict(mod.score(it(), 'acc')))
    assert all(g == want for g in got)
    serial = [o[0].asnumpy() for o, _, _ in mod.iter_predict(it())]
    got = _run_threads(lambda i: [o[0].asnumpy() for o, _, _ in mod.iter_predict(it())])
    for g in got:
        for a, b in zip(g, serial):
            np.testing.assert_array_equal(a, b)
