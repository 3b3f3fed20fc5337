"""all_finite, multi_all_finite, amp_cast, amp_multicast: OpCase rows and MXNet's uses."""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba.base import DTypeError
from ffnumba.testing import OpCase


class TestAllFinite(OpCase):
    op = 'all_finite'
    shapes = [dict(data=(2, 3)), dict(data=(5,))]
    dtypes = ('float32',)
    nondifferentiable = True

    def reference(self, p, data):
        return [np.array([1.0])]


class TestMultiAllFinite(OpCase):
    op = 'multi_all_finite'
    params = [dict(num_arrays=2)]
    shapes = [dict(data0=(2, 3), data1=(4,))]
    dtypes = ('float32',)
    nondifferentiable = True
    max_batch = None

    def reference(self, p, data0, data1):
        return [np.array([1.0])]


class TestAmpCast(OpCase):
    op = 'amp_cast'
    params = [dict(dtype='float64')]
    shapes = [dict(data=(2, 3)), dict(data=(4,))]
    dtypes = ('float64',)

    def reference(self, p, data):
        return [data]


class TestAmpMulticast(OpCase):
    op = 'amp_multicast'
    params = [dict(num_outputs=2), dict(num_outputs=2, cast_narrow=True)]
    shapes = [dict(data0=(2, 3), data1=(3,))]
    max_batch = None

    def reference(self, p, data0, data1):
        return [data0, data1]


@pytest.mark.parametrize('bad', [np.inf, -np.inf, np.nan])
def test_non_finite_gives_zero_for_every_float_dtype(bad):
    for dt in ('float16', 'float32', 'float64'):
        x = np.zeros((3, 4)).astype(dt)
        assert ff.nd.all_finite(ff.nd.array(x, dtype=dt)).asnumpy().tolist() == [1.0]
        x[2, 1] = bad
        assert ff.nd.all_finite(ff.nd.array(x, dtype=dt)).asnumpy().tolist() == [0.0]
        ok = ff.nd.array(np.ones(2), dtype=dt)
        assert ff.nd.multi_all_finite(ok, ff.nd.array(x, dtype=dt),
                                      num_arrays=2).asnumpy().tolist() == [0.0]


def test_init_output_false_keeps_the_flag():
    # the executor's output persists across forwards: a flag shared by several checks
    s = ff.sym.all_finite(ff.sym.Variable('x'), init_output=False)
    exe = s.bind(ff.cpu(), {'x': ff.nd.array([1.0, np.inf])})
    exe.outputs[0][:] = 1
    exe.forward()
    assert exe.outputs[0].asnumpy().tolist() == [0.0]
    exe.arg_dict['x'][:] = 1.0
    exe.forward()
    assert exe.outputs[0].asnumpy().tolist() == [0.0]     # not reset
    s2 = ff.sym.all_finite(ff.sym.Variable('x'))
    exe2 = s2.bind(ff.cpu(), {'x': ff.nd.ones(2)})
    exe2.forward()
    assert exe2.outputs[0].asnumpy().tolist() == [1.0]


def test_amp_cast_rounds_like_numpy_and_keeps_ints():
    x = np.array([1.0e-8, 0.1, 65504.0, 70000.0, -3.3, np.nan], np.float32)
    s = ff.sym.amp_cast(ff.sym.Variable('x', dtype=np.float32), dtype=np.float16)
    exe = s.bind(ff.cpu(), {'x': ff.nd.array(x)})
    exe.forward(is_train=True)
    assert exe.outputs[0].dtype == np.float16
    with np.errstate(over='ignore'):
        want = x.astype(np.float64).astype(np.float16)
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), want)
    i = ff.nd.amp_cast(ff.nd.array([1, 2], dtype='int32'), dtype='float16')
    assert i.dtype == np.int32


def test_amp_multicast_types_and_gradient_dtypes():
    a, b = ff.sym.Variable('a'), ff.sym.Variable('b')
    m = ff.sym.amp_multicast(a, b, num_outputs=2)
    assert m.infer_type(a='float16', b='float32')[1] == [np.float32, np.float32]
    n = ff.sym.amp_multicast(a, b, num_outputs=2, cast_narrow=True)
    assert n.infer_type(a='float16', b='float32')[1] == [np.float16, np.float16]
    exe = m.bind(ff.cpu(), {'a': ff.nd.array([1, 2], dtype='float16'), 'b': ff.nd.array([3, 4])},
                 {'a': ff.nd.zeros(2, dtype='float16'), 'b': ff.nd.zeros(2)})
    exe.forward(is_train=True)
    exe.backward([ff.nd.array([0.5, 1.5]), ff.nd.array([2, 3])])
    assert exe.grad_dict['a'].dtype == np.float16
    np.testing.assert_array_equal(exe.grad_dict['a'].asnumpy(), [0.5, 1.5])
    with pytest.raises(DTypeError, match='float input'):
        ff.sym.amp_multicast(a, b, num_outputs=2).infer_type(a='int32', b='int32')


@pytest.mark.gpu
def test_gpu_flags_non_finite():
    for dt in ('float16', 'float32'):
        ok = ff.nd.array([1.0, 2.0], ctx=ff.gpu(0), dtype=dt)
        bad = ff.nd.array([1.0, np.nan], ctx=ff.gpu(0), dtype=dt)
        assert ff.nd.all_finite(ok).asnumpy().tolist() == [1.0]
        assert ff.nd.all_finite(bad).asnumpy().tolist() == [0.0]
        assert ff.nd.multi_all_finite(ok, bad, num_arrays=2).asnumpy().tolist() == [0.0]
