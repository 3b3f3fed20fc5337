"""Module error paths through the public API, the exhausted-iterator rule and the BLAS switch."""
import numpy as np
import pytest

import ffnumba as ff
import ffnumba.ndarray as nd
import ffnumba.symbol as sym
from ffnumba import io
from ffnumba.base import FFError, ShapeError
from ffnumba.model import FeedForward
from ffnumba.module import Module
from ffnumba.module import executor_group as eg


def mlp():
    data = sym.Variable('data')
    h = sym.FullyConnected(data, num_hidden=4, name='fc1')
    return sym.SoftmaxOutput(h, name='softmax')


def data_iter(n=12, batch_size=4):
    rng = np.random.RandomState(0)
    return io.NDArrayIter(rng.randn(n, 3).astype('float32'),
                          rng.randint(0, 4, n).astype('float32'), batch_size=batch_size)


def bound(batch_size=4):
    mod = Module(mlp())
    mod.bind(data_shapes=[('data', (batch_size, 3))],
             label_shapes=[('softmax_label', (batch_size,))])
    mod.init_params()
    return mod


# ------------------------------------------------------------- exhausted iterators
def test_fit_on_exhausted_iterator_says_reset():
    it = data_iter()
    for _ in it:
        pass
    with pytest.raises(FFError, match=r'exhausted.*reset\(\)'):
        Module(mlp()).fit(it, num_epoch=1)
    it.reset()
    Module(mlp()).fit(it, num_epoch=2)  # a reset iterator trains, over several epochs


def test_feedforward_on_exhausted_iterator_says_reset():
    it = data_iter()
    for _ in it:
        pass
    model = FeedForward(mlp(), num_epoch=1, numpy_batch_size=4)
    with pytest.raises(FFError, match=r'^FeedForward\.fit: .*exhausted.*reset\(\)'):
        model.fit(it)


def test_feedforward_epoch_size_resets_an_exhausted_iterator_but_not_an_empty_one():
    it = data_iter()
    for _ in it:
        pass
    FeedForward(mlp(), num_epoch=1, epoch_size=2).fit(it)  # resets, as MXNet

    class Empty(io.DataIter):
        provide_data = [io.DataDesc('data', (4, 3))]
        provide_label = [io.DataDesc('softmax_label', (4,))]

        def next(self):
            raise StopIteration

    with pytest.raises(FFError, match='exhausted'):  # no endless reset loop
        FeedForward(mlp(), num_epoch=1, epoch_size=2).fit(Empty(batch_size=4))


# ----------------------------------------------------------------- BLAS switch
class _Caps(list):
    """The caps ``_limit_blas_threads`` was called with; ``.shared`` its ``shared`` flags."""

    def __init__(self):
        super().__init__()
        self.shared = []
        self.contexts = []

    def record(self, n, shared=True, contexts=False):
        self.append(n)
        self.shared.append(shared)
        self.contexts.append(contexts)


@pytest.fixture
def blas_calls(monkeypatch):
    calls = _Caps()
    monkeypatch.setattr(eg, '_limit_blas_threads', calls.record)
    monkeypatch.delenv(eg.BLAS_THREADS_ENV, raising=False)
    return calls


def _fit_two_cpus():
    mod = Module(mlp(), context=[ff.cpu(0), ff.cpu(1)])
    mod.fit(data_iter(), num_epoch=1)


