"""One fused update kernel per optimizer step, on the CPU and the GPU.

An optimizer's math is written once as a scalar ``@njit(inline='always')`` step
(inlined at numba's IR level into both loops, so it is never compiled on its
own: a shorter cold start)::

    step(w, g, s0, s1, s2, hp) -> (w', g', s0', s1', s2')

``w``/``g`` are one weight and gradient element, ``s0..s2`` the matching
elements of up to three state arrays (unused slots get ``0.0`` and must be
returned as they came), and ``hp`` the optimizer's **hyper-parameter
record**: a namedtuple made by :func:`hp_record` whose fields the step reads
by name (``hp.lr``, ``hp.wd``, ``hp.rescale_grad``, ``hp.clip_gradient``,
``hp.beta1``, ...). The record's values are all of the compute dtype (float32
for float16/float32 weights, float64 for float64), so numba sees one
homogeneous named tuple type per optimizer and dtype.

:func:`make_update` wraps the step in

* a CPU kernel, ``@njit(cache=True, nogil=True)``, one pass over flat arrays
  (a weight of at least two threads' :data:`UPDATE_MIN_ELEMS` cut into pieces the
  threads share: :func:`ffnumba.thread_pool.split_range`);
* a lazy GPU twin, a grid-stride ``@cuda.jit`` loop calling the same step;

so one read and one write of each array per update (memory-bound). Both
loops come from one template (``_BODY``, written once) instantiated for the
number of state arrays (0 to 3); they differ only in the loop header. The
returned :class:`FusedUpdate` checks the hyper-parameter names against the
record (a missing or unknown name is an :class:`~ffnumba.base.FFError`
naming the optimizer and the field) and dispatches on the weight's
context; this dispatch is the one device branch of the optimizers.

float16 cannot be used in CPU ``@njit`` code: float16 arrays are computed in
float32 and cast back at the edges. GPU float16 arrays take the same host
path (correct but slow; multi-precision training keeps float32 masters on
the device, which run fused).

Compilation: each step compiles one CPU loop per (state count, dtypes) it is
called with, cached on disk across processes (:func:`ffnumba.jit.stable_cache_key`).
"""
import collections
import functools
import sys

import numpy as np
from numba import njit

from ..base import DTypeError, FFError, ShapeError
from ..jit import JIT, LazyCudaKernel, LazyKernel, import_cuda, stable_cache_key
from ..thread_pool import split_range
from . import _deferred

__all__ = ['make_update', 'hp_record', 'FusedUpdate', 'clip', 'cuda', 'MAX_STATES']

#: ``numba.cuda``, bound on first GPU use (the simulator swaps this global).
cuda = None

#: Most state arrays one step reads and writes.
MAX_STATES = 3
#: Fewest elements per thread before a CPU update splits over the kernel threads. An
#: update streams each array once, and a fork-join costs tens of microseconds on a
#: 2-core VM: SGD with momentum (float32, quiet cores) took 30, 50, 78 and 129 us on one
#: thread for 2^17 to 2^20 elements and 90, 96, 102 and 136 us split over two; 2^21
#: elements ran 1.55x faster split (371 against 239 us).
UPDATE_MIN_ELEMS = 1 << 20
#: Hyper-parameter records one :class:`FusedUpdate` keeps for reuse (then it starts afresh).
RECORDS_KEPT = 1024


@njit(inline='always')
def clip(x, bound):
    """``x`` clipped to ``[-bound, bound]``; no clipping when ``bound < 0``."""
    if bound >= 0.0:
        if x > bound:
            return bound
        if x < -bound:
            return -bound
    return x


def hp_record(typename, fields):
    """A namedtuple class for the hyper-parameters of one update step.

    Parameters
    ----------
    typename : str
        The class name; bind the class to this name at module level (numba's
        on-disk cache finds the class again by ``module.typename``).
    fields : str or sequence of str
        Field names, in the order the record stores them (space separated or
        a list).

    Returns
    -------
    type
        A ``collections.namedtuple`` class, created in the caller's module.
    """
    module = sys._getframe(1).f_globals.get('__name__', __name__)
    return collections.namedtuple(typename, fields, module=module)


