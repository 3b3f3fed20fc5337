"""``dtype='asnumpy'`` in the check_symbolic_* helpers (MXNet's spelling: keep each dtype)."""
import numpy as np

import ffnumba as mx
from ffnumba.testing import check_symbolic_backward, check_symbolic_forward


def test_asnumpy_keeps_each_inputs_dtype():
    data, length = mx.sym.Variable('data'), mx.sym.Variable('length')
    s = mx.sym.softmax(data=data, length=length, use_length=True, axis=1)
    x = np.zeros((1, 3, 1), dtype=np.float64)
    loc = {'data': x, 'length': np.array([[2]], dtype=np.int32)}
    out = check_symbolic_forward(s, loc, [np.array([[[.5], [.5], [0.]]])], dtype='asnumpy')
    assert out[0].dtype == np.float64
    check_symbolic_backward(s, loc, [np.ones((1, 3, 1))],
                            [np.zeros((1, 3, 1)), np.zeros((1, 1), dtype=np.int32)],
                            dtype='asnumpy')
