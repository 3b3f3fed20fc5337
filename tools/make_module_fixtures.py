"""Generate tests/data/mx_module_bn_2dev.params with real MXNet 1.9.1.

A small BatchNorm MLP is trained for one epoch by mx.mod.Module on
[cpu(0), cpu(1)] with work_load_list=[1, 3] (per-device BatchNorm statistics,
gradients summed by the 'local' kvstore). The file holds the data, the
initial parameters and the parameters after the epoch.

Run: MXNET_MKLDNN_ENABLED=0 /work/mxref/bin/python tools/make_module_fixtures.py
"""
import os

import mxnet as mx
import numpy as np

OUT = os.path.join(os.path.dirname(__file__), '..', 'tests', 'data', 'mx_module_bn_2dev.params')


def net():
    data = mx.sym.Variable('data')
    h = mx.sym.FullyConnected(data, num_hidden=6, name='fc1')
    h = mx.sym.BatchNorm(h, fix_gamma=False, name='bn1')
    h = mx.sym.Activation(h, act_type='relu', name='relu1')
    h = mx.sym.FullyConnected(h, num_hidden=3, name='fc2')
    return mx.sym.SoftmaxOutput(h, name='softmax')


def main():
    rng = np.random.RandomState(42)
    X = rng.randn(32, 5).astype('float32')
    y = rng.randint(0, 3, size=32).astype('float32')
    sym = net()
    arg_shapes, _, aux_shapes = sym.infer_shape(data=(8, 5), softmax_label=(8,))
    init_arg = {n: mx.nd.array(rng.uniform(-0.5, 0.5, s).astype('float32'))
                for n, s in zip(sym.list_arguments(), arg_shapes)
                if n not in ('data', 'softmax_label')}
    init_arg['bn1_gamma'] = mx.nd.array(rng.uniform(0.5, 1.5, (6,)).astype('float32'))
    init_aux = {'bn1_moving_mean': mx.nd.zeros((6,)), 'bn1_moving_var': mx.nd.ones((6,))}
    it = mx.io.NDArrayIter(X, y, batch_size=8, shuffle=False)
    mod = mx.mod.Module(sym, context=[mx.cpu(0), mx.cpu(1)], work_load_list=[1, 3])
    mod.fit(it, num_epoch=1, arg_params={k: v.copy() for k, v in init_arg.items()},
            aux_params={k: v.copy() for k, v in init_aux.items()}, kvstore='local',
            optimizer='sgd', optimizer_params={'learning_rate': 0.1, 'momentum': 0.9})
    arg, aux = mod.get_params()
    out = {'X': mx.nd.array(X), 'y': mx.nd.array(y)}
    out.update({'init_arg:' + k: v for k, v in init_arg.items()})
    out.update({'init_aux:' + k: v for k, v in init_aux.items()})
    out.update({'final_arg:' + k: v for k, v in arg.items()})
    out.update({'final_aux:' + k: v for k, v in aux.items()})
    mx.nd.save(OUT, out)
    print('wrote', OUT)


if __name__ == '__main__':
    main()
