"""squeeze, reshape_like, _copy (identity), add_n (ElementWiseSum), shape_array, size_array."""
import json

import numpy as np
import pytest
from hypothesis import strategies as st

import ffnumba as ff
import ffnumba.symbol as sym
from ffnumba.base import ShapeError
from ffnumba.testing import OpCase
from ffnumba.testing.gradcheck import bind_numpy


# --------------------------------------------------------------------- squeeze
class TestSqueeze(OpCase):
    op = 'squeeze'
    params = [dict(), dict(axis=(1,)), dict(axis=(1, -1))]
    shapes = [dict(data=(2, 1, 3, 1))]

    def reference(self, p, data):
        out = np.squeeze(data, axis=p.get('axis'))
        return [out.reshape(1) if out.ndim == 0 else out]


def test_squeeze_matches_mxnet():
    assert ff.nd.squeeze(ff.nd.ones((1, 1))).shape == (1,)         # MXNet 1.9.1 keeps (1,)
    assert ff.nd.squeeze(ff.nd.ones((1, 3, 1))).shape == (3,)
    assert ff.nd.squeeze(ff.nd.ones((0, 1))).shape == (0,)
    with pytest.raises(ShapeError, match='sq.*size 2, not 1'):
        sym.squeeze(sym.Variable('d'), axis=0, name='sq').infer_shape(d=(2, 3))
    with pytest.raises(ShapeError, match='twice'):                 # MXNet: duplicate value
        ff.nd.squeeze(ff.nd.ones((1, 3, 1)), axis=(0, 0))


# ---------------------------------------------------------------- reshape_like
class TestReshapeLike(OpCase):
    op = 'reshape_like'
    params = [dict(), dict(lhs_begin=1, rhs_begin=1)]
    shapes = [dict(lhs=(2, 3, 4), rhs=(2, 4, 3))]
    grad_nodes = ['lhs']
    max_batch = None

    def reference(self, p, lhs, rhs):
        if p.get('lhs_begin'):
            return [lhs.reshape(lhs.shape[:1] + rhs.shape[1:])]
        return [lhs.reshape(rhs.shape)]


def test_reshape_like_errors_and_rhs_gradient():
    assert ff.nd.reshape_like(ff.nd.ones((2, 3, 4)), ff.nd.ones((6, 4, 3)), lhs_begin=1,
                              rhs_begin=1).shape == (2, 4, 3)          # MXNet 1.9.1
    with pytest.raises(ShapeError, match='rl.*elements'):
        sym.reshape_like(sym.Variable('a'), sym.Variable('b'), name='rl').infer_shape(
            a=(2, 3), b=(4, 2))
    with pytest.raises(ShapeError, match='lhs_begin'):
        sym.reshape_like(sym.Variable('a'), sym.Variable('b'), lhs_begin=3).infer_shape(
            a=(2, 3), b=(6,))
    s = sym.reshape_like(sym.Variable('a'), sym.Variable('b'))
    exe = bind_numpy(s, dict(a=np.ones((2, 3)), b=np.ones((3, 2))), grads=dict(b=np.ones((3, 2))))
    exe.forward(is_train=True)
    exe.backward(ff.nd.ones((3, 2)))
    assert (exe.grad_dict['b'].asnumpy() == 0).all() and (exe.grad_dict['a'].asnumpy() == 1).all()


# ----------------------------------------------------------------------- _copy
class TestCopy(OpCase):
    op = '_copy'
    shapes = [dict(data=(2, 3)), dict(data=(4,))]

    def reference(self, p, data):
        return [data.copy()]


class TestIdentityAlias(TestCopy):
    op = 'identity'


def test_identity_json_uses_copy():
    node = json.loads(sym.identity(sym.Variable('a')).tojson())['nodes'][1]
    assert node['op'] == '_copy'


# ----------------------------------------------------------------------- add_n
@st.composite
def add_n_cases(draw):
    from ffnumba.testing import strategies as fst
    shape = draw(fst.shapes(min_dims=1, max_dims=3, max_side=3))
    k = draw(st.integers(1, 4))
    return dict(num_args=k), {'arg%d' % i: shape for i in range(k)}


class TestAddN(OpCase):
    op = 'add_n'
    params = [dict(num_args=3)]
    shapes = [dict(arg0=(2, 3), arg1=(2, 3), arg2=(2, 3))]

    def cases(self):
        return add_n_cases()

    def reference(self, p, **args):
        return [sum(args['arg%d' % i] for i in range(p['num_args']))]


class TestElementWiseSum(TestAddN):
    op = 'ElementWiseSum'
    params = [dict(num_args=2)]
    shapes = [dict(arg0=(4,), arg1=(4,))]


def test_add_n_json_and_shape_errors():
    s = sym.ElementWiseSum(sym.Variable('a'), sym.Variable('b'), name='es')
    node = json.loads(s.tojson())['nodes'][2]
    assert node['op'] == 'add_n' and node['attrs'] == {'num_args': '2'}
    assert s.list_arguments() == ['a', 'b']
    with pytest.raises(ShapeError, match='es'):
        s.infer_shape(a=(2, 3), b=(3, 2))
    out = ff.nd.add_n(ff.nd.ones((2,)), ff.nd.ones((2,)), ff.nd.ones((2,)))
    assert out.asnumpy().tolist() == [3, 3]


# ---------------------------------------------------------- shape_array, size_array
class _MetaCase(OpCase):
    nondifferentiable = True
    shapes = [dict(data=(2, 3)), dict(data=(4, 1, 5))]

    def test_forward(self):
        for p, shapes in self._all_cases():
            s, loc, aux, _ = self._setup(p, shapes)
            for dt in ('float32', 'float64'):
                exe = bind_numpy(s, loc, aux, grad_req='null', dtype=dt)
                exe.forward(is_train=False)
                o = exe.outputs[0]
                assert o.dtype == np.int64
                assert o.asnumpy().tolist() == self.reference(p, **loc)[0].tolist()


class TestShapeArray(_MetaCase):
    op = 'shape_array'

    def reference(self, p, data):
        return [np.array(data.shape, np.int64)]


class TestSizeArray(_MetaCase):
    op = 'size_array'

    def reference(self, p, data):
        return [np.array([data.size], np.int64)]


def test_shape_array_matches_mxnet():
    x = ff.nd.ones((2, 3))
    assert ff.nd.shape_array(x).asnumpy().tolist() == [2, 3]       # MXNet 1.9.1, int64
    assert ff.nd.size_array(x).asnumpy().tolist() == [6]
    assert ff.nd.shape_array(x).dtype == np.int64
    assert ff.nd.size_array(ff.nd.ones((0, 3))).asnumpy().tolist() == [0]
