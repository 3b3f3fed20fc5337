"""Module on GPU contexts (CUDA simulator or a real GPU): the same results as on the CPU."""
import numpy as np
import pytest

import ffnumba as ff
import ffnumba.ndarray as nd
import ffnumba.symbol as sym
from ffnumba import io
from ffnumba.module import Module

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize('ctx', [[ff.gpu(0)], [ff.gpu(0), ff.cpu(1)]])
def test_gpu_training_matches_cpu(ctx):
    rng = np.random.RandomState(0)
    X = rng.randn(16, 4).astype('float32')
    y = (X[:, 0] > 0).astype('float32')
    net = sym.SoftmaxOutput(sym.FullyConnected(sym.Variable('data'), num_hidden=2, name='fc'),
                            name='softmax')
    init = {'fc_weight': nd.array(rng.randn(2, 4) * 0.1), 'fc_bias': nd.zeros((2,))}
    out = []
    for c in ([ff.cpu(0)], ctx):
        mod = Module(net, context=c)
        mod.fit(io.NDArrayIter(X, y, batch_size=8), num_epoch=2, arg_params=init,
                kvstore='device', optimizer_params={'learning_rate': 0.5, 'momentum': 0.9})
        out.append((mod.get_params()[0], mod.predict(io.NDArrayIter(X, y, batch_size=8))))
    for k in out[0][0]:
        np.testing.assert_allclose(out[0][0][k].asnumpy(), out[1][0][k].asnumpy(), rtol=1e-5,
                                   atol=1e-6)
    np.testing.assert_allclose(out[0][1].asnumpy(), out[1][1].asnumpy(), rtol=1e-5, atol=1e-6)
