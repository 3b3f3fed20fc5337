"""The cold start's compile-ahead child (ffnumba._compile_ahead).

End to end in fresh interpreters with an empty numba cache: the child compiles
the backward's kernels (waited for, the parent then compiles none of them),
writes its marker, is reaped before the first backward returns, and changes
no number; a warm cache spawns nothing. The switches are checked in process.
"""
import contextlib
import json
import os
import subprocess
import sys

import pytest

import ffnumba as ff
from ffnumba import _compile_ahead, _compile_claims

from bench_modules import benchmark_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# a fresh interpreter: train one batch of a small conv net, record what numba compiled
# in the forward and in the backward, and whether a child ran
_SCRIPT = r'''
import json, sys, time
import numpy as np
from numba.core import event
phase = ['forward']
seen = {'forward': [], 'backward': [], 'update': []}
class L(event.Listener):
    def on_start(self, ev):
        seen[phase[0]].append(ev.data['dispatcher'].py_func.__qualname__)
    def on_end(self, ev):
        pass
event.register('numba:compile', L())
import ffnumba as ff
from ffnumba import _compile_ahead
data = ff.sym.Variable('data')
net = ff.sym.Convolution(data, num_filter=4, kernel=(3, 3), stride=(2, 2), name='c')
net = ff.sym.Activation(net, act_type='relu')
net = ff.sym.FullyConnected(ff.sym.flatten(net), num_hidden=3, name='fc')
net = ff.sym.SoftmaxOutput(net, name='softmax')
ff.random.seed(0)
rng = np.random.default_rng(0)
x = rng.uniform(-1, 1, (4, 2, 9, 9)).astype(np.float32)
y = np.array([0, 1, 2, 1], np.float32)
ex = net.simple_bind(ff.cpu(), data=(4, 2, 9, 9), softmax_label=(4,))
for k, a in sorted(ex.arg_dict.items()):
    if k not in ('data', 'softmax_label'):
        a[:] = rng.uniform(-0.5, 0.5, a.shape).astype(np.float32)
ex.forward(is_train=True, data=x, softmax_label=y)
child = ex._ahead
pid = child._proc.pid if child else None
phase[0] = 'backward'
ex.backward()
phase[0] = 'update'
reaped = child._proc is None if child else None
out = {'forward': seen['forward'], 'backward': seen['backward'], 'child': pid, 'reaped': reaped,
       'grads': {k: ex.grad_dict[k].asnumpy().tolist() for k in sorted(ex.grad_dict)},
       'out': ex.outputs[0].asnumpy().tolist()}
print(json.dumps(out))
'''


