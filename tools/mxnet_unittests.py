"""Run MXNet 1.9.1's own Python unit tests against ffnumba through an import shim.

Usage (nothing is fetched at run time; point it at a checkout outside this repo)::

    git --git-dir=<mxnet.git> archive 1.9.1 tests/python/unittest \
        tests/python/train/test_bucketing.py | tar -x -C /work/mxtests   # scipy needed too
    # 1. which selected tests pass on real MXNet (any interpreter with mxnet + pytest):
    python tools/mxnet_unittests.py /work/mxtests/tests/python/unittest \\
        --mxnet --python /work/mxref/bin/python --json mx.json
    # 2. the same selection on ffnumba, scored against what passes on MXNet:
    python tools/mxnet_unittests.py /work/mxtests/tests/python/unittest \\
        --ref mx.json --json ff.json --table table.txt

What it does
------------
1. Copies the test directory into a temporary directory (MXNet's test code never
   enters this repository) and writes next to it, all written here:

   * ``mxnet/__init__.py`` (only without ``--mxnet``): a pure aliasing shim. Its
     attributes are ``ffnumba``'s (a module ``__getattr__`` forwards every
     name) and every ``mxnet.a.b`` import resolves to ``ffnumba.a.b`` (a
     submodule, or a module-valued attribute such as ``ffnumba.test_utils``
     or ``ffnumba.nd``). It adds no function of its own: a name ffnumba lacks
     fails as it would for a user. The one exception: an out-of-scope module
     ffnumba lacks (``mxnet.gluon``, ``mxnet.autograd``, ``mxnet.operator``,
     ``mxnet.runtime``...) imports as a placeholder whose every use raises
     ``NotImplementedError``, so a file importing it at module level still runs.
   * ``common.py``: the helpers MXNet's tests import from their ``common``
     (``with_seed``, ``setup_module``, ``assertRaises``, ``random_seed``,
     ``TemporaryDirectory``, ``with_environment``, ``models.mlp2/conv``...) on
     the public API; ``with_seed()`` uses one fixed seed (``MXNET_TEST_SEED``
     or 1234) so that both runs see the same numbers.
   * ``nose/tools.py``: the ``nose.tools`` names the tests use (no nose on 3.11).
   * ``_mxut_plugin.py``: a pytest plugin giving every test a time limit
     (``--timeout``) and recording each outcome to a JSON-lines file as it
     happens (a crashed file keeps its partial results).
2. Selects the in-scope tests (see ``EXCLUDED_FILES`` and ``OUT_OF_SCOPE``):
   files about Gluon, autograd, sparse storage, ``mx.np``/``npx``, contrib or
   vision operators, C-API/engine internals, profiler, image, recordio,
   extensions, TVM, DGL, subgraphs and quantization are left out whole; in the
   remaining files a test function is left out when its source, or the source
   of any module-level function it calls (transitively), or its decorators,
   mention one of the ``OUT_OF_SCOPE`` patterns. Tests a decorator skips are
   kept (scored by what MXNet does with them).
3. Runs pytest once per selected file (``python -m pytest file::test ...``) and
   prints per file: the tests selected, those passing on MXNet (from ``--ref``,
   or from this run with ``--mxnet``) and, of those, the ones passing on ffnumba.
"""
import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

