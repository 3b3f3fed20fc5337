"""Pointwise forwards with a small weight run one GEMM per sample on its own data
(``convolution.SMALL_POINTWISE_WEIGHT``), on planes of any size."""
import numpy as np
import pytest

from ffnumba.ops.nn import _im2col as ic
from ffnumba.ops.nn import convolution as conv_mod
from ffnumba.ops.registry import OpContext, get_op

from conv_reference import conv_forward


def _forward(p, vals):
    op = get_op('Convolution')
    params = op.parse_params(p)
    out = op.infer_shape(params, [v.shape for v in vals], [], [None])[1][0]
    y = np.full(out, np.nan, vals[0].dtype)
    op.forward['cpu'](OpContext(False, None, {}, np.random.default_rng(0), 'pw'), params,
                      vals, [y], [])
    return y


@pytest.mark.parametrize('threads', [1, 2])
@pytest.mark.parametrize('dshape, nf, bias', [((5, 24, 4, 5), 40, True), ((3, 7, 2, 2), 9, False),
                                             ((4, 16, 8, 8), 64, True)])
def test_small_weight_pointwise_direct_matches_numpy(monkeypatch, threads, dshape, nf, bias):
    import numba
    if threads > numba.config.NUMBA_NUM_THREADS:
        pytest.skip('numba was started with fewer threads')
    nbmax = []
    real = ic.forward_range

    def spy(*a):
        nbmax.append(a[9])
        return real(*a)
    monkeypatch.setattr(ic, 'forward_range', spy)
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, dshape)
    w = rng.uniform(-1, 1, (nf, dshape[1], 1, 1))
    b = rng.uniform(-1, 1, nf)
    p = dict(kernel=(1, 1), num_filter=nf, no_bias=not bias)
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        y = _forward(p, [x, w, b] if bias else [x, w])
    finally:
        numba.set_num_threads(before)
    if threads == 1:
        assert nbmax == [1]           # direct: one sample per GEMM despite the small plane
    np.testing.assert_allclose(y, conv_forward(x, w, b if bias else None, (1, 1)),
                               rtol=1e-10, atol=1e-12)


def test_large_weight_keeps_gathered_chunks(monkeypatch):
    nbmax = []
    real = ic.forward_range
    monkeypatch.setattr(ic, 'forward_range', lambda *a: nbmax.append(a[9]) or real(*a))
    monkeypatch.setattr(conv_mod, 'SMALL_POINTWISE_WEIGHT', 100)
    import numba
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        x = np.random.default_rng(1).uniform(-1, 1, (6, 12, 4, 4))
        w = np.random.default_rng(2).uniform(-1, 1, (16, 12, 1, 1))
        y = _forward(dict(kernel=(1, 1), num_filter=16, no_bias=True), [x, w])
    finally:
        numba.set_num_threads(before)
    assert nbmax and nbmax[0] > 1
    np.testing.assert_allclose(y, conv_forward(x, w, None, (1, 1)), rtol=1e-10, atol=1e-12)
