"""LeakyReLU: every act_type against numpy, prelu's gamma, rrelu's masks, MXNet goldens."""
import json
from math import erf

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba.symbol as sym
from ffnumba import ndarray as nd
from ffnumba.base import ParamError, ShapeError
from ffnumba.ops.registry import OpContext, get_op
from ffnumba.testing import OpCase, assert_almost_equal, bind_numpy

from golden import load_golden

LAM, ALPHA = 1.0507009873554805, 1.6732632423543772
_erf = np.vectorize(erf)

_REF = {
    'leaky': lambda x, s: np.where(x > 0, x, s * x),
    'elu': lambda x, s: np.where(x > 0, x, s * np.expm1(x)),
    'selu': lambda x, s: LAM * np.where(x > 0, x, ALPHA * np.expm1(x)),
    'gelu': lambda x, s: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
}


def _away_from_kink(rng, shape):
    x = rng.uniform(-2, 2, shape)
    x[np.abs(x) < 0.05] = 0.5
    return x


class TestLeakyReLU(OpCase):
    op = 'LeakyReLU'
    params = [dict(act_type=a, slope=0.3) for a in _REF] + [dict()]
    shapes = [dict(data=(2, 3)), dict(data=(2, 3, 2, 2))]

    def inputs(self, rng, p, shapes):
        return {'data': _away_from_kink(rng, shapes['data'])}

    def reference(self, p, data):
        return [_REF[p.get('act_type', 'leaky')](data, p.get('slope', 0.25))]


class TestPReLU(OpCase):
    op = 'LeakyReLU'
    params = [dict(act_type='prelu')]
    shapes = [dict(data=(2, 3, 4)), dict(data=(3, 2)), dict(data=(2, 3, 2), gamma=(1,))]

    def inputs(self, rng, p, shapes):
        return {'data': _away_from_kink(rng, shapes['data']),
                'gamma': rng.uniform(0, 0.5, shapes['gamma'])}

    def reference(self, p, data, gamma):
        g = gamma.reshape((1, -1) + (1,) * (data.ndim - 2))
        return [np.where(data > 0, data, g * data)]


class TestPReLULeadingGamma(OpCase):
    """gamma of ndim >= 2 aligned with data's leading axes (MXNet 1.9.1's test_prelu)."""
    op = 'LeakyReLU'
    params = [dict(act_type='prelu')]
    shapes = [dict(data=(3, 4, 2, 2), gamma=(3, 4)), dict(data=(3, 4), gamma=(3, 4)),
              dict(data=(2, 3, 2), gamma=(1, 3)), dict(data=(2, 3, 2), gamma=(2, 1, 2))]

    def cases(self):
        @st.composite
        def draw(draw):
            data = tuple(draw(st.lists(st.integers(1, 4), min_size=2, max_size=4)))
            k = draw(st.integers(2, len(data)))
            gamma = tuple(d if draw(st.booleans()) else 1 for d in data[:k])
            return dict(data=data, gamma=gamma)
        return st.tuples(st.just(dict(act_type='prelu')), draw())

    def inputs(self, rng, p, shapes):
        return {'data': _away_from_kink(rng, shapes['data']),
                'gamma': rng.uniform(0, 0.5, shapes['gamma'])}

    def reference(self, p, data, gamma):
        g = gamma.reshape(gamma.shape + (1,) * (data.ndim - gamma.ndim))
        return [np.where(data > 0, data, g * data)]


def test_prelu_leading_gamma_must_broadcast():
    s = sym.LeakyReLU(sym.Variable('data'), sym.Variable('g'), act_type='prelu', name='lr')
    assert s.infer_shape(data=(3, 4, 4, 5), g=(3, 4))[0] == [(3, 4, 4, 5), (3, 4)]
    for bad in ((4, 4), (3, 4, 4, 5, 1)):
        with pytest.raises(ShapeError, match='leading axes'):
            s.infer_shape(data=(3, 4, 4, 5), g=bad)


def _run(p, x, is_train, seed=0, gamma=None):
    op = get_op('LeakyReLU')
    pp = op.parse_params(p)
    outs = [np.empty_like(x) for _ in op.list_outputs(pp)]
    ctx = OpContext(is_train, None, {}, np.random.default_rng(seed), 'lr')
    ins = [x] if gamma is None else [x, gamma]
    op.forward['cpu'](ctx, pp, ins, outs, [])
    return op, pp, ctx, ins, outs


def test_rrelu_eval_uses_mean_slope():
    x = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 0.0]])
    p = dict(act_type='rrelu', lower_bound=0.1, upper_bound=0.3)
    *_, outs = _run(p, x, is_train=False)
    assert_almost_equal(outs[0], np.where(x > 0, x, 0.2 * x), 1e-12, 0)
    assert_almost_equal(outs[1], np.full(x.shape, 0.2), 1e-12, 0)


def test_rrelu_train_mask_and_gradient():
    x = np.random.default_rng(5).standard_normal((6, 7))
    p = dict(act_type='rrelu', lower_bound=0.1, upper_bound=0.3)
    op, pp, ctx, ins, outs = _run(p, x, is_train=True)
    y, mask = outs
    assert np.all((mask >= 0.1) & (mask <= 0.3)) and np.unique(mask).size > 10
    assert_almost_equal(y, np.where(x > 0, x, mask * x), 1e-12, 0)
    og = np.ones_like(x)
    gx = np.full_like(x, 2.0)
    op.backward['cpu'](ctx, pp, [og, og], ins, outs, [gx], ['add'], [])
    assert_almost_equal(gx, 2.0 + np.where(x > 0, 1.0, mask), 1e-12, 0)
    # another draw gives another mask
    assert not np.array_equal(_run(p, x, True, seed=1)[-1][1], mask)


