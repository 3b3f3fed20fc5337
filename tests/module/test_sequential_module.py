"""SequentialModule and PythonLossModule against the equivalent single Module."""
import numpy as np
import pytest

import ffnumba.ndarray as nd
import ffnumba.symbol as sym
from ffnumba import io
from ffnumba.base import FFError
from ffnumba.module import Module, PythonLossModule, SequentialModule


def data(n=40, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 5).astype('float32')
    y = (X[:, 0] + X[:, 1] ** 2 > 1).astype('float32') + (X[:, 2] > 1)
    return X, y


def params(seed=3):
    rng = np.random.RandomState(seed)
    return {'fc1_weight': nd.array(rng.uniform(-.5, .5, (8, 5))), 'fc1_bias': nd.zeros((8,)),
            'fc2_weight': nd.array(rng.uniform(-.5, .5, (3, 8))), 'fc2_bias': nd.zeros((3,))}


def hidden():
    return sym.Activation(sym.FullyConnected(sym.Variable('data'), num_hidden=8, name='fc1'),
                          act_type='relu', name='relu1')


def scores():
    return sym.FullyConnected(sym.Variable('data'), num_hidden=3, name='fc2')


def reference(X, y):
    net = sym.SoftmaxOutput(sym.FullyConnected(hidden(), num_hidden=3, name='fc2'),
                            name='softmax')
    mod = Module(net)
    mod.fit(io.NDArrayIter(X, y, batch_size=10), num_epoch=2, arg_params=params(),
            optimizer_params={'learning_rate': 0.1, 'momentum': 0.9})
    return mod.get_params()[0]


def check(arg, ref):
    for k in ref:
        np.testing.assert_allclose(arg[k].asnumpy(), ref[k].asnumpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=k)


def test_sequential_equals_single_module():
    X, y = data()
    seq = SequentialModule()
    seq.add(Module(hidden(), label_names=None)).add(
        Module(sym.SoftmaxOutput(scores(), name='softmax')), take_labels=True,
        auto_wiring=True)
    seq.fit(io.NDArrayIter(X, y, batch_size=10), num_epoch=2, arg_params=params(),
            optimizer_params={'learning_rate': 0.1, 'momentum': 0.9})
    check(seq.get_params()[0], reference(X, y))
    assert seq.output_shapes == [('softmax_output', (10, 3))]
    assert seq.predict(io.NDArrayIter(X, y, batch_size=10)).shape == (40, 3)
    assert dict(seq.score(io.NDArrayIter(X, y, batch_size=10), 'acc'))['accuracy'] > 0.5


def softmax_grad(scores, labels):
    s = scores.asnumpy()
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(p)), labels.asnumpy().astype(int)] -= 1
    return p


def test_python_loss_module_with_softmax_gradient_equals_softmax_output():
    X, y = data()
    seq = SequentialModule()
    seq.add(Module(hidden(), label_names=None)).add(Module(scores(), label_names=None),
                                                    auto_wiring=True)
    seq.add(PythonLossModule(grad_func=softmax_grad), take_labels=True, auto_wiring=True)
    seq.fit(io.NDArrayIter(X, y, batch_size=10), num_epoch=2, arg_params=params(),
            optimizer_params={'learning_rate': 0.1, 'momentum': 0.9})
    check(seq.get_params()[0], reference(X, y))
    assert seq.output_names == ['pyloss_output']


def test_errors():
    with pytest.raises(FFError, match='unknown meta'):
        SequentialModule().add(Module(hidden(), label_names=None), bogus=True)
    with pytest.raises(FFError, match='at least one module'):
        SequentialModule().bind([('data', (2, 5))])
    loss = PythonLossModule()
    loss.bind([('data', (2, 3))], [('softmax_label', (2,))])
    loss.forward(io.DataBatch([nd.zeros((2, 3))], [nd.zeros((2,))]), is_train=True)
    with pytest.raises(FFError, match='grad_func'):
        loss.backward()
    with pytest.raises(FFError, match='out_grads should be None'):
        loss.backward(out_grads=[nd.zeros((2, 3))])
    assert loss.get_params() == ({}, {})


def test_second_init_optimizer_logs_a_warning_like_mxnet(caplog):
    seq = SequentialModule()
    seq.add(Module(hidden(), label_names=[]))
    seq.add(Module(sym.SoftmaxOutput(scores(), name='softmax')), take_labels=True,
            auto_wiring=True)
    seq.bind(data_shapes=[('data', (10, 5))], label_shapes=[('softmax_label', (10,))])
    seq.init_params(arg_params=params())
    seq.init_optimizer()
    caplog.set_level('WARNING')
    seq.init_optimizer()
    assert [r.getMessage() for r in caplog.records] == ['optimizer already initialized, ignoring.']