def _run(cache, ahead):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), FFNUMBA_COMPILE_AHEAD=ahead,
               PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
    proc = subprocess.run([sys.executable, '-c', _SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open('/proc/%d/stat' % pid) as f:     # a zombie is not running
        return f.read().split(')')[-1].split()[0] != 'Z'


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith('linux') or len(os.sched_getaffinity(0)) < 2,
                    reason='compile-ahead needs a second core (Linux affinity)')
def test_cold_start_compiles_backward_ahead(tmp_path):
    # 'wait': the parent's first backward waits for the child, so the child did it all
    on = _run(tmp_path / 'wait', 'wait')
    assert on['child'] is not None and on['reaped'] is True
    assert not _pid_alive(on['child'])
    # the child compiled the backward drivers: the parent's backward loaded them
    assert 'backward_range' not in on['backward']
    assert 'forward_range' in on['forward']
    markers = [f for _, _, fs in os.walk(tmp_path / 'wait') for f in fs
               if f.startswith('ffnumba-ahead-') and f.endswith('.done')]
    assert len(markers) == 1
    # the default: no waiting, the parent and the child meet midway; the same numbers
    both = _run(tmp_path / 'default', 'force')
    assert both['child'] is not None and both['reaped'] is True
    assert not _pid_alive(both['child'])
    assert both['out'] == on['out'] and both['grads'] == on['grads']
    # the same plan again (warm cache, marker there): no child, nothing compiled
    warm = _run(tmp_path / 'wait', 'force')
    assert warm['child'] is None and warm['forward'] == [] and warm['backward'] == []
    assert warm['grads'] == on['grads']


def test_switch_and_once_per_process(monkeypatch):
    monkeypatch.setenv('FFNUMBA_COMPILE_AHEAD', '0')
    assert not _compile_ahead.enabled()
    assert _compile_ahead.start('cpu', [], [(object(), 'FullyConnected')]) is None
    monkeypatch.setenv('FFNUMBA_COMPILE_AHEAD', '1')
    two = len(os.sched_getaffinity(0)) >= 2
    others, load = _compile_ahead._load()           # the real reading
    assert isinstance(others, int) and others >= 0 and load >= 0.0
    monkeypatch.setattr(_compile_ahead, '_load', lambda: (99, 99.0))
    assert not _compile_ahead.enabled()             # no idle core
    monkeypatch.setattr(_compile_ahead, '_load', lambda: (0, 99.0))
    assert _compile_ahead.enabled() == two          # idle right now
    monkeypatch.setattr(_compile_ahead, '_load', lambda: (99, 0.0))
    assert _compile_ahead.enabled() == two          # idle over the last minute
    monkeypatch.setenv('FFNUMBA_COMPILE_AHEAD', 'force')
    monkeypatch.setattr(_compile_ahead, '_load', lambda: (99, 99.0))
    assert _compile_ahead.enabled() == two
    assert _compile_ahead.start('gpu', [], [(object(), 'FullyConnected')]) is None   # CPU only
    assert _compile_ahead.start('cpu', [], []) is None                              # no backward
    monkeypatch.setattr(_compile_ahead, '_started', True)     # a child already ran here
    assert _compile_ahead.start('cpu', [], [(object(), 'FullyConnected')]) is None


def test_executor_without_child_trains_as_before(monkeypatch):
    """Switched off, an executor records no child and its first backward runs as before."""
    monkeypatch.setenv('FFNUMBA_COMPILE_AHEAD', '0')
    data = ff.sym.Variable('data')
    net = ff.sym.SoftmaxOutput(ff.sym.FullyConnected(data, num_hidden=2, name='fc'),
                               name='softmax')
    ex = net.simple_bind(ff.cpu(), data=(2, 3), softmax_label=(2,))
    ex.forward(is_train=True, data=[[1, 2, 3], [4, 5, 6]], softmax_label=[0, 1])
    ex.backward()
    assert ex._ahead is False
    assert ex.grad_dict['fc_weight'].shape == (2, 3)


def test_warm_forward_stops_child_and_marks(tmp_path):
    """A first forward that loaded from the cache stops the child at once; done() writes the marker."""
    import time
    proc = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
    marker = str(tmp_path / 'ffnumba-ahead-x.done')
    ahead = _compile_ahead.Ahead(proc, marker)
    tic = time.perf_counter()
    ahead.before_backward(_compile_ahead.WARM_FORWARD / 2)
    assert time.perf_counter() - tic < 10
    assert proc.returncode is not None          # killed and reaped
    ahead.stop()                                # idempotent
    assert not os.path.exists(marker)
    ahead.done()
    assert os.path.exists(marker)
    # a cold forward leaves the child running; the end of the first backward stops it
    proc = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
    ahead = _compile_ahead.Ahead(proc, marker)
    ahead.before_backward(_compile_ahead.WARM_FORWARD * 2)
    assert proc.poll() is None
    ahead.done()
    assert proc.returncode is not None


# ---------------------------------------------------------------- claims (_Claims)

def _fresh_kernel(tmp_path, name):
    """A never-compiled ``@njit(cache=True)`` kernel counted as ffnumba's (claims cover those)."""
    import importlib
    from numba import njit
    src = tmp_path / ('%s.py' % name)
    src.write_text('def %s(x):\n    return x * 2.0 + 1.0\n' % name)
    sys.path.insert(0, str(tmp_path))
    try:
        fn = getattr(importlib.import_module(name), name)
    finally:
        sys.path.remove(str(tmp_path))
    fn.__module__ = 'ffnumba._claims_test'
    return njit(cache=True)(fn), src


@contextlib.contextmanager
def _claims(tmp_path, role, alive=None):
    """``(claims, folder)``: a :class:`_Claims` of ``role`` installed on a new folder, closed
    (uninstalled, the folder removed) after the block."""
    folder = tmp_path / 'claims'
    folder.mkdir()
    claims = _compile_ahead._Claims(str(folder), role, alive=alive)
    claims.install()
    try:
        yield claims, folder
    finally:
        claims.close()


def _claim(claims, kernel, role):
    """Create ``kernel``'s (float64) claim file as ``role`` would; its path."""
    from numba import types
    from numba.core.registry import cpu_target
    path = claims._path(kernel._cache, (types.float64,), cpu_target.target_context)
    with open(path, 'w') as f:
        f.write(role)
    return path


class _Compiles:
    """Names of the functions numba compiles while installed (a ``with`` block)."""

    def __enter__(self):
        from numba.core import event
        names = self.names = []

        class L(event.Listener):
            def on_start(self, ev):
                names.append(ev.data['dispatcher'].py_func.__name__)

            def on_end(self, ev):
                pass
        self._listener = L()
        event.register('numba:compile', self._listener)
        return self

    def __exit__(self, *exc):
        from numba.core import event
        event.unregister('numba:compile', self._listener)


def test_child_skips_a_kernel_the_parent_claimed(tmp_path):
    with _claims(tmp_path, 'child') as (claims, folder):
        kernel, _ = _fresh_kernel(tmp_path, 'claimed_by_parent')
        path = _claim(claims, kernel, 'parent')
        with _Compiles() as seen, pytest.raises(_compile_ahead._Skip):
            kernel(1.0)
        assert seen.names == [] and kernel.signatures == []      # nothing compiled
        os.remove(path)                                          # the parent is done
        with _Compiles() as seen:
            assert kernel(1.0) == 3.0
        assert seen.names == ['claimed_by_parent']
        assert [f for f in os.listdir(folder) if f.endswith('.claim')] == []  # released once saved
    assert not folder.exists()


def test_parent_waits_for_the_childs_kernel_and_compiles_nothing(tmp_path):
    with _claims(tmp_path, 'parent', alive=lambda: True) as (claims, folder):
        kernel, src = _fresh_kernel(tmp_path, 'claimed_by_child')
        path = _claim(claims, kernel, 'child')
        # "the child": another interpreter compiles the same kernel into the cache, then
        # drops its claim
        code = ('import os, sys\n'
                'from numba import njit\n'
                'from claimed_by_child import claimed_by_child as k\n'
                'assert njit(cache=True)(k)(1.0) == 3.0\n'
                'os.remove(sys.argv[1])\n')
        child = subprocess.Popen([sys.executable, '-c', code, path],
                                 env=dict(os.environ, PYTHONPATH=str(src.parent)))
        try:
            with _Compiles() as seen:
                assert kernel(1.0) == 3.0
        finally:
            assert child.wait(timeout=300) == 0
        assert seen.names == []                 # loaded what the child compiled
        assert claims.waited > 0


def test_parent_compiles_a_kernel_whose_child_is_gone(tmp_path):
    with _claims(tmp_path, 'parent', alive=lambda: False) as (claims, folder):
        kernel, _ = _fresh_kernel(tmp_path, 'claimed_by_dead_child')
        _claim(claims, kernel, 'child')
        with _Compiles() as seen:
            assert kernel(1.0) == 3.0
        assert seen.names == ['claimed_by_dead_child']
    # uninstalled: the wrappers pass every call through
    kernel, _ = _fresh_kernel(tmp_path, 'after_close')
    assert kernel(2.0) == 5.0


# ------------------------------------------------ claims of helpers compiled inside a kernel

def _nested_kernel(tmp_path, name):
    """``(outer, helper)``: never-compiled cached kernels counted as ffnumba's, ``outer``
    calling ``helper`` (compiled inside ``outer``'s compile)."""
    import importlib
    # importable under its ffnumba name in every process (numba's cache rebuilds a kernel's
    # environment from its module)
    (tmp_path / ('%s.py' % name)).write_text(
        'import sys\n'
        'from numba import njit\n'
        'sys.modules["ffnumba._claims_test_%s"] = sys.modules[__name__]\n'
        'def _h(x):\n    return x * 2.0\n'
        '_h.__module__ = "ffnumba._claims_test_%s"\n'
        'helper = njit(cache=True)(_h)\n'
        'def _o(x):\n    return helper(x) + 1.0\n'
        '_o.__module__ = "ffnumba._claims_test_%s"\n'
        'outer = njit(cache=True)(_o)\n' % (name, name, name))
    sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))
    return mod.outer, mod.helper


