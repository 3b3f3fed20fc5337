"""MXNet's binary NDArray list format: ``nd.save``/``nd.load`` and ``.params`` files.

Layout (little-endian), as MXNet 1.x writes it::

    uint64 0x112, uint64 0                      list header, reserved word
    uint64 n                                    number of arrays
    n records:
        uint32 magic                            0xF993FAC9 (V2) or 0xF993FACA (V3, numpy shape)
        int32  stype                            0 dense, 1 row_sparse, 2 csr
        [int32 ndim, int64 dims]                storage shape (sparse only)
        int32  ndim, int64 dims[ndim]           shape; V2 ndim 0 / V3 ndim -1: no data, record ends
        int32  dev_type, int32 dev_id           1 cpu, 2 gpu, 3 cpu_pinned, 5 cpu_shared
        int32  dtype code                  0 f32 1 f64 2 f16 3 u8 4 i32 5 i8 6 i64 7 bool 12 bf16
        per aux array: int32 type, shape        (sparse only: row_sparse idx; csr indptr, idx)
        raw C-order data, then raw aux data
    uint64 k (0 for a list, else n), then k times uint64 length + UTF-8 name

Older records are read too: V1 (magic 0xF993FAC8, no storage type) and the
legacy layout whose first word is the ndim followed by uint32 dims.

Writing produces exactly MXNet's bytes: dense V2 records, or V3 records for
the whole file when an array is 0-d (what ``mx.npx.save`` writes, since
MXNet's legacy shapes cannot hold a scalar). Reading densifies row_sparse and
csr records and widens bfloat16 to float32 (numpy has no bfloat16). Loaded
arrays live on ``cpu(0)`` whatever context they were saved from.

Every defect of a file (bad header, bad magic, unknown dtype or storage code,
data running past the end, trailing bytes) raises
:class:`~ffnumba.base.FFError` naming the file and the problem.

Source: MXNet 1.x ``src/ndarray/ndarray.cc`` (``NDArray::Save``/``Load``),
decoded and checked byte-for-byte against files written by MXNet 1.9.1.
"""
import os
import stat
import struct
import tempfile

import numpy as np

from ..base import DTypeError, FFError, ParamError
from ..dtype import DTYPE_CODES, dtype_code, np_dtype

__all__ = ['save', 'load', 'dumps', 'loads', 'encode_record', 'record_from_bytes', 'atomic_write',
           'LIST_MAGIC', 'V1_MAGIC', 'V2_MAGIC', 'V3_MAGIC']

LIST_MAGIC = 0x112
V1_MAGIC = 0xF993FAC8
V2_MAGIC = 0xF993FAC9
V3_MAGIC = 0xF993FACA
_BF16 = 12
_MAX_NDIM = 32
_DEV_TYPES = (1, 2, 3, 5)
_STYPES = {0: 'default', 1: 'row_sparse', 2: 'csr'}
# Read the process umask once (os.umask can only be read by setting it).
_UMASK = os.umask(0o22)
os.umask(_UMASK)


# ---------------------------------------------------------------- writing
def _host(value, what):
    """(C-contiguous numpy array, (dev_type, dev_id)) of an NDArray or array_like."""
    from .ndarray import NDArray
    if isinstance(value, NDArray):
        ctx = value.context
        host = value.asnumpy()
        dev = (ctx.device_typeid, ctx.device_id)
    elif isinstance(value, (np.ndarray, np.generic)):
        host, dev = np.asarray(value), (1, 0)
    else:
        raise ParamError('nd.save: %s must be an NDArray or a numpy array. Received: %r'
                         % (what, type(value).__name__))
    np_dtype(host.dtype, 'nd.save: %s' % what)
    return _contiguous(host), dev


def _contiguous(a):
    # np.ascontiguousarray would turn a 0-d array into shape (1,)
    a = np.asarray(a)
    return a if a.flags.c_contiguous else a.copy(order='C')


def encode_record(arr, dev=(1, 0), np_shape=None):
    """The bytes of one dense array record (also MXNet's pickled NDArray payload).

    Parameters
    ----------
    arr : numpy.ndarray
        Any supported dtype (float16/32/64, uint8, int8, int32, int64, bool).
    dev : (int, int), default (1, 0)
        The device type code and id stored in the record (``cpu(0)``).
    np_shape : bool, optional
        Write a V3 (numpy-shape) record; default: only for a 0-d array.

    Returns
    -------
    bytes
    """
    arr = _contiguous(arr)
    code = dtype_code(arr.dtype)
    if np_shape is None:
        np_shape = arr.ndim == 0
    head = struct.pack('<Ii', V3_MAGIC if np_shape else V2_MAGIC, 0)
    shape = struct.pack('<i%dq' % arr.ndim, arr.ndim, *arr.shape)
    meta = struct.pack('<iii', int(dev[0]), int(dev[1]), code)
    return b''.join((head, shape, meta, arr.astype(arr.dtype.newbyteorder('<'), copy=False)
                     .tobytes()))


