"""Write small checkpoints with real MXNet 1.9.1 for ffnumba's compatibility tests.

Run once with MXNet's own interpreter (never a dependency of ffnumba or CI):

    MXNET_MKLDNN_ENABLED=0 /path/to/mxref/bin/python tools/make_mxnet_checkpoints.py

For each network it writes, into tests/data/:
  mx_<name>-symbol.json, mx_<name>-0001.params   the checkpoint (mx.model.save_checkpoint)
  mx_<name>_expected.npz                         inputs, eval and train outputs, gradients of
                                                 every argument (SoftmaxOutput backward), and
                                                 aux states after one training forward+backward
"""
import os

import mxnet as mx
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'data')


def mlp():
    data = mx.sym.Variable('data')
    net = mx.sym.Flatten(data)
    net = mx.sym.FullyConnected(net, num_hidden=32, name='fc1')
    net = mx.sym.Activation(net, act_type='relu', name='relu1')
    net = mx.sym.FullyConnected(net, num_hidden=10, name='fc2')
    return mx.sym.SoftmaxOutput(net, name='softmax'), (4, 1, 8, 8)


def lenet():
    """MXNet's classic LeNet layout with narrow layers (4, 8, 32) to keep the file small."""
    data = mx.sym.Variable('data')
    net = mx.sym.Convolution(data, kernel=(5, 5), num_filter=4, name='conv1')
    net = mx.sym.Activation(net, act_type='tanh', name='tanh1')
    net = mx.sym.Pooling(net, pool_type='max', kernel=(2, 2), stride=(2, 2), name='pool1')
    net = mx.sym.Convolution(net, kernel=(5, 5), num_filter=8, name='conv2')
    net = mx.sym.Activation(net, act_type='tanh', name='tanh2')
    net = mx.sym.Pooling(net, pool_type='max', kernel=(2, 2), stride=(2, 2), name='pool2')
    net = mx.sym.Flatten(net)
    net = mx.sym.FullyConnected(net, num_hidden=32, name='fc1')
    net = mx.sym.Activation(net, act_type='tanh', name='tanh3')
    net = mx.sym.FullyConnected(net, num_hidden=10, name='fc2')
    return mx.sym.SoftmaxOutput(net, name='softmax'), (3, 1, 28, 28)


def bnnet():
    data = mx.sym.Variable('data')
    net = mx.sym.Convolution(data, kernel=(3, 3), num_filter=4, pad=(1, 1), name='conv1')
    net = mx.sym.BatchNorm(net, name='bn1')                       # fix_gamma=True (default)
    net = mx.sym.Activation(net, act_type='relu', name='relu1')
    net = mx.sym.Pooling(net, pool_type='avg', kernel=(2, 2), stride=(2, 2), name='pool1')
    net = mx.sym.Flatten(net)
    net = mx.sym.FullyConnected(net, num_hidden=16, name='fc1')
    net = mx.sym.BatchNorm(net, fix_gamma=False, momentum=0.8, eps=1e-4, name='bn2')
    net = mx.sym.Activation(net, act_type='sigmoid', name='sig1')
    net = mx.sym.FullyConnected(net, num_hidden=10, name='fc2')
    return mx.sym.SoftmaxOutput(net, name='softmax'), (4, 2, 8, 8)


def make(name, build, seed):
    rng = np.random.RandomState(seed)
    sym, dshape = build()
    exe = sym.simple_bind(mx.cpu(), data=dshape, grad_req='write')
    for k, arr in exe.arg_dict.items():
        if k == 'data':
            arr[:] = rng.uniform(0, 1, arr.shape)
        elif k == 'softmax_label':
            arr[:] = rng.randint(0, 10, arr.shape)
        else:
            arr[:] = rng.normal(0, 0.3, arr.shape)
    for k, arr in exe.aux_dict.items():
        arr[:] = rng.uniform(0.5, 1.5, arr.shape) if k.endswith('var') else rng.normal(0, 0.1, arr.shape)
    arg = {k: v.copy() for k, v in exe.arg_dict.items() if k not in ('data', 'softmax_label')}
    aux = {k: v.copy() for k, v in exe.aux_dict.items()}
    prefix = os.path.join(OUT, 'mx_' + name)
    mx.model.save_checkpoint(prefix, 1, sym, arg, aux)
    out = {'data': exe.arg_dict['data'].asnumpy(), 'label': exe.arg_dict['softmax_label'].asnumpy()}
    exe.forward(is_train=False)
    out['eval_output'] = exe.outputs[0].asnumpy()
    exe.forward(is_train=True)
    out['train_output'] = exe.outputs[0].asnumpy()
    exe.backward()
    for k, g in exe.grad_dict.items():
        if k not in ('softmax_label',):
            out['grad:' + k] = g.asnumpy()
    for k, v in exe.aux_dict.items():
        out['aux_after:' + k] = v.asnumpy()
    for k, v in exe.arg_dict.items():
        out['arg_after:' + k] = v.asnumpy()
    np.savez(prefix + '_expected.npz', **out)
    print(name, sorted(out))


if __name__ == '__main__':
    make('mlp', mlp, 1)
    make('lenet', lenet, 2)
    make('bnnet', bnnet, 3)
