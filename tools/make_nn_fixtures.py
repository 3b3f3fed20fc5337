"""Write golden files for the nn operator tests, computed with real MXNet 1.9.1.

Run with the reference install (never from the package or the tests)::

    MXNET_MKLDNN_ENABLED=0 /work/mxref/bin/python tools/make_nn_fixtures.py [family ...]

It writes ``tests/data/{batchnorm,leaky_relu,lrn,softmax,embedding,upsampling}_golden.npz``.
Each file holds several cases; the arrays of case ``c`` are stored under
``c__<name>``: ``c__params`` (JSON of the op params, plus ``is_train``),
``c__arg_<argument>`` (inputs), ``c__aux_<name>`` (aux states before the step),
``c__head<i>`` (head gradients), ``c__out<i>`` (outputs), ``c__grad_<argument>``
(gradients after one forward + backward) and ``c__auxafter_<name>`` (aux states
after forward + backward).
"""
import json
import os
import sys

import numpy as np

os.environ.setdefault('MXNET_MKLDNN_ENABLED', '0')
os.environ.setdefault('MXNET_STORAGE_FALLBACK_LOG_VERBOSE', '0')
import mxnet as mx  # noqa: E402  (reference install only)

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'data')


def run_case(op, params, args, aux=None, is_train=True, dtype='float32', seed=0,
             grad_args=None):
    """One forward + backward of ``mx.sym.<op>`` on the given inputs; returns a dict."""
    rng = np.random.RandomState(seed)
    aux = aux or {}
    inputs = [mx.sym.Variable(n) for n in args]
    sym = getattr(mx.sym, op)(*inputs, name='op', **params)
    arg_names = sym.list_arguments()
    aux_names = sym.list_auxiliary_states()
    a = {n: mx.nd.array(args[n], dtype=dtype) for n in arg_names}
    x = {n: mx.nd.array(aux[n.replace('op_', '')], dtype=dtype) for n in aux_names}
    grad_args = arg_names if grad_args is None else grad_args
    g = {n: mx.nd.zeros(a[n].shape, dtype=dtype) for n in grad_args}
    req = {n: ('write' if n in grad_args else 'null') for n in arg_names}
    exe = sym.bind(mx.cpu(), args=a, args_grad=g, grad_req=req, aux_states=x)
    exe.forward(is_train=is_train)
    outs = [o.asnumpy() for o in exe.outputs]
    heads = [rng.standard_normal(o.shape).astype(dtype) for o in outs]
    exe.backward([mx.nd.array(h, dtype=dtype) for h in heads])
    mx.nd.waitall()
    res = {'params': np.array(json.dumps(dict(params, is_train=is_train)))}
    for n in arg_names:
        res['arg_' + n] = np.asarray(args[n], dtype=dtype)
    for n in aux_names:
        short = n.replace('op_', '')
        res['aux_' + short] = np.asarray(aux[short], dtype=dtype)
        res['auxafter_' + short] = x[n].asnumpy()
    for i, (o, h) in enumerate(zip(outs, heads)):
        res['out%d' % i] = o
        res['head%d' % i] = h
    for n in grad_args:
        res['grad_' + n] = g[n].asnumpy()
    # gamma is written to 1 by fix_gamma: keep the value after the step too
    for n in arg_names:
        res['argafter_' + n] = a[n].asnumpy()
    return res


def save(name, cases):
    flat = {}
    for case, arrays in cases.items():
        for k, v in arrays.items():
            flat['%s__%s' % (case, k)] = v
    path = os.path.join(OUT_DIR, name + '_golden.npz')
    np.savez_compressed(path, **flat)
    print('wrote', os.path.relpath(path), len(cases), 'cases', os.path.getsize(path), 'bytes')


def batchnorm(rng):
    def bn_inputs(shape, axis):
        c = shape[axis]
        return (dict(data=rng.standard_normal(shape) * 2 + 0.5,
                     op_gamma=rng.uniform(0.5, 1.5, c), op_beta=rng.standard_normal(c)),
                dict(moving_mean=rng.standard_normal(c), moving_var=rng.uniform(0.5, 2, c)))
    cases = {}
    for case, params, shape, train in [
            ('train_fixfalse', dict(fix_gamma=False, momentum=0.9, eps=1e-3), (4, 3, 2, 2), True),
            ('train_fixtrue_axis-1', dict(axis=-1, momentum=0.8), (3, 2, 4), True),
            ('train_axis0', dict(axis=0, fix_gamma=False, eps=1e-5), (3, 5), True),
            ('global_stats', dict(fix_gamma=False, use_global_stats=True), (2, 3, 4), True),
            ('eval', dict(fix_gamma=False), (2, 3, 4), False),
            ('output_mean_var', dict(fix_gamma=False, output_mean_var=True), (4, 3, 2), True)]:
        args, aux = bn_inputs(shape, params.get('axis', 1))
        cases[case] = run_case('BatchNorm', params, args, aux, is_train=train)
    save('batchnorm', cases)


