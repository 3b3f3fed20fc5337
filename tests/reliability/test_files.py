"""File failures: one FFError naming the file, checksummed .states, no litter."""
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import ffnumba as ff
from ffnumba.base import FFError, ShapeError
from ffnumba.ndarray import params_io


def _module():
    data = ff.sym.Variable('data')
    net = ff.sym.SoftmaxOutput(ff.sym.FullyConnected(data, num_hidden=3, name='fc'),
                               name='softmax')
    mod = ff.mod.Module(net, context=ff.cpu())
    mod.bind([('data', (4, 5))], [('softmax_label', (4,))])
    mod.init_params()
    mod.init_optimizer(optimizer='adam')
    mod.forward_backward(ff.io.DataBatch([ff.nd.ones((4, 5))], [ff.nd.array([0, 1, 2, 0])]))
    mod.update()
    return mod


def test_states_checksum_detects_every_flipped_byte_in_the_arrays_and_header(tmp_path):
    mod = _module()
    path = str(tmp_path / 'x.states')
    mod.save_optimizer_states(path)
    good = open(path, 'rb').read()
    mod.load_optimizer_states(path)         # round trip
    bad_loads = 0
    for pos in range(0, len(good), max(1, len(good) // 60)):
        data = bytearray(good)
        data[pos] ^= 0x01
        open(path, 'wb').write(bytes(data))
        with pytest.raises(FFError, match=str(tmp_path)):
            mod.load_optimizer_states(path)
        bad_loads += 1
    assert bad_loads >= 50


def test_states_without_checksum_still_load():
    upd = ff.optimizer.get_updater(ff.optimizer.create('sgd', momentum=0.9))
    upd(0, ff.nd.ones((3,)), ff.nd.ones((3,)))
    blob = upd.get_states()
    data = params_io.loads(blob)
    doc = json.loads(data['__ffnumba_states__'].asnumpy().tobytes().decode())
    assert 'sha256' in doc['checksum']
    del doc['checksum']                      # a file from before the checksum existed
    data['__ffnumba_states__'] = ff.nd.array(
        np.frombuffer(json.dumps(doc, sort_keys=True).encode(), np.uint8), dtype='uint8')
    upd2 = ff.optimizer.get_updater(ff.optimizer.create('sgd', momentum=0.9))
    upd2.set_states(params_io.dumps(data))
    np.testing.assert_array_equal(upd2.states[0].asnumpy(), upd.states[0].asnumpy())


class _Evil:
    def __reduce__(self):
        return (os.system, ('echo pwned',))


@pytest.mark.parametrize('proto', [0, 1, 2, 5])
def test_pickles_of_every_protocol_get_the_pickle_refusal(tmp_path, proto):
    blob = pickle.dumps({0: _Evil()}, protocol=proto)
    with pytest.raises(FFError, match='pickle'):
        ff.optimizer.get_updater(ff.optimizer.create('sgd')).set_states(blob)
    path = str(tmp_path / 'old.states')
    open(path, 'wb').write(blob)
    with pytest.raises(FFError, match='pickle') as e:
        _module().load_optimizer_states(path)
    assert path in str(e.value)
    with pytest.raises(FFError, match='pickle'):
        ff.nd.load(path)


def test_module_state_file_errors_name_the_file(tmp_path):
    mod = _module()
    path = str(tmp_path / 'cut.states')
    mod.save_optimizer_states(path)
    data = open(path, 'rb').read()
    open(path, 'wb').write(data[:len(data) // 3])
    with pytest.raises(FFError, match='cut.states'):
        mod.load_optimizer_states(path)
    with pytest.raises(FFError, match='missing.states'):
        mod.load_optimizer_states(str(tmp_path / 'missing.states'))


def test_nd_load_refuses_devices_and_folders(tmp_path):
    with pytest.raises(FFError, match='not a regular file'):
        ff.nd.load('/dev/zero')
    with pytest.raises(FFError, match=str(tmp_path)):
        ff.nd.load(str(tmp_path))


def test_symbol_save_into_missing_folder_names_the_file(tmp_path):
    target = str(tmp_path / 'no' / 'a.json')
    with pytest.raises(FFError, match='cannot write .*no/a.json') as e:
        ff.sym.Variable('x').save(target)
    assert isinstance(e.value, OSError) and '.tmp' not in str(e.value)


def test_deep_and_malformed_json(tmp_path):
    with pytest.raises(FFError, match='nested too deeply'):
        ff.sym.load_json('[' * 100000 + ']' * 100000)
    with pytest.raises(FFError, match='malformed graph') as e:
        ff.sym.load_json('{"nodes": [{"op": "null"}], "heads": [[5, 0, 0]]}')
    assert 'KeyError' not in str(e.value)


@pytest.mark.parametrize('attr', ['bogus', '(', '(2, 1e400)', '[1.5]', '(' * 5000])
def test_bad_shape_attributes(attr):
    x = ff.sym.Variable('x', attr={'__shape__': attr})
    with pytest.raises(ShapeError, match='__shape__'):
        ff.sym.FullyConnected(x, num_hidden=2).infer_shape()


def test_huge_num_args_refused_quickly():
    with pytest.raises(FFError, match='num_args'):
        ff.sym.Concat(ff.sym.Variable('a'), num_args=10 ** 12)
    with pytest.raises(FFError, match='num_outputs'):
        ff.sym.SliceChannel(ff.sym.Variable('a'), num_outputs=10 ** 12)


_KILL_MID_SAVE = r'''
import os, signal, sys
import ffnumba as ff
from ffnumba.ndarray import params_io
real = params_io.os.fsync
def die(fd):
    os.kill(os.getpid(), signal.SIGKILL)     # killed mid-write: the temporary stays
params_io.os.fsync = die
ff.nd.save(sys.argv[1], {'a': ff.nd.ones((1000,))})
'''


def test_save_killed_mid_write_leaves_temp_that_next_save_removes(tmp_path):
    target = str(tmp_path / 'ck.params')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, '-c', _KILL_MID_SAVE, target], env=env)
    assert r.returncode == -9
    litter = [n for n in os.listdir(tmp_path) if n.endswith('.tmp')]
    assert len(litter) == 1 and not os.path.exists(target)
    ff.nd.save(target, {'a': ff.nd.zeros((2,))})
    assert os.listdir(tmp_path) == ['ck.params']
    np.testing.assert_array_equal(ff.nd.load(target)['a'].asnumpy(), [0, 0])


def test_cleanup_spares_a_temporary_a_live_writer_holds(tmp_path):
    import fcntl
    target = str(tmp_path / 'ck.params')
    live = str(tmp_path / '.ck.params.live.tmp')
    with open(live, 'wb') as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        ff.nd.save(target, {'a': ff.nd.zeros((2,))})
        assert os.path.exists(live)
    ff.nd.save(target, {'a': ff.nd.zeros((2,))})
    assert not os.path.exists(live)