@pytest.fixture(autouse=True)
def _forget_test_modules():
    yield
    for name in [m for m in sys.modules if m.startswith('ffnumba._claims_test_')]:
        del sys.modules[name]


def test_child_defers_a_kernel_whose_helper_the_parent_compiles(tmp_path, monkeypatch):
    """The child, in its first pass, drops a kernel that needs a helper the parent is
    compiling (``deferred``: the parent's claim); on its last pass it waits for the
    parent's helper and compiles only the kernel around it. The timeline
    (``FFNUMBA_AHEAD_TRACE``) records each step."""
    trace = tmp_path / 'timeline.txt'
    monkeypatch.setenv(_compile_claims.TRACE_ENV, str(trace))
    with _claims(tmp_path, 'child') as (claims, folder):
        outer, helper = _nested_kernel(tmp_path, 'defer_for_helper')
        path = _claim(claims, helper, 'parent')
        with _Compiles() as seen, pytest.raises(Exception):
            outer(1.0)
        assert claims.deferred == path
        assert outer.signatures == [] and helper.signatures == []
        claims.release()
        assert [f for f in os.listdir(folder) if f.endswith('.claim')] == [os.path.basename(path)]
        # "the parent": another interpreter compiles the helper into the cache, then drops
        # its claim
        code = ('import os, sys\n'
                'from defer_for_helper import helper\n'
                'assert helper(1.0) == 2.0\n'
                'os.remove(sys.argv[1])\n')
        claims.patient = True
        parent = subprocess.Popen([sys.executable, '-c', code, path],
                                  env=dict(os.environ, PYTHONPATH=str(tmp_path)))
        try:
            with _Compiles() as seen:
                assert outer(1.0) == 3.0
        finally:
            assert parent.wait(timeout=300) == 0
        assert seen.names == ['_o']             # the helper was loaded, not compiled
        assert claims.waited > 0
        assert not (folder / 'nested.waiting').exists()
    events = [ln.split(' ', 5)[1:5] for ln in trace.read_text().splitlines()]
    mod = 'ffnumba._claims_test_defer_for_helper.'
    assert events == [['child', 'claim', 'top', mod + '_o'],
                      ['child', 'defer', 'nested', mod + '_h'],
                      ['child', 'claim', 'top', mod + '_o'],
                      ['child', 'wait', 'nested', mod + '_h'],
                      ['child', 'loaded', 'nested', mod + '_h'],
                      ['child', 'saved', 'top', mod + '_o']]
    cold_start = benchmark_module('cold_start')
    text = cold_start.timeline(trace.read_text().splitlines())
    assert 'child: 1 compiled (1 top, 0 helpers)' in text and '1 deferred' in text
    assert text.endswith('compiled by both: none')
    both = ['1.0 parent saved top m.k (float64,)', '2.5 child saved top m.k (float64,)',
            '3.0 child saved nested m.h (int64,)']
    text = cold_start.timeline(both)
    assert 'parent: 1 compiled (1 top, 0 helpers), last at 0.00 s' in text
    assert 'child: 2 compiled (1 top, 1 helpers), last at 2.00 s' in text
    assert text.endswith('compiled by both: m.k (float64,)')
    assert 'no compile-ahead child' in cold_start.timeline([])