# Whole files out of scope (the reason is the comment).
EXCLUDED_FILES = {
    'test_autograd.py', 'test_contrib_autograd.py', 'test_higher_order_grad.py',  # autograd
    'test_gluon.py', 'test_gluon_batch_processor.py', 'test_gluon_contrib.py',  # Gluon
    'test_gluon_data.py', 'test_gluon_data_vision.py', 'test_gluon_estimator.py',
    'test_gluon_event_handler.py', 'test_gluon_model_zoo.py', 'test_gluon_rnn.py',
    'test_gluon_save.py', 'test_gluon_trainer.py', 'test_gluon_utils.py', 'test_loss.py',
    'test_contrib_control_flow.py', 'test_dynamic_shape.py',
    'test_numpy_gluon.py', 'test_numpy_interoperability.py',  # mx.np / npx
    'test_numpy_ndarray.py', 'test_numpy_op.py',
    'test_sparse_ndarray.py', 'test_sparse_operator.py',  # sparse storage
    'test_contrib_hawkesll.py', 'test_contrib_intgemm.py', 'test_contrib_krprod.py',  # contrib ops
    'test_contrib_operator.py', 'test_contrib_stes_op.py', 'test_contrib_optimizer.py',
    'test_contrib_text.py', 'test_contrib_io.py', 'test_image.py',  # contrib / vision data
    'test_recordio.py', 'test_dgl_graph.py', 'test_tvm_op.py', 'test_extensions.py',
    'test_subgraph.py', 'test_subgraph_op.py',  # C-API / engine / build internals
    'test_engine.py', 'test_engine_import.py', 'test_exc_handling.py', 'test_profiler.py',
    'test_runtime.py', 'test_thread_local.py', 'test_dlpack.py', 'test_predictor.py',
    'test_kvstore_custom.py', 'test_metric_perf.py',
}

# A test whose code mentions one of these is out of scope.
OUT_OF_SCOPE = [
    r'autograd', r'gluon', r'\bmx\.np\b', r'\bnp\.ndarray\b.*mx', r'\bnpx\b', r'use_np',
    r'set_np', r'is_np_array', r'np_shape', r'np_array\(', r'sparse', r'\bcsr\b',
    r'row_sparse', r'contrib', r'ctypes', r'_LIB', r'check_call',
    r'mx\.image', r'recordio', r'profiler', r'mx\.rtc', r'\bengine\b', r'mx\.library',
    r'dlpack', r'quantiz', r'mkldnn', r'cudnn', r'tensorrt', r'subgraph', r'intgemm',
    r'\blinalg', r'mx\.operator', r'CustomOp', r"op_type\s*=", r'\bCustom\(',
    r'ROIPooling', r'ROIAlign', r'BilinearSampler', r'GridGenerator', r'SpatialTransformer',
    r'Correlation', r'Deformable', r'MultiBox', r'box_nms', r'box_iou', r'CTCLoss', r'ctc_loss',
    r'mx\.nd\.image', r'\bimage\.', r'SequenceLast', r'SequenceMask', r'SequenceReverse',
    r'LeakyReLU.*rrelu', r"'rrelu'", r'large_tensor', r'int64_tensor', r'MXNET_USE_',
    r'runtime\.', r'\bamp\.', r'bfloat16', r'dtype=.*int8', r'uint8.*Convolution', r'_internal', r'mx\.cpu_shared',
    r'psroipool', r'fft', r'khatri', r'count_sketch',
    r'mx\.nd\.random\.pdf|pdf_', r'Proposal', r'LSTMBias', r'ravel_multi_index',
    r'unravel_index', r'index_copy', r'index_array', r'boolean_mask', r'SoftmaxOutput.*multi_output.*use_ignore.*preserve',
    r'dgl', r'gradient_multiplier', r'_npi', r'_np_', r'\bnumpy_op', r'hawkes',
]
_OUT_RE = re.compile('|'.join('(?:%s)' % p for p in OUT_OF_SCOPE))

