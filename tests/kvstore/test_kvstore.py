"""KVStore: init/push/pull/pushpull/broadcast, updaters, key kinds (dist: test_dist_mpi.py)."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba as ff
import ffnumba.kvstore as kvs
import ffnumba.ndarray as nd
from ffnumba.base import FFError

SHAPE = (2, 3)


@pytest.mark.parametrize('name', ['local', 'device'])
def test_init_pull_copy(name):
    kv = kvs.create(name)
    assert kv.type == name and kv.rank == 0 and kv.num_workers == 1
    src = nd.ones(SHAPE) * 3
    kv.init(3, src)
    src[:] = 0  # the store keeps its own copy
    out = nd.zeros(SHAPE)
    kv.pull(3, out=out)
    np.testing.assert_array_equal(out.asnumpy(), 3)


@given(n=st.integers(1, 4), seed=st.integers(0, 100))
def test_push_sums_device_values(n, seed):
    rng = np.random.RandomState(seed)
    kv = kvs.create('local')
    kv.init('w', nd.zeros(SHAPE))
    vals = [rng.randn(*SHAPE).astype('float32') for _ in range(n)]
    kv.push('w', [nd.array(v, ctx=ff.cpu(i)) for i, v in enumerate(vals)])
    outs = [nd.zeros(SHAPE, ctx=ff.cpu(i)) for i in range(n)]
    kv.pull('w', out=outs)
    for o in outs:
        np.testing.assert_allclose(o.asnumpy(), np.sum(vals, axis=0), rtol=1e-6, atol=1e-6)


def test_updater_receives_key_sum_and_stored():
    kv = kvs.create('local')
    seen = []

    def upd(key, grad, weight):
        seen.append(key)
        weight[:] = weight.asnumpy() - 0.5 * grad.asnumpy()
    kv._set_updater(upd)
    kv.init([0, 1], [nd.ones(SHAPE), nd.ones(SHAPE) * 2])
    kv.push([0, 1], [[nd.ones(SHAPE), nd.ones(SHAPE)], [nd.ones(SHAPE)]])
    assert seen == [0, 1]
    a, b = nd.zeros(SHAPE), nd.zeros(SHAPE)
    kv.pull([0, 1], out=[a, b])
    np.testing.assert_allclose(a.asnumpy(), 0.0)
    np.testing.assert_allclose(b.asnumpy(), 1.5)


def test_pushpull_writes_every_output_and_value_in_place():
    kv = kvs.create('device')
    kv.init('g', nd.zeros(SHAPE))
    g0, g1 = nd.ones(SHAPE), nd.ones(SHAPE) * 2
    kv.pushpull('g', [g0, g1])
    np.testing.assert_allclose(g0.asnumpy(), 3)
    np.testing.assert_allclose(g1.asnumpy(), 3)
    o = nd.zeros(SHAPE)
    kv.pushpull('g', [nd.ones(SHAPE)], out=[o])
    np.testing.assert_allclose(o.asnumpy(), 1)


def test_broadcast_and_set_optimizer_runs_sgd():
    kv = kvs.create('local')
    outs = [nd.zeros(SHAPE), nd.zeros(SHAPE)]
    kv.broadcast('w', nd.ones(SHAPE), out=outs)
    for o in outs:
        np.testing.assert_allclose(o.asnumpy(), 1)
    kv.set_optimizer(ff.optimizer.create('sgd', learning_rate=0.1))
    kv.pushpull('w', [nd.ones(SHAPE), nd.ones(SHAPE)], out=outs)
    for o in outs:
        np.testing.assert_allclose(o.asnumpy(), 1 - 0.1 * 2, rtol=1e-6)


def test_optimizer_states_roundtrip(tmp_path):
    kv = kvs.create('local')
    kv.set_optimizer(ff.optimizer.create('sgd', learning_rate=0.1, momentum=0.9))
    kv.init('w', nd.ones(SHAPE))
    kv.push('w', [nd.ones(SHAPE)])
    f = str(tmp_path / 'kv.states')
    kv.save_optimizer_states(f)
    kv2 = kvs.create('local')
    kv2.set_optimizer(ff.optimizer.create('sgd', learning_rate=0.1, momentum=0.9))
    kv2.init('w', nd.zeros(SHAPE))
    kv2.load_optimizer_states(f)
    before = kv._store['w'].asnumpy()
    kv2._store['w'][:] = before  # same weight; momentum from the file
    w1, w2, w3 = nd.zeros(SHAPE), nd.zeros(SHAPE), nd.zeros(SHAPE)
    kv.pushpull('w', [nd.ones(SHAPE)], out=[w1])
    kv2.pushpull('w', [nd.ones(SHAPE)], out=[w2])
    fresh = kvs.create('local')  # no states: a different step
    fresh.set_optimizer(ff.optimizer.create('sgd', learning_rate=0.1, momentum=0.9))
    fresh.init('w', nd.array(before))
    fresh.pushpull('w', [nd.ones(SHAPE)], out=[w3])
    assert not np.allclose(w3.asnumpy(), w1.asnumpy())
    np.testing.assert_array_equal(w1.asnumpy(), w2.asnumpy())


def test_errors_name_the_problem():
    kv = kvs.create('local')
    kv.init(0, nd.zeros(SHAPE))
    with pytest.raises(FFError, match='not mixed'):
        kv.init('a', nd.zeros(SHAPE))
    with pytest.raises(FFError, match='already initialized'):
        kv.init(0, nd.zeros(SHAPE))
    with pytest.raises(FFError, match='has not been initialized'):
        kv.push(5, nd.zeros(SHAPE))
    with pytest.raises(FFError, match='shape'):
        kv.push(0, [nd.zeros((3, 3))])
    with pytest.raises(FFError, match='Gradient compression is not supported'):
        kv.set_gradient_compression({'type': '2bit', 'threshold': 0.5})
    with pytest.raises(FFError, match='no optimizer'):
        kv.save_optimizer_states('x')
    with pytest.raises(FFError):
        kvs.create(3)


def test_state_file_errors_name_the_file(tmp_path):
    kv = kvs.create('local')
    kv.set_optimizer(ff.optimizer.create('sgd', momentum=0.9))
    missing = str(tmp_path / 'missing.states')
    with pytest.raises(FFError, match='cannot read .*missing.states'):
        kv.load_optimizer_states(missing)
    bad = tmp_path / 'bad.states'
    bad.write_bytes(b'garbage')
    with pytest.raises(FFError, match='bad.states.*too short'):
        kv.load_optimizer_states(str(bad))
    bad.write_bytes(b'\x80\x04pickled')
    with pytest.raises(FFError, match='bad.states.*pickle'):
        kv.load_optimizer_states(str(bad))


def test_two_bit_compression_on_device_store():
    kv = kvs.create('device')
    kv.set_gradient_compression({'type': '2bit', 'threshold': 0.5})
    kv.init(0, nd.zeros((4,)))
    out = nd.zeros((4,))
    kv.pushpull(0, [nd.array([0.3, 0.6, -0.7, 0.1])], out=[out])
    np.testing.assert_allclose(out.asnumpy(), [0, 0.5, -0.5, 0])
    # the residual carries over: 0.3+0.3 crosses the threshold on the second push
    kv.pushpull(0, [nd.array([0.3, 0.0, 0.0, 0.1])], out=[out])
    np.testing.assert_allclose(out.asnumpy(), [0.5, 0, 0, 0])


def test_dist_without_mpi4py_says_how_to_install():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        with pytest.raises(FFError, match=r'pip install ffnumba\[dist\].*mpirun'):
            kvs.create('dist_sync')
    else:
        kv = kvs.create('dist_sync')
        assert kv.num_workers >= 1


def test_local_push_sums_in_device_order_bit_for_bit():
    """Two host values are added in one pass, further ones after: ((v0 + v1) + v2) + v3."""
    import ffnumba as ff
    rng = np.random.default_rng(0)
    for n in (2, 3, 4):
        vals = [rng.standard_normal(1000).astype(np.float32) * 10 ** i for i in range(n)]
        kv = ff.kv.create('local')
        kv.init('w', ff.nd.zeros(1000))
        kv.push('w', [ff.nd.array(v) for v in vals])
        out = ff.nd.zeros(1000)
        kv.pull('w', out=out)
        want = vals[0].copy()
        for v in vals[1:]:
            want += v
        np.testing.assert_array_equal(out.asnumpy(), want)