# ------------------------------------------------------------------ the loop template
#: The loop body, written once: read one element of each array, step, write back.
_BODY = '''\
            nw, ng, {outs} = step(w[i], g[i], {reads}, hp)
            w[i] = nw
{writes}            if wg:
                g[i] = ng
'''
_HEADERS = {
    'cpu': '        for i in range(w.size):\n',
    'gpu': ('        start, stride = cuda.grid(1), cuda.gridsize(1)\n'
            '        for i in range(start, w.size, stride):\n'),
}
_TEMPLATE = '''\
def build_{target}_{n}(step):
    def loop_{target}_{n}(w, g, {args}hp, wg):
{header}{body}
    return loop_{target}_{n}
'''


def _parts(n):
    """The template fields for ``n`` state arrays: the loop's state arguments, the step's
    new states (``outs``) and state reads, and the state writes."""
    return dict(args=''.join('s%d, ' % k for k in range(n)),
                outs=', '.join(['n%d' % k for k in range(n)] + ['_'] * (MAX_STATES - n)),
                reads=', '.join(['s%d[i]' % k for k in range(n)] + ['0.0'] * (MAX_STATES - n)),
                writes=''.join('            s%d[i] = n%d\n' % (k, k) for k in range(n)))


def _exec(src):
    # compiled under this file's name: numba's disk cache keys (and locates) a function
    # by its source file; the generated names are unique within it
    namespace = {'__name__': __name__, 'cuda': None}
    exec(compile(src, __file__, 'exec'), namespace)
    return namespace


def _loop_builder(target, n):
    """``build(step) -> python loop`` over ``n`` state arrays for ``target`` ('cpu'/'gpu')."""
    parts = _parts(n)
    body = _BODY.format(outs=parts['outs'], reads=parts['reads'], writes=parts['writes'])
    namespace = _exec(_TEMPLATE.format(target=target, n=n, args=parts['args'],
                                       header=_HEADERS[target], body=body))
    return namespace, namespace['build_%s_%d' % (target, n)]


#: The reducing CPU loop: the gradient is the sum of the devices' gradients ``gs`` (a
#: tuple, summed left to right as the kvstore sums them), and the new weight is also
#: written to every array of ``outs`` (the devices' copies), all in one pass.
_TEMPLATE_RED = '''\
def build_cpu_red_{n}(step):
    def loop_cpu_red_{n}(w, gs, {args}outs, hp, wg):
        for i in range(w.size):
            gi = gs[0][i]
            for d in range(1, len(gs)):
                gi += gs[d][i]
            nw, ng, {outs} = step(w[i], gi, {reads}, hp)
            w[i] = nw
{writes}            for d in range(len(outs)):
                outs[d][i] = nw
    return loop_cpu_red_{n}
'''


def _cpu_loop(step, n):
    return njit(**JIT)(_loop_builder('cpu', n)[1](step))


def _cpu_red_loop(step, n):
    """The reducing twin of :func:`_cpu_loop` (:data:`_TEMPLATE_RED`)."""
    namespace = _exec(_TEMPLATE_RED.format(n=n, **_parts(n)))
    return njit(**JIT)(namespace['build_cpu_red_%d' % n](step))


def _cpu_loops(step):
    # built on first call: a program runs one or two of the optimizers' loops
    return tuple(LazyKernel(functools.partial(_cpu_loop, step, n)) for n in range(MAX_STATES + 1))


def _gpu_builders(step):
    def builder(n):
        def build():
            namespace, make = _loop_builder('gpu', n)
            namespace['cuda'] = import_cuda(globals())   # the simulator swaps it there
            return cuda.jit(make(step))
        return build
    return tuple(builder(n) for n in range(MAX_STATES + 1))


def _flat(a):
    return a.reshape(-1)


