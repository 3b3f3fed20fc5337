"""Cold and warm starts: what numba compiles, in fresh processes with their own cache.

``import ffnumba`` compiles nothing and never imports ``numba.cuda`` on its
own; a second process with the same ``NUMBA_CACHE_DIR`` trains its first batch
with every kernel (operators and the optimizer's fused update) loaded from the
disk cache, not recompiled. Timings live in ``benchmarks/cold_start.py``.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r'''
import json, sys
from numba.core import event
compiled = []

class L(event.Listener):
    def on_start(self, ev):
        d = ev.data['dispatcher']
        compiled.append('%s.%s' % (d.py_func.__module__, d.py_func.__qualname__))

    def on_end(self, ev):
        pass

event.register('numba:compile', L())
from numba.core import caching
caches = []
_real_init = caching.FunctionCache.__init__
caching.FunctionCache.__init__ = lambda self, f: caches.append(f.__module__) or _real_init(self, f)
import numpy as np
import ffnumba as ff
at_import = list(compiled)
caches_at_import = list(caches)
cuda = 'numba.cuda' in sys.modules
if sys.argv[1] == 'train':
    x = ff.sym.Variable('data')
    x = ff.sym.Activation(ff.sym.FullyConnected(ff.sym.Flatten(x), num_hidden=8), act_type='relu')
    net = ff.sym.SoftmaxOutput(ff.sym.FullyConnected(x, num_hidden=3), name='softmax')
    mod = ff.mod.Module(net, context=ff.cpu())
    mod.bind([('data', (4, 1, 2, 3))], [('softmax_label', (4,))])
    mod.init_params(ff.init.Xavier())
    mod.init_optimizer(optimizer='sgd', optimizer_params={'learning_rate': 0.1, 'momentum': 0.9})
    batch = ff.io.DataBatch([ff.nd.ones((4, 1, 2, 3))], [ff.nd.array([0, 1, 2, 0])])
    mod.forward_backward(batch)
    mod.update()
    assert np.isfinite(mod.get_outputs()[0].asnumpy()).all()
if sys.argv[1] == 'conv':      # a Winograd-eligible layer, forward and backward (tile 2);
    # 6x6, not 4x4: a 4x4 plane's backward split over threads runs the taps
    s = ff.sym.Convolution(ff.sym.Variable('data'), num_filter=16, kernel=(3, 3), pad=(1, 1),
                           name='c')
    exe = s.simple_bind(ff.cpu(), data=(2, 16, 6, 6))
    for name, arr in exe.arg_dict.items():
        arr[:] = np.random.default_rng(0).uniform(-1, 1, arr.shape).astype(np.float32)
    exe.forward(is_train=True)
    exe.backward(ff.nd.ones(exe.outputs[0].shape))
    assert np.isfinite(exe.grad_dict['c_weight'].asnumpy()).all()
if sys.argv[1] == 'conv4':     # F(4x4, 3x3) forward and backward
    s = ff.sym.Convolution(ff.sym.Variable('data'), num_filter=16, kernel=(3, 3), pad=(1, 1),
                           name='c')
    exe = s.simple_bind(ff.cpu(), data=(2, 16, 8, 8))
    for name, arr in exe.arg_dict.items():
        arr[:] = np.random.default_rng(0).uniform(-1, 1, arr.shape).astype(np.float32)
    exe.forward(is_train=True)
    exe.backward(ff.nd.ones(exe.outputs[0].shape))
    assert np.isfinite(exe.grad_dict['c_weight'].asnumpy()).all()
if sys.argv[1] == 'deep':      # two threads, a deep layer: the backward split by channels
    from ffnumba.ops.nn import _conv_par as cp
    split = []
    real = cp.conv_backward_channels
    cp.conv_backward_channels = lambda *a: split.append(a[-1]) or real(*a)
    s = ff.sym.Convolution(ff.sym.Variable('data'), num_filter=128, kernel=(3, 3), pad=(1, 1),
                           stride=(2, 2), name='c')
    exe = s.simple_bind(ff.cpu(), data=(4, 64, 4, 4))
    exe.forward(is_train=True)
    exe.backward(ff.nd.ones(exe.outputs[0].shape))
    assert split == [2], split
print(json.dumps({'at_import': at_import, 'all': compiled, 'cuda': cuda,
                  'caches_at_import': caches_at_import, 'caches': caches,
                  'scipy_linalg': 'scipy.linalg' in sys.modules}))
'''


def _child(what, cache, **env_vars):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=ROOT, **env_vars)
    env.pop('NUMBA_ENABLE_CUDASIM', None)
    proc = subprocess.run([sys.executable, '-c', _CHILD, what], env=env, capture_output=True,
                          text=True, timeout=600, cwd=str(cache))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_compiles_nothing_and_leaves_cuda_alone(tmp_path):
    out = _child('import', tmp_path)
    assert out['at_import'] == []
    assert out['cuda'] is False


def test_kernels_build_their_disk_cache_on_first_use(tmp_path):
    # numba builds a cache=True kernel's disk cache when it is decorated (a temporary file
    # written and removed in its folder, the source stat-ed and hashed: ~0.3 ms each, ~0.02 s
    # of `import ffnumba` for ~200 kernels); ffnumba's are built when a kernel first runs
    out = _child('import', tmp_path)
    assert [m for m in out['caches_at_import'] if m.startswith('ffnumba.')] == []
    out = _child('train', tmp_path)
    built = [m for m in out['caches'] if m.startswith('ffnumba.')]
    assert 'ffnumba.ops.nn.fully_connected' in built, built
    assert len(built) < 50, built       # the kernels the batch ran, not every kernel


def test_warm_cache_first_batch_compiles_nothing(tmp_path):
    cold = _child('train', tmp_path)
    assert any('fully_connected' in n for n in cold['all'])       # the cache started empty
    assert any('optimizer' in n for n in cold['all'])
    warm = _child('train', tmp_path)
    assert warm['all'] == [], 'recompiled with a warm cache: %s' % warm['all']
    assert warm['cuda'] is False


def test_first_batch_leaves_scipy_linalg_unimported(tmp_path):
    # the GEMMs call numpy's OpenBLAS; importing scipy.linalg (numba's np.dot BLAS) only to
    # hold its threads cost ~85 ms of every start (16% of a warm LeNet's)
    for what in ('train', 'train', 'conv'):
        out = _child(what, tmp_path, FFNUMBA_GEMM='openblas', NUMBA_NUM_THREADS='2')
        assert out['scipy_linalg'] is False, what


def test_conv_compiles_one_gemm_and_no_unused_winograd_tile(tmp_path):
    # gemm's callers pass row- and column-major operands (w, w^T, col^T): one compiled
    # body serves them all; the default backward runs F(2x2, 3x3) only, so the F(4x4, 3x3)
    # transposed transforms are pruned.
    out = _child('conv', tmp_path, FFNUMBA_CONV_WINOGRAD='2')
    names = out['all']
    assert 'ffnumba.ops.nn._winograd.backward_range' in names
    assert names.count('ffnumba.ops._gemm._gemm_any') == 1, names
    assert not [n for n in names if n.endswith(('output_tf_t', 'input_tf_t'))
                and '_winograd4' in n], names


def test_channel_split_backward_compiles_no_driver_of_its_own(tmp_path):
    # the channel split (2 threads, deep layer) runs the batch split's compiled backward_range:
    # one backward driver compiled (it cost about 2.5 s of a cold ResNet-18 as its own kernel)
    out = _child('deep', tmp_path, NUMBA_NUM_THREADS='2', FFNUMBA_CONV_WINOGRAD='0')
    names = out['all']
    assert names.count('ffnumba.ops.nn._im2col.backward_range') == 1, names
    assert not [n for n in names if n.startswith('ffnumba.ops.nn._conv_par.')
                and 'add_parts' not in n], names
    # the copies between GEMMs compile once each: the forward's and the backward's calls
    # pass run-time values where a literal (0, False) compiled a second specialization
    assert names.count('ffnumba.ops.nn._im2col._scatter') == 1, names
    assert names.count('ffnumba.ops.nn._im2col._gather') == 1, names


def test_winograd4_column_transforms_compile_once(tmp_path):
    # _bt and _g take float64 values in both of their passes (the first pass's float32
    # entries converted exactly): one compiled signature each, where there were two
    out = _child('conv4', tmp_path, NUMBA_NUM_THREADS='1')
    names = out['all']
    assert 'ffnumba.ops.nn._winograd4.input_tf' in names, names      # the F(4x4) path ran
    assert names.count('ffnumba.ops.nn._winograd4._bt') == 1, names
    assert names.count('ffnumba.ops.nn._winograd4._g') == 1, names


def test_winograd4_column_transforms_float32_twins_compute_the_same():
    # what makes the single signature exact: on float32 entries the float32 twins of _bt and
    # _g give the very bits the float64 versions give on the same entries converted
    import numpy as np
    from ffnumba.ops.nn import _winograd4 as w4
    rng = np.random.default_rng(0)
    vals = np.concatenate([rng.standard_normal(600), rng.uniform(-1e4, 1e4, 600),
                           rng.standard_normal(600) * 1e-30]).astype(np.float32)
    for fn, k in ((w4._bt, 6), (w4._g, 3)):
        for args in vals.reshape(-1, k)[:300]:
            as32 = fn(*[np.float32(a) for a in args])
            as64 = fn(*[np.float64(a) for a in args])
            assert np.array(as32, np.float64).tobytes() == np.array(as64, np.float64).tobytes()


_KEYS = r'''
import gc, json
import ffnumba
from numba import types
from numba.core.registry import cpu_target
keys = {}
for obj in gc.get_objects():
    if isinstance(obj, ffnumba.jit.LazyKernel) and obj.kernel.py_func.__closure__:
        k = obj.kernel
        cells = ','.join(getattr(getattr(c.cell_contents, 'py_func', None), '__qualname__', '?')
                         for c in k.py_func.__closure__)
        key = k._cache._index_key((types.float32[::1],), cpu_target.target_context.codegen())
        keys.setdefault('%s.%s[%s]' % (k.py_func.__module__, k.py_func.__qualname__, cells),
                        []).append(str(key))
print(json.dumps({n: sorted(v) for n, v in keys.items()}))
'''


def test_template_cache_keys_same_from_source_and_from_pyc(tmp_path):
    # a process that compiles ffnumba's modules from source and one that loads their .pyc
    # files key the template kernels (closures over their scalar bodies) alike: a warm start
    # finds what a cold start cached however each loaded the package (numba's own key, a
    # pickle of the bodies, differed for every one of them)
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONPYCACHEPREFIX=str(tmp_path / 'pyc'))
    env.pop('PYTHONDONTWRITEBYTECODE', None)
    runs = []
    for _ in range(2):      # the first compiles from source and writes the .pyc files
        proc = subprocess.run([sys.executable, '-c', _KEYS], env=env, capture_output=True,
                              text=True, timeout=600, cwd=str(tmp_path))
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert any(f.endswith('.pyc') for _, _, fs in os.walk(tmp_path / 'pyc') for f in fs)
    assert len(runs[0]) > 100 and runs[0] == runs[1]
    # and two different bodies never share a key in one kernel's index
    by_kernel = {}
    for name, keys in runs[0].items():
        kernel = name.split('[')[0]
        for key in set(keys):
            assert (kernel, key) not in by_kernel, (name, by_kernel.get((kernel, key)))
            by_kernel[(kernel, key)] = name
