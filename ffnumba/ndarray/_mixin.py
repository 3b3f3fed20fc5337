"""NDArray behaviour MXNet users rely on: indexing, MXNet's arithmetic rules,
reductions, fluent operator methods and the numpy protocols.

:class:`NDArrayMixin` is a base class of :class:`~ffnumba.ndarray.NDArray`.

Fluent methods (``x.exp()``, ``x.clip(0, 1)``, ``x.topk(k=2)``...) are looked
up when first used: a name in MXNet's list of fluent methods
(:data:`FLUENT`) resolves to ``ff.nd.<name>(x, ...)`` if an operator of that
name is registered, so operators registered later get their method without a
change here; a listed name without an operator is an ``AttributeError``.

MXNet's rules kept here (checked against MXNet 1.9.1):

* ``a / b`` on integer arrays truncates toward zero (``-7 / 2 == -3``);
  integer division by zero raises :class:`~ffnumba.base.FFError` (MXNet
  crashes the process with SIGFPE).
* ``a % b`` takes the sign of the divisor (Python's rule, ``-7 % 2 == 1``)
  for every dtype, and ``x % 0 == 0``.
* ``max``/``min`` propagate NaN; ``bool()`` of an empty array is False.
* A numpy function that wraps a method (``np.argmax(x, axis=1)``,
  ``np.mean(x)``, ``np.clip(x, 0, 1)``) calls the NDArray method and returns an
  NDArray, as numpy does with MXNet's NDArray; other numpy functions
  (``np.std``, ``np.concatenate``) run on the host copy and return numpy values.
"""
import functools

import numpy as np

from ..base import FFError, ShapeError

__all__ = ['NDArrayMixin', 'FLUENT']

#: MXNet 1.9.1's fluent NDArray methods backed by operators.
FLUENT = frozenset((
    'reshape_like', 'broadcast_axes', 'repeat', 'pad', 'swapaxes', 'split', 'split_v2',
    'slice', 'slice_axis', 'slice_like', 'take', 'one_hot', 'pick', 'sort', 'topk',
    'argsort', 'argmax_channel', 'clip', 'abs', 'sign', 'shape_array',
    'size_array', 'tile', 'transpose', 'flip', 'depth_to_space', 'space_to_depth', 'diag',
    'nansum', 'prod', 'nanprod', 'round', 'rint', 'fix', 'floor', 'ceil', 'trunc', 'sin',
    'cos', 'tan', 'arcsin', 'arccos', 'arctan', 'degrees', 'radians', 'sinh', 'cosh', 'tanh',
    'arcsinh', 'arccosh', 'arctanh', 'exp', 'expm1', 'log', 'log10', 'log2', 'log1p', 'sqrt',
    'rsqrt', 'cbrt', 'rcbrt', 'square', 'reciprocal', 'relu', 'sigmoid', 'softmax',
    'log_softmax', 'softmin', 'broadcast_to', 'broadcast_like'))

# numpy ufuncs whose reflected NDArray operator keeps MXNet's result (an NDArray)
_REFLECTED = {np.add: '__radd__', np.subtract: '__rsub__', np.multiply: '__rmul__',
              np.true_divide: '__rtruediv__', np.power: '__rpow__', np.remainder: '__rmod__',
              np.equal: '__eq__', np.not_equal: '__ne__', np.less: '__gt__',
              np.less_equal: '__ge__', np.greater: '__lt__', np.greater_equal: '__le__',
              np.matmul: '__rmatmul__'}


# numpy function name -> NDArray method name, for the methods numpy would call
_NP_METHOD_NAMES = {'amax': 'max', 'amin': 'min', 'around': 'round', 'round_': 'round'}
_NP_METHODS = frozenset(('argmax', 'argmin', 'sum', 'mean', 'max', 'min', 'reshape',
                         'squeeze', 'transpose', 'clip', 'round', 'prod', 'repeat'))


# The concrete class and its package, set by ``ffnumba/ndarray/__init__.py`` once
# they exist (:func:`bind`): the mixin is NDArray's base class, so importing them
# here would make an import cycle.
NDArray = NDArrayIndexError = array = None
_package = _params_io = None


def bind(package, params_io, ndarray_module):
    """Give the mixin the names it needs from ``ff.nd`` (called once at import)."""
    global NDArray, NDArrayIndexError, array, _package, _params_io
    NDArray = ndarray_module.NDArray
    NDArrayIndexError = ndarray_module.NDArrayIndexError
    array = ndarray_module.array
    _package, _params_io = package, params_io


def _nd():
    return _package


def _has_op(name):
    from ..ops.registry import get_op
    try:
        get_op(name)
        return True
    except FFError:
        return False