def _normalise(data):
    """(list of (host, dev), list of names or None) for what ``save`` accepts."""
    from .ndarray import NDArray
    if isinstance(data, (NDArray, np.ndarray, np.generic)):
        return [_host(data, 'data')], None
    if isinstance(data, dict):
        names, arrays = [], []
        for k, v in data.items():
            if not isinstance(k, str):
                raise ParamError('nd.save: dict keys must be str. Received: key=%r' % (k,))
            names.append(k)
            arrays.append(_host(v, 'data[%r]' % k))
        return arrays, names
    if isinstance(data, (list, tuple)):
        return [_host(v, 'data[%d]' % i) for i, v in enumerate(data)], None
    raise ParamError('nd.save: `data` must be an NDArray, a list of NDArrays or a dict '
                     'str->NDArray. Received: data of type %s' % type(data).__name__)


def _chunks(data):
    arrays, names = _normalise(data)
    np_shape = any(a.ndim == 0 for a, _ in arrays)
    yield struct.pack('<QQQ', LIST_MAGIC, 0, len(arrays))
    for a, dev in arrays:
        yield encode_record(a, dev, np_shape)
    names = names or []
    yield struct.pack('<Q', len(names))
    for n in names:
        b = n.encode('utf-8')
        yield struct.pack('<Q', len(b))
        yield b


def dumps(data):
    """The bytes ``nd.save`` would write for ``data`` (see :func:`save`)."""
    return b''.join(_chunks(data))


class WriteError(FFError, OSError):
    """A file that cannot be written (also an ``OSError``)."""


def _lock(fd):
    """Hold an exclusive lock on an open temporary file while it is written (POSIX)."""
    try:
        import fcntl
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except (ImportError, OSError):
        return False


def _remove_stale(folder, base, mine):
    """Remove temporaries of ``base`` left by saves that died mid-write.

    A live writer holds a lock on its temporary file (released when its process
    dies), so only the files nobody holds are removed; where locks are not
    available, only those older than an hour.
    """
    import time
    prefix = '.%s.' % base
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith('.tmp')]
    except OSError:
        return
    for n in names:
        path = os.path.join(folder, n)
        if path == mine:
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            try:
                import fcntl
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                stale = True
            except ImportError:
                stale = time.time() - os.fstat(fd).st_mtime > 3600
            except OSError:
                stale = False       # a save in progress holds it
            if stale:
                os.unlink(path)
        except OSError:
            pass
        finally:
            os.close(fd)


def atomic_write(fname, chunks):
    """Write byte chunks to ``fname`` through a temporary file and a rename.

    The temporary file (``.<name>.<random>.tmp``) sits in the same folder, is
    locked while written, flushed and fsync'ed, then ``os.replace``'d over
    ``fname``: a crash never leaves a half-written file under the real name.
    After a successful write, temporaries of the same ``fname`` left by saves
    killed mid-write (unlocked ones) are removed.

    This is the one home of atomic writes (``nd.save``, ``Symbol.save``,
    checkpoints, optimizer states).

    Raises
    ------
    WriteError
        (an FFError and OSError) when the folder does not exist or the file
        cannot be written; the message names ``fname``.
    """
    fname = os.fspath(fname)
    folder = os.path.dirname(os.path.abspath(fname))
    base = os.path.basename(fname)
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix='.%s.' % base, suffix='.tmp')
    except OSError as e:
        raise WriteError('cannot write %s: %s' % (fname, e.strerror or e)) from None
    _lock(fd)
    try:
        with os.fdopen(fd, 'wb') as f:
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
            os.chmod(tmp, 0o666 & ~_UMASK)
            os.replace(tmp, fname)      # still locked: a cleaner never takes it for stale
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise WriteError('cannot write %s: %s' % (fname, e.strerror or e)) from None
        raise
    try:  # make the rename itself durable (POSIX); best effort elsewhere
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    _remove_stale(folder, base, tmp)


def save(fname, data):
    """Save arrays to a file in MXNet's binary format (MXNet ``nd.save``).

    Parameters
    ----------
    fname : str or os.PathLike
        Destination; written atomically (temporary file + rename).
    data : NDArray, list of NDArray or dict str -> NDArray
        numpy arrays are accepted in place of NDArrays (stored as ``cpu(0)``).
        Checkpoints use the keys ``arg:<name>`` and ``aux:<name>``.

    Raises
    ------
    ParamError
        If ``data`` is not one of the accepted forms.
    DTypeError
        For a dtype MXNet cannot store.

    Examples
    --------
    >>> import ffnumba as ff, os, tempfile
    >>> f = os.path.join(tempfile.mkdtemp(), 'x.params')
    >>> ff.nd.save(f, {'arg:w': ff.nd.ones((2, 3))})
    >>> ff.nd.load(f)['arg:w'].shape
    (2, 3)
    """
    chunks = list(_chunks(data))  # validate everything before touching the disk
    atomic_write(fname, chunks)