def test_two_processes_never_wait_inside_a_compile_for_each_other(tmp_path):
    """A helper held by the other process while that process waits inside a compile
    (``nested.waiting``) is compiled here at once: a wait there could be a deadlock."""
    with _claims(tmp_path, 'parent', alive=lambda: True) as (claims, folder):
        outer, helper = _nested_kernel(tmp_path, 'other_waits')
        _claim(claims, helper, 'child')
        (folder / 'nested.waiting').write_text('')      # the child waits inside a compile
        with _Compiles() as seen:
            assert outer(1.0) == 3.0
        assert sorted(seen.names) == ['_h', '_o'] and claims.waited == 0
        assert (folder / 'nested.waiting').exists()     # the child's mark, left alone


def test_child_retries_a_deferred_node_once_the_parents_claim_is_gone(tmp_path, monkeypatch):
    """:func:`_compile_ahead.main`: a deferred node runs again right after the parent's
    claim it waited for is gone, before the child's next node; the marker is written."""
    import pickle
    folder = tmp_path / 'claims'
    folder.mkdir()
    blocker = tmp_path / 'parent.claim'
    blocker.write_text('parent')
    ran = []

    def run_node(rec, rng):
        ran.append(rec)
        claims = _compile_ahead._Claims._active
        if rec == 'c' and blocker.exists():
            claims.deferred = str(blocker)
            raise _compile_ahead._Skip('helper')
        if rec == 'b':
            blocker.unlink()                    # the parent saved its helper meanwhile
    monkeypatch.setattr(_compile_ahead, '_run_node', run_node)
    monkeypatch.setattr(os, 'nice', lambda n: 0)
    marker = tmp_path / 'ffnumba-ahead-t.done'
    try:
        _compile_ahead.main(str(marker), pickle.dumps(['a', 'b', 'c']), str(folder))
    finally:
        _compile_ahead._Claims._active.close()
    assert ran == ['c', 'b', 'c', 'a'] and marker.exists()
