"""The device primitives of NDArray: the one home of the CPU/GPU split above the kernels.

The executor, the executor group, the kvstores, the optimizers and the module
move values between arrays only through these methods (mixed into
:class:`~ffnumba.ndarray.NDArray`) and functions; none of them asks which
device an array lives on. On the CPU every primitive works on the numpy
storage in place (no temporary, no copy); on a GPU it uses the device copy
engines or, where there is no device kernel for it yet, a round trip through
the host (correct, not fast).

=========================  ====================================================
primitive                  meaning
=========================  ====================================================
``a._host()``              the values as numpy: the storage itself on the CPU
                           (read it, do not write it), a copy from a GPU
``a._copy_from(src)``      ``a[...] = src`` (NDArray or host array, broadcast,
                           cast to ``a``'s dtype)
``a._add_from(src, sign)`` ``a += src`` (``sign=-1``: ``a -= src``)
``a._fill(value)``         every element set to ``value``
``a._host_slice(ax, s)``   part ``s`` along axis ``ax`` as a CPU NDArray (a
                           view on the CPU for axis 0, else a host copy)
``a._prefix_view(shape)``  an NDArray of ``shape`` over ``a``'s first elements,
                           or None where the device cannot share it
``a._is_contiguous()``     the storage is C-contiguous
``a._shares_memory(b)``    a write to one shows in the other
``a._usable_on(ctx)``      an executor bound to ``ctx`` can read ``a`` directly
``same_memory(c1, c2)``    contexts whose arrays share one memory space
``host_compute(ctx)``      kernels for ``ctx`` run on the host CPU's cores
``_from_host(h, ctx)``     (classmethod) an NDArray with ``h``'s values on
                           ``ctx``, optionally cast (no copy on the CPU when
                           the dtype already matches)
=========================  ====================================================

Kernel code (``ffnumba/ops/``, ``ffnumba/jit.py``, the dispatch of
``optimizer/kernels.py``) works on raw storage and branches on its own;
``tests/test_architecture.py`` keeps every other module off the device
(``DEVICE_AWARE`` there lists the modules allowed to branch).
"""
import numpy as np

from ..context import check_device

__all__ = ['DeviceMixin', 'same_memory', 'host_compute']


def _gpu(ctx):
    return ctx.device_type == 'gpu'


def same_memory(a, b):
    """True when arrays on contexts ``a`` and ``b`` live in one memory space.

    All CPU contexts (any ``device_id``, ``cpu_pinned`` too) share the host
    memory; a GPU context shares only with itself.
    """
    if _gpu(a) or _gpu(b):
        return a == b
    return True


def host_compute(ctx):
    """True when kernels for ``ctx`` run on the host CPU (and share its cores and BLAS)."""
    return not _gpu(ctx)


def _to_device(host, ctx):
    """A device copy of the numpy array ``host`` on the GPU context ``ctx``."""
    check_device(ctx)
    from numba import cuda
    with cuda.gpus[ctx.device_id]:
        return cuda.to_device(np.ascontiguousarray(host))


def _values(src):
    """Host values of an NDArray (its storage on the CPU) or of an array-like."""
    return src._host() if isinstance(src, DeviceMixin) else np.asarray(src)


class DeviceMixin:
    """The device primitives of :class:`~ffnumba.ndarray.NDArray` (see the module docstring)."""

    __slots__ = ()

    @classmethod
    def _from_host(cls, host, ctx, dtype=None):
        """An NDArray holding the values of the numpy array ``host`` on ``ctx``.

        On the CPU a C-contiguous ``host`` of the right dtype is wrapped without
        a copy (the NDArray then shares its memory); otherwise it is cast or
        copied (to the device for a GPU context).
        """
        dt = np.dtype(dtype) if dtype is not None else host.dtype
        if host.dtype != dt or not host.flags.c_contiguous:
            host = np.ascontiguousarray(host, dtype=dt)
        return cls(_to_device(host, ctx) if _gpu(ctx) else host, ctx)

    def _host(self):
        """The values as a numpy array: the storage itself on the CPU, a copy from a GPU.

        The CPU result must only be read: writing to it writes the NDArray.
        """
        if _gpu(self._ctx):
            return self._data.copy_to_host()
        return self._data

    def _copy_from(self, src):
        """``self[...] = src`` in place (``src``: NDArray or array-like; broadcast, cast).

        No temporary on the CPU; a device-to-device copy between arrays of one
        GPU with the same shape and dtype; otherwise through the host.
        """
        if src is self:
            return self
        if not _gpu(self._ctx):
            self._data[...] = _values(src)
            return self
        if isinstance(src, DeviceMixin) and src._ctx == self._ctx and src.shape == self.shape \
                and np.dtype(src._data.dtype) == np.dtype(self._data.dtype):
            self._data.copy_to_device(src._data)
            return self
        self._set(_values(src))
        return self

    def _add_from(self, src, sign=1):
        """``self += src`` in place (``sign=-1``: ``self -= src``); no temporary on the CPU."""
        if not _gpu(self._ctx):
            if sign >= 0:
                self._data += _values(src)
            else:
                self._data -= _values(src)
            return self
        host = self._data.copy_to_host()
        if sign >= 0:
            host += _values(src)
        else:
            host -= _values(src)
        self._data.copy_to_device(np.ascontiguousarray(host))
        return self

    def _fill(self, value):
        """Set every element to ``value`` in place."""
        if _gpu(self._ctx):
            self._data.copy_to_device(np.full(self.shape, value, self._data.dtype))
        else:
            self._data[...] = value
        return self

    def _host_slice(self, axis, slc):
        """Part ``slc`` along ``axis`` as a CPU NDArray.

        A view (no copy) of a CPU array along axis 0; otherwise a C-contiguous
        host copy.
        """
        if axis == 0 and not _gpu(self._ctx):
            return type(self)(self._data[slc], self._ctx)
        idx = [slice(None)] * self.ndim
        idx[axis] = slc
        return type(self)(np.ascontiguousarray(self._host()[tuple(idx)]))

    def _prefix_view(self, shape):
        """An NDArray of ``shape`` sharing this array's first elements, or None.

        None on a GPU (buffers are not shared there), when ``shape`` has
        more elements than this array, and when this array is not
        C-contiguous (its first elements are no view: numpy would copy them).
        """
        n = int(np.prod(shape, dtype=np.int64))
        if _gpu(self._ctx) or n > self.size or not self._data.flags.c_contiguous:
            return None
        return type(self)(self._data.reshape(-1)[:n].reshape(shape), self._ctx)

    def _is_contiguous(self):
        """True when the storage is C-contiguous (device arrays always are here)."""
        return _gpu(self._ctx) or bool(self._data.flags.c_contiguous)

    def _shares_memory(self, other):
        """True when a write to one array shows in the other."""
        if _gpu(self._ctx) or _gpu(other._ctx):
            return self._data is other._data
        return bool(np.shares_memory(np.asarray(self._data), np.asarray(other._data)))

    def _usable_on(self, ctx):
        """True when an executor bound to ``ctx`` can use this array as it is."""
        return same_memory(self._ctx, ctx)
