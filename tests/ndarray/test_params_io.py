"""MXNet's binary NDArray format: real MXNet files, round trips, corruption, atomic writes."""
import os
import struct

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba.ndarray as nd
from ffnumba.base import DTypeError, FFError, ParamError
from ffnumba.ndarray import params_io

DATA = os.path.join(os.path.dirname(__file__), '..', 'data', 'params')
EXPECTED = dict(np.load(os.path.join(DATA, 'expected.npz')))
CASES = sorted({k.split('|')[0] for k in EXPECTED} | {'empty_list'})
DTYPES = ['float16', 'float32', 'float64', 'uint8', 'int8', 'int32', 'int64', 'bool']


def _path(case):
    return os.path.join(DATA, case + '.params')


def _raw(case):
    with open(_path(case), 'rb') as f:
        return f.read()


# ------------------------------------------------------------ real MXNet files
@pytest.mark.parametrize('case', CASES)
def test_mxnet_file_decodes_to_expected_values(case):
    got = nd.load(_path(case))
    want = {k.split('|', 1)[1]: v for k, v in EXPECTED.items() if k.split('|')[0] == case}
    if isinstance(got, list):
        got = {str(i): v for i, v in enumerate(got)}
    assert sorted(got) == sorted(want)
    for k, v in got.items():
        assert isinstance(v, nd.NDArray) and str(v.context) == 'cpu(0)'
        a = v.asnumpy()
        assert a.dtype == want[k].dtype and a.shape == want[k].shape, k
        np.testing.assert_array_equal(a, want[k])


@pytest.mark.parametrize('case', [c for c in CASES if c != 'sparse'])
def test_dumps_is_byte_identical_to_mxnet(case):
    raw = _raw(case)
    assert nd.dumps(nd.load(_path(case))) == raw


def test_dumps_from_numpy_matches_mxnet_checkpoint():
    want = {k.split('|', 1)[1]: v for k, v in EXPECTED.items() if k.startswith('checkpoint|')}
    order = ['arg:fc1_weight', 'arg:fc1_bias', 'aux:bn_moving_mean']  # MXNet's dict order
    assert nd.dumps({k: want[k] for k in order}) == _raw('checkpoint')
    assert nd.dumps({k: nd.array(want[k], dtype=want[k].dtype) for k in order}) == \
        _raw('checkpoint')


def test_single_array_loads_as_list_of_one(tmp_path):
    f = tmp_path / 'one.params'
    nd.save(f, nd.array([1, 2, 3]))
    out = nd.load(str(f))
    assert isinstance(out, list) and len(out) == 1
    np.testing.assert_array_equal(out[0].asnumpy(), [1, 2, 3])
    assert _raw('single') == nd.dumps(nd.load(_path('single'))[0])


def test_sparse_records_are_densified():
    out = nd.load(_path('sparse'))
    assert out['rsp'].shape == (4, 3) and out['csr'].shape == (4, 3)
    np.testing.assert_array_equal(out['rsp'].asnumpy(), out['csr'].asnumpy())
    assert not out['zero_rsp'].asnumpy().any()


# ------------------------------------------------------------ round trips
_shapes = st.lists(st.integers(0, 3), min_size=0, max_size=4).map(tuple)


@st.composite
def _arrays(draw):
    dt = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(_shapes)
    seed = draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    if dt.kind == 'b':
        return rng.random(shape) > 0.5
    if dt.kind == 'f':
        return (rng.standard_normal(shape) * 100).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)


@given(arrays=st.lists(_arrays(), max_size=4), as_dict=st.booleans())
def test_round_trip_keeps_values_dtypes_and_shapes(arrays, as_dict):
    data = {'arg:p%d' % i: a for i, a in enumerate(arrays)} if as_dict else arrays
    out = nd.loads(nd.dumps(data))
    if as_dict and arrays:
        assert list(out) == list(data)
        pairs = [(out[k], data[k]) for k in data]
    else:
        assert isinstance(out, list)
        pairs = list(zip(out, arrays))
    assert len(pairs) == len(arrays)
    for got, want in pairs:
        a = got.asnumpy()
        assert a.dtype == want.dtype and a.shape == want.shape
        np.testing.assert_array_equal(a, want)


@given(arr=_arrays())
def test_record_size_is_header_plus_data(arr):
    rec = params_io.encode_record(arr)
    assert len(rec) == 4 + 4 + 4 + 8 * arr.ndim + 12 + arr.nbytes
    back = params_io.record_from_bytes(rec)
    assert back.shape == arr.shape and back.dtype == arr.dtype


def test_zero_d_array_switches_file_to_numpy_shape_records():
    raw = nd.dumps([np.float32(2.5).reshape(()), np.ones(2, np.float32)])
    assert raw.count(struct.pack('<I', params_io.V3_MAGIC)) == 2
    out = nd.loads(raw)
    assert out[0].shape == () and out[0].asscalar() == 2.5


# ------------------------------------------------------------ old layouts
def _file(records, names=()):
    body = struct.pack('<QQQ', 0x112, 0, len(records)) + b''.join(records)
    body += struct.pack('<Q', len(names))
    for n in names:
        body += struct.pack('<Q', len(n)) + n.encode()
    return body


