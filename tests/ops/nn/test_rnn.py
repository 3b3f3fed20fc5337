"""The fused RNN operator: shapes, MXNet's packed layout, numpy reference, float64 gradients."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ffnumba as ff
from ffnumba.base import FFError, ParamError, ShapeError
from ffnumba.ops.nn.rnn import rnn_param_size
from ffnumba.testing import OpCase
from rnn_reference import rnn_forward, rnn_forward_lengths

MODES = ['rnn_relu', 'rnn_tanh', 'lstm', 'gru']


class TestRNN(OpCase):
    op = 'RNN'
    params = [dict(mode='lstm', state_size=3, num_layers=2, bidirectional=True, state_outputs=True),
              dict(mode='gru', state_size=2, num_layers=1, state_outputs=True),
              dict(mode='rnn_tanh', state_size=3, num_layers=2, bidirectional=True),
              dict(mode='rnn_relu', state_size=2, num_layers=1, state_outputs=True),
              dict(mode='lstm', state_size=2, num_layers=1, lstm_state_clip_min=-0.3,
                   lstm_state_clip_max=0.3, state_outputs=True),
              dict(mode='lstm', state_size=4, projection_size=2, num_layers=2, bidirectional=True,
                   state_outputs=True)]
    shapes = [dict(data=(3, 2, 4)), dict(data=(1, 1, 2))]
    max_batch = None
    rtol32, atol32 = 1e-4, 1e-5
    grad_rtol, grad_atol = 1e-4, 1e-6

    def reference(self, p, data, parameters, state, state_cell=None):
        clip = None
        if p.get('lstm_state_clip_min') is not None:
            clip = (p['lstm_state_clip_min'], p['lstm_state_clip_max'])
        out, hy, cy = rnn_forward(p['mode'], p['num_layers'], p.get('bidirectional', False),
                                  data, parameters, state, state_cell, clip, p['state_size'])
        if not p.get('state_outputs'):
            return [out]
        return [out, hy] + ([cy] if p['mode'] == 'lstm' else [])

    def cases(self):
        @st.composite
        def draw(d):
            p = dict(mode=d(st.sampled_from(MODES)), state_size=d(st.integers(1, 3)),
                     num_layers=d(st.integers(1, 2)), bidirectional=d(st.booleans()),
                     state_outputs=d(st.booleans()))
            if p['mode'] == 'lstm' and d(st.booleans()):
                p['projection_size'] = d(st.integers(1, p['state_size']))
            shape = (d(st.integers(1, 4)), d(st.integers(1, 3)), d(st.integers(1, 3)))
            return p, dict(data=shape)
        return draw()

    test_gradient = settings(max_examples=20, deadline=None)(given(data=st.data())(
        OpCase._gradient_case))


class _SeqLen(OpCase):
    """use_sequence_length: each sequence alone over its own length is the oracle."""
    op = 'RNN'
    shapes = [dict(data=(4, 3, 2)), dict(data=(3, 4, 3))]
    max_batch = None
    rtol32, atol32 = 1e-4, 1e-5
    grad_rtol, grad_atol = 1e-4, 1e-6

    def inputs(self, rng, p, shapes):
        T, N, _ = shapes['data']
        out = {k: rng.uniform(-1, 1, v) for k, v in shapes.items() if k != 'sequence_length'}
        lens = rng.integers(1, T + 1, N)
        lens[0] = T            # one full-length sequence, the rest drawn
        out['sequence_length'] = lens.astype(float)
        return out

    def reference(self, p, data, parameters, state, state_cell=None, sequence_length=None):
        if sequence_length is None:
            state_cell, sequence_length = None, state_cell
        clip = None
        if p.get('lstm_state_clip_min') is not None:
            clip = (p['lstm_state_clip_min'], p['lstm_state_clip_max'])
        out, hy, cy = rnn_forward_lengths(p['mode'], p['num_layers'], p.get('bidirectional', False),
                                          data, parameters, state, state_cell, sequence_length,
                                          clip, p['state_size'])
        if not p.get('state_outputs'):
            return [out]
        return [out, hy] + ([cy] if p['mode'] == 'lstm' else [])

    def cases(self):
        @st.composite
        def draw(d):
            p = dict(self.params[0], num_layers=d(st.integers(1, 2)),
                     bidirectional=d(st.booleans()), state_size=d(st.integers(1, 3)))
            if p['mode'] != 'lstm':
                p['mode'] = d(st.sampled_from(['gru', 'rnn_tanh', 'rnn_relu']))
            elif d(st.booleans()):
                p['projection_size'] = d(st.integers(1, p['state_size']))
            return p, dict(data=(d(st.integers(1, 4)), d(st.integers(1, 3)), d(st.integers(1, 3))))
        return draw()

    test_gradient = settings(max_examples=12, deadline=None)(given(data=st.data())(
        OpCase._gradient_case))


class TestRNNSequenceLengthLSTM(_SeqLen):
    params = [dict(mode='lstm', state_size=3, num_layers=2, bidirectional=True,
                   state_outputs=True, use_sequence_length=True),
              dict(mode='lstm', state_size=2, num_layers=1, state_outputs=True,
                   use_sequence_length=True, lstm_state_clip_min=-0.3, lstm_state_clip_max=0.3),
              dict(mode='lstm', state_size=3, projection_size=2, num_layers=2, bidirectional=True,
                   state_outputs=True, use_sequence_length=True)]
    grad_nodes = ['data', 'parameters', 'state', 'state_cell']


class TestRNNSequenceLengthOther(_SeqLen):
    params = [dict(mode='gru', state_size=3, num_layers=2, bidirectional=True,
                   state_outputs=True, use_sequence_length=True),
              dict(mode='rnn_tanh', state_size=2, num_layers=1, bidirectional=True,
                   state_outputs=True, use_sequence_length=True),
              dict(mode='rnn_relu', state_size=2, num_layers=2, use_sequence_length=True)]
    grad_nodes = ['data', 'parameters', 'state']


def test_sequence_length_names_shapes_and_errors():
    s = ff.sym.RNN(ff.sym.var('data'), state_size=4, num_layers=1, mode='lstm',
                   use_sequence_length=True, state_outputs=True, name='r')
    assert s.list_arguments() == ['data', 'r_parameters', 'r_state', 'r_state_cell',
                                  'r_sequence_length']   # as MXNet 1.9.1
    args, outs, _ = s.infer_shape(data=(5, 3, 2))
    assert args[-1] == (3,) and outs == [(5, 3, 4), (1, 3, 4), (1, 3, 4)]
    g = ff.sym.RNN(ff.sym.var('data'), state_size=4, num_layers=1, mode='gru',
                   use_sequence_length=True, name='g')
    assert g.list_arguments() == ['data', 'g_parameters', 'g_state', 'g_sequence_length']
    shapes = dict(zip(g.list_arguments(), g.infer_shape(data=(3, 2, 2))[0]))
    vals = {k: ff.nd.zeros(v) for k, v in shapes.items()}
    for bad in ([0, 2], [1, 4], [1.5, 2]):
        vals['g_sequence_length'] = ff.nd.array(bad)
        exe = g.bind(ff.cpu(), vals)
        with pytest.raises(FFError, match=r'RNN.*sequence_length.*\[1, 3\]'):
            exe.forward()


def test_sequence_length_gradient_is_zero_and_padding_gets_none():
    rng = np.random.default_rng(3)
    s = ff.sym.RNN(ff.sym.var('data'), state_size=2, num_layers=1, mode='lstm',
                   bidirectional=True, use_sequence_length=True, name='r')
    shapes = dict(zip(s.list_arguments(), s.infer_shape(data=(4, 2, 3))[0]))
    vals = {k: ff.nd.array(rng.uniform(-1, 1, v)) for k, v in shapes.items()}
    vals['r_sequence_length'] = ff.nd.array([4, 2])
    exe = s.bind(ff.cpu(), vals, args_grad={k: ff.nd.ones(v) for k, v in shapes.items()})
    exe.forward(is_train=True)
    assert np.all(exe.outputs[0].asnumpy()[2:, 1] == 0)
    exe.backward([ff.nd.ones((4, 2, 4))])
    assert np.all(exe.grad_dict['r_sequence_length'].asnumpy() == 0)
    assert np.all(exe.grad_dict['data'].asnumpy()[2:, 1] == 0)


def test_param_size_matches_mxnet():
    # values from MXNet 1.9.1's infer_shape
    assert rnn_param_size('lstm', 2, True, 6, 4) == 832
    assert rnn_param_size('gru', 2, True, 6, 4) == 624
    assert rnn_param_size('rnn_tanh', 2, True, 6, 4) == 208
    assert rnn_param_size('gru', 1, False, 6, 4) == 144


def test_projection_shapes_and_size_as_mxnet():
    # MXNet 1.9.1's infer_shape for the same symbol
    s = ff.sym.RNN(ff.sym.var('data'), state_size=4, num_layers=2, mode='lstm', projection_size=3,
                   bidirectional=True, state_outputs=True, name='r')
    args, outs, _ = s.infer_shape(data=(5, 2, 6))
    assert args == [(5, 2, 6), (752,), (4, 2, 3), (4, 2, 4)]
    assert outs == [(5, 2, 6), (4, 2, 3), (4, 2, 4)]


def test_names_and_shapes_as_mxnet():
    s = ff.sym.RNN(ff.sym.var('data'), state_size=4, num_layers=2, mode='lstm',
                   bidirectional=True, state_outputs=True, name='r')
    assert s.list_arguments() == ['data', 'r_parameters', 'r_state', 'r_state_cell']
    assert s.list_outputs() == ['r_output', 'r_state_output', 'r_statecell_output']
    args, outs, _ = s.infer_shape(data=(5, 3, 6))
    assert args == [(5, 3, 6), (832,), (4, 3, 4), (4, 3, 4)]
    assert outs == [(5, 3, 8), (4, 3, 4), (4, 3, 4)]
    g = ff.sym.RNN(ff.sym.var('data'), state_size=4, num_layers=1, mode='gru', name='g')
    assert g.list_arguments() == ['data', 'g_parameters', 'g_state']
    assert g.list_outputs() == ['g_output']


def test_data_shape_inferred_back_from_output_and_parameters():
    s = ff.sym.RNN(ff.sym.var('data'), state_size=4, num_layers=2, mode='gru',
                   bidirectional=True, name='r')
    out = s + ff.sym.var('y')
    args, outs, _ = out.infer_shape(r_parameters=(624,), y=(5, 3, 8))
    assert args[0] == (5, 3, 6) and args[2] == (4, 3, 4) and outs == [(5, 3, 8)]


def test_bad_inputs_raise():
    with pytest.raises(ParamError, match='mode'):
        ff.sym.RNN(ff.sym.var('data'), state_size=2, num_layers=1, mode='lstmp')
    with pytest.raises(ParamError, match='projection_size'):
        ff.sym.RNN(ff.sym.var('data'), state_size=2, num_layers=1, mode='gru', projection_size=2)
    with pytest.raises(ParamError, match='projection_size'):
        ff.sym.RNN(ff.sym.var('data'), state_size=2, num_layers=1, mode='lstm', projection_size=3)
    s = ff.sym.RNN(ff.sym.var('data'), state_size=2, num_layers=1, mode='lstm', name='r')
    with pytest.raises(ShapeError, match=r'r.*3-D'):
        s.infer_shape(data=(2, 3))
    with pytest.raises(ShapeError, match='r_parameters|parameters'):
        s.infer_shape(data=(2, 3, 4), r_parameters=(5,))


def test_dropout_only_between_layers_and_only_in_training():
    rng = np.random.default_rng(0)
    kw = dict(state_size=3, mode='lstm', name='r')
    one = ff.sym.RNN(ff.sym.var('data'), num_layers=1, p=0.5, **kw)
    args = {n: rng.uniform(-1, 1, s) for n, s in zip(one.list_arguments(),
                                                     one.infer_shape(data=(4, 2, 3))[0])}
    outs = []
    for sym_, train in [(one, True), (one, False)]:
        exe = sym_.bind(ff.cpu(), {k: ff.nd.array(v) for k, v in args.items()})
        exe.forward(is_train=train)
        outs.append(exe.outputs[0].asnumpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6)
    two = ff.sym.RNN(ff.sym.var('data'), num_layers=2, p=0.5, **kw)
    two0 = ff.sym.RNN(ff.sym.var('data'), num_layers=2, **kw)
    shapes = two.infer_shape(data=(4, 2, 3))[0]
    args = {n: ff.nd.array(rng.uniform(-1, 1, s)) for n, s in zip(two.list_arguments(), shapes)}
    res = []
    for sym_, train in [(two, True), (two, False), (two0, True)]:
        exe = sym_.bind(ff.cpu(), args)
        exe.forward(is_train=train)
        res.append(exe.outputs[0].asnumpy())
    np.testing.assert_allclose(res[1], res[2], rtol=1e-6)
    assert np.abs(res[0] - res[1]).max() > 1e-3


@pytest.mark.gpu
def test_gpu_dropout_between_layers_matches_cpu_with_the_same_seed():
    from ffnumba.testing import assert_almost_equal, bind_numpy
    s = ff.sym.RNN(ff.sym.var('data'), state_size=3, num_layers=2, mode='gru', p=0.4,
                   bidirectional=True, name='r')
    shapes = dict(zip(s.list_arguments(), s.infer_shape(data=(3, 2, 4))[0]))
    rng = np.random.default_rng(0)
    vals = {k: rng.uniform(-1, 1, v) for k, v in shapes.items()}
    head = rng.standard_normal((3, 2, 6))
    res = []
    for ctx in (ff.cpu(0), ff.gpu(0)):
        ff.random.seed(7)
        exe = bind_numpy(s, vals, ctx=ctx)
        exe.forward(is_train=True)
        exe.backward([ff.nd.array(head, ctx=ctx)])
        res.append((exe.outputs[0].asnumpy(), exe.grad_dict['r_parameters'].asnumpy()))
    assert_almost_equal(res[1][0], res[0][0], 1e-4, 1e-5)
    assert_almost_equal(res[1][1], res[0][1], 1e-4, 1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize('mode, extra', [('lstm', {}), ('gru', {}), ('rnn_relu', {}),
                                         ('lstm', dict(projection_size=2)),
                                         ('lstm', dict(projection_size=2,
                                                       use_sequence_length=False))])
def test_gpu_gradients_match_cpu(mode, extra):
    from ffnumba.testing import assert_almost_equal, bind_numpy
    kw = dict(dict(use_sequence_length=True), **extra)
    s = ff.sym.RNN(ff.sym.var('data'), state_size=3, num_layers=2, mode=mode,
                   bidirectional=True, state_outputs=True, name='r', **kw)
    shapes = dict(zip(s.list_arguments(), s.infer_shape(data=(4, 3, 2))[0]))
    rng = np.random.default_rng(0)
    vals = {k: rng.uniform(-1, 1, v) for k, v in shapes.items()}
    if kw['use_sequence_length']:
        vals['r_sequence_length'] = np.array([4.0, 1.0, 3.0])
    heads = [rng.standard_normal(o) for o in s.infer_shape(data=(4, 3, 2))[1]]
    res = []
    for ctx in (ff.cpu(0), ff.gpu(0)):
        exe = bind_numpy(s, vals, ctx=ctx, dtype='float64')
        exe.forward(is_train=True)
        exe.backward([ff.nd.array(h, ctx=ctx, dtype='float64') for h in heads])
        res.append([o.asnumpy() for o in exe.outputs] +
                   [exe.grad_dict[k].asnumpy() for k in sorted(shapes)])
    for gpu_v, cpu_v in zip(res[1], res[0]):
        assert_almost_equal(gpu_v, cpu_v, 1e-6, 1e-8)


@pytest.mark.parametrize('k', [0, 1])
def test_projection_forward_matches_real_mxnet(k):
    """tests/data/mx_rnn_lstmp_expected.npz from tools/make_lstmp_fixture.py (MXNet 1.9.1's
    CPU LSTMP inference; MXNet has no CPU training for it, gradients are checked above)."""
    import os
    ref = np.load(os.path.join(os.path.dirname(__file__), '..', '..', 'data',
                               'mx_rnn_lstmp_expected.npz'))
    L, bi, H, P = (int(v) for v in ref['%d_config' % k])
    s = ff.sym.RNN(ff.sym.var('data'), state_size=H, num_layers=L, mode='lstm',
                   bidirectional=bool(bi), projection_size=P, state_outputs=True, name='r')
    vals = {n: ff.nd.array(ref['%d_%s' % (k, n[2:] if n.startswith('r_') else n)])
            for n in s.list_arguments()}
    exe = s.bind(ff.cpu(), vals)
    exe.forward(is_train=False)
    for name, out in zip(['output', 'state_output', 'statecell_output'], exe.outputs):
        np.testing.assert_allclose(out.asnumpy(), ref['%d_%s' % (k, name)], rtol=1e-5,
                                   atol=1e-6, err_msg=name)


def test_per_step_gemms_run_on_one_numba_blas_thread_and_restore():
    from ffnumba.blas_threads import _BLAS_LIMITED, _numba_blas, numba_blas_single_thread
    fns = _numba_blas()
    assert fns is not None, 'numba np.dot calls scipy\'s OpenBLAS; it must be found'
    get, put = fns
    before, cap = get(), _BLAS_LIMITED['threads']
    _BLAS_LIMITED['threads'] = None      # an earlier Module may have capped BLAS (see below)
    try:
        put(2)
        with numba_blas_single_thread():
            assert get() == 1
            with numba_blas_single_thread():     # nested: no-op
                assert get() == 1
            assert get() == 1
        assert get() == 2
        _BLAS_LIMITED['threads'] = 1         # a process-wide cap wins over the restore
        with numba_blas_single_thread():
            assert get() == 1
        assert get() == 1
    finally:
        _BLAS_LIMITED['threads'] = cap
        put(before)
