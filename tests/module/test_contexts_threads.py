"""Several CPU contexts and the kernel threads: the cap holds only while the
contexts run side by side, the kvstore's sums and copies split over the
threads, and a two-context run repeats bit for bit."""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba import blas_threads
from ffnumba import io
from ffnumba.module import Module
from ffnumba.thread_pool import SPLIT_MIN_ELEMS, kernel_threads


@pytest.fixture
def cap_one(monkeypatch):
    """A process-wide BLAS cap of 1 already in force (so no library is touched)."""
    state = {'threads': 1, 'shared': False, 'contexts_only': False}
    monkeypatch.setattr(blas_threads, '_BLAS_LIMITED', state)
    monkeypatch.setattr(blas_threads, '_RUNNING', [0])
    return state


def test_context_cap_holds_only_while_the_contexts_run(cap_one, threads):
    threads(2)
    blas_threads._limit_blas_threads(1, shared=True, contexts=True)
    assert cap_one['shared'] and cap_one['contexts_only']
    assert blas_threads.kernel_thread_cap() is None       # the update, the kvstore sums
    assert kernel_threads(64) == 2
    with blas_threads.contexts_running():
        assert blas_threads.kernel_thread_cap() == 1      # forward and backward
        assert kernel_threads(64) == 1
    assert kernel_threads(64) == 2