def _in_place(arrays):
    """Whether the CPU kernel can run on these host arrays as they are (C-contiguous,
    no float16)."""
    for a in arrays:
        if a.dtype.char == 'e' or not a.flags.c_contiguous:
            return False
    return True


def _host_call(kernel, flat, hp, wg):
    """``kernel(*flat, hp, wg)`` on host arrays; a weight of at least two threads'
    :data:`UPDATE_MIN_ELEMS` is cut into pieces the threads share (elementwise: the same
    values)."""
    if flat[0].size < 2 * UPDATE_MIN_ELEMS:
        kernel(*flat, hp, wg)
    else:
        split_range(lambda lo, hi: kernel(*[a[lo:hi] for a in flat], hp, wg), flat[0].size,
                    UPDATE_MIN_ELEMS)


class FusedUpdate:
    """CPU and GPU kernels of one scalar step; call :meth:`__call__` with NDArrays.

    Parameters
    ----------
    step : njit function
        The scalar step (see the module docstring).
    name : str
        The optimizer's name, shown in errors.
    record : namedtuple class
        The step's hyper-parameter record (:func:`hp_record`).
    """

    def __init__(self, step, name, record):
        self.name = name
        self.step = step
        self.record = record
        self.fields = tuple(record._fields)
        # the step and the njit helpers it calls (clip, ...) get reproducible cache keys
        glb = step.py_func.__globals__
        stable_cache_key(step, *[glb[n] for n in step.py_func.__code__.co_names
                                 if hasattr(glb.get(n), 'py_func')])
        self.cpu = _cpu_loops(step)
        self.cpu_red = tuple(LazyKernel(functools.partial(_cpu_red_loop, step, n))
                             for n in range(MAX_STATES + 1))
        self.gpu = tuple(LazyCudaKernel(b) for b in _gpu_builders(step))
        self._records = {}

    def hp(self, dtype, values):
        """The record of ``values`` (a dict: field -> number) in ``dtype``'s compute type.

        Raises
        ------
        FFError
            Naming the optimizer and the field, for a missing or unknown field
            or a value that is not a real number (None included: numpy would
            make it NaN, and every weight NaN with it).

        Records are kept by ``(dtype, values)`` (at most :data:`RECORDS_KEPT`): a
        training step asks for the same few once per parameter.
        """
        key = (dtype,) + tuple(values.items())
        try:
            return self._records[key]
        except KeyError:
            rec = self._record(dtype, values)
        except TypeError:               # an unhashable value: the checks below name it
            return self._record(dtype, values)
        if len(self._records) >= RECORDS_KEPT:
            self._records.clear()
        self._records[key] = rec
        return rec

    def _record(self, dtype, values):
        cdt = np.dtype(dtype)
        if cdt == np.float16:
            cdt = np.dtype(np.float32)
        try:
            if len(values) != len(self.fields):
                raise KeyError
            vals = [values[f] for f in self.fields]
            if not all(map(_is_real, vals)):      # None (NaN to numpy), a list, a string
                raise TypeError
            return self.record(*[cdt.type(v) for v in vals])
        except KeyError:
            missing = [f for f in self.fields if f not in values]
            unknown = sorted(k for k in values if k not in self.fields)
            raise FFError('%s update: %s; the kernel reads %s'
                          % (self.name, '; '.join(
                              ['missing hyper-parameter `%s`' % f for f in missing]
                              + ['unknown hyper-parameter `%s`' % f for f in unknown]),
                             list(self.fields))) from None
        except (TypeError, ValueError):
            bad = next(f for f in self.fields if not _is_real(values[f]))
            raise FFError('%s update: hyper-parameter `%s` must be a real number. Received: '
                          '%r' % (self.name, bad, values[bad])) from None

    def __call__(self, weight, grad, states, write_grad=False, **hp):
        """Update ``weight`` (and ``states``, and ``grad`` if ``write_grad``) in place.

        Parameters
        ----------
        weight, grad : NDArray
            Same shape; ``grad`` is read (and written back when ``write_grad``).
        states : sequence of NDArray
            0 to 3 arrays of the weight's shape.
        write_grad : bool, default False
            Write the step's new gradient value back into ``grad``.
        **hp : float
            The hyper-parameters, by the names of the step's record.

        Raises
        ------
        FFError
            For a missing or unknown hyper-parameter (naming it).
        ShapeError, DTypeError
            For a gradient or state of another shape, or non-float arrays.
        """
        self.run(weight._ctx.device_type == 'gpu', weight._data, grad._data,
                 [s._data for s in states], self.hp(weight._data.dtype, hp), write_grad)

    def run(self, gpu, weight, grad, states, hp, write_grad=False):
        """:meth:`__call__` on raw storage (numpy or device arrays) with a built record.

        ``gpu``: the arrays are device arrays. The update operators
        (:mod:`ffnumba.optimizer.update_ops`) call this from their kernels.
        """
        if grad.shape != weight.shape:
            raise ShapeError('%s: gradient shape %s does not match weight shape %s'
                             % (self.name, tuple(grad.shape), tuple(weight.shape)))
        if weight.dtype.kind != 'f' or grad.dtype.kind != 'f':
            # an int weight would truncate every step to nothing (or to INT_MIN garbage)
            raise DTypeError('%s: weights and gradients must have a float dtype. Received: '
                             'weight %s, grad %s' % (self.name, np.dtype(weight.dtype).name,
                                                     np.dtype(grad.dtype).name))
        for k, s in enumerate(states):
            # the kernels index every state by the weight's flat index: check before they run
            if s.shape != weight.shape:
                raise ShapeError('%s: optimizer state %d has shape %s but the weight has shape '
                                 '%s (a state created for another weight?)'
                                 % (self.name, k, tuple(s.shape), tuple(weight.shape)))
        arrays = [weight, grad] + list(states)
        n = len(states)
        if not gpu and _in_place(arrays):
            # the usual call (host arrays, no float16): microseconds matter here, once per
            # parameter and step
            flat, kernel, wg = [a.reshape(-1) for a in arrays], self.cpu[n], bool(write_grad)
            if not _deferred.collect(kernel, flat, hp, wg, self.cpu_red[n]):
                _host_call(kernel, flat, hp, wg)    # (else it runs with the step's others)
            return
        if gpu and all(np.dtype(a.dtype) != np.float16 for a in arrays):
            self.gpu[n].launch(weight.size, *[_flat(a) for a in arrays], hp, bool(write_grad))
            return
        hosts = [a.copy_to_host() if gpu else a for a in arrays]
        work = [np.ascontiguousarray(h, np.float32 if h.dtype == np.float16 else h.dtype)
                for h in hosts]
        _host_call(self.cpu[n], [_flat(a) for a in work], hp, bool(write_grad))
        for k, (orig, h, wk) in enumerate(zip(arrays, hosts, work)):
            if k == 1 and not write_grad:
                continue
            if gpu:
                orig.copy_to_device(np.ascontiguousarray(wk.astype(h.dtype, copy=False)))
            elif wk is not h:
                h[...] = wk


def _is_real(x):
    try:
        float(x)
        return True
    except (TypeError, ValueError):
        return False


def make_update(step, name, record):
    """A :class:`FusedUpdate` for a scalar step reading the hyper-parameter ``record``.

    Parameters
    ----------
    step : numba ``@njit`` dispatcher
        ``step(w, g, s0, s1, s2, hp) -> (w', g', s0', s1', s2')`` on scalars of
        the compute dtype (see the module docstring).
    name : str
        The optimizer's name, used in every error message.
    record : namedtuple class
        The hyper-parameter record the step reads (:func:`hp_record`).

    Returns
    -------
    FusedUpdate
        Called as ``update(weight, grad, states, **hp)`` with NDArrays; the CPU
        loops compile on first use, the GPU kernels on first GPU use.
    """
    return FusedUpdate(step, name, record)
