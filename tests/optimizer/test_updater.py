"""Updater state files: resume exactly, never unpickle, refuse what does not fit."""
import json
import os
import pickle
import warnings

import numpy as np
import pytest

import ffnumba as ff
import ffnumba.ndarray as nd
import ffnumba.optimizer as opt
from ffnumba import lr_scheduler
from ffnumba.base import FFError, ParamError
from ffnumba.optimizer.updater import HEADER

DATA = os.path.join(os.path.dirname(__file__), '..', 'data', 'optimizer')
CONFIGS = {
    'sgd': dict(momentum=0.9, wd=0.01), 'ccsgd': dict(), 'nag': dict(momentum=0.9),
    'signum': dict(), 'sgld': dict(learning_rate=0.01), 'dcasgd': dict(momentum=0.5),
    'adam': dict(wd=0.01), 'adamax': dict(), 'nadam': dict(), 'ftml': dict(),
    'adagrad': dict(), 'rmsprop': dict(centered=True), 'adadelta': dict(), 'ftrl': dict(),
}


def _grads(steps, seed=0):
    rng = np.random.default_rng(seed)
    return [[rng.uniform(-1, 1, s).astype(np.float32) for s in ((2, 3), (4,))]
            for _ in range(steps)]


def _train(updater, ws, grads):
    for gs in grads:
        for i, g in enumerate(gs):
            updater(i, nd.array(g), ws[i])


def _weights():
    return [nd.array(np.linspace(-1, 1, 6).reshape(2, 3)), nd.array([0.5, -0.5, 0.25, 0.0])]


@pytest.mark.filterwarnings('ignore:learning rate from')
@pytest.mark.parametrize('name', sorted(CONFIGS))
@pytest.mark.parametrize('dump', [False, True])
def test_resume_from_saved_states_equals_uninterrupted_run(name, dump):
    grads = _grads(6)
    sched = lambda: lr_scheduler.FactorScheduler(step=2, factor=0.7,  # noqa: E731
                                                 base_lr=CONFIGS[name].get('learning_rate', .05))
    make = lambda: opt.create(name, lr_scheduler=sched(), **{  # noqa: E731
        k: v for k, v in CONFIGS[name].items() if k != 'learning_rate'})
    ff.random.seed(1)
    full = _weights()
    _train(opt.get_updater(make()), full, grads)

    ff.random.seed(1)
    ws = _weights()
    first = opt.get_updater(make())
    _train(first, ws, grads[:3])
    blob = first.get_states(dump_optimizer=dump)
    assert isinstance(blob, bytes) and not blob.startswith(b'\x80')
    saved = [w.asnumpy() for w in ws]
    fresh = opt.get_updater(make() if not dump else opt.SGD())
    fresh.set_states(blob)
    assert type(fresh.optimizer).__name__ == type(first.optimizer).__name__
    ws = [nd.array(w) for w in saved]
    _train(fresh, ws, grads[3:])
    for a, b in zip(ws, full):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_state_file_is_an_ndarray_container_with_a_json_header(tmp_path):
    u = opt.get_updater(opt.Adam(multi_precision=True))
    u(0, nd.ones((2,), dtype='float16'), nd.ones((2,), dtype='float16'))
    u('fc_bias', nd.ones((3,)), nd.ones((3,)))
    blob = u.get_states()
    f = tmp_path / 'x.states'
    f.write_bytes(blob)
    data = nd.load(f)
    doc = json.loads(data.pop(HEADER).asnumpy().tobytes())
    assert doc['optimizer'] == 'Adam' and doc['num_update'] == 1
    assert sorted(data) == ['state:0:0', 'state:0:1', 'state:0:2', 'state:fc_bias:0',
                            'state:fc_bias:1']
    assert data['state:0:0'].dtype is np.float32  # the master copy
    u2 = opt.get_updater(opt.Adam(multi_precision=True))
    u2.set_states(blob)
    assert set(u2.states) == {0, 'fc_bias'}
    master, (mean, var) = u2.states[0]
    assert master.shape == (2,) and mean.shape == (2,)