def test_a_cap_shared_with_ranks_holds_everywhere(cap_one, threads):
    threads(2)
    blas_threads._limit_blas_threads(1, shared=True, contexts=True)
    blas_threads._limit_blas_threads(1)                    # MPI ranks share the cores too
    assert not cap_one['contexts_only']
    assert blas_threads.kernel_thread_cap() == 1
    assert kernel_threads(64) == 1
    cap_one['contexts_only'] = False
    cap_one['shared'] = False
    blas_threads._limit_blas_threads(1)                    # ranks first, then contexts
    blas_threads._limit_blas_threads(1, shared=True, contexts=True)
    assert not cap_one['contexts_only']


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_kvstore_split_sum_and_copies_are_the_one_call_values(threads, monkeypatch, dtype):
    from ffnumba import thread_pool
    from ffnumba.optimizer import _deferred
    threads(2)
    calls = []
    real = thread_pool.run_parallel
    for mod in (thread_pool, _deferred):      # pushpull runs the key as one deferred chain
        monkeypatch.setattr(mod, 'run_parallel',
                            lambda fn, n, pool='kernel': (calls.append(n), real(fn, n, pool)))
    size = 3 * SPLIT_MIN_ELEMS + 37                      # pieces that do not divide it
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((size // 37, 37)).astype(dtype) for _ in range(2))
    kv = ff.kv.create('local')
    kv.init('w', ff.nd.zeros(a.shape, dtype=dtype))
    outs = [ff.nd.zeros(a.shape, dtype=dtype) for _ in range(2)]
    kv.pushpull('w', [ff.nd.array(a, dtype=dtype), ff.nd.array(b, dtype=dtype)], out=outs)
    assert calls and all(n == 2 for n in calls)          # the sum and the copies split
    for o in outs:
        np.testing.assert_array_equal(o.asnumpy(), a + b)


def _convnet():
    x = ff.sym.Variable('data')
    x = ff.sym.Convolution(x, kernel=(3, 3), num_filter=8, name='c1')
    x = ff.sym.Activation(x, act_type='relu')
    x = ff.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type='max')
    x = ff.sym.FullyConnected(ff.sym.Flatten(x), num_hidden=300, name='f1')
    x = ff.sym.Activation(x, act_type='tanh')
    x = ff.sym.FullyConnected(x, num_hidden=10, name='f2')
    return ff.sym.SoftmaxOutput(x, name='softmax')


def _train(nctx, steps=4, batch=32):
    rng = np.random.default_rng(0)
    data = rng.uniform(0, 1, (batch, 1, 20, 20))
    label = rng.integers(0, 10, batch).astype(np.float64)
    mod = Module(_convnet(), context=[ff.cpu(i) for i in range(nctx)])
    mod.bind([io.DataDesc('data', data.shape, np.float64)],
             [io.DataDesc('softmax_label', label.shape, np.float64)])
    mod.init_params(ff.init.Xavier(magnitude=2.0, rnd_type='gaussian'))
    args, _ = mod.get_params()
    init = {k: np.random.default_rng(len(k)).standard_normal(v.shape) * 0.1
            for k, v in sorted(args.items())}
    mod.set_params({k: ff.nd.array(v, dtype=np.float64) for k, v in init.items()}, {})
    mod.init_optimizer(optimizer='sgd', optimizer_params={'learning_rate': 0.05,
                                                          'momentum': 0.9})
    batch_ = io.DataBatch([ff.nd.array(data, dtype=np.float64)],
                          [ff.nd.array(label, dtype=np.float64)])
    for _ in range(steps):
        mod.forward_backward(batch_)
        mod.update()
    args, _ = mod.get_params()
    return {k: v.asnumpy() for k, v in args.items()}


def test_two_contexts_repeat_bitwise_and_match_one_context(threads):
    """f1's weight (300 x 576 = 172,800 elements) is big enough for the kvstore's
    sum and the copies back to split over both threads (the update splits from
    ``2 * optimizer.kernels.UPDATE_MIN_ELEMS`` elements)."""
    threads(2)
    first, again = _train(2), _train(2)
    assert first['f1_weight'].dtype == np.float64
    assert first['f1_weight'].size >= 2 * SPLIT_MIN_ELEMS
    for k in first:
        np.testing.assert_array_equal(first[k], again[k], err_msg=k)
    threads(1)
    one = _train(1)
    for k in first:
        np.testing.assert_allclose(first[k], one[k], rtol=1e-9, atol=1e-12, err_msg=k)


def test_kvstore_pull_into_several_outputs_in_one_split(threads):
    threads(2)
    size = 2 * SPLIT_MIN_ELEMS + 5
    value = np.arange(size, dtype=np.float32)
    kv = ff.kv.create('local')
    kv.init(3, ff.nd.array(value))
    outs = [ff.nd.zeros((size,)) for _ in range(3)]
    kv.pull(3, out=outs)
    for o in outs:
        np.testing.assert_array_equal(o.asnumpy(), value)
    mixed = [ff.nd.zeros((size,)), ff.nd.zeros((size,), dtype=np.float64)]
    kv.pull(3, out=mixed)                                # another dtype: one copy each
    for o in mixed:
        np.testing.assert_array_equal(o.asnumpy(), value)
    with pytest.raises(ff.base.FFError, match='shape mismatch'):
        kv.pull(3, out=[ff.nd.zeros((size,)), ff.nd.zeros((size - 1,))])


def test_update_groups_run_alone_on_their_threads(threads):
    """Groups of parameters already fill the threads: kernels inside them do not split too
    (a store whose keys do not chain: LAMB takes norms between its kernels)."""
    from ffnumba.kvstore import updates
    threads(2)
    grads = [[ff.nd.zeros((SPLIT_MIN_ELEMS,)), ff.nd.zeros((SPLIT_MIN_ELEMS,))]
             for _ in range(4)]
    seen = []
    kv = ff.kv.create('local')
    kv.set_optimizer(ff.optimizer.create('lamb'))
    assert not kv.chainable()
    updates._grouped(kv, list(range(4)), grads,
                     lambda g: seen.append((tuple(g), kernel_threads(1 << 20))))
    assert sorted(g for g, _ in seen) == [(0, 2), (1, 3)]
    assert [n for _, n in seen] == [1, 1]
    assert kernel_threads(1 << 20) == 2                  # lifted again on this thread
    seen.clear()
    updates._grouped(ff.kv.create('local'), list(range(4)), grads,     # chains: one call
                     lambda g: seen.append((tuple(g), kernel_threads(1 << 20))))
    assert seen == [((0, 1, 2, 3), 2)]
