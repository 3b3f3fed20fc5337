"""GPU Convolution / Deconvolution / FullyConnected through im2col + the tiled GEMM.

Marked ``gpu`` (CUDA simulator or a real GPU): chunked column buffers, 3-D
kernels, the depthwise direct path, and that the GEMM really runs.
"""
import pytest

from ffnumba.ops import gemm_cuda
from ffnumba.ops.nn import _conv_gemm_cuda as cg

from test_convolution import gpu_matches_cpu

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize('op, p, data, col_max', [
    # one sample per chunk (col_max below one sample's columns)
    ('Convolution', dict(kernel=(2, 2, 2), num_filter=4, pad=(1, 0, 1), stride=(1, 2, 1),
                         num_group=2), (2, 2, 3, 3, 2), 1),
    # chunks of two samples, the last one short
    ('Convolution', dict(kernel=(3, 3), num_filter=3, pad=(1, 1)), (3, 2, 3, 4), 2 * 18 * 12),
    ('Deconvolution', dict(kernel=(2, 3), num_filter=2, stride=(2, 1), no_bias=False),
     (3, 2, 2, 3), 1),
])
def test_chunked_column_buffer(op, p, data, col_max, monkeypatch):
    monkeypatch.setattr(cg, 'COL_MAX_ELEMS', col_max)
    gpu_matches_cpu(op, p, [data], monkeypatch)


def test_depthwise_keeps_the_direct_kernels(monkeypatch):
    gpu_matches_cpu('Convolution', dict(kernel=(3, 3), num_filter=3, num_group=3, pad=(1, 1)),
                    [(2, 3, 4, 4)], monkeypatch)


@pytest.mark.parametrize('op, p, data', [
    ('Convolution', dict(kernel=(2, 2), num_filter=2), (1, 2, 3, 3)),
    ('Deconvolution', dict(kernel=(2,), num_filter=2), (1, 2, 3)),
    ('FullyConnected', dict(num_hidden=3), (2, 4)),
])
def test_gemm_runs_forward_and_backward(op, p, data, monkeypatch):
    calls = []
    real = gemm_cuda.gemm

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(gemm_cuda, 'gemm', spy)
    gpu_matches_cpu(op, p, [data], monkeypatch)
    # forward + (data grad, weight grad) for write and add
    assert len(calls) >= 6


@pytest.mark.parametrize('op, p, data', [
    ('Convolution', dict(kernel=(2, 2), num_filter=2), (0, 2, 3, 3)),
    ('Convolution', dict(kernel=(2,), num_filter=3, pad=(1,)), (2, 0, 3)),
    ('Deconvolution', dict(kernel=(2,), num_filter=2, no_bias=False), (0, 2, 3)),
])
def test_empty_batch_or_channels(op, p, data, monkeypatch):
    """Sums over no samples or channels: weight gradients 0 (write) and the bias alone."""
    gpu_matches_cpu(op, p, [data], monkeypatch)
