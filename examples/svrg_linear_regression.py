"""Linear regression with SVRGModule and with plain SGD on scikit-learn's diabetes data.

Both train the same network from the same start with the same learning rate;
the script prints both training-loss curves. SVRG (Johnson & Zhang 2013)
corrects each mini-batch gradient with a full-gradient snapshot taken every
`update_freq` epochs and reaches a lower loss at the same number of epochs.

    python examples/svrg_linear_regression.py
"""
import logging

import numpy as np
from sklearn.datasets import load_diabetes

import ffnumba as ff

logging.basicConfig(level=logging.WARNING)


def data():
    X, y = load_diabetes(return_X_y=True)
    X = ((X - X.mean(0)) / X.std(0)).astype('float32')
    y = ((y - y.mean()) / y.std()).astype('float32')
    return X, y


def net():
    fc = ff.sym.FullyConnected(ff.sym.Variable('data'), num_hidden=1, name='fc')
    return ff.sym.LinearRegressionOutput(fc, ff.sym.Variable('lin_reg_label'), name='lro')


# A constant step large enough that plain SGD stalls on its gradient-noise floor, which is
# where SVRG's variance reduction shows (at lr 0.1 both creep toward the optimum together).
LR = 0.3


def curve(cls, X, y, num_epoch=20, lr=LR, **kw):
    it = ff.io.NDArrayIter(X, y, batch_size=32, label_name='lin_reg_label')
    mod = cls(net(), label_names=['lin_reg_label'], **kw)
    losses = []

    def record(epoch, symbol, arg, aux):
        pred = mod.predict(it).asnumpy().ravel()  # padding rows removed
        losses.append(float(((pred - y) ** 2).mean()))
    mod.fit(it, num_epoch=num_epoch, eval_metric='mse', epoch_end_callback=record,
            arg_params={'fc_weight': ff.nd.zeros((1, X.shape[1])), 'fc_bias': ff.nd.zeros((1,))},
            optimizer='sgd', optimizer_params={'learning_rate': lr})
    return losses


def main():
    X, y = data()
    sgd = curve(ff.mod.Module, X, y)
    svrg = curve(ff.mod.SVRGModule, X, y, update_freq=2)
    A = np.c_[X, np.ones(len(X))]
    best = ((A @ np.linalg.lstsq(A, y, rcond=None)[0] - y) ** 2).mean()
    print('epoch   SGD mse    SVRG mse   (least-squares optimum %.6f)' % best)
    for e, (a, b) in enumerate(zip(sgd, svrg)):
        print('%5d  %.6f   %.6f' % (e, a, b))
    print('final: SGD %.6f, SVRG %.6f -> SVRG %s' % (sgd[-1], svrg[-1],
                                                     'lower' if svrg[-1] < sgd[-1] else 'NOT lower'))


if __name__ == '__main__':
    main()
