"""NDArray: an array on a device (MXNet ``mx.nd.NDArray``).

A CPU NDArray holds a C-contiguous ``numpy.ndarray``; a GPU NDArray holds a
numba ``DeviceNDArray``. ``np.asarray(nd)`` works through ``__array__``.
Arithmetic between NDArrays broadcasts like numpy (MXNet's NDArray rule);
on a GPU it runs through the host for now (kernels never do).
"""
import numpy as np

from ..base import DTypeError, FFError, ParamError, ShapeError
from ..context import Context, current_context
from ..dtype import np_dtype
from ._device import DeviceMixin, _to_device
from ._mixin import NDArrayMixin

__all__ = ['NDArray', 'array', 'zeros', 'ones', 'empty', 'full', 'arange', 'concat',
           'concatenate', 'waitall', 'from_numpy', 'moveaxis', 'py_slice']

#: Python's ``slice`` (MXNet's ``ndarray.ndarray.py_slice``).
py_slice = slice


class NDArrayIndexError(FFError, IndexError):
    """An index out of an NDArray's range (also an ``IndexError``, as numpy's)."""


class NDArray(NDArrayMixin, DeviceMixin):
    """An n-dimensional array on a context.

    Build one with :func:`array`, :func:`zeros` and friends rather than the
    constructor. The device primitives the executor, kvstores and optimizers
    use (``_host``, ``_copy_from``, ``_add_from``, ``_fill``, ...) come from
    :class:`~ffnumba.ndarray._device.DeviceMixin`.

    Parameters
    ----------
    data : numpy.ndarray or numba DeviceNDArray
        The storage, owned by this NDArray (views share it).
    ctx : Context, optional
        Defaults to ``cpu(0)``.
    """

    __array_priority__ = 1000.0

    def __init__(self, data, ctx=None):
        self._data = data
        self._ctx = ctx if ctx is not None else Context('cpu', 0)

    # ------------------------------------------------------------ properties
    @property
    def shape(self):
        """Tuple of dimensions."""
        return tuple(self._data.shape)

    @property
    def dtype(self):
        """The element type as a numpy type class (``numpy.float32``), as MXNet."""
        return np.dtype(self._data.dtype).type

    @property
    def context(self):
        """The :class:`Context` the array lives on."""
        return self._ctx

    ctx = context

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def stype(self):
        return 'default'

    @property
    def T(self):
        return NDArray(np.ascontiguousarray(self.asnumpy().T), self._ctx).as_in_context(self._ctx)

    @property
    def handle(self):
        """The underlying storage (numpy array or DeviceNDArray)."""
        return self._data

    # ------------------------------------------------------------ conversion
    def asnumpy(self):
        """A numpy copy of the data (a host transfer for a GPU array)."""
        if self._ctx.device_type == 'gpu':
            return self._data.copy_to_host()
        try:
            return np.array(self._data, copy=True)
        except MemoryError:
            raise FFError('asnumpy: cannot copy an array of shape %s and dtype %s (%.3g GB) to '
                          'numpy: out of memory' % (self.shape, self.dtype,
                                                    self._data.nbytes / 1e9)) from None

    def asscalar(self):
        """The value of a size-1 array as a numpy scalar.

        Raises
        ------
        ShapeError
            If the array does not have exactly one element.
        """
        if self.size != 1:
            raise ShapeError('The current array is not a scalar: shape %s' % (self.shape,))
        return self.asnumpy().reshape(-1)[0]

    def __array__(self, dtype=None, copy=None):
        a = self._data.copy_to_host() if self._ctx.device_type == 'gpu' else self._data
        return a if dtype is None else a.astype(dtype)

    def astype(self, dtype, copy=True):
        """A copy with elements cast to ``dtype`` (float to int truncates toward 0)."""
        dt = np_dtype(dtype)
        if not copy and np.dtype(self._data.dtype) == dt:
            return self
        return array(self.asnumpy().astype(dt), ctx=self._ctx, dtype=dt)

    def tostype(self, stype):
        """A copy in storage type ``stype``; only ``'default'`` (dense) exists here.

        Raises
        ------
        FFError
            For ``'row_sparse'``/``'csr'`` (sparse storage is outside ffnumba).
        """
        if stype != 'default':
            raise FFError("tostype: storage type %r is not supported; ffnumba has only "
                          "dense ('default') arrays" % (stype,))
        return self.copy()

    def copy(self):
        """A deep copy on the same context.

        Returns
        -------
        NDArray
            Same shape, dtype and context; its own memory.
        """
        return self.copyto(self._ctx)

    def copyto(self, other):
        """Copy into another NDArray (same shape) or onto a context.

        Returns
        -------
        NDArray
            ``other`` if it is an NDArray, else the new array.
        """
        if isinstance(other, Context):
            return array(self.asnumpy(), ctx=other, dtype=self._data.dtype)
        if not isinstance(other, NDArray):
            raise FFError('copyto: expected an NDArray or Context, got %s' % type(other).__name__)
        if other.shape != self.shape:
            raise ShapeError('copyto: shape mismatch, source %s, target %s'
                             % (self.shape, other.shape))
        other._set(self.asnumpy())
        return other

    def as_in_context(self, context):
        """This array on ``context``: itself if already there, else a copy."""
        return self if context == self._ctx else self.copyto(context)

    def as_nd_ndarray(self):
        """This array itself (MXNet converts ``mx.np`` arrays; ffnumba has one kind).

        Returns
        -------
        NDArray
        """
        return self

    def wait_to_read(self):
        """Block until pending writes finish (kernels are synchronous on the CPU)."""
        if self._ctx.device_type == 'gpu':
            from numba import cuda
            cuda.synchronize()

    def _set(self, host):
        """Overwrite every element from a host array (broadcast allowed)."""
        if self._ctx.device_type == 'gpu':
            full_ = np.broadcast_to(np.asarray(host, dtype=self._data.dtype), self.shape)
            # flat on both sides: numba's CUDA simulator drops unit axes from a host
            # array but not from its own, and refused (4, 4, 1, 1) into (4, 4, 1, 1)
            n = self._data.size
            self._data.reshape(n).copy_to_device(np.ascontiguousarray(full_).reshape(n))
        else:
            self._data[...] = host

    # --------------------------------------------------------------- shaping
    def reshape(self, *shape, **kwargs):
        """A view with a new shape, with the ``Reshape`` operator's codes.

        ``-1`` infers one dimension, ``0`` copies an input axis, ``-2`` copies
        the remaining axes, ``-3`` merges two axes and ``-4 a b`` splits one
        (MXNet ``NDArray.reshape``); ``reverse=True`` applies the codes from
        the right.

        Raises
        ------
        ShapeError
            If the codes do not fit or the sizes differ.
        """
        reverse = bool(kwargs.pop('reverse', False))
        if 'shape' in kwargs:
            shape = kwargs.pop('shape')
        elif len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        if kwargs:
            raise TypeError('reshape: unexpected keyword arguments %s' % sorted(kwargs))
        shape = tuple(int(s) for s in shape)
        if reverse or any(s == 0 or s < -1 for s in shape):
            from ..ops.tensor.shape import _apply_codes
            try:
                if reverse:
                    shape = tuple(_apply_codes(list(shape)[::-1], self.shape[::-1])[::-1])
                else:
                    shape = tuple(_apply_codes(list(shape), self.shape))
            except ValueError as e:
                raise ShapeError('reshape: cannot reshape array of shape %s with codes %s: %s'
                                 % (self.shape, shape, e)) from None
        try:
            data = self._data.reshape(shape)
        except (ValueError, NotImplementedError, TypeError):
            raise ShapeError('reshape: cannot reshape array of shape %s (size %d) into %s'
                             % (self.shape, self.size, shape)) from None
        return NDArray(data, self._ctx)

    def _gpu(self):
        return self._ctx.device_type == 'gpu'

    def __len__(self):
        return self.shape[0]

    def __iter__(self):
        for i in range(self.shape[0]):
            yield self[i]

    # ------------------------------------------------------------ arithmetic
    def _binary(self, other, fn, reverse=False):
        a = self.asnumpy() if self._gpu() else self._data
        b = other.asnumpy() if isinstance(other, NDArray) else other
        if isinstance(other, NDArray) and other.context != self._ctx:
            raise FFError('NDArray arithmetic across contexts %s and %s; copy with '
                          'as_in_context first' % (self._ctx, other.context))
        try:
            out = fn(b, a) if reverse else fn(a, b)
        except ValueError as e:
            raise ShapeError('NDArray: operands could not be broadcast together: %s and %s'
                             % (self.shape, getattr(other, 'shape', ())) ) from e
        except TypeError:   # numpy's UFuncTypeError names its loops
            raise DTypeError('NDArray: cannot do arithmetic between an NDArray of dtype %s and '
                             'a %s' % (a.dtype, type(other).__name__)) from None
        out = np.asarray(out)
        if out.dtype != a.dtype and not isinstance(other, NDArray):
            out = out.astype(a.dtype)   # MXNet: an array-scalar op keeps the array's dtype
        return array(out, ctx=self._ctx, dtype=out.dtype)

    def _inplace(self, other, fn):
        res = self._binary(other, fn)
        self._set(res.asnumpy().astype(self._data.dtype))
        return self

    __add__ = lambda s, o: s._binary(o, np.add)
    __radd__ = lambda s, o: s._binary(o, np.add, True)
    __sub__ = lambda s, o: s._binary(o, np.subtract)
    __rsub__ = lambda s, o: s._binary(o, np.subtract, True)
    __mul__ = lambda s, o: s._binary(o, np.multiply)
    __rmul__ = lambda s, o: s._binary(o, np.multiply, True)
    __pow__ = lambda s, o: s._binary(o, np.power)
    __rpow__ = lambda s, o: s._binary(o, np.power, True)
    __eq__ = lambda s, o: s._binary(o, lambda a, b: (a == b).astype(a.dtype))
    __ne__ = lambda s, o: s._binary(o, lambda a, b: (a != b).astype(a.dtype))
    __gt__ = lambda s, o: s._binary(o, lambda a, b: (a > b).astype(a.dtype))
    __ge__ = lambda s, o: s._binary(o, lambda a, b: (a >= b).astype(a.dtype))
    __lt__ = lambda s, o: s._binary(o, lambda a, b: (a < b).astype(a.dtype))
    __le__ = lambda s, o: s._binary(o, lambda a, b: (a <= b).astype(a.dtype))
    __iadd__ = lambda s, o: s._inplace(o, np.add)
    __isub__ = lambda s, o: s._inplace(o, np.subtract)
    __imul__ = lambda s, o: s._inplace(o, np.multiply)
    __hash__ = object.__hash__

    def __neg__(self):
        return self._binary(-1, np.multiply)

    def __abs__(self):
        return array(np.abs(self.asnumpy()), ctx=self._ctx)

    def __repr__(self):
        return '\n%s\n<NDArray %s @%s>' % (self.asnumpy(), 'x'.join(str(s) for s in self.shape),
                                          self._ctx)

    def zeros_like(self):
        """A new array of zeros with this shape, dtype and context."""
        return zeros(self.shape, self._ctx, self._data.dtype)

    def ones_like(self):
        """A new array of ones with this shape, dtype and context."""
        return ones(self.shape, self._ctx, self._data.dtype)


