"""BucketingModule: variable-length inputs, one shared set of parameters."""
import os

import numpy as np
import pytest

import ffnumba as ff
import ffnumba.ndarray as nd
import ffnumba.symbol as sym
from ffnumba import io
from ffnumba.base import FFError
from ffnumba.module import BucketingModule

VOCAB, DIM = 12, 6
BUCKETS = [3, 5, 8]


def sym_gen(seq_len):
    data = sym.Variable('data')
    emb = sym.Embedding(data, input_dim=VOCAB, output_dim=DIM, name='embed')
    bag = sym.sum(emb, axis=1)  # bag of words: does not depend on seq_len
    fc = sym.FullyConnected(bag, num_hidden=2, name='fc')
    return sym.SoftmaxOutput(fc, name='softmax'), ('data',), ('softmax_label',)


class BucketIter(io.DataIter):
    """Sequences of several lengths; label = whether token 0 occurs more than token 1."""

    def __init__(self, n_per_bucket=24, batch_size=8, seed=0):
        super().__init__(batch_size)
        rng = np.random.RandomState(seed)
        self.default_bucket_key = max(BUCKETS)
        self.batches = []
        for L in BUCKETS:
            X = rng.randint(0, VOCAB, size=(n_per_bucket, L)).astype('float32')
            y = ((X == 0).sum(1) > (X == 1).sum(1)).astype('float32')
            for i in range(0, n_per_bucket, batch_size):
                self.batches.append((L, X[i:i + batch_size], y[i:i + batch_size]))
        order = rng.permutation(len(self.batches))
        self.batches = [self.batches[i] for i in order]
        self.provide_data = [io.DataDesc('data', (batch_size, self.default_bucket_key))]
        self.provide_label = [io.DataDesc('softmax_label', (batch_size,))]
        self.cur = 0

    def reset(self):
        self.cur = 0

    def next(self):
        if self.cur == len(self.batches):
            raise StopIteration
        L, X, y = self.batches[self.cur]
        self.cur += 1
        return io.DataBatch([nd.array(X)], [nd.array(y)], pad=0, bucket_key=L,
                            provide_data=[io.DataDesc('data', X.shape)],
                            provide_label=[io.DataDesc('softmax_label', y.shape)])


def test_buckets_share_one_set_of_parameters_and_train():
    it = BucketIter()
    mod = BucketingModule(sym_gen, default_bucket_key=it.default_bucket_key,
                          context=[ff.cpu(0), ff.cpu(1)])
    mod.fit(it, num_epoch=8, optimizer_params={'learning_rate': 0.05, 'momentum': 0.9},
            initializer=ff.init.Xavier())
    assert sorted(mod._buckets) == BUCKETS
    w = {k: m._exec_group.execs[0].arg_dict['embed_weight'] for k, m in mod._buckets.items()}
    assert all(a is w[8] for a in w.values())
    acc = dict(mod.score(it, 'acc'))['accuracy']
    assert acc > 0.8
    arg, _ = mod.get_params()
    assert sorted(arg) == ['embed_weight', 'fc_bias', 'fc_weight']


def test_switch_bucket_and_checkpoint_roundtrip(tmp_path):
    it = BucketIter()
    mod = BucketingModule(sym_gen, default_bucket_key=8)
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params(ff.init.Xavier())
    mod.init_optimizer()
    mod.switch_bucket(3, [('data', (8, 3))], [('softmax_label', (8,))])
    assert mod._curr_bucket_key == 3 and mod.data_shapes[0].shape == (8, 3)
    prefix = str(tmp_path / 'bow')
    mod.save_checkpoint(prefix, 1)
    names = sorted(os.listdir(tmp_path))
    assert names == ['bow-0001.params', 'bow-3-symbol.json', 'bow-8-symbol.json', 'bow.buckets']
    assert nd.load(prefix + '.buckets')[0].dtype == np.int32
    again = BucketingModule.load(prefix, 1)
    again.bind(it.provide_data, it.provide_label, for_training=False)
    x = it.batches[0]
    batch = io.DataBatch([nd.array(x[1])], None, bucket_key=x[0],
                         provide_data=[io.DataDesc('data', x[1].shape)])
    mod.forward(batch, is_train=False)
    again.forward(batch, is_train=False)
    np.testing.assert_allclose(again.get_outputs()[0].asnumpy(),
                               mod.get_outputs()[0].asnumpy(), rtol=1e-6)


def test_bucketing_errors():
    with pytest.raises(FFError, match='default_bucket_key'):
        BucketingModule(sym_gen)
    mod = BucketingModule(sym_gen, default_bucket_key=8)
    mod.bind([('data', (8, 8))], [('softmax_label', (8,))])
    with pytest.raises(FFError, match='not supported'):
        mod.bind([('data', (8, 8))], force_rebind=True, shared_module=mod)


def test_sym_gen_gets_fresh_default_names_each_call():
    import ffnumba as mx

    def sym_gen(seq_len):
        data = mx.sym.Variable('data')
        embed = mx.sym.Embedding(data, input_dim=10, output_dim=4)   # default name
        pred = mx.sym.FullyConnected(mx.sym.Reshape(embed, shape=(-1, 4)), num_hidden=10)
        label = mx.sym.Reshape(mx.sym.Variable('softmax_label'), shape=(-1,))
        return mx.sym.SoftmaxOutput(pred, label, name='softmax'), ('data',), ('softmax_label',)

    mx.sym.Embedding(mx.sym.Variable('x'), input_dim=3, output_dim=2)  # bumps the global counter
    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=6)
    mod.bind([('data', (2, 6))], [('softmax_label', (2, 6))])
    mod.init_params()
    assert mod.symbol.list_arguments()[1] == 'embedding0_weight'
    mod.switch_bucket(3, [('data', (2, 3))], [('softmax_label', (2, 3))])
    assert mod.symbol.list_arguments()[1] == 'embedding0_weight'   # shared with bucket 6
    arg, _ = mod.get_params()
    assert sorted(arg) == ['embedding0_weight', 'fullyconnected0_bias', 'fullyconnected0_weight']
