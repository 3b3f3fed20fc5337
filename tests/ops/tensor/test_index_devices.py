"""The index and shape ops on both devices with grad_req='add', and their other dtypes.

The GPU half runs under numba's CUDA simulator (tests/test_cuda_simulator.py)
or on a real GPU with ``-m gpu``. Each case calls the registry's compute
functions directly: forward, then backward with grad_req='add' onto random
initial gradients, on the CPU and on the GPU; every output and gradient must
agree.
"""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba.ops.registry import get_op

P4 = (0, 0, 0, 0, 1, 2, 2, 1)

# (op, params, input shapes, integer-valued inputs {position: (low, high)})
CASES = [
    ('slice', dict(begin=(None, 1), end=(None, None), step=(-1, 2)), [(4, 5)], {}),
    ('slice_like', dict(axes=(0,)), [(4, 3), (2, 3)], {}),
    ('_split_v2', dict(indices=(0, 1, 3), axis=1), [(2, 5)], {}),
    ('tile', dict(reps=(2, 1, 3)), [(2, 3)], {}),
    ('repeat', dict(repeats=2, axis=0), [(2, 3)], {}),
    ('repeat', dict(repeats=3), [(2, 2)], {}),
    ('broadcast_to', dict(shape=(3, 0, 4)), [(1, 2, 1)], {}),
    ('broadcast_axis', dict(axis=(0,), size=(3,)), [(1, 2)], {}),
    ('broadcast_like', {}, [(1, 3), (4, 3)], {}),
    ('reverse', dict(axis=(0, 1)), [(3, 4)], {}),
    ('SwapAxis', dict(dim1=0, dim2=2), [(2, 3, 4)], {}),
    ('Pad', dict(mode='constant', pad_width=P4, constant_value=0.5), [(1, 2, 3, 3)], {}),
    ('Pad', dict(mode='edge', pad_width=P4), [(1, 2, 3, 3)], {}),
    ('Pad', dict(mode='reflect', pad_width=P4), [(1, 2, 3, 3)], {}),
    ('Crop', dict(num_args=1, offset=(1, 0), h_w=(2, 2)), [(2, 1, 4, 3)], {}),
    ('take', dict(axis=1, mode='wrap'), [(2, 4, 3), (2, 3)], {1: (-5, 9)}),
    ('take', {}, [(4, 3), (6,)], {1: (-2, 6)}),
    ('pick', dict(axis=1, keepdims=True), [(2, 4, 3), (2, 3)], {1: (-1, 5)}),
    ('batch_take', {}, [(5, 3), (5,)], {1: (-1, 4)}),
    ('one_hot', dict(depth=4), [(3, 2)], {0: (-1, 5)}),
    ('argmax', dict(axis=1), [(3, 5, 2)], {}),
    ('argmin', {}, [(3, 4)], {}),
    ('argmax_channel', {}, [(3, 4)], {}),
    ('topk', dict(k=2, ret_typ='both', axis=0), [(5, 3)], {}),
    ('topk', dict(k=3, ret_typ='mask', is_ascend=True), [(2, 5)], {}),
    ('topk', dict(k=2, ret_typ='value', axis=None), [(3, 4)], {}),
    ('sort', dict(is_ascend=False), [(3, 6)], {}),
    ('argsort', dict(axis=0), [(4, 3)], {}),
    ('squeeze', {}, [(2, 1, 3)], {}),
    ('reshape_like', {}, [(2, 3), (3, 2)], {}),
    ('_copy', {}, [(2, 3)], {}),
    ('add_n', dict(num_args=3), [(2, 3)] * 3, {}),
    ('shape_array', {}, [(2, 3, 4)], {}),
    ('size_array', {}, [(2, 3, 4)], {}),
]


def _arrays(shapes, ints, rng):
    out = []
    for i, s in enumerate(shapes):
        if i in ints:
            lo, hi = ints[i]
            out.append(rng.integers(lo, hi, s).astype(np.float64))
        else:
            out.append(rng.uniform(-1, 1, s))
    return out


def _run(dev, opdef, p, arrays, outs, heads, init):
    from numba import cuda
    fwd, bwd = opdef.compute(dev)
    _, otypes, _ = opdef.infer_type(p, [a.dtype for a in arrays], [])
    put = (lambda a: a.copy()) if dev == 'cpu' else cuda.to_device
    get = (lambda a: a) if dev == 'cpu' else (lambda a: a.copy_to_host())
    xs = [put(a) for a in arrays]
    os_ = [put(np.zeros(s, t)) for s, t in zip(outs, otypes)]
    gs, hs = [put(g) for g in init], [put(h.astype(t)) for h, t in zip(heads, otypes)]
    fwd(None, p, xs, os_, [])
    bwd(None, p, hs, xs, os_, gs, ['add'] * len(arrays), [])
    return [get(o) for o in os_], [get(g) for g in gs]


