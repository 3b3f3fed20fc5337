"""ff.sym.maximum / minimum / pow: MXNet's Python helpers over the elementwise ops."""
import numpy as np
import pytest

import ffnumba as ff


def _run(s, **vals):
    return s.eval(**{k: ff.nd.array(v) for k, v in vals.items()})[0].asnumpy()


@pytest.mark.parametrize('fn, npfn, op', [(ff.sym.maximum, np.maximum, '_maximum'),
                                          (ff.sym.minimum, np.minimum, '_minimum')])
def test_max_min_symbol_and_scalar(fn, npfn, op):
    a, b = ff.sym.var('a'), ff.sym.var('b')
    x, y = np.array([0., 1., -2.]), np.array([1., 0., -3.])
    s = fn(a, b)
    assert s.tojson().count('"op": "%s"' % op) == 1
    np.testing.assert_array_equal(_run(s, a=x, b=y), npfn(x, y))
    np.testing.assert_array_equal(_run(fn(a, 0.5), a=x), npfn(x, 0.5))
    np.testing.assert_array_equal(_run(fn(0.5, a), a=x), npfn(x, 0.5))
    assert fn(2, 3) == npfn(2, 3)


def test_pow_both_ways():
    a = ff.sym.var('a')
    x = np.array([0.5, 1., 2.])
    np.testing.assert_allclose(_run(ff.sym.pow(a, 2), a=x), x ** 2)
    np.testing.assert_allclose(_run(ff.sym.pow(2.0, a), a=x), 2.0 ** x, rtol=1e-6)
    assert ff.sym.power(2, 3) == 8