def _to_host(obj):
    """NDArrays inside ``obj`` (nested lists/tuples/dicts) as numpy arrays."""
    if isinstance(obj, NDArray):
        return obj.asnumpy()
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_host(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _to_host(v) for k, v in obj.items()}
    return obj


def _index_msg(key, err):
    """The problem with ``key``, in our words (numpy's mention its internals)."""
    if 'out of bounds' in str(err) or 'too many indices' in str(err):
        return 'index %r is out of range' % (key,)
    return ('index %r is not valid: use ints, slices (`:`), `...`, None or int/bool arrays'
            % (key,))


def _index(key):
    """An NDArray index (or one inside a tuple) as an int64 numpy array."""
    if isinstance(key, NDArray):
        return key.asnumpy().astype(np.int64)
    if isinstance(key, tuple):
        return tuple(_index(k) for k in key)
    if isinstance(key, list) and any(isinstance(k, NDArray) for k in key):
        return [_index(k) for k in key]
    return key


def _int_divide(a, b):
    """Integer ``a / b`` truncated toward zero (C's rule, as MXNet's kernels)."""
    b = np.asarray(b)
    if np.any(b == 0):
        raise FFError('NDArray: integer division by zero')
    q = np.floor_divide(a, b)
    return q + ((np.remainder(a, b) != 0) & ((np.asarray(a) < 0) != (b < 0)))


def _mx_mod(a, b):
    """``a % b`` with the divisor's sign and ``x % 0 == 0`` (MXNet's ``mod``)."""
    b_arr = np.asarray(b)
    zero = b_arr == 0
    with np.errstate(divide='ignore', invalid='ignore'):
        r = np.remainder(a, np.where(zero, 1, b_arr).astype(b_arr.dtype))
    return np.where(zero, np.zeros((), dtype=r.dtype), r) if np.any(zero) else r