def from_numpy(ndarray, zero_copy=True, ctx=None):
    """An NDArray from a numpy array (MXNet ``nd.from_numpy``).

    Parameters
    ----------
    ndarray : numpy.ndarray
    zero_copy : bool, default True
        Share the numpy array's memory (CPU only); as in MXNet the numpy
        array becomes read-only and writes go through the NDArray. False
        copies.
    ctx : Context, optional
        Default: the current context.

    Returns
    -------
    NDArray
        Same dtype as ``ndarray``.

    Raises
    ------
    ShapeError
        ``zero_copy=True`` on an array that is not C-contiguous.
    """
    ctx = ctx or current_context()
    if ctx.device_type == 'gpu':
        return NDArray(_to_device(ndarray, ctx), ctx)
    if zero_copy:
        if not ndarray.flags['C_CONTIGUOUS']:
            raise ShapeError('from_numpy: zero_copy needs a C-contiguous array; use '
                             'np.ascontiguousarray or zero_copy=False')
        if ndarray.flags.writeable:
            view = np.ndarray(ndarray.shape, ndarray.dtype, buffer=ndarray.data)
        else:  # already handed over once: share the memory again, writable
            import ctypes
            raw = (ctypes.c_char * max(ndarray.nbytes, 1)).from_address(ndarray.ctypes.data)
            view = np.frombuffer(raw, dtype=ndarray.dtype, count=ndarray.size)
            view = view.reshape(ndarray.shape)
        ndarray.flags.writeable = False  # as MXNet: the NDArray owns the memory now
        out = NDArray(view, ctx)
        out._numpy_owner = ndarray       # keeps the shared memory alive
        return out
    return NDArray(np.array(ndarray, order='C', copy=True), ctx)