def leaky_relu(rng):
    cases = {}
    x = rng.standard_normal((3, 4)) * 2
    for act in ('leaky', 'elu', 'selu', 'gelu'):
        cases[act] = run_case('LeakyReLU', dict(act_type=act, slope=0.3), dict(data=x),
                              dtype='float64')
    cases['prelu'] = run_case('LeakyReLU', dict(act_type='prelu'),
                              dict(data=rng.standard_normal((2, 3, 4)),
                                   op_gamma=rng.uniform(0, 0.5, 3)), dtype='float64')
    # rrelu: MXNet 1.9.1 fails in training on the CPU; evaluation output only
    cases['rrelu_eval'] = run_case('LeakyReLU', dict(act_type='rrelu'), dict(data=x),
                                   is_train=False, dtype='float64', grad_args=[])
    save('leaky_relu', cases)


def lrn(rng):
    cases = {}
    x = rng.standard_normal((2, 6, 3, 3))
    cases['n3'] = run_case('LRN', dict(nsize=3, alpha=0.1, beta=0.75, knorm=2), dict(data=x))
    cases['n5'] = run_case('LRN', dict(nsize=5, alpha=0.5, beta=0.6, knorm=1.5), dict(data=x))
    cases['default'] = run_case('LRN', dict(nsize=3), dict(data=x))
    save('lrn', cases)


def softmax(rng):
    cases = {}
    x = rng.standard_normal((2, 3, 4)) * 3
    for op in ('softmax', 'log_softmax'):
        cases[op + '_last'] = run_case(op, {}, dict(data=x), dtype='float64')
        cases[op + '_axis0_t'] = run_case(op, dict(axis=0, temperature=2.5), dict(data=x),
                                          dtype='float64')
    for mode in ('instance', 'channel'):
        # MXNet's SoftmaxActivation runs in float32 only
        cases['act_' + mode] = run_case('SoftmaxActivation', dict(mode=mode), dict(data=x))
    # 3-D 'instance': MXNet's backward sums over axis 1 (not the derivative of its
    # forward over the last axis); the tests use only its forward, and this 2-D case
    cases['act_instance_2d'] = run_case('SoftmaxActivation', dict(mode='instance'),
                                        dict(data=x[:, :, 0]))
    save('softmax', cases)


def embedding(rng):
    cases = {}
    idx = np.array([[1.7, -1, 100, 2.5], [-0.5, 3.99, 2, 2]])
    cases['clip'] = run_case('Embedding', dict(input_dim=4, output_dim=3),
                             dict(data=idx, op_weight=rng.standard_normal((4, 3))),
                             grad_args=['op_weight'])
    save('embedding', cases)


def upsampling(rng):
    cases = {}
    cases['nearest'] = run_case('UpSampling', dict(scale=2, sample_type='nearest'),
                                dict(a=rng.standard_normal((2, 2, 3, 2))))
    cases['nearest_concat'] = run_case(
        'UpSampling', dict(scale=2, sample_type='nearest', num_args=2),
        dict(a=rng.standard_normal((1, 2, 2, 2)), b=rng.standard_normal((1, 3, 1, 1))))
    cases['nearest_sum'] = run_case(
        'UpSampling', dict(scale=3, sample_type='nearest', num_args=2, multi_input_mode='sum'),
        dict(a=rng.standard_normal((1, 2, 2, 2)), b=rng.standard_normal((1, 2, 3, 3))))
    for s in (2, 3):
        k = 2 * s - s % 2
        cases['bilinear%d' % s] = run_case(
            'UpSampling', dict(scale=s, sample_type='bilinear', num_filter=2, num_args=2),
            dict(data=rng.standard_normal((1, 2, 3, 2)),
                 op_weight=rng.standard_normal((2, 1, k, k))))
    save('upsampling', cases)


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    families = ['batchnorm', 'leaky_relu', 'lrn', 'softmax', 'embedding', 'upsampling']
    which = sys.argv[1:] or families
    for name in which:
        # one generator per family: any subset regenerates the same files
        globals()[name](np.random.default_rng(20240521 + families.index(name)))


if __name__ == '__main__':
    main()