class NDArrayMixin:
    """Indexing, MXNet arithmetic, reductions, fluent methods, numpy protocols."""

    # ------------------------------------------------------------ fluent methods
    def __getattr__(self, name):
        if name.startswith('_') or name not in FLUENT or not _has_op(name):
            raise AttributeError("'NDArray' object has no attribute %r" % name)
        fn = getattr(_nd(), name)
        method = functools.partial(fn, self)
        method.__doc__ = 'Fluent form of ``ff.nd.%s(self, ...)``.' % name
        return method

    def __dir__(self):
        return sorted(set(super().__dir__()) | {n for n in FLUENT if _has_op(n)})

    # ------------------------------------------------------------ indexing
    def __getitem__(self, key):
        key = _index(key)
        try:
            out = self.asnumpy()[key] if self._gpu() else self._data[key]
        except IndexError as e:
            raise NDArrayIndexError('NDArray of shape %s: %s' % (self.shape, _index_msg(key, e))) \
                from None
        if self._gpu():
            return array(out, ctx=self._ctx, dtype=self._data.dtype)
        if np.isscalar(out) or (isinstance(out, np.ndarray) and out.ndim == 0):
            out = np.asarray(out).reshape(1)
        if isinstance(out, np.ndarray) and not out.flags.c_contiguous:
            out = np.ascontiguousarray(out)
        return NDArray(out, self._ctx)

    def __setitem__(self, key, value):
        key = _index(key)
        if isinstance(value, NDArray):
            value = value.asnumpy()
        try:
            if self._gpu():
                host = self.asnumpy()
                self._assign(host, key, value)
                self._set(host)
            else:
                self._assign(self._data, key, value)
        except IndexError as e:
            raise NDArrayIndexError('NDArray of shape %s: %s' % (self.shape, _index_msg(key, e))) \
                from None
        except (ValueError, TypeError):
            raise ShapeError('NDArray of shape %s: cannot assign a value of shape %s and type %s '
                             'to [%r]' % (self.shape, np.shape(value), type(value).__name__,
                                          key)) from None

    @staticmethod
    def _assign(dst, key, value):
        target = dst[key] if not (isinstance(key, slice) and key == slice(None)) else dst
        vshape = np.shape(value)
        if np.ndim(target) < len(vshape) and np.size(value) == np.size(target):
            value = np.reshape(value, np.shape(target))  # b[0] = nd.array([3.5])
        dst[key] = value

    # ------------------------------------------------------------ arithmetic
    def __truediv__(self, other):
        if np.issubdtype(self._data.dtype, np.integer) and \
                np.issubdtype(np.asarray(_to_host(other)).dtype, np.integer):
            return self._binary(other, _int_divide)
        return self._binary(other, np.true_divide)

    def __rtruediv__(self, other):
        if np.issubdtype(self._data.dtype, np.integer) and \
                np.issubdtype(np.asarray(_to_host(other)).dtype, np.integer):
            return self._binary(other, _int_divide, True)
        return self._binary(other, np.true_divide, True)

    def __itruediv__(self, other):
        res = self.__truediv__(other)
        self._set(res.asnumpy().astype(self._data.dtype))
        return self

    def __mod__(self, other):
        return self._binary(other, _mx_mod)

    def __rmod__(self, other):
        return self._binary(other, _mx_mod, True)

    def __imod__(self, other):
        return self._inplace(other, _mx_mod)

    def __matmul__(self, other):
        return self._binary(other, np.matmul)

    def __rmatmul__(self, other):
        return self._binary(other, np.matmul, True)

    def __bool__(self):
        if self.size == 0:
            return False
        if self.size == 1:
            return bool(self.asnumpy().reshape(-1)[0])
        raise ValueError('The truth value of an NDArray with more than one element is ambiguous.')

    def __float__(self):
        return float(self.asscalar())

    def __int__(self):
        return int(self.asscalar())

    def __getstate__(self):
        """MXNet's pickle payload: ``{'handle': <one array record>}``."""
        return {'handle': bytearray(_params_io.encode_record(self.asnumpy()))}

    def __setstate__(self, state):
        """Restore from :meth:`__getstate__` (or an MXNet pickle), on ``cpu(0)``."""
        from ..context import Context
        if 'handle' in state:
            record = _params_io.record_from_bytes(bytes(state['handle']), '<pickled NDArray>')
            self._data = np.ascontiguousarray(record)
            self._ctx = Context('cpu', 0)
        else:
            self.__dict__.update(state)

    def tolist(self):
        """The elements as nested Python lists (``asnumpy().tolist()``)."""
        return self.asnumpy().tolist()

    # ------------------------------------------------------------ numpy protocols
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if (method == '__call__' and len(inputs) == 2 and not kwargs
                and not isinstance(inputs[0], NDArray) and inputs[1] is self
                and ufunc in _REFLECTED):
            return getattr(self, _REFLECTED[ufunc])(inputs[0])  # numpy_array + nd -> NDArray
        if 'out' in kwargs:
            if any(isinstance(o, NDArray) for o in kwargs['out']):
                return NotImplemented
        return getattr(ufunc, method)(*_to_host(inputs), **_to_host(kwargs))

    def __array_function__(self, func, types, args, kwargs):
        # numpy functions that wrap a method (np.argmax, np.sum, np.mean, np.clip...) call
        # the NDArray method, as numpy does for MXNet's NDArray; the rest run on the host
        name = _NP_METHOD_NAMES.get(func.__name__, func.__name__)
        if args and args[0] is self and (name in _NP_METHODS or name in FLUENT):
            kw = {k: v for k, v in kwargs.items() if v is not None and k != 'out'}
            try:
                res = getattr(self, name)(*args[1:], **kw)
            except (TypeError, AttributeError, FFError):
                res = None
            if res is not None:
                out = kwargs.get('out')
                if out is not None:
                    out[...] = _to_host(res)
                    return out
                return res
        return func(*_to_host(args), **_to_host(kwargs))

    # ------------------------------------------------------------ shaping
    def flatten(self, inplace=False):
        """``(d0, d1, ...)`` -> ``(d0, d1*...)``; a view with ``inplace=True``, else a copy.

        Returns
        -------
        NDArray
            Shape ``(shape[0], prod(shape[1:]))``; a 0-d array gives ``(1, 1)``.
        """
        out = self.reshape(self.shape[0], -1) if self.ndim else self.reshape(1, 1)
        return out if inplace else out.copy()

    def expand_dims(self, axis, inplace=False):
        """Insert an axis of length 1 at ``axis`` (numpy's rule); a view with ``inplace=True``.

        Raises
        ------
        ShapeError
            When ``axis`` is out of range ``[-ndim-1, ndim]``.
        """
        if not -self.ndim - 1 <= axis <= self.ndim:
            raise ShapeError('expand_dims: `axis` must be in [%d, %d] for shape %s. '
                             'Received: axis=%r' % (-self.ndim - 1, self.ndim, self.shape, axis))
        shape = list(self.shape)
        shape.insert(axis if axis >= 0 else self.ndim + 1 + axis, 1)
        out = self.reshape(shape)
        return out if inplace else out.copy()

    def squeeze(self, axis=None, inplace=False):
        """Drop axes of length 1 (all, or those in ``axis``); a view with ``inplace=True``.

        Raises
        ------
        ShapeError
            When an axis in ``axis`` does not have length 1.
        """
        axes = range(self.ndim) if axis is None else \
            [a % self.ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]
        for a in axes:
            if axis is not None and self.shape[a] != 1:
                raise ShapeError('squeeze: axis %d has length %d, not 1' % (a, self.shape[a]))
        shape = [d for i, d in enumerate(self.shape) if not (i in axes and d == 1)]
        out = self.reshape(shape or [1])
        return out if inplace else out.copy()

    # ------------------------------------------------------------ reductions
    def _reduce(self, fn, axis, keepdims, what, exclude=False, out=None):
        """``fn`` over ``axis`` on the host, kept in this dtype, at least 1-D."""
        if axis is not None:
            axes = axis if isinstance(axis, (tuple, list)) else (axis,)
            for a in axes:
                if not -self.ndim <= a < self.ndim:
                    raise ShapeError('%s: `axis` must be in [%d, %d) for shape %s. '
                                     'Received: axis=%r'
                                     % (what, -self.ndim, self.ndim, self.shape, axis))
            axis = tuple(axes) if isinstance(axis, (tuple, list)) else axis
            if exclude:
                keep = {a % self.ndim for a in axes}
                axis = tuple(i for i in range(self.ndim) if i not in keep)
        kw = {} if keepdims is None else {'keepdims': keepdims}
        try:
            r = np.asarray(fn(self.asnumpy(), axis=axis, **kw))
        except ValueError as e:   # min/max of a zero-size array
            raise ShapeError('%s: cannot reduce an array of shape %s over axis %r (%s)'
                             % (what, self.shape, axis, e)) from None
        res = array(r.reshape(1) if r.ndim == 0 else r, ctx=self._ctx, dtype=self._data.dtype)
        if out is not None:
            out[:] = res
            return out
        return res

    def sum(self, axis=None, keepdims=False, exclude=False, out=None):
        """Sum over ``axis`` (all axes by default), in this array's dtype.

        Parameters
        ----------
        axis : int or tuple of int, optional
        keepdims : bool, default False
            Keep reduced axes with length 1.
        exclude : bool, default False
            Reduce over every axis *not* in ``axis``.
        out : NDArray, optional
            Written and returned.

        Returns
        -------
        NDArray
            The reduced shape; ``(1,)`` for a full reduction (MXNet has no
            0-d arrays).

        Raises
        ------
        ShapeError
            For an axis out of range.
        """
        return self._reduce(np.sum, axis, keepdims, 'sum', exclude, out)

    def mean(self, axis=None, keepdims=False, exclude=False, out=None):
        """Mean over ``axis``; arguments and errors as :meth:`sum`."""
        return self._reduce(np.mean, axis, keepdims, 'mean', exclude, out)

    def max(self, axis=None, keepdims=False, exclude=False, out=None):
        """Maximum over ``axis`` (NaN propagates); arguments and errors as :meth:`sum`."""
        return self._reduce(np.max, axis, keepdims, 'max', exclude, out)

    def min(self, axis=None, keepdims=False, exclude=False, out=None):
        """Minimum over ``axis`` (NaN propagates); arguments and errors as :meth:`sum`."""
        return self._reduce(np.min, axis, keepdims, 'min', exclude, out)

    def argmax(self, axis=None, keepdims=False, out=None):
        """Index of the maximum along ``axis`` (of the flattened array by default).

        Returns
        -------
        NDArray
            Indices in this array's dtype (as MXNet), shape without ``axis``;
            ``(1,)`` when ``axis`` is None. Written into ``out`` if given.

        Raises
        ------
        ShapeError
            For an axis that is not an int or is out of range.
        """
        return self._arg(np.argmax, 'argmax', axis, keepdims, out)

    def argmin(self, axis=None, keepdims=False, out=None):
        """Index of the minimum along ``axis``; as :meth:`argmax`."""
        return self._arg(np.argmin, 'argmin', axis, keepdims, out)

    def _arg(self, fn, what, axis, keepdims, out):
        if axis is not None and not isinstance(axis, (int, np.integer)):
            raise ShapeError('%s: `axis` must be an int or None. Received: axis=%r'
                             % (what, axis))
        return self._reduce(fn, axis, keepdims if axis is not None else None, what, out=out)

    def norm(self, ord=2, axis=None, keepdims=False, out=None):
        """The L2 (``ord=2``) or L1 (``ord=1``) norm over ``axis`` (all elements by
        default), accumulated in float64 (MXNet ``NDArray.norm``).

        Returns
        -------
        NDArray
            This array's dtype; ``(1,)`` for a full reduction.

        Raises
        ------
        FFError
            For ``ord`` other than 1 or 2.
        """
        if ord not in (1, 2):
            raise FFError('norm: `ord` must be 1 or 2. Received: ord=%r' % (ord,))

        def fn(a, axis=None, keepdims=False):
            a = a.astype(np.float64)
            if ord == 1:
                return np.sum(np.abs(a), axis=axis, keepdims=keepdims)
            return np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims))
        return self._reduce(fn, axis, keepdims, 'norm', out=out)