from ._objects import check_numeric  # noqa: E402


def array(source_array, ctx=None, dtype=None):
    """An NDArray copied from ``source_array``.

    Parameters
    ----------
    source_array : array_like or NDArray
    ctx : Context, optional
        Defaults to :func:`~ffnumba.context.current_context`.
    dtype : str or numpy dtype, optional
        Defaults to float32 for non-NDArray sources (MXNet's rule, even for
        int64 numpy input) and to the source's dtype for an NDArray.

    Returns
    -------
    NDArray
    """
    ctx = ctx or current_context()
    if isinstance(source_array, NDArray):
        host = source_array.asnumpy()
        dt = np_dtype(dtype) if dtype is not None else host.dtype
    else:
        try:
            host = np.asarray(source_array)
        except ValueError as e:  # ragged nested lists
            raise ShapeError('array: the source is not a regular (rectangular) array: %s'
                             % e) from None
        dt = np_dtype(dtype) if dtype is not None else np.dtype('float32')
        check_numeric(host, 'array')      # None would become NaN silently
    try:
        host = np.array(host, dtype=dt, order='C', copy=True)
    except (TypeError, ValueError):
        raise DTypeError('array: cannot convert a source of dtype %s to %s'
                         % (host.dtype, dt)) from None
    if ctx.device_type == 'gpu':
        return NDArray(_to_device(host, ctx), ctx)
    return NDArray(host, ctx)


