"""Train a Dropout net on shuffled data: ``full`` (4 epochs), ``first`` (2) or ``resume`` (2 more).

Usage: python _resume_script.py MODE PREFIX OPTIMIZER NCTX OUT.npz
"""
import sys

import numpy as np

import ffnumba as ff

mode, prefix, opt, nctx, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), \
    sys.argv[5]
ff.random.seed(7)
rng = np.random.RandomState(3)
x = rng.standard_normal((48, 6)).astype(np.float32)
y = (x[:, 0] > 0).astype(np.float32) + (x[:, 1] > 0)
train = ff.io.NDArrayIter(x, y, batch_size=8, shuffle=True)
ctx = [ff.cpu(i) for i in range(nctx)]
params = {'sgd': (('learning_rate', 0.1), ('momentum', 0.9)),
          'adam': (('learning_rate', 0.01),),
          'rmsprop': (('learning_rate', 0.01),)}[opt]


def net():
    data = ff.sym.Variable('data')
    h = ff.sym.FullyConnected(data, num_hidden=16, name='fc1')
    h = ff.sym.Activation(h, act_type='relu')
    h = ff.sym.Dropout(h, p=0.5)
    h = ff.sym.FullyConnected(h, num_hidden=3, name='fc2')
    return ff.sym.SoftmaxOutput(h, name='softmax')


def checkpoint(mod):
    def cb(epoch, sym, arg, aux):
        if epoch + 1 == 2:
            mod.save_checkpoint(prefix, 2, save_optimizer_states=True)
    return cb


if mode == 'resume':
    mod = ff.mod.Module.load(prefix, 2, load_optimizer_states=True, context=ctx)
    mod.fit(train, optimizer=opt, optimizer_params=params, begin_epoch=2, num_epoch=4)
else:
    mod = ff.mod.Module(net(), context=ctx)
    mod.fit(train, optimizer=opt, optimizer_params=params, initializer=ff.init.Xavier(),
            num_epoch=4 if mode == 'full' else 2, epoch_end_callback=checkpoint(mod))
arg, aux = mod.get_params()
np.savez(out, **{k: v.asnumpy() for k, v in arg.items()})
