"""tools/mxnet_unittests.py on a small MXNet-style test directory written here."""
import importlib.util
import json
import os
import sys



_TOOL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'tools',
                     'mxnet_unittests.py')


def _tool():
    spec = importlib.util.spec_from_file_location('mxnet_unittests', _TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FAKE = '''
import numpy as np
import mxnet as mx
from mxnet import gluon                      # out of scope, imported at module level
from mxnet.test_utils import same, assert_almost_equal
from common import with_seed, assertRaises
from nose.tools import raises


def helper_uses_autograd():
    return mx.autograd.record()


@with_seed()
def test_in_scope():
    x = mx.nd.array([1, 2, 3])
    assert same((x * 2).asnumpy(), np.array([2, 4, 6]))
    assertRaises(mx.base.MXNetError, mx.nd.zeros((2,)).reshape, (3,))


def test_fails_here():
    assert_almost_equal(mx.nd.ones((2,)), np.zeros(2))


def test_out_of_scope_by_helper():
    helper_uses_autograd()


@raises(ValueError)
def test_nose_raises():
    raise ValueError('expected')
'''


def test_selection_shim_and_table(tmp_path, capsys):
    tool = _tool()
    d = tmp_path / 'unittest'
    d.mkdir()
    (d / 'test_fake.py').write_text(FAKE)
    (d / 'test_gluon.py').write_text('def test_x():\n    pass\n')   # excluded by file
    sel, dropped = tool.select_tests(str(d / 'test_fake.py'))
    assert sel == ['test_in_scope', 'test_fails_here', 'test_nose_raises']
    assert dropped == ['test_out_of_scope_by_helper']
    ref = tmp_path / 'mx.json'
    ref.write_text(json.dumps({'test_fake.py': {'test_in_scope': 'passed',
                                                'test_fails_here': 'passed',
                                                'test_nose_raises': 'passed'}}))
    out = tmp_path / 'ff.json'
    table = tmp_path / 'table.txt'
    assert tool.main([str(d), '--ref', str(ref), '--json', str(out), '--table', str(table),
                      '--python', sys.executable, '--timeout', '300']) == 0
    res = json.loads(out.read_text())['test_fake.py']
    assert res['test_in_scope'] == 'passed' and res['test_nose_raises'] == 'passed'
    assert res['test_fails_here'].startswith('failed')
    lines = table.read_text().splitlines()
    assert lines[1].split() == ['test_fake.py', '3', '3', '2', '67']
    assert lines[-1].split()[0] == 'TOTAL' and 'test_gluon.py' not in table.read_text()