def test_blas_cap_default_is_cores_per_device(blas_calls):
    _fit_two_cpus()
    assert blas_calls == [max(1, eg._cpu_count() // 2)]
    assert blas_calls.shared == [True]      # a share of the cores: prange kernels keep to it
    assert blas_calls.contexts == [True]    # ... while the contexts run side by side


def test_blas_cap_env_zero_leaves_blas_alone(blas_calls, monkeypatch):
    monkeypatch.setenv(eg.BLAS_THREADS_ENV, '0')
    _fit_two_cpus()
    assert blas_calls == []


def test_blas_cap_env_sets_the_cap(blas_calls, monkeypatch):
    monkeypatch.setenv(eg.BLAS_THREADS_ENV, '3')
    _fit_two_cpus()
    assert blas_calls == [3]


def test_blas_cap_single_context_leaves_a_core(blas_calls, monkeypatch):
    for var in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
        monkeypatch.delenv(var, raising=False)
    Module(mlp()).fit(data_iter(), num_epoch=1)
    assert blas_calls == [max(1, eg._cpu_count() - 1)]
    assert blas_calls.shared == [False]     # one context: its convolutions use every thread


def test_single_context_cap_leaves_prange_kernels_all_threads(monkeypatch):
    # the single-context BLAS cap keeps OpenBLAS off a busy core; it must not stop the
    # convolution's own batch split (numba threads, one BLAS thread each)
    from numba import get_num_threads
    from ffnumba import blas_threads
    from ffnumba.ops.nn._conv_par import split_threads
    monkeypatch.setitem(blas_threads._BLAS_LIMITED, 'threads', 1)
    monkeypatch.setitem(blas_threads._BLAS_LIMITED, 'shared', False)
    assert blas_threads.kernel_thread_cap() is None
    assert split_threads(64) == min(64, get_num_threads())
    monkeypatch.setitem(blas_threads._BLAS_LIMITED, 'shared', True)     # two contexts
    monkeypatch.setitem(blas_threads._BLAS_LIMITED, 'contexts_only', True)
    with blas_threads.contexts_running():                                # side by side
        assert blas_threads.kernel_thread_cap() == 1
        assert split_threads(64) == 1


@pytest.mark.parametrize('var', ['OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS'])
def test_blas_cap_single_context_respects_the_users_thread_count(blas_calls, monkeypatch, var):
    for v in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv(var, '2')
    Module(mlp()).fit(data_iter(), num_epoch=1)
    assert blas_calls == []
    monkeypatch.setenv(eg.BLAS_THREADS_ENV, '1')       # ffnumba's own variable still applies
    Module(mlp()).fit(data_iter(), num_epoch=1)
    assert blas_calls == [1]


@pytest.mark.parametrize('value', ['-1', 'two', '1.5'])
def test_blas_cap_env_rejects_bad_values(monkeypatch, value):
    monkeypatch.setenv(eg.BLAS_THREADS_ENV, value)
    with pytest.raises(ff.base.ParamError, match='FFNUMBA_BLAS_THREADS'):
        eg._blas_thread_cap(2)


# ------------------------------------------------------------------ error paths
@pytest.mark.parametrize('shapes, err, match', [
    ([('data', 4)], ShapeError, 'tuple of ints'),
    ([('data', (4, -3))], ShapeError, '>= 0'),
    ([('data', (0, 3))], ShapeError, 'batch size 0'),
    ([('data', ('a', 3))], ShapeError, 'tuple of ints'),
    ('data', ff.base.ParamError, 'DataDesc'),
    ([('x', (4, 3))], ff.base.ParamError, "don't match names"),
])
def test_bind_rejects_bad_shapes_with_named_errors(shapes, err, match):
    with pytest.raises(err, match=match):
        Module(mlp()).bind(data_shapes=shapes, label_shapes=None)


def test_forward_backward_and_update_misuse():
    mod = bound()
    for batch in (None, nd.zeros((4, 3)), io.DataBatch(None, None), io.DataBatch([], [])):
        with pytest.raises(ff.base.ParamError, match='Module.forward'):
            mod.forward(batch)
    mod.backward()  # before any forward, as MXNet allows (it reads the zeroed buffers)
    with pytest.raises(FFError, match='init_optimizer'):
        mod.update()
    pred = Module(mlp())
    pred.bind(data_shapes=[('data', (4, 3))], label_shapes=[('softmax_label', (4,))],
              for_training=False)
    pred.init_params()
    pred.forward(io.DataBatch([nd.zeros((4, 3))], [nd.zeros((4,))]))
    with pytest.raises(FFError, match='for_training=True'):
        pred.backward()


def test_predict_before_bind_or_init():
    it = data_iter()
    with pytest.raises(FFError, match='bind'):
        Module(mlp()).predict(it)
    mod = Module(mlp())
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    with pytest.raises(FFError, match='init_params'):
        mod.predict(it)


def test_set_params_checks_types_and_shapes_and_accepts_numpy():
    mod = bound()
    with pytest.raises(ff.base.ParamError, match='`arg_params` must be a dict'):
        mod.set_params([nd.zeros((4, 3))], {})
    with pytest.raises(ShapeError, match=r'fc1_weight has shape \(4, 5\).*needs \(4, 3\)'):
        mod.set_params({'fc1_weight': nd.zeros((4, 5)), 'fc1_bias': nd.zeros((4,))}, {})
    with pytest.raises(ff.executor.ArgumentError, match='fc1_bias'):
        mod.set_params({'fc1_weight': nd.zeros((4, 3)), 'fc1_bias': 'abc'}, {})
    w = np.arange(12, dtype='float64').reshape(4, 3)
    mod.set_params({'fc1_weight': w, 'fc1_bias': np.ones(4)}, {})
    np.testing.assert_array_equal(mod.get_params()[0]['fc1_weight'].asnumpy(), w)
    mod.set_params({'fc1_weight': 2 * w}, {}, allow_missing=True)
    np.testing.assert_array_equal(mod.get_params()[0]['fc1_weight'].asnumpy(), 2 * w)


def test_fit_argument_errors():
    it = data_iter()
    with pytest.raises(ff.base.ParamError, match='num_epoch'):
        Module(mlp()).fit(it, num_epoch='2')
    with pytest.raises(ff.base.ParamError, match="unexpected keyword argument 'bogus'"):
        Module(mlp()).fit(it, num_epoch=1, optimizer_params={'bogus': 1})
    with pytest.raises(ff.base.ParamError, match='optimizer_params'):
        Module(mlp()).fit(it, num_epoch=1, optimizer_params=5)
    with pytest.raises(ff.base.ParamError, match='initializer'):
        Module(mlp()).fit(it, num_epoch=1, initializer=5)
    Module(mlp()).fit(it, num_epoch=1, initializer='xavier')  # a registered name is fine
    with pytest.raises(ff.base.ParamError, match='context'):
        Module(mlp(), context='cpu')
    with pytest.raises(ff.base.ParamError, match='context'):
        FeedForward(mlp(), ctx=['cpu'])


def test_checkpoint_file_errors(tmp_path):
    mod = bound()
    mod.init_optimizer()
    with pytest.raises(FFError, match='cannot read'):
        mod.load_optimizer_states(str(tmp_path / 'missing.states'))
    (tmp_path / 'bad.states').write_bytes(b'garbage')
    with pytest.raises(FFError, match='bad.states.*too short'):
        mod.load_optimizer_states(str(tmp_path / 'bad.states'))
    with pytest.raises(FFError, match='does not exist'):
        Module.load(str(tmp_path / 'nope'), 1)
    with pytest.raises(FFError, match='cannot write'):
        mod.save_checkpoint(str(tmp_path / 'no_such_dir' / 'm'), 1)
    with pytest.raises(OSError):  # also an OSError, for code written against MXNet
        mod.save_params(str(tmp_path / 'no_such_dir' / 'm.params'))


def test_update_metric_and_iterators_are_checked():
    mod = bound()
    mod.forward(io.DataBatch([nd.zeros((4, 3))], [nd.zeros((4,))]))
    acc = ff.metric.create('acc')
    with pytest.raises(ShapeError, match=r'shape \(5,\) but the batch size is 4'):
        mod.update_metric(acc, [nd.zeros((5,))])  # would silently drop a sample
    with pytest.raises(ShapeError, match='2 label arrays for the 1 bound labels'):
        mod.update_metric(acc, [nd.zeros((4,)), nd.zeros((4,))])
    with pytest.raises(ff.base.ParamError, match='`eval_data` must be a DataIter'):
        mod.score(5, 'acc')
    with pytest.raises(ff.base.ParamError, match='`train_data` must be a DataIter'):
        Module(mlp()).fit([1, 2], num_epoch=1)


def test_fit_of_a_module_without_outputs_skips_the_nan_check():
    seen = []

    class Batches:
        provide_data = provide_label = None

        def reset(self):
            pass

        def __iter__(self):
            return iter([io.DataBatch([nd.zeros((1,))], [nd.zeros((1,))]) for _ in range(3)])

    mod = ff.mod.BaseModule()
    for name in ('bind', 'init_params', 'init_optimizer', 'forward', 'backward',
                 'update_metric'):
        setattr(mod, name, lambda *a, **k: None)
    mod.update = lambda: seen.append(1)
    mod.get_params = lambda: (None, None)
    mod.fit(Batches(), num_epoch=1)      # BaseModule.get_outputs is not implemented
    assert len(seen) == 3