# ---------------------------------------------------------------- reading
class _Reader:
    """Bounds-checked little-endian reads over a bytes buffer."""

    def __init__(self, buf, source):
        self.buf = buf if isinstance(buf, bytes) else bytes(buf)
        self.pos = 0
        self.source = source

    def fail(self, what):
        raise FFError('nd.load: %s: %s (at byte %d of %d)'
                      % (self.source, what, self.pos, len(self.buf)))

    def need(self, n, what):
        if n < 0 or self.pos + n > len(self.buf):
            self.fail('file is truncated or corrupted: %s needs %d bytes, only %d remain'
                      % (what, n, len(self.buf) - self.pos))

    def unpack(self, fmt, what):
        n = struct.calcsize(fmt)
        self.need(n, what)
        v = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return v

    def take(self, n, what):
        self.need(n, what)
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return b

    def shape(self, what, ndim=None, legacy=False):
        if ndim is None:
            (ndim,) = self.unpack('<i', what + ' ndim')
        if ndim == -1:
            return None
        if not 0 <= ndim <= _MAX_NDIM:
            self.fail('%s has an invalid ndim %d' % (what, ndim))
        if ndim == 0:
            return ()
        dims = self.unpack('<%d%s' % (ndim, 'I' if legacy else 'q'), what)
        if any(d < 0 for d in dims):
            self.fail('%s has a negative dimension: %s' % (what, dims))
        return tuple(int(d) for d in dims)

    def array(self, code, shape, what):
        if code == _BF16:
            dt = np.dtype('<u2')
        elif code in DTYPE_CODES:
            dt = DTYPE_CODES[code].newbyteorder('<')
        else:
            self.fail('%s has an unknown dtype code %d (known: %s)'
                      % (what, code, sorted(list(DTYPE_CODES) + [_BF16])))
        count = 1
        for d in shape:
            count *= d
        self.need(count * dt.itemsize, '%s data (%s x %s)' % (what, shape, dt.name))
        a = np.frombuffer(self.buf, dt, count, self.pos).reshape(shape)
        self.pos += count * dt.itemsize
        if code == _BF16:
            return (a.astype(np.uint32) << 16).view(np.float32)
        return a.astype(a.dtype.newbyteorder('='), copy=True)


def _densify(stype, shape, data, aux, r, what):
    out = np.zeros(shape, data.dtype)
    try:
        if stype == 1:
            idx = aux[0].astype(np.int64).reshape(-1)
            if data.shape[:1] != idx.shape or data.shape[1:] != tuple(shape[1:]):
                raise IndexError('row_sparse data %s does not fit indices %s'
                                 % (data.shape, idx.shape))
            out[idx] = data
        else:
            indptr, idx = (a.astype(np.int64).reshape(-1) for a in aux)
            if len(shape) != 2 or indptr.size != shape[0] + 1 or \
                    int(indptr[-1]) != idx.size or idx.size != data.size:
                raise IndexError('csr arrays do not fit shape %s' % (shape,))
            rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
            out[rows, idx] = data.reshape(-1)
    except (IndexError, ValueError) as e:
        r.fail('%s: inconsistent sparse record: %s' % (what, e))
    return out


def decode_record(r, what='array'):
    """Read one array record at the reader's position.

    Returns a host numpy array (dense; sparse records are densified); an
    'unknown shape' record (V2 ndim 0, V3 ndim -1) gives an empty float32
    array of shape ``(0,)``.
    """
    (magic,) = r.unpack('<I', what + ' magic')
    stype = 0
    sshape = None
    if magic in (V2_MAGIC, V3_MAGIC):
        (stype,) = r.unpack('<i', what + ' storage type')
        if stype not in _STYPES:
            r.fail('%s has an unknown storage type %d' % (what, stype))
        if stype:
            sshape = r.shape(what + ' storage shape')
        shape = r.shape(what + ' shape')
        if shape is None or (magic == V2_MAGIC and shape == ()):
            return np.zeros((0,), np.float32)
    elif magic == V1_MAGIC:
        shape = r.shape(what + ' shape')
        if not shape:
            return np.zeros((0,), np.float32)
    elif magic <= _MAX_NDIM:  # legacy record: the first word is the ndim
        shape = r.shape(what + ' shape', ndim=magic, legacy=True)
        if shape == ():
            return np.zeros((0,), np.float32)
    else:
        r.pos -= 4
        r.fail('%s has a bad magic number 0x%08X (expected 0x%08X)' % (what, magic, V2_MAGIC))
    dev, _, code = r.unpack('<iii', what + ' context and dtype')
    if dev not in _DEV_TYPES:
        r.fail('%s has an invalid device type %d' % (what, dev))
    if not stype:
        return r.array(code, shape, what)
    aux_meta = []
    for k in range(stype):
        (acode,) = r.unpack('<i', what + ' aux type')
        aux_meta.append((acode, r.shape(what + ' aux shape')))
    data = r.array(code, sshape, what)
    aux = [r.array(acode, ashape, what + ' aux') for acode, ashape in aux_meta]
    return _densify(stype, shape, data, aux, r, what)


