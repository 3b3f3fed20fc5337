"""A list of parameters updated in one call: the kernels run together, split over threads,
and every weight is the one a call per parameter gives, bit for bit."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba as ff
import ffnumba.ndarray as nd
import ffnumba.optimizer as opt
from ffnumba.base import ShapeError
from ffnumba.kvstore.updates import _update_params
from ffnumba.optimizer import _deferred
from ffnumba.optimizer.updater import defers
from ffnumba.thread_pool import SPLIT_ALIGN

CONFIGS = {
    'sgd': dict(momentum=0.9, wd=0.01), 'ccsgd': dict(), 'nag': dict(momentum=0.9),
    'signum': dict(momentum=0.5), 'sgld': dict(), 'dcasgd': dict(momentum=0.5),
    'adam': dict(wd=0.01), 'adamax': dict(), 'nadam': dict(), 'ftml': dict(),
    'adagrad': dict(), 'rmsprop': dict(centered=True), 'adadelta': dict(), 'ftrl': dict(),
    'lamb': dict(), 'lars': dict(momentum=0.9),
}
SHAPES = [(40, 30), (7,), (8, 3, 3, 3), (300,), (3,)]


def _train(name, dtype, as_list, steps=3, **extra):
    ff.random.seed(5)        # SGLD's noise: the same draws in the same order
    o = opt.create(name, learning_rate=0.01, **dict(CONFIGS[name], **extra))
    up = opt.get_updater(o)
    rng = np.random.default_rng(0)
    ws = [nd.array(rng.standard_normal(s), dtype=dtype) for s in SHAPES]
    for _ in range(steps):
        gs = [nd.array(rng.standard_normal(s), dtype=dtype) for s in SHAPES]
        if as_list:
            up(list(range(len(ws))), gs, ws)
        else:
            for i, (g, w) in enumerate(zip(gs, ws)):
                up(i, g, w)
    return [w.asnumpy() for w in ws], o


@pytest.fixture
def split_small(threads, monkeypatch):
    """Two threads, and the test's few hundred elements split as a network's millions do;
    returns the list of piece lists each flush ran."""
    threads(2)
    monkeypatch.setattr(_deferred, 'DEFER_MIN_ELEMS', 64)
    runs = []
    pieces = _deferred._pieces

    def record(*args):
        runs.append(pieces(*args))
        return runs[-1]
    monkeypatch.setattr(_deferred, '_pieces', record)
    return runs


def test_lists_run_in_pieces_over_threads(split_small):
    _train('sgd', np.float32, True)
    assert len(split_small) == 3 and all(len(p) > 2 for p in split_small)
    assert any(lo > 0 for p in split_small[0] for _, lo, _ in p)   # a weight was cut


@pytest.mark.parametrize('name', sorted(CONFIGS))
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_list_update_equals_a_call_per_parameter(split_small, name, dtype):
    each, o = _train(name, dtype, False)
    assert not split_small
    listed, _ = _train(name, dtype, True)
    for a, b in zip(each, listed):
        np.testing.assert_array_equal(a, b)
    assert bool(split_small) == defers(o) == (name not in ('lamb', 'lars'))


def test_float16_multi_precision_flushes_before_the_master_copy(split_small):
    each, _ = _train('sgd', np.float16, False, multi_precision=True)
    listed, _ = _train('sgd', np.float16, True, multi_precision=True)
    for a, b in zip(each, listed):
        np.testing.assert_array_equal(a, b)
    assert each[0].dtype == np.float16 and np.abs(each[0]).sum() > 0


def test_one_thread_runs_each_kernel_at_once(threads, monkeypatch):
    threads(1)
    monkeypatch.setattr(_deferred, 'DEFER_MIN_ELEMS', 64)
    ran = []
    with _deferred.deferred():
        assert not _deferred.collect(lambda *a: ran.append(a), [np.zeros(4)], None, False)
    assert not ran


def test_only_an_update_that_ends_in_its_kernel_defers():
    class Plain(opt.SGD):                      # inherits SGD.update: defers
        pass

    class OwnUpdate(opt.SGD):
        def update(self, index, weight, grad, state):
            super().update(index, weight, grad, state)

    class OwnMultiPrecision(opt.SGD):
        def update_multi_precision(self, index, weight, grad, state):
            super().update_multi_precision(index, weight, grad, state)

    assert defers(Plain()) and defers(opt.create('ccsgd'))
    assert not defers(OwnUpdate())
    assert not defers(OwnMultiPrecision())
    assert not defers(opt.create('lamb'))


def test_kept_kernels_run_when_the_block_raises(threads, monkeypatch):
    threads(2)
    ran = []
    with pytest.raises(ShapeError):
        with _deferred.deferred():
            assert _deferred.collect(lambda a, hp, wg: ran.append(a.size), [np.zeros(5)],
                                     None, False)
            assert not ran
            raise ShapeError('after the first update')
    assert ran == [5]
    assert not _deferred.collect(lambda *a: None, [np.zeros(1)], None, False)


@given(st.lists(st.integers(0, 200), min_size=1, max_size=12), st.integers(1, 9))
def test_pieces_cover_every_element_once_cut_at_aligned_offsets(sizes, n):
    total = sum(sizes)
    pieces = _deferred._pieces(sizes, total, n)
    seen = [np.zeros(s, int) for s in sizes]
    for piece in pieces:
        assert piece
        for j, lo, hi in piece:
            assert 0 <= lo < hi <= sizes[j]
            assert lo % SPLIT_ALIGN == 0 and (hi % SPLIT_ALIGN == 0 or hi == sizes[j])
            seen[j][lo:hi] += 1
    assert all((s == 1).all() for s in seen)
    assert len(pieces) <= n


def test_update_params_passes_one_list_per_device_as_mxnet():
    calls = []
    params = [[nd.zeros(2), nd.zeros(2)], [nd.zeros(3), nd.zeros(3)], [nd.zeros(1), nd.zeros(1)]]
    grads = [[nd.ones(2), nd.ones(2)], [None, None], [nd.ones(1), nd.ones(1)]]
    _update_params(params, grads, lambda i, g, w: calls.append((list(i), g, w)), 2)
    assert [c[0] for c in calls] == [[0, 4], [1, 5]]
    assert calls[1][1][0] is grads[0][1] and calls[1][2][1] is params[2][1]


def _kv_train(name, ndev, dtype):
    ff.random.seed(5)
    kv = ff.kv.create('local')
    kv.set_optimizer(opt.create(name, learning_rate=0.01, **CONFIGS[name]))
    rng = np.random.default_rng(3)
    keys = list(range(len(SHAPES)))
    for k, s in zip(keys, SHAPES):
        kv.init(k, nd.array(rng.standard_normal(s), dtype=dtype))
    outs = [[nd.zeros(s, dtype=dtype) for _ in range(ndev)] for s in SHAPES]
    for _ in range(3):
        grads = [[nd.array(rng.standard_normal(s), dtype=dtype) for _ in range(ndev)]
                 for s in SHAPES]
        kv.pushpull(keys, grads, out=outs)
    return [[o.asnumpy() for o in dev] for dev in outs], kv


@pytest.mark.parametrize('name', sorted(CONFIGS))
@pytest.mark.parametrize('ndev', [1, 2, 3])
def test_kvstore_chains_sum_update_and_copy_in_one_pass_bit_for_bit(threads, monkeypatch,
                                                                     name, ndev):
    """Each key's sum over the devices, update on the store and copies back as one pass of
    the update kernel's reducing twin, split over two threads: the serial values."""
    threads(1)
    serial, _ = _kv_train(name, ndev, np.float32)
    threads(2)
    monkeypatch.setattr(_deferred, 'DEFER_MIN_ELEMS', 64)
    fused = []
    keep = _deferred.chain.__exit__

    def exit_(self, *exc):
        fused.append(self.fused)
        return keep(self, *exc)
    monkeypatch.setattr(_deferred.chain, '__exit__', exit_)
    chained, kv = _kv_train(name, ndev, np.float32)
    assert kv.chainable() == (name not in ('lamb', 'lars'))
    assert fused == ([True] * 3 * len(SHAPES) if kv.chainable() else [])
    for a, b in zip(serial, chained):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
        for y in b[1:]:
            np.testing.assert_array_equal(b[0], y)      # every device got the new weight


def test_kvstore_float16_keys_do_not_chain(threads):
    threads(2)
    kv = ff.kv.create('local')
    kv.set_optimizer(opt.create('sgd', multi_precision=True))
    kv.init(0, nd.ones((4,), dtype=np.float16))
    pushes = [(0, [nd.ones((4,), dtype=np.float16)] * 2)]
    assert kv.chainable() and not kv._chains(pushes, pushes)