SHIM_MXNET = r'''
"""Aliasing shim: ``mxnet.<name>`` is ``ffnumba.<name>``; ``mxnet.a.b`` imports ``ffnumba.a.b``."""
import importlib
import importlib.abc
import importlib.util
import sys
import types

import ffnumba as _ff

# Modules outside ffnumba's scope that some test files import at module level although
# their selected tests never use them: the import succeeds, any use raises.
_ABSENT = ('gluon', 'autograd', 'operator', 'runtime', 'np', 'npx', 'image',
           'recordio', 'profiler', 'engine', 'library', 'rtc', 'contrib')


def __getattr__(name):
    return getattr(_ff, name)


def __dir__():
    return dir(_ff)


class _Absent(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return _AbsentName('%s.%s' % (self.__name__, name))


class _AbsentName:
    def __init__(self, name):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise NotImplementedError('%s is outside ffnumba (out of scope)' % self.name)

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return _AbsentName('%s.%s' % (self.name, name))


def _resolve(fullname):
    parts = fullname.split('.')[1:]
    mod = _ff
    try:
        for i, p in enumerate(parts):
            nxt = getattr(mod, p, None)
            if not isinstance(nxt, types.ModuleType):
                nxt = importlib.import_module('ffnumba.' + '.'.join(parts[:i + 1]))
            mod = nxt
        return mod
    except ImportError:
        if parts[0] not in _ABSENT:
            raise
        return _Absent(fullname)


class _Loader(importlib.abc.Loader):
    def __init__(self, module):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        pass


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith('mxnet.'):
            return None
        try:
            module = _resolve(fullname)
        except ImportError:
            return None
        return importlib.util.spec_from_loader(fullname, _Loader(module))


sys.meta_path.insert(0, _Finder())
'''

SHIM_COMMON = r'''
"""Helpers MXNet's unit tests import from ``common`` (written for this runner)."""
import contextlib
import functools
import os
import random
import shutil
import tempfile

import numpy as np
import mxnet as mx

DEFAULT_SEED = int(os.getenv('MXNET_TEST_SEED', '1234'))


def _seed_all(seed):
    np.random.seed(seed)
    random.seed(seed)
    mx.random.seed(seed)


def assertRaises(expected_exception, func, *args, **kwargs):
    try:
        func(*args, **kwargs)
    except expected_exception:
        return
    raise AssertionError('%s did not raise %s' % (getattr(func, '__name__', func),
                                                   expected_exception.__name__))


def with_seed(seed=None):
    def deco(test):
        @functools.wraps(test)
        def run(*args, **kwargs):
            state = np.random.get_state()
            _seed_all(DEFAULT_SEED if seed is None else seed)
            try:
                return test(*args, **kwargs)
            finally:
                np.random.set_state(state)
        return run
    return deco


@contextlib.contextmanager
def random_seed(seed=None):
    state = np.random.get_state(), random.getstate()
    if seed is None:  # a fresh seed, as MXNet's helper
        seed = int.from_bytes(os.urandom(4), 'little') & 0x7FFFFFFF
    _seed_all(seed)
    try:
        yield
    finally:
        np.random.set_state(state[0])
        random.setstate(state[1])


def setup_module():
    _seed_all(DEFAULT_SEED)


def teardown():
    mx.nd.waitall()


def teardown_module():
    teardown()


def assert_raises_cudnn_not_satisfied(min_version):
    return lambda test: test


assert_raises_cuda_not_satisfied = assert_raises_cudnn_not_satisfied


@contextlib.contextmanager
def _env(pairs):
    old = {k: os.environ.get(k) for k in pairs}
    for k, v in pairs.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = str(v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def with_environment(*args):
    pairs = args[0] if len(args) == 1 else {args[0]: args[1]}

    def deco(test):
        @functools.wraps(test)
        def run(*a, **kw):
            with _env(pairs):
                return test(*a, **kw)
        return run
    return deco


def run_in_spawned_process(func, env, *args):
    import multiprocessing as mp
    with _env(env):
        proc = mp.get_context('spawn').Process(target=func, args=args)
        proc.start()
        proc.join()
    assert proc.exitcode == 0, 'spawned test process failed'
    return True


@contextlib.contextmanager
def TemporaryDirectory(*args, **kwargs):
    path = tempfile.mkdtemp(*args, **kwargs)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class models:
    """The two networks MXNet's tests build (an MLP and a small conv net)."""

    @staticmethod
    def mlp2():
        x = mx.symbol.Variable('data')
        x = mx.symbol.FullyConnected(data=x, name='fc1', num_hidden=1000)
        x = mx.symbol.Activation(data=x, act_type='relu')
        return mx.symbol.FullyConnected(data=x, name='fc2', num_hidden=10)

    @staticmethod
    def conv():
        x = mx.symbol.Variable('data')
        for i in (1, 2):
            x = mx.symbol.Convolution(data=x, name='conv%d' % i, num_filter=32, kernel=(3, 3),
                                      stride=(2, 2))
            x = mx.symbol.BatchNorm(data=x, name='bn%d' % i)
            x = mx.symbol.Activation(data=x, name='relu%d' % i, act_type='relu')
            x = mx.symbol.Pooling(data=x, name='mp%d' % i, kernel=(2, 2), stride=(2, 2),
                                  pool_type='max')
        x = mx.symbol.Flatten(data=x, name='flatten')
        x = mx.symbol.FullyConnected(data=x, name='fc2', num_hidden=10)
        return mx.symbol.SoftmaxOutput(data=x, name='sm')
'''