def record_from_bytes(buf, source='<record>'):
    """Decode one standalone array record (e.g. a pickled MXNet NDArray's handle).

    Raises
    ------
    FFError
        If the record is malformed or followed by extra bytes.
    """
    r = _Reader(buf, source)
    a = decode_record(r)
    if r.pos != len(r.buf):
        r.fail('%d unexpected trailing bytes after the array record' % (len(r.buf) - r.pos))
    return a


def looks_like_pickle(buf):
    """Whether ``buf`` is (probably) a Python pickle of any protocol.

    Protocol 2+ pickles start with the PROTO opcode ``0x80``; protocols 0 and 1
    start with an opcode such as ``(``, ``]``, ``}``, ``c`` and every pickle ends
    with the STOP opcode ``.``. Neither MXNet's NDArray files (first byte
    0x12) nor ffnumba's state files look like that.
    """
    buf = bytes(buf[:1]) + bytes(buf[-1:])
    if buf[:1] == b'\x80':
        return True
    return len(buf) == 2 and buf[:1] in b'(]}cIFLSVNKJUTX)' and buf[1:] == b'.'


def _decode(buf, source):
    from .ndarray import NDArray
    r = _Reader(buf, source)
    if len(r.buf) < 24:
        r.fail('file is too short (%d bytes) to hold an NDArray list header' % len(r.buf))
    magic, _reserved, n = r.unpack('<QQQ', 'header')
    if magic != LIST_MAGIC:
        r.pos = 0
        if looks_like_pickle(r.buf):
            r.fail('this is a Python pickle, not an NDArray file')
        r.fail('not an MXNet NDArray file: header magic 0x%X (expected 0x%X)'
               % (magic, LIST_MAGIC))
    if n > len(r.buf):
        r.fail('header claims %d arrays, more than the file can hold' % n)
    arrays = [decode_record(r, 'array %d' % i) for i in range(n)]
    (k,) = r.unpack('<Q', 'name count')
    if k not in (0, n):
        r.fail('file has %d arrays but %d names' % (n, k))
    names = []
    for i in range(k):
        (ln,) = r.unpack('<Q', 'name %d length' % i)
        raw = r.take(ln, 'name %d' % i)
        try:
            names.append(raw.decode('utf-8'))
        except UnicodeDecodeError:
            r.fail('name %d is not valid UTF-8' % i)
    if r.pos != len(r.buf):
        r.fail('%d unexpected trailing bytes after the last name' % (len(r.buf) - r.pos))
    nds = [NDArray(a) for a in arrays]
    return dict(zip(names, nds)) if names else nds


def loads(buf, source='<bytes>'):
    """Decode the bytes of an NDArray file (see :func:`load`).

    Parameters
    ----------
    buf : bytes-like
    source : str, default '<bytes>'
        Named in error messages.
    """
    return _decode(buf, source)


def load(fname):
    """Load arrays saved by :func:`save` or by MXNet (MXNet ``nd.load``).

    Parameters
    ----------
    fname : str or os.PathLike

    Returns
    -------
    list of NDArray or dict str -> NDArray
        A dict when the file stores names, else a list (one saved array
        gives a list of one). Arrays are on ``cpu(0)`` with the stored dtypes.

    Raises
    ------
    FFError
        If the file is missing, truncated or corrupted; the message names
        the file and the defect.
    """
    if not isinstance(fname, (str, bytes, os.PathLike)):
        raise DTypeError('nd.load: `fname` must be a path (str or os.PathLike). Received: %r'
                         % (fname,))
    path = os.fspath(fname)
    try:
        with open(path, 'rb') as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                # /dev/zero, a FIFO: no size to bound the reads by, and maybe no end
                raise FFError('nd.load: cannot read %s: not a regular file' % path)
            buf = f.read(st.st_size)
    except OSError as e:
        raise FFError('nd.load: cannot read %s: %s' % (path, e.strerror or e)) from None
    return _decode(buf, path)