def test_rrelu_symbol_has_mask_output():
    s = sym.LeakyReLU(sym.Variable('data'), act_type='rrelu', name='r')
    assert s.list_outputs() == ['r_output', 'r_mask']
    assert s.infer_shape(data=(2, 3))[1] == [(2, 3), (2, 3)]


def test_bad_params():
    with pytest.raises(ParamError) as e:
        get_op('LeakyReLU').parse_params(dict(act_type='swish'))
    assert str(e.value) == ("LeakyReLU: `act_type` must be one of 'elu', 'gelu', 'leaky', "
                            "'prelu', 'rrelu', 'selu'. Received: act_type='swish'")
    with pytest.raises(ParamError, match=r'LeakyReLU: `upper_bound` must be >= lower_bound'):
        get_op('LeakyReLU').parse_params(dict(act_type='rrelu', lower_bound=0.5,
                                              upper_bound=0.1))


def test_prelu_declaration_and_shape_errors():
    s = sym.LeakyReLU(sym.Variable('data'), act_type='prelu', name='lr')
    assert s.list_arguments() == ['data', 'lr_gamma']
    assert sym.LeakyReLU(sym.Variable('data'), name='l2').list_arguments() == ['data']
    with pytest.raises(ShapeError, match='Error in operator lr'):
        s.infer_shape(data=(2, 3, 4), lr_gamma=(2,))
    with pytest.raises(ShapeError, match='ndim >= 2'):
        s.infer_shape(data=(5,))


@given(shape=st.lists(st.integers(1, 5), min_size=2, max_size=4))
def test_prelu_infer_shape_property(shape):
    s = sym.LeakyReLU(sym.Variable('data'), act_type='prelu', name='lr')
    args, outs, _ = s.infer_shape(data=tuple(shape))
    assert args == [tuple(shape), (shape[1],)] and outs == [tuple(shape)]


@given(x=st.lists(st.floats(-20, 20), min_size=1, max_size=6),
       act=st.sampled_from(sorted(_REF)), slope=st.floats(0.01, 2))
def test_values_property(x, act, slope):
    x = np.array(x)
    *_, outs = _run(dict(act_type=act, slope=slope), x, is_train=False)
    assert_almost_equal(outs[0], _REF[act](x, slope), 1e-12, 1e-300)


def test_float16_runs():
    x = np.linspace(-3, 3, 7).astype(np.float16)
    *_, outs = _run(dict(act_type='gelu'), x, is_train=False)
    assert outs[0].dtype == np.float16
    assert_almost_equal(outs[0], _REF['gelu'](x.astype(np.float64), 0), 2e-3, 2e-3)


@pytest.mark.parametrize('case', sorted(load_golden('leaky_relu')))
def test_golden_mxnet(case):
    """Values (and gradients, except selu) against MXNet 1.9.1.

    MXNet's CPU selu gradient for x <= 0 is lam * (y + alpha), not the derivative
    y + lam * alpha; ffnumba keeps the derivative (checked by the gradient tests).
    """
    c = load_golden('leaky_relu')[case]
    p = json.loads(str(c['params']))
    is_train = p.pop('is_train')
    names = [k[4:] for k in c if k.startswith('arg_') and not k.startswith('argafter_')]
    s = sym.LeakyReLU(*[sym.Variable(n) for n in names], name='op', **p)
    exe = bind_numpy(s, {n: c['arg_' + n] for n in names})
    exe.forward(is_train=is_train)
    assert_almost_equal(exe.outputs[0].asnumpy(), c['out0'], 1e-6, 1e-7)
    if 'grad_data' in c and p['act_type'] != 'selu':
        exe.backward([nd.array(c['head%d' % i], dtype='float64') for i in range(len(exe.outputs))])
        for n in names:
            assert_almost_equal(exe.grad_dict[n].asnumpy(), c['grad_' + n], 1e-6, 1e-7,
                                names=('grad ' + n, 'mxnet'))


@pytest.mark.gpu
def test_gpu_prelu_rrelu(monkeypatch):
    """prelu with a shared gamma, rrelu in evaluation and in training, on the (simulated) GPU."""
    from ffnumba.context import cpu, gpu
    from ffnumba import jit
    from ffnumba.testing import check_consistency
    monkeypatch.setattr(jit, 'GPU_THREADS', 8)   # several blocks: exercise the edges
    rng = np.random.default_rng(2)
    x = _away_from_kink(rng, (3, 4, 5))
    s = sym.LeakyReLU(sym.Variable('data'), sym.Variable('g'), act_type='prelu', name='lr')
    check_consistency(s, [cpu(0), gpu(0)], {'data': x, 'g': np.array([0.3])})
    r = sym.LeakyReLU(sym.Variable('data'), act_type='rrelu', name='rr')
    check_consistency(r, [cpu(0), gpu(0)], {'data': x}, is_train=False)
    exe = bind_numpy(r, {'data': x}, ctx=gpu(0))
    exe.forward(is_train=True)
    y, mask = (o.asnumpy() for o in exe.outputs)
    assert np.all((mask >= 0.125) & (mask <= 0.334))
    assert_almost_equal(y, np.where(x > 0, x, mask * x), 1e-12, 0)
    exe.backward([nd.array(np.ones(x.shape), ctx=gpu(0), dtype='float64')] * 2)
    assert_almost_equal(exe.grad_dict['data'].asnumpy(), np.where(x > 0, 1.0, mask), 1e-12, 0)