def _shape(shape):
    try:
        if isinstance(shape, (int, np.integer)):
            return (int(shape),)
        shape = tuple(shape)
        if not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in shape):
            raise TypeError
        return tuple(int(s) for s in shape)
    except TypeError:
        raise ParamError('shape must be an int or a tuple of ints. Received: %r' % (shape,)) \
            from None


def empty(shape, ctx=None, dtype='float32', out=None):
    """An uninitialised NDArray (zero-filled here, as MXNet's reads look)."""
    return zeros(shape, ctx, dtype, out=out)



def _host_alloc(fn, shape, dtype, *fill):
    """``fn(shape, *fill, dtype=dtype)``, with running out of memory as an FFError."""
    try:
        return fn(shape, *fill, dtype=dtype)
    except (MemoryError, ValueError, OverflowError) as e:
        if not isinstance(e, MemoryError) and 'big' not in str(e) and 'dimension' not in str(e):
            raise           # numpy's "array is too big" / "Maximum allowed dimension exceeded"
        nbytes = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
        raise FFError('cannot allocate an array of shape %s and dtype %s (%.3g GB): out of '
                      'memory. Check the shapes (a huge pad, scale or batch size?)'
                      % (tuple(shape), dtype, nbytes / 1e9)) from None


def _fill_out(out, host):
    if out.shape != host.shape:
        raise ShapeError('`out` has shape %s; the result has %s' % (out.shape, host.shape))
    out[:] = host
    return out


def zeros(shape, ctx=None, dtype='float32', stype=None, out=None, **kwargs):
    """An NDArray of zeros. ``shape``: int or tuple; ``dtype`` default float32;
    ``out``: an NDArray to fill and return instead."""
    ctx = ctx or current_context()
    host = _host_alloc(np.zeros, _shape(shape), np_dtype(dtype))
    if out is not None:
        return _fill_out(out, host)
    if ctx.device_type == 'gpu':
        return NDArray(_to_device(host, ctx), ctx)
    return NDArray(host, ctx)


