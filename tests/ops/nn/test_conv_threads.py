"""Convolution's work split over two threads: by input channels, and the split sums and
filter transforms of the weight gradient (``ops.nn._conv_par``)."""
import numpy as np
import pytest

from ffnumba.ops.registry import OpContext, get_op

from conv_reference import conv_backward


def _run(p, arrays, head):
    """Forward and backward through the registry's CPU kernels; the gradients."""
    op = get_op('Convolution')
    params = op.parse_params(p)
    ins, outs, _ = op.infer_shape(params, [a.shape for a in arrays], [], [None])
    y = np.empty(outs[0], arrays[0].dtype)
    ctx = OpContext(True, None, {}, np.random.default_rng(0), 'conv')
    op.forward['cpu'](ctx, params, arrays, [y], [])
    grads = [np.zeros_like(a) for a in arrays]
    op.backward['cpu'](ctx, params, [head], arrays, [y], grads, ['write'] * len(arrays), [])
    return grads


@pytest.mark.parametrize('kernel, stride, pad, data, F, nbc', [
    ((3, 3), (1, 1), (1, 1), (5, 6, 4, 3), 4, 5),      # the whole batch in one chunk
    ((3, 3), (2, 1), (1, 0), (5, 7, 6, 5), 3, 2),      # chunks: dw added from the part
    ((1, 1), (1, 1), (0, 0), (3, 5, 4, 4), 6, 3),      # pointwise: plane copies
    ((2,), (1,), (1,), (4, 9, 7), 2, 4),                # 1-D
])
@pytest.mark.parametrize('nt', [2, 3])
def test_channel_split_driver_matches_serial(kernel, stride, pad, data, F, nbc, nt):
    """The backward split by input channels (own dx rows and dw columns per thread) = serial."""
    from ffnumba.ops.nn import _conv_par as cp, _im2col as ic
    from ffnumba.ops.nn.convolution import conv_output_size
    rng = np.random.default_rng(12)
    C, K = data[1], int(np.prod(kernel))
    out = tuple(conv_output_size(i, k, s, q, 1)
                for i, k, s, q in zip(data[2:], kernel, stride, pad))
    g = ic.geometry(kernel, stride, pad, (), out)
    x5 = ic.as5d(data)
    P = int(np.prod(out))
    x = rng.uniform(-1, 1, data)
    w2 = rng.uniform(-1, 1, (F, C * K))
    dy = rng.uniform(-1, 1, (data[0], F, P))
    rmax = -(-C // nt) * K
    col = np.full(nt * rmax * nbc * P, np.nan)
    tmp = np.full(nt * F * nbc * P, np.nan)
    for mode_dx, mode_dw in ((1, 1), (2, 2), (0, 1), (2, 1)):
        init_x, init_w = rng.uniform(-1, 1, x.size), rng.uniform(-1, 1, w2.shape)
        dx_par, dw_par, dx_ser, dw_ser = init_x.copy(), init_w.copy(), init_x.copy(), init_w.copy()
        cp.conv_backward_channels(x.reshape(-1), x5, w2, dy, dx_par, dw_par, mode_dx, mode_dw,
                                  col, tmp, nbc, g, nt)
        ic.conv_backward(x.reshape(-1), x5, w2[None], dy, dx_ser, dw_ser[None], mode_dx,
                         mode_dw, np.empty(C * K * nbc * P), np.empty(F * nbc * P),
                         np.empty(F * C * K), nbc, g)
        np.testing.assert_allclose(dx_par, dx_ser, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(dw_par, dw_ser, rtol=1e-12, atol=1e-12)
        # both run _im2col.backward_range (on a channel range / every channel): numpy's too
        ref_dx, ref_dw, _ = conv_backward(x, w2.reshape((F, C) + kernel), dy.reshape(
            (data[0], F) + out), kernel, stride, pad)
        ex_dx = ref_dx.reshape(-1) + (init_x if mode_dx == 2 else 0) if mode_dx else init_x
        ex_dw = ref_dw.reshape(w2.shape) + (init_w if mode_dw == 2 else 0)
        np.testing.assert_allclose(dx_par, ex_dx, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(dw_par, ex_dw, rtol=1e-10, atol=1e-10)


def test_deep_layer_backward_splits_by_channels(monkeypatch, threads):
    """Two threads on a layer with a small output plane and a large weight (VGG's deep
    layers) take the channel split; its gradients match numpy's, and one thread's to float32
    rounding: one thread accumulates ``dw^T = col dy^T`` (``F < C*K``), a channel range ``dw =
    dy col^T``, and a BLAS may round the two orientations differently (OpenBLAS' Haswell
    kernels do, on 3.8% of this layer's dw by up to 2.4e-4 relative)."""
    from ffnumba.ops.nn import _conv_par as cp
    calls = []
    real = cp.conv_backward_channels
    monkeypatch.setattr(cp, 'conv_backward_channels',
                        lambda *a: calls.append(a[-1]) or real(*a))
    # stride 2: no Winograd; dw of 128 x 64*9 elements is above _conv_par.SMALL_DW
    p = dict(kernel=(3, 3), num_filter=128, pad=(1, 1), stride=(2, 2))
    rng = np.random.default_rng(13)
    vals = [rng.uniform(-1, 1, s).astype(np.float32)
            for s in ((4, 64, 4, 4), (128, 64, 3, 3), (128,))]
    head = rng.uniform(-1, 1, (4, 128, 2, 2)).astype(np.float32)
    results = {}
    for n in (1, 2):
        threads(n)
        results[n] = _run(p, vals, head)
    assert calls == [2]
    exp = conv_backward(*[v.astype(np.float64) for v in vals[:2]], head.astype(np.float64),
                        (3, 3), (2, 2), (1, 1), (), 1)
    for one, two, e in zip(results[1], results[2], exp):
        np.testing.assert_allclose(two, e, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(one, two, rtol=0, atol=4 * np.finfo(np.float32).eps *
                                   np.abs(e).max())


@pytest.mark.parametrize('write', [True, False])
@pytest.mark.parametrize('t0', [0, 1])
def test_sum_parts_adds_in_part_order(threads, write, t0):
    """The split sum of per-thread parts (2 threads, columns of a padded layout) = summing
    them one after another; padding columns untouched."""
    from ffnumba.ops.nn import _conv_par as cp
    threads(2)
    rng = np.random.default_rng(3)
    nt, R, L, ncol = 3, 5, 70000, 69990          # 5 * 69990 elements: split in two
    parts = rng.standard_normal((nt, R, L)).astype(np.float32)
    dst = rng.standard_normal((R, L)).astype(np.float32)
    exp = dst.copy()
    if write:
        exp[:, :ncol] = parts[t0, :, :ncol]
    for t in range(t0 + 1 if write else t0, nt):
        exp[:, :ncol] += parts[t, :, :ncol]
    cp.sum_parts(parts, t0, dst, ncol, write)
    np.testing.assert_array_equal(dst, exp)


@pytest.mark.parametrize('m', [2, 4])
def test_filter_transforms_split_by_filters(threads, m):
    """Winograd's filter transform and its transpose cut over 2 threads = one call."""
    from ffnumba.ops.nn import _conv_par as cp, _winograd as wg, _winograd4 as w4
    ft, ftt = (w4.filter_transform, w4.filter_transform_t) if m == 4 else \
        (wg.filter_transform, wg.filter_transform_t)
    rng = np.random.default_rng(4)
    F, C = 160, 64                                # 160 filters: over 2 * 64 split
    a2 = (m + 2) ** 2
    us = wg.stride(F * C)
    w = rng.standard_normal((F, C, 3, 3)).astype(np.float32)
    u1, u2 = np.zeros(a2 * us, np.float32), np.zeros(a2 * us, np.float32)
    seen = []
    threads(1)
    ft(w, u1, us)
    threads(2)
    cp.transform_filters(lambda *a: seen.append(a[0].shape[0]) or ft(*a), w, u2, us)
    assert sum(seen) == F and len(seen) > 1
    np.testing.assert_array_equal(u1, u2)
    du = rng.standard_normal(a2 * us).astype(np.float32)
    for add in (False, True):
        init = rng.standard_normal(w.shape).astype(np.float32)
        d1, d2 = init.copy(), init.copy()
        ftt(du, us, d1, add)
        cp.transform_filters_t(ftt, du, us, d2, add)
        np.testing.assert_array_equal(d1, d2)


def test_small_layers_rule(monkeypatch):
    """Which passes run on one thread when split over two (batch 32): forwards under
    SPLIT_MIN_FLOPS of work, counting only the pairs the taps reach where they run;
    backwards only by the taps (not with ``FFNUMBA_CONV_TAPS=0``); nothing on one thread
    anyway."""
    from ffnumba.ops.nn import convolution as conv
    monkeypatch.setattr(conv, 'SPLIT_MIN_FLOPS', 24_000_000)
    op = get_op('Convolution')
    one = op.parse_params(dict(kernel=(1, 1), num_filter=16))
    five = op.parse_params(dict(kernel=(5, 5), num_filter=128, pad=(2, 2)))
    # 1x1 480 -> 16 of 4x4: 2*32*16*480*16 = 7.9 MFLOP; 512 -> 64 filters would be 4x that
    small, big = (32, 480, 4, 4), (32, 2048, 4, 4)
    # 5x5 32 -> 128 on 2x2: 100 pairs of which 16 reach the input: 4.2 MFLOP, not 26
    taps = (32, 32, 2, 2)
    for nt in (1, 2):
        monkeypatch.setattr(conv.cp, 'split_threads', lambda n, nt=nt: min(n, nt))
        split = nt == 2
        assert conv._small_pass(one, small, (32, 16, 4, 4)) is split
        assert conv._small_pass(one, big, (32, 16, 4, 4)) is False
        assert conv._small_pass(one, small, (32, 16, 4, 4), 2) is False     # im2col backward
        assert conv._small_pass(five, taps, (32, 128, 2, 2)) is split
        assert conv._small_pass(five, taps, (32, 128, 2, 2), 2) is split
        assert conv._small_pass(five, (32, 32, 4, 4), (32, 128, 4, 4), 2) is False   # 103 MF
    assert conv.SPLIT_MIN_FLOPS > 2 * 2 * 32 * 128 * 32 * 16     # the taps' backward above
    # taps off: im2col runs the 5x5 layer, all 100 pairs count (26 MFLOP), backward splits
    monkeypatch.setenv('FFNUMBA_CONV_TAPS', '0')
    assert conv._small_pass(five, taps, (32, 128, 2, 2)) is False
    assert conv._small_pass(five, taps, (32, 128, 2, 2), 2) is False


@pytest.mark.parametrize('kernel, pad, hw', [((1, 1), (0, 0), 4), ((5, 5), (2, 2), 2)])
def test_small_layer_on_two_threads_is_one_threads(monkeypatch, threads, kernel, pad, hw):
    """On two threads a forward (and a backward by the taps) under the threshold runs no
    split kernel and gives one thread's results bit for bit; the threads' setting is back
    afterwards. The 1x1 layer's backward (im2col) still splits (other sums: not compared)."""
    from ffnumba import thread_pool
    from ffnumba.ops.nn import _conv_par as cp, _conv_taps as tp, convolution as conv
    monkeypatch.setattr(conv, 'SPLIT_MIN_FLOPS', 24_000_000)
    splits = []
    real = cp.run_split
    for mod in (cp, tp):
        monkeypatch.setattr(mod, 'run_split', lambda part, nt: splits.append(nt) or
                            real(part, nt))
    rng = np.random.default_rng(5)
    vals = [rng.uniform(-1, 1, s).astype(np.float32)
            for s in ((32, 32, hw, hw), (64, 32) + kernel, (64,))]
    head = rng.uniform(-1, 1, (32, 64, hw, hw)).astype(np.float32)
    op = get_op('Convolution')
    params = op.parse_params(dict(kernel=kernel, num_filter=64, pad=pad, no_bias=True))
    results = {}
    for n in (1, 2):
        threads(n)
        ctx = OpContext(True, None, {}, np.random.default_rng(0), 'conv')
        y = np.empty(head.shape, np.float32)
        op.forward['cpu'](ctx, params, vals[:2], [y], [])
        forward_splits = len(splits)
        grads = [np.zeros_like(a) for a in vals[:2]]
        op.backward['cpu'](ctx, params, [head], vals[:2], [y], grads, ['write'] * 2, [])
        results[n] = [y] + grads
        assert thread_pool.kernel_threads(32) == n
        assert forward_splits == 0
        assert (len(splits) > 0) is (n == 2 and kernel == (1, 1)), splits
        del splits[:]
    for one, two in zip(results[1], results[2] if kernel != (1, 1) else results[2][:1]):
        np.testing.assert_array_equal(one, two)
    monkeypatch.setattr(conv, 'SPLIT_MIN_FLOPS', 0)      # the same layer split: it splits
    op.forward['cpu'](ctx, params, vals[:2], [y], [])
    assert splits and splits[0] == 2