def test_reads_v1_and_legacy_records():
    data = np.arange(6, dtype=np.float64).reshape(2, 3)
    v1 = struct.pack('<Ii2q', params_io.V1_MAGIC, 2, 2, 3) + struct.pack('<iii', 1, 0, 1) \
        + data.tobytes()
    legacy = struct.pack('<I2I', 2, 2, 3) + struct.pack('<iii', 1, 0, 1) + data.tobytes()
    out = nd.loads(_file([v1, legacy], ['a', 'b']))
    np.testing.assert_array_equal(out['a'].asnumpy(), data)
    np.testing.assert_array_equal(out['b'].asnumpy(), data)


def test_unknown_shape_record_is_an_empty_array():
    none = struct.pack('<Iii', params_io.V2_MAGIC, 0, 0)
    out = nd.loads(_file([none]))
    assert out[0].shape == (0,)


def test_bfloat16_widens_to_float32():
    vals = np.array([1.5, -2.0, 3.0], np.float32)
    bf = (vals.view(np.uint32) >> 16).astype(np.uint16)
    rec = struct.pack('<Iiiq', params_io.V2_MAGIC, 0, 1, 3) + struct.pack('<iii', 1, 0, 12) \
        + bf.tobytes()
    out = nd.loads(_file([rec]))[0].asnumpy()
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, vals)


# ------------------------------------------------------------ corrupted files
def _load_err(buf, match):
    with pytest.raises(FFError, match=match):
        nd.loads(buf, source='bad.params')


def test_every_truncation_is_an_fferror_naming_the_file():
    raw = _raw('checkpoint')
    for cut in range(len(raw)):
        with pytest.raises(FFError, match='bad.params'):
            nd.loads(raw[:cut], source='bad.params')


@given(pos=st.integers(0, 277), byte=st.integers(0, 255))
def test_any_single_byte_change_loads_or_raises_fferror(pos, byte):
    raw = bytearray(_raw('checkpoint'))
    raw[pos] = byte
    try:
        out = nd.loads(bytes(raw))
    except FFError:
        return
    assert isinstance(out, (list, dict))


def test_specific_defects_are_named():
    raw = _raw('small')
    _load_err(raw + b'\0', 'trailing')
    _load_err(b'\x13' + raw[1:], 'header magic')
    magic_at = 24
    _load_err(raw[:magic_at] + b'\xde\xad\xbe\xef' + raw[magic_at + 4:], 'bad magic')
    dtype_at = magic_at + 4 + 4 + 4 + 16 + 8
    assert struct.unpack_from('<i', raw, dtype_at)[0] == 0
    _load_err(raw[:dtype_at] + struct.pack('<i', 9) + raw[dtype_at + 4:], 'unknown dtype code 9')
    _load_err(raw[:magic_at + 4] + struct.pack('<i', 4) + raw[magic_at + 8:],
              'unknown storage type 4')
    _load_err(raw[:magic_at + 12] + struct.pack('<q', -2) + raw[magic_at + 20:],
              'negative dimension')
    _load_err(raw[:magic_at + 12] + struct.pack('<q', 2 ** 40) + raw[magic_at + 20:],
              'truncated or corrupted')
    _load_err(raw[:16] + struct.pack('<Q', 3) + raw[24:], 'array 2')
    _load_err(b'\x80\x04\x95' + b'\0' * 40, 'pickle')
    _load_err(b'', 'too short')


def test_name_count_mismatch_and_bad_utf8():
    rec = params_io.encode_record(np.ones(2, np.float32))
    _load_err(_file([rec, rec], ['only_one']), '2 arrays but 1 names')
    bad = _file([rec], ['x'])[:-1] + b'\xff'
    _load_err(bad, 'UTF-8')


def test_missing_file_is_fferror(tmp_path):
    with pytest.raises(FFError, match='nope.params'):
        nd.load(tmp_path / 'nope.params')


# ------------------------------------------------------------ saving
def test_save_rejects_bad_inputs(tmp_path):
    f = tmp_path / 'x.params'
    with pytest.raises(ParamError, match='data'):
        nd.save(f, 3.0)
    with pytest.raises(ParamError, match='keys must be str'):
        nd.save(f, {1: nd.ones((1,))})
    with pytest.raises(ParamError, match=r"data\[1\]"):
        nd.save(f, [nd.ones((1,)), 'x'])
    with pytest.raises(DTypeError):
        nd.save(f, [np.ones(2, np.complex64)])
    assert not os.listdir(tmp_path)


def test_save_is_atomic_and_leaves_no_temporary(tmp_path, monkeypatch):
    f = tmp_path / 'm.params'
    nd.save(f, {'arg:w': nd.ones((2, 2))})
    before = f.read_bytes()

    def boom(*a, **k):
        raise OSError('disk full')
    monkeypatch.setattr(params_io.os, 'replace', boom)
    with pytest.raises(OSError, match='disk full'):
        nd.save(f, {'arg:w': nd.zeros((3, 3))})
    monkeypatch.undo()
    assert f.read_bytes() == before
    assert os.listdir(tmp_path) == ['m.params']
    nd.save(str(f), [nd.zeros((3,))])
    assert os.listdir(tmp_path) == ['m.params']
    assert nd.load(f)[0].shape == (3,)
    assert (os.stat(f).st_mode & 0o777) == 0o666 & ~params_io._UMASK
