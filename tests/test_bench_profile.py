"""benchmarks/_profile.op_profile (zoo.py --profile) attributes every fused training call."""
import numpy as np

import ffnumba as ff
from bench_modules import benchmark_module

S = ff.sym


def _op_profile():
    return benchmark_module('_profile').op_profile


def test_fused_training_calls_have_rows_and_are_restored():
    from ffnumba import _executor_train_fuse as tf_mod
    from ffnumba.ops.nn import _bn_act
    before = (_bn_act.forward, _bn_act.backward, _bn_act.relu_add_backward,
              tf_mod.add_relu_forward)
    x = S.Variable('data')
    c = S.Convolution(x, num_filter=4, kernel=(3, 3), pad=(1, 1), name='c')
    a = S.Activation(S.BatchNorm(c, name='bn'), act_type='relu')
    y = S.Activation(S.elemwise_add(a, c), act_type='relu')
    net = S.SoftmaxOutput(S.FullyConnected(S.Flatten(y), num_hidden=3), name='softmax')
    rng = np.random.default_rng(0)
    rows = _op_profile()(ff, net, {'data': rng.uniform(-1, 1, (2, 2, 8, 8)),
                                   'softmax_label': np.array([0, 2])}, steps=2)
    names = {(name, kind) for name, kind, _, _ in rows}
    assert {('BatchNorm+act (fused)', 'forward'), ('BatchNorm+act (fused)', 'backward'),
            ('elemwise_add+relu (fused)', 'forward'),
            ('elemwise_add+relu (fused)', 'backward')} <= names, names
    assert rows[-1][0] == '(outside kernels)'
    assert (_bn_act.forward, _bn_act.backward, _bn_act.relu_add_backward,
            tf_mod.add_relu_forward) == before


def test_conv_relu_training_forward_has_its_row():
    x = S.Variable('data')
    r = S.Activation(S.Convolution(x, num_filter=4, kernel=(3, 3), pad=(1, 1), name='c'),
                     act_type='relu')
    net = S.SoftmaxOutput(S.FullyConnected(S.Flatten(r), num_hidden=3), name='softmax')
    rng = np.random.default_rng(0)
    rows = _op_profile()(ff, net, {'data': rng.uniform(-1, 1, (2, 2, 8, 8)),
                                   'softmax_label': np.array([0, 2])}, steps=2)
    names = {(name, kind) for name, kind, _, _ in rows}
    assert ('Convolution+BatchNorm/act (fused)', 'forward') in names, names
    assert ('Convolution', 'forward') not in names          # the relu is its epilogue


def test_patch_fused_wraps_every_fused_call_and_restores():
    prof = benchmark_module('_profile')
    calls = prof.fused_calls()
    real = [getattr(m, a) for m, a, _ in calls]
    seen = []
    restore = prof.patch_fused(lambda fn, key: seen.append(key) or ('wrapped', fn))
    assert [getattr(m, a) for m, a, _ in calls] == [('wrapped', fn) for fn in real]
    assert seen == [key for _, _, key in calls]
    restore()
    assert [getattr(m, a) for m, a, _ in calls] == real