SHIM_NOSE_TOOLS = r'''
"""The ``nose.tools`` names MXNet's tests use (pep8 names of unittest's asserts)."""
import functools
import re
import unittest

_tc = unittest.TestCase('__init__')
for _name in dir(_tc):
    if _name.startswith('assert') and '_' not in _name:
        globals()[re.sub(r'([A-Z])', lambda m: '_' + m.group(1).lower(), _name)] = \
            getattr(_tc, _name)
ok_ = _tc.assertTrue
eq_ = _tc.assertEqual


def make_decorator(func):
    return lambda new: functools.wraps(func)(new)


def raises(*exceptions):
    def deco(func):
        @functools.wraps(func)
        def run(*args, **kwargs):
            try:
                func(*args, **kwargs)
            except exceptions:
                return
            raise AssertionError('%s did not raise %s' % (func.__name__, exceptions))
        return run
    return deco


def nottest(func):
    func.__test__ = False
    return func
'''

SHIM_PLUGIN = r'''
"""pytest plugin: per-test time limit, outcomes to a JSON-lines file."""
import json
import os
import signal

import pytest

_OUT = os.environ['MXUT_RESULTS']
_LIMIT = int(os.environ.get('MXUT_TIMEOUT', '120'))


def _alarm(signum, frame):
    raise TimeoutError('test exceeded %d s' % _LIMIT)


@pytest.fixture(autouse=True)
def _mxut_limit():
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(_LIMIT)
    yield
    signal.alarm(0)


def pytest_runtest_logreport(report):
    if report.when == 'call' or report.outcome != 'passed':
        msg = ''
        if report.outcome == 'failed' and report.longrepr:
            crash = getattr(report.longrepr, 'reprcrash', None)
            msg = (crash.message if crash else str(report.longrepr)).strip()
            msg = ' '.join(msg.split())[:300]
        with open(_OUT, 'a') as f:
            f.write(json.dumps({'id': report.nodeid, 'when': report.when,
                                'outcome': report.outcome, 'msg': msg}) + '\n')


def pytest_collectreport(report):
    if report.failed:
        with open(_OUT, 'a') as f:
            f.write(json.dumps({'id': report.nodeid, 'when': 'collect', 'outcome': 'failed',
                                'msg': str(report.longrepr).strip().splitlines()[-1][:300]})
                    + '\n')
'''


