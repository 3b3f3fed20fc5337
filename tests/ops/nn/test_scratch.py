"""Kernel scratch (``_im2col.buffer``): one per-thread pool that the nodes of a graph share.

No kernel may rely on what its scratch held before the call (another node
has used it since): poisoning every pooled array with NaN between two passes
leaves the results bit-identical. Another thread gets a pool of its own.
"""
import threading

import numpy as np

import ffnumba as ff
from ffnumba.ops.nn import _im2col as ic


def _net():
    x = ff.sym.Variable('data')
    # Winograd (16 channels, 8x8), im2col (stride 2), depthwise, then pooling and a dense layer
    x = ff.sym.Convolution(x, num_filter=16, kernel=(3, 3), pad=(1, 1), name='wino')
    x = ff.sym.Convolution(x, num_filter=8, kernel=(3, 3), stride=(2, 2), pad=(1, 1), name='s2')
    x = ff.sym.Convolution(x, num_filter=8, kernel=(3, 3), pad=(1, 1), num_group=8, name='dw')
    x = ff.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type='max')
    return ff.sym.FullyConnected(ff.sym.Flatten(x), num_hidden=5, name='fc')


def _run(exe, rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    for arr in exe.arg_dict.values():
        arr[:] = rng.uniform(-1, 1, arr.shape).astype(np.float32)
    exe.forward(is_train=True)
    exe.backward(ff.nd.ones(exe.outputs[0].shape))
    return [exe.outputs[0].asnumpy()] + [g.asnumpy() for g in exe.grad_arrays]


def _poison():
    for buf in ic._SCRATCH.pool.values():
        buf[:] = np.nan if buf.dtype.kind == 'f' else -1


def test_nodes_share_scratch_and_never_read_what_it_held():
    exe = _net().simple_bind(ff.cpu(), data=(4, 16, 8, 8))
    first = _run(exe)
    assert ('col', '<f4') in ic._SCRATCH.pool        # the im2col layer's, in this thread's pool
    _poison()
    again = _run(exe)
    for a, b in zip(first, again):
        assert np.isfinite(b).all()
        np.testing.assert_array_equal(a, b)


def test_each_thread_has_its_own_pool():
    exe = _net().simple_bind(ff.cpu(), data=(4, 16, 8, 8))
    here = _run(exe)
    mine = ic._SCRATCH.pool
    out = {}

    def other():
        out['res'] = _run(_net().simple_bind(ff.cpu(), data=(4, 16, 8, 8)))
        out['pool'] = ic._SCRATCH.pool

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert out['pool'] is not mine
    for a, b in zip(here, out['res']):
        np.testing.assert_array_equal(a, b)


def test_without_state_a_new_array():
    a = ic.buffer(None, 'col', 5, np.float32)
    b = ic.buffer(None, 'col', 5, np.float32)
    assert a.shape == (5,) and a is not b and not np.shares_memory(a, b)