def test_pickled_states_are_refused_with_the_reason():
    blob = pickle.dumps({0: None})
    u = opt.get_updater(opt.SGD())
    with pytest.raises(FFError, match='pickle.*arbitrary code'):
        u.set_states(blob)


def test_states_of_another_optimizer_are_refused():
    u = opt.get_updater(opt.Adam())
    u(0, nd.ones((2,)), nd.ones((2,)))
    with pytest.raises(ParamError, match="'Adam'.*'SGD'"):
        opt.get_updater(opt.SGD(momentum=0.9)).set_states(u.get_states())


def test_states_that_do_not_fit_the_weight_are_refused():
    u = opt.get_updater(opt.SGD(momentum=0.9))
    u(0, nd.ones((2,)), nd.ones((2,)))
    blob = u.get_states()
    v = opt.get_updater(opt.SGD(momentum=0.9))
    v.set_states(blob)
    with pytest.raises(ParamError, match=r'parameter 0 .*\(2,\).*\(3,\)'):
        v(0, nd.ones((3,)), nd.ones((3,)))
    w = opt.get_updater(opt.SGD(momentum=0.0))
    w.set_states(blob)
    with pytest.raises(ParamError, match='None'):
        w(0, nd.ones((2,)), nd.ones((2,)))


def test_corrupted_state_files_raise_fferror():
    u = opt.get_updater(opt.Adam())
    u(0, nd.ones((2,)), nd.ones((2,)))
    blob = u.get_states()
    v = opt.get_updater(opt.Adam())
    with pytest.raises(FFError, match='optimizer states'):
        v.set_states(blob[:-3])
    with pytest.raises(FFError, match='no __ffnumba_states__'):
        v.set_states(nd.dumps({'a': nd.ones((1,))}))
    with pytest.raises(FFError, match='corrupted header'):
        v.set_states(nd.dumps({HEADER: np.frombuffer(b'{"x": 1}', np.uint8)}))
    with pytest.raises(ParamError, match='expected bytes'):
        v.set_states(3)


def test_import_mxnet_pickled_states_without_running_code():
    expected = dict(np.load(os.path.join(DATA, 'states_expected.npz')))
    for fname in ('sgd_momentum.states', 'adam.states'):
        with open(os.path.join(DATA, fname), 'rb') as f:
            raw = f.read()
        with pytest.raises(FFError, match='pickle'):
            opt.get_updater(opt.SGD()).set_states(raw)
        states = opt.import_mxnet_states(raw)
        assert set(states) == {0, 1}
        for idx, st in states.items():
            leaves, stack = [], [st]
            while stack:
                s = stack.pop(0)
                if isinstance(s, tuple):
                    stack = list(s) + stack
                else:
                    leaves.append(s)
            for k, leaf in enumerate(leaves):
                key = '%s|%d|%d' % (fname, idx, k)
                if leaf is None:
                    assert key not in expected
                else:
                    np.testing.assert_array_equal(leaf.asnumpy(), expected[key])
                    assert leaf.dtype is expected[key].dtype.type
    u = opt.get_updater(opt.Adam(multi_precision=True))
    with open(os.path.join(DATA, 'adam.states'), 'rb') as f:
        u.set_states(opt.import_mxnet_states(f.read()))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        u(1, nd.ones((4,), dtype='float16'), nd.ones((4,), dtype='float16'))


class _Evil:
    def __reduce__(self):
        return (os.system, ('echo pwned',))


def test_import_refuses_any_other_class():
    with pytest.raises(FFError, match='posix.system|os.system|only NDArray'):
        opt.import_mxnet_states(pickle.dumps({0: _Evil()}))
    with pytest.raises(FFError, match='not a readable'):
        opt.import_mxnet_states(b'\x80\x04garbage')


def test_states_move_to_the_weight_context():
    u = opt.get_updater(opt.SGD(momentum=0.9))
    u(0, nd.ones((2,)), nd.ones((2,)))
    v = opt.get_updater(opt.SGD(momentum=0.9))
    v.set_states(u.get_states())
    v(0, nd.ones((2,), ctx=ff.cpu(3)), nd.ones((2,), ctx=ff.cpu(3)))
    assert v.states[0].context == ff.cpu(3)