def select_tests(path):
    """``(selected, dropped)`` test-function names of one test file."""
    with open(path) as f:
        src = f.read()
    tree = ast.parse(src)
    funcs = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            funcs[node.name] = node
    def decorators(node):  # @mx.use_np_shape counts; the GPU-version guards do not
        texts = ['@' + ast.get_source_segment(src, d) for d in node.decorator_list]
        return [t for t in texts if 'assert_raises_cud' not in t]
    seg = {name: '\n'.join(decorators(node) + [ast.get_source_segment(src, node)])
           for name, node in funcs.items()}

    def closure(name):
        seen, todo = set(), [name]
        while todo:
            n = todo.pop()
            if n in seen or n not in funcs:
                continue
            seen.add(n)
            for sub in ast.walk(funcs[n]):
                if isinstance(sub, ast.Name) and sub.id in funcs:
                    todo.append(sub.id)
        return seen

    selected, dropped = [], []
    for name, node in funcs.items():
        if not name.startswith('test') or isinstance(node, ast.ClassDef):
            continue
        text = '\n'.join(seg[n] for n in closure(name))
        (dropped if _OUT_RE.search(text) else selected).append(name)
    return selected, dropped


def write_shim(root, test_dir, with_alias):
    tests = os.path.join(root, 'tests')
    shutil.copytree(test_dir, tests, ignore=shutil.ignore_patterns('common.py', '__pycache__'))
    # test_module.py imports helpers from MXNet's tests/python/train/test_bucketing.py
    bucketing = os.path.join(test_dir, os.pardir, 'train', 'test_bucketing.py')
    if os.path.exists(bucketing):
        shutil.copy(bucketing, tests)
    files = {'common.py': SHIM_COMMON, 'nose/__init__.py': '', 'nose/tools.py': SHIM_NOSE_TOOLS,
             '_mxut_plugin.py': SHIM_PLUGIN}
    if with_alias:
        files['mxnet/__init__.py'] = SHIM_MXNET
    for rel, text in files.items():
        dest = os.path.join(tests if rel == 'common.py' else root, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, 'w') as f:
            f.write(textwrap.dedent(text).lstrip())
    return tests


def run_file(python, root, tests, fname, names, timeout, file_timeout, repo, show=False):
    results = os.path.join(root, 'results_%s.jsonl' % fname[:-3])
    env = dict(os.environ, MXUT_RESULTS=results, MXUT_TIMEOUT=str(timeout),
               PYTHONPATH=os.pathsep.join(p for p in (root, repo) if p),
               MXNET_MKLDNN_ENABLED='0', PYTHONDONTWRITEBYTECODE='1')
    cmd = [python, '-m', 'pytest', '-q', '-p', '_mxut_plugin', '-p', 'no:cacheprovider',
           '--continue-on-collection-errors', '-W', 'ignore',
           '--rootdir', tests] + ['%s::%s' % (fname, n) for n in names]
    t0 = time.time()
    try:
        sink = None if show else subprocess.DEVNULL
        subprocess.run(cmd, cwd=tests, env=env, timeout=file_timeout, stdout=sink, stderr=sink)
    except subprocess.TimeoutExpired:
        pass
    outcomes = {}
    if os.path.exists(results):
        with open(results) as f:
            for line in f:
                r = json.loads(line)
                if r['when'] == 'collect':
                    outcomes['__collect__'] = 'failed: ' + r['msg']
                    continue
                tid = r['id'].split('::', 1)[-1]
                prev = outcomes.get(tid, 'passed')
                if r['outcome'] != 'passed' or prev != 'passed':
                    outcomes[tid] = (r['outcome'] + (': ' + r['msg'] if r['msg'] else '')
                                     if prev == 'passed' else prev)
                else:
                    outcomes[tid] = 'passed'
    return outcomes, time.time() - t0