def ones(shape, ctx=None, dtype='float32', out=None, **kwargs):
    """An NDArray of ones (``out``: filled and returned instead)."""
    return full(shape, 1, ctx, dtype, out=out)


def full(shape, val, ctx=None, dtype='float32', out=None):
    """An NDArray filled with ``val``."""
    ctx = ctx or current_context()
    try:
        host = _host_alloc(np.full, _shape(shape), np_dtype(dtype), val)
    except (ValueError, TypeError):
        raise ParamError('full: cannot fill an array of dtype %s with %r'
                         % (np_dtype(dtype), val)) from None
    if out is not None:
        return _fill_out(out, host)
    if ctx.device_type == 'gpu':
        return NDArray(_to_device(host, ctx), ctx)
    return NDArray(host, ctx)


def arange(start, stop=None, step=1.0, repeat=1, ctx=None, dtype='float32', infer_range=False,
           out=None):
    """Evenly spaced values in ``[start, stop)``, each repeated ``repeat`` times
    (``out``: filled and returned instead)."""
    host = np.arange(start, stop, step, dtype=np_dtype(dtype))
    if repeat > 1:
        host = np.repeat(host, repeat)
    if out is not None:
        return _fill_out(out, host)
    return array(host, ctx=ctx, dtype=dtype)


def concatenate(arrays, axis=0, always_copy=True):
    """Join NDArrays along ``axis``.

    Raises
    ------
    ShapeError
        If the shapes differ off ``axis``.
    """
    if not arrays:
        raise ShapeError('concatenate: need at least one array')
    try:
        host = np.concatenate([a.asnumpy() for a in arrays], axis=axis)
    except (ValueError, IndexError):       # numpy's own wording is not repeated
        raise ShapeError('concatenate: shapes %s do not fit along axis %d (every other axis '
                         'must match)' % ([a.shape for a in arrays], axis)) from None
    return array(host, ctx=arrays[0].context, dtype=host.dtype)


def concat(*arrays, dim=1, num_args=None):
    """Join NDArrays along ``dim`` (MXNet ``nd.concat``; default dim 1).

    ``num_args``, when given, must equal the number of arrays (MXNet's check).
    """
    if num_args is not None and num_args != len(arrays):
        raise ParamError('concat: num_args=%r but %d arrays were given' % (num_args, len(arrays)))
    return concatenate(list(arrays), axis=dim)


def _axes(axes, ndim, what):
    axes = [axes] if isinstance(axes, (int, np.integer)) else list(axes)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ShapeError('moveaxis: `%s` axis %r is out of range for %d dimensions'
                             % (what, a, ndim))
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ShapeError('moveaxis: repeated axis in `%s`: %r' % (what, axes))
    return out


def moveaxis(tensor, source, destination):
    """Move axes ``source`` of ``tensor`` to positions ``destination`` (MXNet ``nd.moveaxis``).

    Parameters
    ----------
    tensor : NDArray
    source, destination : int or sequence of int
        Same length; negative values count from the end.

    Returns
    -------
    NDArray
        A new array (through the ``transpose`` operator).

    Raises
    ------
    ShapeError
        For an axis out of range, repeated, or lengths that differ.
    """
    src = _axes(source, tensor.ndim, 'source')
    dst = _axes(destination, tensor.ndim, 'destination')
    if len(src) != len(dst):
        raise ShapeError('moveaxis: `source` and `destination` must have the same number '
                         'of elements. Received: %r, %r' % (source, destination))
    order = [i for i in range(tensor.ndim) if i not in src]
    for d, s_ in sorted(zip(dst, src)):
        order.insert(d, s_)
    return tensor.transpose(axes=tuple(order))   # the registry's transpose, fluent


def waitall():
    """Wait for every pending operation (a no-op on the CPU, a sync on a GPU)."""
    try:
        from numba import cuda
        if cuda.is_available():
            cuda.synchronize()
    except Exception:  # no numba-cuda: nothing to wait for
        pass
