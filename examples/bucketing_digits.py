"""BucketingModule on variable-length sequences: scikit-learn digits read row by row.

Each 8x8 digit is cut to its first L rows (L in 4, 6, 8: the bucket keys), a
variable-length sequence of 8-pixel rows. The network embeds every row with
one FullyConnected (flatten=False), sums over the sequence and classifies, so
all buckets share one set of parameters; BucketingModule binds one executor
per length on the memory of the largest bucket.

    python examples/bucketing_digits.py
"""
import logging

import numpy as np

import ffnumba as ff

logging.basicConfig(level=logging.INFO, format='%(message)s')
BUCKETS = [4, 6, 8]


def sym_gen(seq_len):
    data = ff.sym.Variable('data')                                   # (batch, seq_len, 8)
    rows = ff.sym.FullyConnected(data, num_hidden=64, flatten=False, name='row')
    rows = ff.sym.Activation(rows, act_type='relu', name='row_relu')
    bag = ff.sym.sum(rows, axis=1)                                   # (batch, 64)
    out = ff.sym.FullyConnected(bag, num_hidden=10, name='cls')
    return ff.sym.SoftmaxOutput(out, name='softmax'), ('data',), ('softmax_label',)


class RowBucketIter(ff.io.DataIter):
    """Batches of digits cut to L rows, L drawn per batch from BUCKETS."""

    def __init__(self, X, y, batch_size=50, seed=0):
        super().__init__(batch_size)
        self.X, self.y = X.reshape(-1, 8, 8), y.astype('float32')
        self.rng = np.random.RandomState(seed)
        self.default_bucket_key = max(BUCKETS)
        self.provide_data = [ff.io.DataDesc('data', (batch_size, 8, 8))]
        self.provide_label = [ff.io.DataDesc('softmax_label', (batch_size,))]
        self.reset()

    def reset(self):
        n = len(self.X) // self.batch_size * self.batch_size
        order = self.rng.permutation(len(self.X))[:n]
        self.plan = [(order[i:i + self.batch_size], BUCKETS[self.rng.randint(len(BUCKETS))])
                     for i in range(0, n, self.batch_size)]

    def next(self):
        if not self.plan:
            raise StopIteration
        idx, L = self.plan.pop()
        x = self.X[idx, :L, :]
        return ff.io.DataBatch([ff.nd.array(x)], [ff.nd.array(self.y[idx])], pad=0,
                               bucket_key=L, provide_data=[ff.io.DataDesc('data', x.shape)],
                               provide_label=[ff.io.DataDesc('softmax_label', idx.shape)])


def main():
    X, y, Xt, yt = ff.datasets.load_digits()
    train, test = RowBucketIter(X, y), RowBucketIter(Xt, yt, seed=1)
    mod = ff.mod.BucketingModule(sym_gen, default_bucket_key=train.default_bucket_key,
                                 context=[ff.cpu(0), ff.cpu(1)])
    mod.fit(train, eval_data=test, num_epoch=15, initializer=ff.init.Xavier(),
            optimizer='adam', optimizer_params={'learning_rate': 0.01})
    logging.info('buckets bound: %s; parameters: %s', sorted(mod._buckets),
                 sorted(mod.get_params()[0]))


if __name__ == '__main__':
    main()