def base_name(tid):
    return tid.split('[', 1)[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('test_dir', help="MXNet 1.9.1's tests/python/unittest checkout")
    ap.add_argument('--mxnet', action='store_true',
                    help='run on real MXNet (no alias shim); use with --python')
    ap.add_argument('--python', default=sys.executable, help='interpreter running pytest')
    ap.add_argument('--files', nargs='*', help='only these test files')
    ap.add_argument('--ref', help='JSON from a --mxnet run: score against what passes there')
    ap.add_argument('--json', help='write per-test outcomes here')
    ap.add_argument('--table', help='also write the table here')
    ap.add_argument('--timeout', type=int, default=120, help='seconds per test (120)')
    ap.add_argument('--file-timeout', type=int, default=3600, help='seconds per file (3600)')
    ap.add_argument('--list', action='store_true', help='print the selection and stop')
    ap.add_argument('--show', action='store_true', help="show pytest's output")
    args = ap.parse_args(argv)

    repo = '' if args.mxnet else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = sorted(f for f in os.listdir(args.test_dir)
                   if f.startswith('test_') and f.endswith('.py') and f not in EXCLUDED_FILES)
    if args.files:
        files = [f for f in files if f in args.files or f[:-3] in args.files]
    selection = {f: select_tests(os.path.join(args.test_dir, f)) for f in files}
    if args.list:
        for f, (sel, drop) in selection.items():
            print('%s: %d selected, %d out of scope' % (f, len(sel), len(drop)))
            print('  selected: ' + ' '.join(sel))
            print('  dropped:  ' + ' '.join(drop))
        return 0
    ref = None
    if args.ref:
        with open(args.ref) as f:
            ref = json.load(f)

    root = tempfile.mkdtemp(prefix='mxut_')
    all_out = {}
    rows = []
    try:
        tests = write_shim(root, args.test_dir, with_alias=not args.mxnet)
        for fname in files:
            names = selection[fname][0]
            if not names:
                continue
            outcomes, secs = run_file(args.python, root, tests, fname, names, args.timeout,
                                      args.file_timeout, repo, args.show)
            collect = outcomes.pop('__collect__', None)
            if collect:
                outcomes = {n: collect for n in names}
            for n in names:  # a test that never reported (crash, file time limit)
                if not any(base_name(t) == n for t in outcomes):
                    outcomes[n] = 'not run'
            all_out[fname] = outcomes
            passed = {t for t, o in outcomes.items() if o == 'passed'}
            if ref is not None:
                ref_pass = {t for t, o in ref.get(fname, {}).items()
                            if o == 'passed' and base_name(t) in names}
                good = ref_pass & passed
                row = (fname, len(outcomes), len(ref_pass), len(good))
            else:
                row = (fname, len(outcomes), len(passed), None)
            rows.append(row)
            print('%-34s selected %4d  pass-mx %4s  pass-ff %4s  (%.0f s)'
                  % (fname, row[1], row[2] if ref is not None or args.mxnet else '-',
                     row[3] if row[3] is not None else (row[2] if not args.mxnet else '-'),
                     secs), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    lines = ['%-34s %9s %8s %8s %6s' % ('file', 'selected', 'pass-mx', 'pass-ff', '%')]
    tot = [0, 0, 0]
    for fname, sel, a, b in rows:
        if b is None:  # no reference: the one count is MXNet's (--mxnet) or ffnumba's
            a, b = (a, '-') if args.mxnet else ('-', a)
        ints = isinstance(a, int) and isinstance(b, int)
        lines.append('%-34s %9d %8s %8s %6s' % (fname, sel, a, b, '%.0f' % (100.0 * b / a)
                                                if ints and a else '-'))
        tot = [tot[0] + sel, tot[1] + (a if isinstance(a, int) else 0),
               tot[2] + (b if isinstance(b, int) else 0)]
    lines.append('%-34s %9d %8s %8s %6s' % ('TOTAL', tot[0], tot[1] or '-', tot[2] or '-',
                                            '%.1f' % (100.0 * tot[2] / tot[1]) if tot[1] else '-'))
    print('\n'.join(lines))
    for path, text in ((args.table, '\n'.join(lines) + '\n'),
                       (args.json, json.dumps(all_out, indent=1, sort_keys=True))):
        if path:
            with open(path, 'w') as f:
                f.write(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
