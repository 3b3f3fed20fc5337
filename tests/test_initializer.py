"""Tests of ffnumba.initializer: statistics, dispatch rules, MXNet golden values, registry."""
import json
import os
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba as ff
import ffnumba.ndarray as nd
from ffnumba import initializer as init
from ffnumba.base import ParamError, ShapeError
from ffnumba.initializer import InitDesc

GOLDEN = os.path.join(os.path.dirname(__file__), 'data', 'mx_init_golden.json')
with open(GOLDEN) as _f:
    _G = json.load(_f)


def _run(initializer, name, shape, attrs=None, dtype='float32'):
    arr = nd.zeros(shape, dtype=dtype)
    initializer(InitDesc(name, attrs), arr)
    return arr.asnumpy()


def test_uniform_and_normal_statistics():
    u = _run(init.Uniform(0.5), 'w_weight', (200, 100))
    assert np.abs(u).max() <= 0.5 and abs(u.mean()) < 0.01
    assert u.std() == pytest.approx(0.5 / np.sqrt(3), rel=0.02)
    n = _run(init.Normal(0.3), 'w_weight', (200, 100))
    assert n.std() == pytest.approx(0.3, rel=0.02) and abs(n.mean()) < 0.01
    assert init.Uniform().scale == 0.07 and init.Normal().sigma == 0.01


@given(shape=st.lists(st.integers(1, 6), min_size=2, max_size=4).map(tuple),
       factor=st.sampled_from(['avg', 'in', 'out']), mag=st.floats(0.5, 6))
def test_xavier_uniform_bound(shape, factor, mag):
    hw = float(np.prod(shape[2:])) if len(shape) > 2 else 1.0
    fan = {'in': shape[1] * hw, 'out': shape[0] * hw,
           'avg': (shape[0] + shape[1]) * hw / 2}[factor]
    w = _run(init.Xavier(factor_type=factor, magnitude=mag), 'c_weight', shape)
    assert np.abs(w).max() <= np.sqrt(mag / fan) * (1 + 1e-6)


def test_xavier_gaussian_and_msra_std():
    w = _run(init.Xavier(rnd_type='gaussian', factor_type='in', magnitude=2), 'f_weight',
             (64, 32, 3, 3))
    assert w.std() == pytest.approx(np.sqrt(2 / (32 * 9)), rel=0.03)
    m = _run(init.MSRAPrelu(factor_type='out', slope=0.5), 'f_weight', (64, 32, 3, 3))
    assert m.std() == pytest.approx(np.sqrt(2 / 1.25 / (64 * 9)), rel=0.03)
    with pytest.raises(ShapeError, match='cannot be applied to vector fc_weight'):
        _run(init.Xavier(), 'fc_weight', (5,))
    with pytest.raises(ParamError, match='factor_type'):
        init.Xavier(factor_type='fan')


@pytest.mark.parametrize('shape', [(4, 10), (10, 4), (3, 2, 2, 2)])
@pytest.mark.parametrize('rand_type', ['uniform', 'normal'])
def test_orthogonal(shape, rand_type):
    w = _run(init.Orthogonal(scale=2.0, rand_type=rand_type), 'o_weight', shape,
             dtype='float64').reshape(shape[0], -1)
    small = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    np.testing.assert_allclose(small, 4.0 * np.eye(small.shape[0]), atol=1e-10)


def test_suffix_dispatch_and_init_attr():
    xav = init.Xavier()
    assert (_run(xav, 'fc_bias', (3,)) == 0).all()
    assert (_run(xav, 'bn_gamma', (3,)) == 1).all()
    assert (_run(xav, 'bn_beta', (3,)) == 0).all()
    assert (_run(xav, 'q_min', (3,)) == 0).all()
    assert (_run(xav, 'q_max', (3,)) == 1).all()
    assert (_run(xav, 'fc_weight', (3, 4)) != 0).any()
    # '__init__' wins over the suffix: BatchNorm's moving stats come this way
    assert (_run(xav, 'bn_moving_var', (3,), {'__init__': '["one", {}]'}) == 1).all()
    assert (_run(xav, 'fc_bias', (3,), {'__init__': '["constant", {"value": 2.5}]'}) == 2.5).all()
    assert (_run(xav, 'fc_weight', (2, 2), {'__init__': init.Zero().dumps()}) == 0).all()
    with pytest.raises(ParamError, match='Unknown initialization pattern for bn_moving_mean'):
        _run(xav, 'bn_moving_mean', (3,))
    desc = InitDesc('x_weight')
    xav(desc, nd.zeros((2, 2)))
    assert desc.global_init is xav and isinstance(desc, str) and desc.attrs == {}


def test_legacy_string_dispatch():
    u = init.Uniform(0.1)
    cases = {'bn_moving_mean': 0, 'bn_moving_var': 1, 'bn_moving_inv_var': 0,
             'x_moving_avg': 0, 'fc_bias': 0, 'bn_gamma': 1, 'bn_beta': 0, 'q_max': 1}
    with pytest.warns(DeprecationWarning):
        u('fc_weight', nd.zeros((2, 2)))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        for name, value in cases.items():
            arr = nd.full((3,), 7.0)
            u(name, arr)
            assert (arr.asnumpy() == value).all(), name
        loc_b, loc_w = nd.zeros((6,)), nd.ones((6, 4))
        u('stn_loc_bias', loc_b)
        u('stn_loc_weight', loc_w)
        assert loc_b.asnumpy().tolist() == [1, 0, 0, 0, 1, 0] and (loc_w.asnumpy() == 0).all()
        up = nd.zeros((2, 3, 4, 5))
        u('upsampling0_weight', up)
        np.testing.assert_allclose(up.asnumpy(), _G['bilinear_2x3x4x5'], rtol=1e-6)
        with pytest.raises(ParamError, match='Unknown initialization pattern'):
            u('mystery', nd.zeros((2,)))


