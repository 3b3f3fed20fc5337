"""The executor's branch schedule: independent nodes side by side on two threads.

Every test trains an inception-like net (four towers and a concat, a weight
shared by two towers, BatchNorm, pooling, ``grad_req`` 'write' and 'add') for
several steps on two threads and compares each step's outputs, gradients and
auxiliary states with the plain one-thread run: a race between the towers, a
buffer the memory plan hands to two concurrent nodes, or a gradient sum out of
order shows up as a difference.
"""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba import _executor_branches as branches
from ffnumba import thread_pool
from ffnumba.blas_threads import numba_blas_single_thread

STEPS = 4


def _tower(x, name, nf, k, w=None):
    kw = {} if w is None else {'weight': w}
    x = ff.sym.Convolution(x, num_filter=nf, kernel=(k, k), pad=(k // 2, k // 2),
                           name=name + '_conv', **kw)
    return ff.sym.Activation(x, act_type='relu', name=name + '_relu')


def _inception_net():
    x = ff.sym.Variable('data')
    x = _tower(x, 'stem', 6, 3)
    shared = ff.sym.Variable('shared_weight')
    for m in range(2):
        p = 'm%d' % m
        a = _tower(x, p + 'a', 4, 1, w=shared if m == 0 else None)
        b = _tower(_tower(x, p + 'b1', 3, 1), p + 'b2', 5, 3)
        c = _tower(_tower(x, p + 'c', 4, 1, w=shared if m == 0 else None), p + 'c2', 4, 1)
        d = ff.sym.Pooling(x, kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type='max',
                           name=p + 'pool')
        d = ff.sym.BatchNorm(_tower(d, p + 'd', 3, 1), name=p + 'bn', fix_gamma=False)
        x = ff.sym.Concat(a, b, c, d, name=p + 'concat')
    x = ff.sym.Pooling(x, kernel=(1, 1), global_pool=True, pool_type='avg', name='gap')
    x = ff.sym.FullyConnected(ff.sym.Flatten(x), num_hidden=5, name='fc')
    return ff.sym.SoftmaxOutput(x, name='softmax')


def _train(nthreads, threads, dtype='float32', steps=STEPS):
    """Outputs, gradients and aux states of ``steps`` SGD steps on ``nthreads`` threads
    (one thread: BLAS on one thread too, as each call of a schedule's lane)."""
    threads(nthreads)
    if nthreads == 1:
        with numba_blas_single_thread():
            return _steps(dtype, steps)
    return _steps(dtype, steps)


def _steps(dtype, steps):
    net = _inception_net()
    shapes = {'data': (6, 3, 8, 8), 'softmax_label': (6,)}
    args = net.list_arguments()
    reqs = {n: ('add' if n in ('m1a_conv_weight', 'shared_weight', 'fc_bias') else 'write')
            for n in args}
    reqs['data'] = 'write'
    reqs['softmax_label'] = 'null'
    ex = net.simple_bind(ff.cpu(), grad_req=reqs, type_dict={'data': dtype}, **shapes)
    rng = np.random.default_rng(3)
    for n, a in ex.arg_dict.items():
        if n == 'softmax_label':
            a[:] = rng.integers(0, 5, a.shape)
        else:
            a[:] = rng.normal(0, 0.5, a.shape)
    for n, a in ex.aux_dict.items():
        a[:] = 1.0 if n.endswith('var') else 0.0
    record = []
    for _ in range(steps):
        ex.forward(is_train=True)
        ex.backward()
        record.append([o.asnumpy().copy() for o in ex.outputs])
        record.append([g.asnumpy().copy() for g in ex.grad_arrays if g is not None])
        record.append([a.asnumpy().copy() for a in ex.aux_arrays])
        for n, a in ex.arg_dict.items():
            g = ex.grad_dict[n]
            if n not in ('data', 'softmax_label') and g is not None:
                a[:] = a.asnumpy() - 0.1 * g.asnumpy()
    return ex, record


def _flat(record):
    return [a for group in record for a in group]


@pytest.fixture
def one_thread_only(monkeypatch):
    """Every call of a schedule runs on one thread (no split): results equal one thread's."""
    monkeypatch.setattr(branches, 'SPLIT_SPEEDUP', 1.0)
    monkeypatch.setattr(branches, 'KEEP_BELOW', float('inf'))


def _in_order(self, call):
    """A schedule's calls one after another on this thread (as its first run)."""
    return self.run_in_order(call)


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_side_by_side_bit_identical_to_in_order(threads, one_thread_only, monkeypatch, dtype):
    """Two lanes give bit for bit what the same calls give one after another: no race."""
    with monkeypatch.context() as m:
        m.setattr(branches.Schedule, 'run', _in_order)
        _, ref = _train(2, threads, dtype, steps=6)
    ex, got = _train(2, threads, dtype, steps=6)
    for what in ('forward', 'backward'):
        sched = ex._calls._sched.get(what)
        assert sched is not None, what
        assert all(split is False for lane in sched.lanes for _, split in lane)
        assert sched.lanes[0] and sched.lanes[1], 'nothing ran side by side'
    assert len(_flat(ref)) == len(_flat(got))
    for a, b in zip(_flat(ref), _flat(got)):
        np.testing.assert_array_equal(a, b)


def test_default_schedule_matches_one_thread(threads, monkeypatch):
    monkeypatch.setattr(branches, 'KEEP_BELOW', float('inf'))
    _, ref = _train(1, threads, 'float64', steps=6)
    ex, got = _train(2, threads, 'float64', steps=6)
    assert ex._calls._sched.get('backward') is not None
    for a, b in zip(_flat(ref), _flat(got)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_side_by_side_matches_one_thread(threads, one_thread_only):
    """Calls on one thread each: the one-thread run's numbers up to summation order."""
    _, ref = _train(1, threads, 'float64', steps=6)
    ex, got = _train(2, threads, 'float64', steps=6)
    for a, b in zip(_flat(ref), _flat(got)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_off_switch(threads, one_thread_only, monkeypatch):
    monkeypatch.setenv(branches.BRANCHES_ENV, '0')
    ex, _ = _train(2, threads, steps=2)
    assert ex._calls._sched == {}


def test_one_thread_runs_node_after_node(threads, one_thread_only):
    ex, _ = _train(1, threads, steps=3)
    assert ex._calls._sched == {}


def test_first_run_gives_the_numbers_of_later_runs(threads, monkeypatch):
    """The first (compiling) run takes the schedule's calls in order with the same split
    or one-thread choice: a repeated forward and backward give the same numbers."""
    monkeypatch.setattr(branches, 'KEEP_BELOW', float('inf'))
    threads(2)
    ex = _inception_net().simple_bind(ff.cpu(), data=(6, 3, 8, 8), softmax_label=(6,))
    rng = np.random.default_rng(5)
    for n, a in ex.arg_dict.items():
        a[:] = rng.integers(0, 5, a.shape) if n == 'softmax_label' else rng.normal(0, .5, a.shape)
    runs = []
    for _ in range(3):
        ex.forward(is_train=True)
        ex.backward()
        runs.append([g.asnumpy().copy() for g in ex.grad_arrays if g is not None])
    assert ex._calls._runs == {'forward': 3, 'backward': 3}
    for later in runs[1:]:
        for a, b in zip(runs[0], later):
            np.testing.assert_array_equal(a, b)


def test_regions_never_share_a_buffer_inside():
    """The memory plan gives no two nodes of one branchy region a buffer one of them freed."""
    net = _inception_net()
    ex = net.simple_bind(ff.cpu(), data=(2, 3, 8, 8), softmax_label=(2,))
    view = ex._view
    cuts = branches.cut_nodes(view)
    names = {view.nodes[c].name for c in cuts}
    assert 'm0concat' in names and 'm1concat' in names and 'stem_relu' in names
    assert 'm0b2_conv' not in names and 'm1pool' not in names
    deps = branches._dependencies(
        [(ins + aux, outs + aux) for _, _, _, ins, outs, aux in ex._calls._fwd],
        [view.nodes[n].op.name for n in ex._calls._fwd_nids])
    # the four towers of a module wait for the stem only (never for each other); a
    # training executor runs the stem's convolution and relu as one call (the fused
    # forward carries the convolution's node)
    fwd_names = [view.nodes[n].name for n in ex._calls._fwd_nids]
    stem = {fwd_names.index(n) for n in ('stem_conv', 'stem_relu') if n in fwd_names}
    for n in ('m0a_conv', 'm0b1_conv', 'm0c_conv', 'm0pool'):
        j = fwd_names.index(n)
        assert max(stem) in deps[j] and deps[j] <= stem, (n, sorted(deps[j]))


def test_dependencies_from_memory_and_random_stream():
    buf = np.zeros(100)
    a, b, c = buf[:50], buf[40:60], np.zeros(10)
    acc = [([c], [a]), ([c], [np.zeros(3)]), ([b], [np.zeros(4)]), ([], [c]),
           ([], [np.zeros(5)]), ([], [np.zeros(6)])]
    names = ['x', 'x', 'x', 'x', 'Dropout', '_random_uniform']
    deps = branches._dependencies(acc, names)
    assert deps[1] == set()                 # reads c beside another reader of c
    assert deps[2] == {0}                   # b overlaps a, which call 0 wrote
    assert deps[3] == {0, 1}                # writes c after two readers
    assert deps[5] == {4}                   # one random stream, in order
    deps = branches._dependencies(acc + [([], [])], names + ['Custom'])
    assert deps[6] == set(range(6))          # an op of unknown effects runs alone


def test_error_names_the_node(threads, one_thread_only, monkeypatch):
    ex, _ = _train(2, threads, steps=2)
    calls = ex._calls
    k = [calls._nodes[n].name for n in calls._fwd_nids].index('m0b2_conv')
    fn, *rest = calls._fwd[k]

    def boom(*a):
        raise ValueError('boom')
    calls._fwd[k] = (boom, *rest)
    with pytest.raises(ff.base.FFError, match='m0b2_conv'):
        ex.forward(is_train=True)
    calls._fwd[k] = (fn, *rest)
    ex.forward(is_train=True)               # the lanes are usable again


def test_a_held_back_thread_leaves_its_calls_to_the_other(threads, one_thread_only):
    """With every 'branch' pool thread busy elsewhere, the caller runs the whole pass alone
    (and gets the same numbers): no call waits for a thread that never comes."""
    import os
    import threading
    import time
    ex, _ = _train(2, threads, steps=2)
    ex.forward(is_train=True)
    ex.backward()
    written = [n for n, r in ex.grad_req.items() if r == 'write']   # 'add' ones grow
    want = [ex.grad_dict[n].asnumpy().copy() for n in written]
    release = threading.Event()
    pool = thread_pool.get_pool('branch', os.cpu_count() or 1)
    blockers = [pool.submit(release.wait, 60) for _ in range(os.cpu_count() or 1)]
    try:
        tic = time.perf_counter()
        ex.forward(is_train=True)
        ex.backward()
        assert time.perf_counter() - tic < 30
    finally:
        release.set()
    for b in blockers:
        b.result()
    got = [ex.grad_dict[n].asnumpy() for n in written]
    assert len(got) > 20
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)


def test_inference_executors_run_node_after_node(threads):
    """Without gradients there is no schedule (the fused and unfused forwards of an
    inference executor stay bitwise equal: tests/test_executor_fuse.py)."""
    threads(2)
    ex = _inception_net().simple_bind(ff.cpu(), grad_req='null', data=(6, 3, 8, 8),
                                      softmax_label=(6,))
    for _ in range(2):
        ex.forward()
    assert ex._calls._sched == {} and ex._fused._sched == {}


def _residual_net():
    x = _tower(ff.sym.Variable('data'), 'stem', 8, 3)
    y = _tower(_tower(x, 'r1', 8, 3), 'r2', 8, 3)
    s = ff.sym.Convolution(x, num_filter=8, kernel=(1, 1), name='short')
    x = ff.sym.Activation(y + s, act_type='relu', name='out_relu')
    x = ff.sym.FullyConnected(ff.sym.Flatten(x), num_hidden=3, name='fc')
    return ff.sym.SoftmaxOutput(x, name='softmax')


def test_narrow_regions_keep_their_buffers_shared(monkeypatch):
    """A residual block (a 1x1 shortcut beside two 3x3 convolutions) gains nothing side
    by side: the memory plan is the one without the schedule; inception modules are kept
    apart (more memory)."""
    sizes = {}
    for on in ('0', '1'):
        monkeypatch.setenv(branches.BRANCHES_ENV, on)
        for name, net in (('res', _residual_net()), ('inc', _inception_net())):
            ex = net.simple_bind(ff.cpu(), data=(8, 3, 16, 16), softmax_label=(8,))
            sizes[name, on] = ex._plan.total_bytes
            assert ex._calls._branches == (on == '1' and name == 'inc')   # no wide region: none
            if name == 'res':
                view = ex._view
                assert len(branches.cut_nodes(view, ex._shapes)) > len(branches.cut_nodes(view))
    assert sizes['res', '1'] == sizes['res', '0']
    assert sizes['inc', '1'] > sizes['inc', '0']
