"""MXNet's batch-splitting rule and the executor group's per-device binding."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba as ff
import ffnumba.symbol as sym
from ffnumba.io import DataDesc
from ffnumba.module.executor_group import DataParallelExecutorGroup, _split_input_slice
from ffnumba.model import _split_input_slice as model_split


@pytest.mark.parametrize('batch, work, expected', [
    (10, [1, 1, 1], [(0, 3), (3, 6), (6, 10)]),
    (5, [1, 1], [(0, 2), (2, 5)]),
    (7, [1, 2], [(0, 2), (2, 7)]),
    (11, [1, 1, 1, 1], [(0, 3), (3, 6), (6, 9), (9, 11)]),
    (8, [1, 3], [(0, 2), (2, 8)]),
])
def test_split_matches_mxnet_examples(batch, work, expected):
    assert [(s.start, s.stop) for s in _split_input_slice(batch, work)] == expected
    assert model_split is _split_input_slice


@given(batch=st.integers(1, 300), work=st.lists(st.integers(1, 5), min_size=1, max_size=5))
def test_split_covers_batch_consecutively(batch, work):
    try:
        slices = _split_input_slice(batch, work)
    except ValueError as e:
        assert 'Too many slices' in str(e)
        return
    assert slices[0].start == 0 and slices[-1].stop == batch
    for a, b in zip(slices, slices[1:]):
        assert a.stop == b.start
    assert all(s.stop > s.start for s in slices)


def test_split_empty_slice_raises():
    with pytest.raises(ValueError, match='Too many slices'):
        _split_input_slice(2, [1, 1, 1])


def _net():
    data = sym.Variable('data')
    fc = sym.FullyConnected(data, num_hidden=4, name='fc1')
    return sym.SoftmaxOutput(fc, name='softmax')


def test_group_binds_one_executor_per_context_with_grad_req():
    net = _net()
    g = DataParallelExecutorGroup(
        net, [ff.cpu(0), ff.cpu(1)], [1, 3], [DataDesc('data', (8, 5))],
        [DataDesc('softmax_label', (8,))], ['fc1_weight', 'fc1_bias'], for_training=True,
        inputs_need_grad=False, fixed_param_names=['fc1_bias'])
    assert len(g.execs) == 2 and g.batch_size == 8
    assert [e.arg_dict['data'].shape for e in g.execs] == [(2, 5), (6, 5)]
    req = g.execs[0].grad_req
    assert req['fc1_weight'] == 'write' and req['fc1_bias'] == 'null'
    assert req['data'] == 'null' and req['softmax_label'] == 'null'
    # separate parameter copies per device
    assert g.param_arrays[0][0] is not g.param_arrays[0][1]
    assert g.get_output_shapes() == [('softmax_output', (8, 4))]


def test_group_rejects_inconsistent_batch_sizes():
    net = sym.elemwise_add(sym.Variable('a'), sym.Variable('b'))
    with pytest.raises(ff.base.ShapeError, match='same batch size'):
        DataParallelExecutorGroup(net, [ff.cpu(0)], [1], [DataDesc('a', (4, 2)),
                                                          DataDesc('b', (3, 2))],
                                  None, [], for_training=False, inputs_need_grad=False)


def test_group_forward_merges_outputs_in_order():
    net = sym.Variable('data') * 2
    g = DataParallelExecutorGroup(net, [ff.cpu(0), ff.cpu(1), ff.cpu(2)], [1, 1, 1],
                                  [DataDesc('data', (7, 2))], None, [], for_training=False,
                                  inputs_need_grad=False)
    x = np.arange(14, dtype='float32').reshape(7, 2)
    g.forward(ff.io.DataBatch([ff.nd.array(x)]), is_train=False)
    np.testing.assert_array_equal(g.get_outputs()[0].asnumpy(), 2 * x)
    parts = g.get_outputs(merge_multi_context=False)[0]
    assert [p.shape[0] for p in parts] == [2, 2, 3]


def test_gpu_context_without_cuda_is_refused():
    if ff.num_gpus() > 0:
        return
    with pytest.raises(ff.FFError, match='CUDA'):
        DataParallelExecutorGroup(_net(), [ff.gpu(0)], [1], [DataDesc('data', (4, 5))],
                                  [DataDesc('softmax_label', (4,))], ['fc1_weight', 'fc1_bias'],
                                  for_training=True, inputs_need_grad=False)
