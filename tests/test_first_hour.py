"""What a new user meets in the first hour: a core-only install, logging that obeys the
application, a word when numba compiles, and errors instead of silent traps."""
import logging
import re
import os
import subprocess
import sys

import numpy as np
import pytest

import ffnumba as ff
from ffnumba import compile_notice
from ffnumba.base import FFError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Imports of anything outside the core dependencies fail in the child process.
_BLOCK_EXTRAS = '''
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('hypothesis', 'pytest', 'sklearn', 'mlxtend', 'pandas',
                                  'matplotlib', 'mpi4py', 'graphviz'):
            raise ImportError('blocked: ' + name, name=name.split('.')[0])
sys.meta_path.insert(0, Block())
'''


def _run(code):
    proc = subprocess.run([sys.executable, '-c', _BLOCK_EXTRAS + code], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_import_and_train_with_core_dependencies_only():
    out = _run('''
import numpy as np
import ffnumba as ff
X, y, _, _ = ff.datasets.load_mnist()
net = ff.sym.SoftmaxOutput(ff.sym.FullyConnected(ff.sym.Flatten(ff.sym.Variable('data')),
                                                 num_hidden=10), name='softmax')
model = ff.FeedForward(net, num_epoch=1, numpy_batch_size=50, epoch_size=1)
model.fit(X[:50], y[:50])
print('trained', model.predict(X[:5]).shape, ff.__version__)
try:
    ff.testing.strategies
except ImportError as e:
    print('strategies:', e)
''')
    assert 'trained (5, 10) %s' % ff.__version__ in out
    assert "needs hypothesis, which the test extra installs: pip install 'ffnumba[test]'" in out


def test_version_is_the_one_in_pyproject_metadata():
    from importlib.metadata import version
    assert version('ffnumba') == ff.__version__


def _tiny_fit(**kwargs):
    X = np.random.RandomState(0).rand(40, 6).astype(np.float32)
    y = (X.sum(1) > 3).astype(np.int64)
    net = ff.sym.SoftmaxOutput(ff.sym.FullyConnected(ff.sym.Variable('data'), num_hidden=2),
                               name='softmax')
    model = ff.FeedForward(net, num_epoch=1, numpy_batch_size=20, **kwargs)
    model.fit(X, y, eval_data=(X, y))
    return model


def test_library_never_configures_the_root_logger():
    out = _run('''
import logging, io
import numpy as np
import ffnumba as ff
X = np.random.RandomState(0).rand(40, 6).astype(np.float32); y = (X.sum(1) > 3).astype(int)
net = ff.sym.SoftmaxOutput(ff.sym.FullyConnected(ff.sym.Variable('data'), num_hidden=2),
                           name='softmax')
ff.FeedForward(net, num_epoch=1, numpy_batch_size=20).fit(X, y, eval_data=(X, y))
print('root handlers after fit:', len(logging.getLogger().handlers))
stream = io.StringIO()
logging.basicConfig(level=logging.INFO, stream=stream, format='%(name)s|%(message)s')
ff.FeedForward(net, num_epoch=1, numpy_batch_size=20).fit(X, y, eval_data=(X, y))
print(stream.getvalue())
''')
    assert 'root handlers after fit: 0' in out
    # basicConfig after a fit still takes effect, and records carry ffnumba's logger names.
    assert 'ffnumba.model|Start training with [cpu(0)]' in out
    assert 'Epoch[0] Validation-accuracy=' in out


def test_fit_output_reaches_a_handler_on_the_ffnumba_logger():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append((record.name, record.getMessage()))
    handler = Keep(level=logging.INFO)
    logger = logging.getLogger('ffnumba')
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        _tiny_fit()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    names = {n for n, _ in records}
    messages = [m for _, m in records]
    assert all(n.startswith('ffnumba.') for n in names)
    assert 'Start training with [cpu(0)]' in messages
    assert any(m.startswith('Epoch[0] Time cost=') for m in messages)
    assert any(m.startswith('Epoch[0] Validation-accuracy=') for m in messages)


def test_first_slow_run_says_it_is_compiling(monkeypatch, caplog):
    monkeypatch.setattr(compile_notice, 'NOTICE_AFTER', 0.0)
    monkeypatch.setattr(compile_notice, '_seen', set())
    monkeypatch.setenv('NUMBA_CACHE_DIR', '/some/cache')
    caplog.set_level(logging.INFO, logger='ffnumba')
    x = ff.sym.Variable('x')
    net = ff.sym.Activation(ff.sym.FullyConnected(x, num_hidden=3, name='fc'), act_type='tanh')
    exe = net.simple_bind(ff.cpu(), x=(2, 4))
    exe.forward(is_train=True)
    import time
    time.sleep(0.2)      # the notice comes from a timer thread
    exe.backward(ff.nd.ones((2, 3)))
    time.sleep(0.2)
    text = caplog.text
    assert ('compiling numba kernels for FullyConnected, Activation (forward; first run only; '
            'cached in /some/cache)') in text
    assert 'compiling numba kernels for Activation, FullyConnected (backward' in text
    assert 'kernels ready in' in text
    # Said once: a second executor over the same ops is silent.
    caplog.clear()
    exe2 = net.simple_bind(ff.cpu(), x=(2, 4))
    exe2.forward()
    time.sleep(0.2)
    assert 'compiling' not in caplog.text


def test_fast_first_run_is_silent(monkeypatch, caplog):
    monkeypatch.setattr(compile_notice, '_seen', set())
    caplog.set_level(logging.INFO, logger='ffnumba')
    with compile_notice.first_run(['Quick'], 'forward'):
        pass
    assert caplog.text == ''


# ------------------------------------------------------------------ silent traps

def _mlp():
    data = ff.sym.Variable('data')
    net = ff.sym.FullyConnected(ff.sym.Flatten(data), num_hidden=10, name='fc1')
    return ff.sym.SoftmaxOutput(net, name='softmax')


def test_label_name_mismatch_is_an_error_naming_both():
    X = np.random.rand(20, 1, 4, 4).astype(np.float32)
    y = np.random.randint(0, 10, 20)
    it = ff.io.NDArrayIter(X, y, 10, label_name='label')
    mod = ff.mod.Module(_mlp())
    with pytest.raises(FFError, match=r"labels named \['label'\] but the symbol's label "
                                      r"argument is \['softmax_label'\].*label_name="
                                      r"'softmax_label'.*label_names=\['label'\]"):
        mod.fit(it, num_epoch=1)


def test_one_hot_labels_for_a_sparse_label_loss():
    X = np.random.rand(20, 1, 4, 4).astype(np.float32)
    y = np.random.randint(0, 10, 20)
    model = ff.FeedForward(_mlp(), num_epoch=1, numpy_batch_size=10)
    with pytest.raises(FFError, match='looks one-hot encoded'):
        model.fit(X, np.eye(10)[y])


def test_channels_last_data_names_the_layout():
    data = ff.sym.Variable('data')
    net = ff.sym.Convolution(data, kernel=(5, 5), num_filter=4, name='conv')
    net = ff.sym.SoftmaxOutput(ff.sym.FullyConnected(net, num_hidden=10), name='softmax')
    X = np.random.rand(20, 28, 28, 3).astype(np.float32)
    model = ff.FeedForward(net, num_epoch=1, numpy_batch_size=10)
    with pytest.raises(FFError, match=r'looks channels-last \(N, H, W, C\) = \(10, 28, 28, 3\)'
                                      r'.*X.transpose\(0, 3, 1, 2\)'):
        model.fit(X, np.zeros(20))
    pool = ff.sym.Pooling(data, kernel=(3, 3), pool_type='max')
    with pytest.raises(FFError, match='channels-last'):
        pool.infer_shape(data=(2, 32, 2, 1))


def _checkpoint(tmp_path, drop):
    X = np.random.rand(20, 1, 4, 4).astype(np.float32)
    y = np.random.randint(0, 10, 20)
    model = ff.FeedForward(_mlp(), num_epoch=1, numpy_batch_size=10)
    model.fit(X, y)
    prefix = str(tmp_path / 'm')
    model.save(prefix, 1)
    params = ff.nd.load(prefix + '-0001.params')
    ff.nd.save(prefix + '-0001.params', {k: v for k, v in params.items() if k != drop})
    return prefix, X


def test_module_load_with_missing_parameters_names_them(tmp_path):
    prefix, X = _checkpoint(tmp_path, 'arg:fc1_bias')
    mod = ff.mod.Module.load(prefix, 1)
    with pytest.raises(FFError, match=r'm-0001.params lacks 1 array\(s\) the symbol needs: '
                                      r'fc1_bias.*allow_missing=True'):
        mod.bind([('data', (10, 1, 4, 4))], for_training=False)
    # MXNet's opt-in: bound as zeros, with a warning naming them.
    mod = ff.mod.Module.load(prefix, 1, allow_missing=True)
    with pytest.warns(UserWarning, match='fc1_bias'):
        mod.bind([('data', (10, 1, 4, 4))], for_training=False)
    arg, _ = mod.get_params()
    assert np.all(arg['fc1_bias'].asnumpy() == 0)


def test_feedforward_load_with_missing_parameters_names_them(tmp_path):
    prefix, X = _checkpoint(tmp_path, 'arg:fc1_weight')
    with pytest.raises(FFError, match='lack 1 array.*fc1_weight'):
        ff.FeedForward.load(prefix, 1).predict(X)


def test_params_file_without_arrays_loads_empty_with_mxnet_warning(tmp_path, caplog):
    """MXNet writes 0 arrays and 0 names for a parameter-free net; it loads as {}, {}."""
    prefix = str(tmp_path / 'empty')
    net = ff.sym.Activation(ff.sym.Variable('data'), act_type='relu')
    net.save(prefix + '-symbol.json')
    ff.nd.save(prefix + '-0003.params', {})
    with open(prefix + '-0003.params', 'rb') as f:   # MXNet's bytes for an empty list
        assert f.read() == (0x112).to_bytes(8, 'little') + bytes(24)
    caplog.set_level(logging.WARNING, logger='ffnumba')
    sym, arg, aux = ff.model.load_checkpoint(prefix, 3)
    assert (arg, aux) == ({}, {})
    assert "Params file '%s-0003.params' is empty" % prefix in caplog.text
    model = ff.FeedForward.load(prefix, 3)
    out = model.predict(np.array([[-1.0, 2.0]], dtype=np.float32))
    assert out.tolist() == [[0.0, 2.0]]


def test_readme_code_block_runs_and_prints_what_it_computes(tmp_path):
    with open(os.path.join(ROOT, 'README.md')) as f:
        text = f.read()
    code = text.split('```python\n', 1)[1].split('```', 1)[0]
    proc = subprocess.run([sys.executable, '-c', code], cwd=str(tmp_path), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    acc = float(re.search(r'predictions \(1000, 10\) test accuracy ([0-9.]+)', out).group(1))
    assert acc >= 0.9
    assert 'reloaded test accuracy %.3f' % acc in out
    assert 'Epoch[9] Validation-accuracy=' in out and 'samples/sec' in out


def test_missing_core_dependency_says_how_to_install():
    """``import ffnumba`` in a Python without numba names numba and the install command,
    not a traceback from inside the package."""
    code = ("import sys; sys.modules['numba'] = None\n"
            "try:\n    import ffnumba\nexcept ModuleNotFoundError as e:\n"
            "    print('NAME', e.name); print('MSG', e)\n")
    proc = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'NAME numba' in proc.stdout, proc.stdout
    assert "ffnumba needs 'numba'" in proc.stdout and 'pip install -e .' in proc.stdout
