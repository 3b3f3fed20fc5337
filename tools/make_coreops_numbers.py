"""Print the MXNet 1.9.1 numbers encoded in the core-op loss and elemwise tests.

Run with the reference install (never imported by the package or the tests)::

    MXNET_MKLDNN_ENABLED=0 /work/mxref/bin/python tools/make_coreops_numbers.py

It prints, for ``data = sin(0.1 * arange)``, the SoftmaxOutput data gradients
of every case in ``tests/ops/loss/test_softmax_output.py::MXNET_CASES`` (the
preserve_shape and out-of-range rows of earlier runs are left out: MXNet
silently skips an out-of-range label where ffnumba raises), the MakeLoss
gradients, the MAE regression gradient and ``_mod``/``_rmod_scalar`` values,
and writes ``tests/data/coreops_graph.json``: MXNet's JSON of the graph that
``tests/ops/tensor/test_elemwise.py::build_graph`` builds (auto names, hints,
param strings and hidden outputs of the core ops).
"""
import os

import numpy as np
import mxnet as mx

np.set_printoptions(precision=5, suppress=True)


def _sin(shape):
    return np.sin(np.arange(np.prod(shape)).reshape(shape) * 0.1)


def softmax_grad(dshape, label, **kw):
    label = np.array(label, dtype=float)
    s = mx.sym.SoftmaxOutput(mx.sym.Variable('data'), mx.sym.Variable('label'), **kw)
    ex = s.bind(mx.cpu(), {'data': mx.nd.array(_sin(dshape)), 'label': mx.nd.array(label)},
                args_grad={'data': mx.nd.zeros(dshape)}, grad_req={'data': 'write', 'label': 'null'})
    ex.forward(is_train=True)
    ex.backward()
    return ex.grad_dict['data'].asnumpy().ravel()


def unary_grad(op, x, **kw):
    s = getattr(mx.sym, op)(mx.sym.Variable('data'), **kw)
    ex = s.bind(mx.cpu(), {'data': mx.nd.array(x)}, args_grad={'data': mx.nd.zeros(x.shape)})
    ex.forward(is_train=True)
    ex.backward([mx.nd.ones(x.shape) * 3])
    return ex.grad_dict['data'].asnumpy().ravel()


def build_graph(S):
    """The graph of ``test_elemwise.build_graph`` (keep the two in sync)."""
    d = S.Variable('data')
    a = S.FullyConnected(d, num_hidden=8, name='fc1')
    a = S.Activation(a, act_type='softrelu', name='act')
    a = S.Dropout(a, p=0.3, axes=(1,), name='drop')
    b = S.Flatten(a, name='fl')
    c = (b + 1) * 2 - b / 3 + (b ** 2) - (2 - b) + S.BlockGrad(b, name='bg') + (b > 0.5)
    c = S.elemwise_mul(c, 2 / b, name='em') % 3 + (1 ** b) + (-b)
    l1 = S.SoftmaxOutput(c, name='softmax', normalization='valid', use_ignore=True)
    l2 = S.LinearRegressionOutput(c, name='lin', grad_scale=0.5)
    l3 = S.MakeLoss(S.make_loss(c, name='ml0'), name='ml', normalization='batch')
    return S.Group([l1, l2, l3, S.stop_gradient(b)])


def main():
    out = os.path.join(os.path.dirname(__file__), '..', 'tests', 'data', 'coreops_graph.json')
    with open(out, 'w') as f:
        f.write(build_graph(mx.sym).tojson())
    cases = [
        (dict(use_ignore=True, normalization='valid'), (3, 4), [0, 2, -1]),
        (dict(normalization='valid'), (3, 4), [0, 2, -1]),
        (dict(use_ignore=True, normalization='batch', grad_scale=2), (3, 4), [0, 2, -1]),
        (dict(smooth_alpha=0.3), (3, 4), [0, 2, 1]),
        (dict(smooth_alpha=0.3, use_ignore=True, normalization='valid'), (3, 4), [0, 2, -1]),
        (dict(multi_output=True), (2, 3, 2), [[0, 2], [1, -1]]),
        (dict(multi_output=True, normalization='valid', use_ignore=True), (2, 3, 2), [[0, 2], [1, -1]]),
        (dict(multi_output=True, normalization='batch', use_ignore=True), (2, 3, 2), [[0, 2], [1, -1]]),
        (dict(multi_output=True, smooth_alpha=0.3), (2, 3, 2), [[0, 2], [1, 1]]),
        (dict(), (2, 3, 2), [[0, 2, 1], [1, 0, 0]]),
        (dict(normalization='batch', grad_scale=3), (3, 4), np.random.RandomState(0).rand(3, 4)),
    ]
    for kw, dshape, label in cases:
        print('SoftmaxOutput', kw, dshape, softmax_grad(dshape, label, **kw))
    x = np.array([[0.5, -1, 2], [0, 0.3, -0.2]])
    for kw in [{}, dict(normalization='batch', grad_scale=2), dict(normalization='valid'),
               dict(normalization='valid', valid_thresh=0.4), dict(normalization='valid', valid_thresh=5)]:
        print('MakeLoss', kw, unary_grad('MakeLoss', x, **kw))
    print('make_loss', unary_grad('make_loss', x), 'BlockGrad', unary_grad('BlockGrad', x))
    y = np.array([[0.5, 0, 0], [1, 0.3, -1]])
    s = mx.sym.MAERegressionOutput(mx.sym.Variable('data'), mx.sym.Variable('label'), grad_scale=2)
    ex = s.bind(mx.cpu(), {'data': mx.nd.array(x), 'label': mx.nd.array(y)},
                args_grad={'data': mx.nd.zeros(x.shape)}, grad_req={'data': 'write', 'label': 'null'})
    ex.forward(is_train=True)
    ex.backward()
    print('MAERegressionOutput', ex.grad_dict['data'].asnumpy().ravel())
    a = mx.nd.array([5.5, -5.5, 5.5, -5.5, 3, 0.7])
    b = mx.nd.array([2, 2, -2, -2, 0, 0.3])
    a.attach_grad()
    b.attach_grad()
    with mx.autograd.record():
        z = mx.nd._internal._mod(a, b)
    z.backward()
    print('_mod', z.asnumpy(), a.grad.asnumpy(), b.grad.asnumpy())
    with mx.autograd.record():
        z = mx.nd._internal._rmod_scalar(a, scalar=2.5)
    z.backward()
    print('_rmod_scalar', z.asnumpy(), a.grad.asnumpy())


if __name__ == '__main__':
    main()