@pytest.mark.gpu
@pytest.mark.parametrize('op, params, shapes, ints', CASES)
def test_gpu_matches_cpu_with_grad_req_add(op, params, shapes, ints):
    rng = np.random.default_rng(3)
    opdef = get_op(op)
    p = opdef.parse_params(params)
    arrays = _arrays(shapes, ints, rng)
    _, outs, _ = opdef.infer_shape(p, [a.shape for a in arrays], [], [None])
    heads = [rng.standard_normal(s) for s in outs]
    init = [rng.standard_normal(a.shape) for a in arrays]
    cpu = _run('cpu', opdef, p, arrays, outs, heads, init)
    gpu = _run('gpu', opdef, p, arrays, outs, heads, init)
    for a, b in zip(cpu[0] + cpu[1], gpu[0] + gpu[1]):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


def test_every_case_op_is_in_this_table():
    """The table covers every operator of the index and shape families."""
    mine = {'slice', 'slice_like', '_split_v2', 'tile', 'repeat', 'broadcast_to',
            'broadcast_axis', 'broadcast_like', 'reverse', 'SwapAxis', 'Pad', 'Crop', 'take',
            'pick', 'batch_take', 'one_hot', 'argmax', 'argmin', 'argmax_channel', 'topk',
            'sort', 'argsort', 'squeeze', 'reshape_like', '_copy', 'add_n', 'shape_array',
            'size_array'}
    assert {get_op(c[0]).name for c in CASES} == mine


# ------------------------------------------------------------------ other dtypes
@pytest.mark.parametrize('dtype', ['float16', 'int32', 'int64', 'uint8'])
@pytest.mark.parametrize('call, expect', [
    (lambda x: ff.nd.slice(x, begin=(None, 1), end=(None, None), step=(1, 2)),
     lambda a: a[:, 1::2]),
    (lambda x: ff.nd.tile(x, reps=(2, 1)), lambda a: np.tile(a, (2, 1))),
    (lambda x: ff.nd.repeat(x, repeats=2, axis=1), lambda a: np.repeat(a, 2, 1)),
    (lambda x: ff.nd.flip(x, axis=0), lambda a: a[::-1]),
    (lambda x: ff.nd.swapaxes(x, dim1=0, dim2=1), lambda a: a.T),
    (lambda x: ff.nd.broadcast_to(x[0:1], shape=(3, 0)), lambda a: np.broadcast_to(a[:1], a.shape)),
    (lambda x: ff.nd.take(x, ff.nd.array([2, 0])), lambda a: a[[2, 0]]),
    (lambda x: ff.nd.pick(x, ff.nd.array([0, 3, 1]), axis=1), lambda a: a[[0, 1, 2], [0, 3, 1]]),
    (lambda x: ff.nd.argmax(x, axis=1), lambda a: np.argmax(a, 1)),
    (lambda x: ff.nd.sort(x, axis=1), lambda a: np.sort(a, 1)),
    (lambda x: ff.nd.topk(x, k=2, ret_typ='value'), lambda a: -np.sort(-a.astype(float), 1)[:, :2]),
    (lambda x: ff.nd.add_n(x, x), lambda a: a + a),
    (lambda x: ff.nd.Pad(x.reshape((1, 1, 3, 4)), mode='edge', pad_width=(0, 0, 0, 0, 1, 1, 1, 1)),
     lambda a: np.pad(a.reshape(1, 1, 3, 4), ((0, 0), (0, 0), (1, 1), (1, 1)), mode='edge')),
])
def test_non_float64_dtypes_forward(dtype, call, expect):
    a = np.array([[3, 1, 4, 1], [5, 9, 2, 6], [5, 3, 5, 8]], dtype=dtype)
    out = call(ff.nd.array(a, dtype=dtype))
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out.asnumpy().astype(np.float64),
                                  np.asarray(expect(a)).astype(np.float64))


def test_float16_backward_through_gather_and_pick():
    x = ff.sym.Variable('x')
    for s in [ff.sym.tile(x, reps=(2, 2)), ff.sym.pick(x, ff.sym.Variable('i'), axis=1),
              ff.sym.sort(x, axis=1)]:
        shapes = dict(x=(3, 4), i=(3,)) if 'i' in s.list_arguments() else dict(x=(3, 4))
        ex16 = s.simple_bind(ff.cpu(), type_dict={n: 'float16' for n in shapes}, **shapes)
        ex32 = s.simple_bind(ff.cpu(), **shapes)
        for ex in (ex16, ex32):
            ex.arg_dict['x'][:] = np.arange(12).reshape(3, 4) / 8.0
            if 'i' in shapes:
                ex.arg_dict['i'][:] = np.array([0, 3, 1])
            ex.forward(is_train=True)
            ex.backward(ff.nd.ones(ex.outputs[0].shape, dtype=ex.outputs[0].dtype))
        assert ex16.grad_dict['x'].dtype == np.float16
        np.testing.assert_allclose(ex16.grad_dict['x'].asnumpy(), ex32.grad_dict['x'].asnumpy())
        np.testing.assert_allclose(ex16.outputs[0].asnumpy(), ex32.outputs[0].asnumpy())