def test_golden_deterministic_initializers():
    np.testing.assert_allclose(_run(init.Bilinear(), 'up_weight', (2, 3, 4, 5)),
                               _G['bilinear_2x3x4x5'], rtol=1e-6)
    lstm = init.LSTMBias(forget_bias=2.0)
    assert _run(init.Uniform(), 'lstm_i2h_bias', (8,), {'__init__': lstm.dumps()}).tolist() == \
        _G['lstmbias_8']
    made = {'xavier': init.Xavier(rnd_type='gaussian', magnitude=2),
            'msraprelu': init.MSRAPrelu(), 'uniform': init.Uniform(), 'normal': init.Normal(0.5),
            'zero': init.Zero(), 'constant': init.Constant(3.0), 'orthogonal': init.Orthogonal()}
    for key, obj in made.items():
        assert json.loads(obj.dumps()) == json.loads(_G['dumps'][key]), key
        assert init.create(obj.dumps()) == obj


def test_registry_names():
    for name, klass in {'zeros': init.Zero, 'zero': init.Zero, 'ones': init.One, 'one': init.One,
                        'uniform': init.Uniform, 'normal': init.Normal, 'xavier': init.Xavier,
                        'msraprelu': init.MSRAPrelu, 'orthogonal': init.Orthogonal,
                        'bilinear': init.Bilinear, 'lstmbias': init.LSTMBias}.items():
        assert type(init.create(name)) is klass
    assert init.create('constant', 4).value == 4
    assert init.create('Xavier', magnitude=2).magnitude == 2.0
    with pytest.raises(ParamError, match='Cannot find initializer'):
        init.create('glorot')
    assert ff.init is init if hasattr(ff, 'init') else True
    assert json.loads(init.Constant(np.array([1.0, 2.0])).dumps()) == \
        ['constant', {'value': [1.0, 2.0]}]


def test_seed_repeats_exactly():
    def draw():
        ff.random.seed(11)
        return [_run(init.Xavier(), 'a_weight', (4, 5)), _run(init.Normal(1), 'b_weight', (6,)),
                _run(init.Orthogonal(), 'c_weight', (3, 3))]
    for a, b in zip(draw(), draw()):
        np.testing.assert_array_equal(a, b)


def test_dtype_kept_and_numpy_target():
    w = _run(init.Uniform(1.0), 'h_weight', (3, 3), dtype='float16')
    assert w.dtype == np.float16 and np.abs(w).max() <= 1.0
    target = np.zeros((2, 3))
    init.One()(InitDesc('k_weight'), target)
    assert (target == 1).all()


def test_load_and_mixed():
    params = {'arg:fc_weight': nd.array(np.arange(6).reshape(2, 3)), 'aux:bn_moving_mean':
              nd.ones((3,))}
    loader = init.Load(params, default_init=init.Constant(9.0))
    w, m, other = nd.zeros((2, 3)), nd.zeros((3,)), nd.zeros((2, 2))
    loader('fc_weight', w)
    loader('bn_moving_mean', m)
    loader(InitDesc('new_weight'), other)
    assert w.asnumpy().tolist() == [[0, 1, 2], [3, 4, 5]] and (m.asnumpy() == 1).all()
    assert (other.asnumpy() == 9).all()
    with pytest.raises(ShapeError, match='Shape mismatch, target \\(3, 2\\) vs loaded \\(2, 3\\)'):
        loader('fc_weight', nd.zeros((3, 2)))
    with pytest.raises(ParamError, match='Cannot initialize zz'):
        init.Load(params)('zz', nd.zeros((1,)))

    mixed = init.Mixed(['fc1', '.*'], [init.Constant(5.0), init.Zero()])
    b, w = nd.zeros((2,)), nd.ones((2, 2))
    mixed(InitDesc('fc1_weight'), b)          # the first re.match wins
    mixed(InitDesc('xfc1_weight'), w)
    assert (b.asnumpy() == 5).all() and (w.asnumpy() == 0).all()
    with pytest.raises(ParamError, match='did not match any pattern'):
        init.Mixed(['a.*'], [init.Zero()])(InitDesc('b_weight'), w)
    with pytest.raises(ParamError, match='2 patterns but 1'):
        init.Mixed(['a', 'b'], [init.Zero()])


def test_bilinear_and_lstm_shape_errors():
    with pytest.raises(ShapeError, match='4-D'):
        _run(init.Bilinear(), 'up_weight', (3, 3))
    with pytest.raises(ShapeError, match='divisible by 4'):
        _run(init.Uniform(), 'l_bias', (6,), {'__init__': init.LSTMBias().dumps()})


def test_non_array_target_is_param_error():
    with pytest.raises(ff.base.ParamError, match='`arr` must be an NDArray'):
        ff.init.Uniform()('fc_weight', 'abc')
