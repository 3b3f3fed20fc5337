"""ff.random.seed makes runs repeat, and binding executors never shifts the initializers."""
import numpy as np

import ffnumba as ff


def _net():
    return ff.sym.SoftmaxOutput(ff.sym.FullyConnected(ff.sym.var('data'), num_hidden=3, name='fc'),
                                name='softmax')


def _init_weight(ctx):
    ff.random.seed(3)
    mod = ff.mod.Module(_net(), context=ctx)
    mod.bind(data_shapes=[('data', (4, 5))], label_shapes=[('softmax_label', (4,))])
    mod.init_params(ff.init.Xavier())
    return mod.get_params()[0]['fc_weight'].asnumpy()


def test_number_of_contexts_does_not_change_initial_weights():
    one = _init_weight([ff.cpu(0)])
    two = _init_weight([ff.cpu(0), ff.cpu(1)])
    np.testing.assert_array_equal(one, two)


def test_seed_repeats_and_spawned_generators_differ():
    ff.random.seed(7)
    a = ff.random.generator().random(3)
    g1, g2 = ff.random.spawn(), ff.random.spawn()
    ff.random.seed(7)
    np.testing.assert_array_equal(a, ff.random.generator().random(3))
    h1 = ff.random.spawn()
    np.testing.assert_array_equal(g1.random(4), h1.random(4))
    assert not np.array_equal(g1.random(4), g2.random(4))