# ------------------------------------------------------------------ zero-size dims
ZERO = [
    ('slice', dict(begin=(None, 1), end=(None, 3)), [(0, 4)]),
    ('slice_like', {}, [(0, 3), (0, 2)]),
    ('_split_v2', dict(sections=2, axis=1), [(0, 4)]),
    ('tile', dict(reps=(2, 3)), [(0, 2)]),
    ('repeat', dict(repeats=2, axis=1), [(0, 2)]),
    ('broadcast_to', dict(shape=(0, 3)), [(0, 1)]),
    ('broadcast_axis', dict(axis=(1,), size=(3,)), [(0, 1)]),
    ('broadcast_like', {}, [(0, 1), (0, 4)]),
    ('reverse', dict(axis=(0,)), [(0, 3)]),
    ('SwapAxis', dict(dim1=0, dim2=1), [(0, 3)]),
    ('Pad', dict(mode='reflect', pad_width=P4), [(0, 2, 3, 3)]),
    ('Crop', dict(num_args=1, h_w=(2, 2)), [(0, 1, 3, 3)]),
    ('take', {}, [(3, 0), (2,)]),
    ('pick', dict(axis=1), [(0, 3), (0,)]),
    ('batch_take', {}, [(0, 3), (0,)]),
    ('one_hot', dict(depth=3), [(0, 2)]),
    ('argmax', dict(axis=1), [(0, 3)]),
    ('topk', dict(k=2, ret_typ='both'), [(0, 3)]),
    ('sort', {}, [(0, 3)]),
    ('argsort', dict(axis=0), [(0, 3)]),
    ('squeeze', {}, [(0, 1)]),
    ('reshape_like', {}, [(0, 3), (3, 0)]),
    ('_copy', {}, [(0, 3)]),
    ('add_n', dict(num_args=2), [(0, 3), (0, 3)]),
    ('shape_array', {}, [(0, 3)]),
    ('size_array', {}, [(0, 3)]),
]


def _zero_size_run(dev):
    from ffnumba.context import cpu, gpu
    ctx = cpu() if dev == 'cpu' else gpu(0)
    for op, params, shapes in ZERO:
        names = ['in%d' % i for i in range(len(shapes))]
        s = getattr(ff.sym, op)(*[ff.sym.Variable(n) for n in names], **params)
        exe = s.simple_bind(ctx, **dict(zip(s.list_arguments(), shapes)))
        outs = exe.forward(is_train=True)
        exe.backward([ff.nd.zeros(o.shape, ctx=ctx, dtype=o.dtype) for o in outs])
        for g in exe.grad_dict.values():
            assert g.size == 0 or not g.asnumpy().any(), op


def test_zero_size_dims_do_not_crash():
    _zero_size_run('cpu')


@pytest.mark.gpu
def test_zero_size_dims_do_not_crash_on_gpu():
    _zero_size_run('gpu')


NAMES = ['argmax', 'argmin', 'argmax_channel', 'slice', 'crop', 'slice_like', 'take', 'pick',
         'choose_element_0index', 'batch_take', 'one_hot', 'topk', 'sort', 'argsort', 'tile',
         'repeat', 'squeeze', 'SwapAxis', 'swapaxes', 'flip', 'reverse', 'broadcast_to',
         'broadcast_axis', 'broadcast_axes', 'broadcast_like', 'reshape_like', 'shape_array',
         'size_array', 'identity', '_copy', 'ElementWiseSum', 'add_n', 'split_v2', '_split_v2',
         'Pad', 'pad', 'Crop']


@pytest.mark.parametrize('name', NAMES)
def test_symbolic_and_imperative_functions_exist(name):
    assert callable(getattr(ff.sym, name)) and callable(getattr(ff.nd, name))
    assert getattr(ff.nd, name).__doc__ and getattr(ff.sym, name).__doc__


@pytest.mark.gpu
@pytest.mark.parametrize('op, params', [
    ('topk', dict(k=2, ret_typ='both')), ('topk', dict(k=3, ret_typ='mask')),
    ('sort', dict(is_ascend=False)), ('argsort', {})])
def test_gpu_long_rows_sort_on_the_host(monkeypatch, op, params):
    from ffnumba.ops.tensor import ordering
    monkeypatch.setattr(ordering, 'GPU_RANK_MAX', 3)       # rows of 6 take the host path
    rng = np.random.default_rng(5)
    opdef = get_op(op)
    p = opdef.parse_params(params)
    arrays = [rng.uniform(-1, 1, (4, 6))]
    _, outs, _ = opdef.infer_shape(p, [(4, 6)], [], [None])
    heads = [rng.standard_normal(s) for s in outs]
    init = [rng.standard_normal((4, 6))]
    cpu = _run('cpu', opdef, p, arrays, outs, heads, init)
    gpu = _run('gpu', opdef, p, arrays, outs, heads, init)
    for a, b in zip(cpu[0] + cpu[1], gpu[0] + gpu[1]):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)
