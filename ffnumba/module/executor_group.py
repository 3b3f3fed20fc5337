"""Data parallelism: one executor per context, the batch split between them.

:class:`DataParallelExecutorGroup` binds one executor per context, each on a
slice of the batch chosen by :func:`_split_input_slice` (MXNet's rule), runs
them concurrently in threads for CPU contexts (numba kernels and BLAS release
the GIL), merges their outputs along the batch axis and leaves the per-device
gradients for the kvstore to reduce (reference ``mxnet_api.md`` section 8).
"""
import logging
from collections import OrderedDict

import numpy as np

from ..base import FFError, ShapeError, get_logger
from ._checks import per_device_groups
from ..ndarray._device import host_compute
from ..ndarray.ndarray import NDArray
from ..thread_pool import run_parallel
from ..blas_threads import BLAS_THREADS_ENV, _blas_thread_cap, _cpu_count, _limit_blas_threads  # noqa: F401
from ..blas_threads import contexts_running

__all__ = ['DataParallelExecutorGroup', '_split_input_slice']


def _split_input_slice(batch_size, work_load_list):
    """Split ``batch_size`` samples into consecutive slices by workload.

    Device ``i`` gets ``round(w_i * batch_size / sum(w))`` samples (Python's
    round-half-to-even); a shortfall goes to the last device; slices are laid
    consecutively and clipped at ``batch_size`` (MXNet ``executor_manager``).

    Parameters
    ----------
    batch_size : int
        Number of samples in a batch.
    work_load_list : list of float
        Relative workload of each device.

    Returns
    -------
    list of slice

    Raises
    ------
    ShapeError
        (a ValueError) ``'Too many slices. Some splits are empty.'`` when a
        device would get no sample.

    Examples
    --------
    >>> _split_input_slice(7, [1, 2])
    [slice(0, 2, None), slice(2, 7, None)]
    """
    total = sum(work_load_list)
    counts = [round(w * batch_size / total) for w in work_load_list]
    short = batch_size - sum(counts)
    if short > 0:
        counts[-1] += short
    slices = []
    end = 0
    for n in counts:
        begin = int(min(end, batch_size))
        end = int(min(begin + n, batch_size))
        if begin >= end:
            raise ShapeError('Too many slices. Some splits are empty. (batch size %d over %d '
                             'devices with workload %s)' % (batch_size, len(work_load_list),
                                                           list(work_load_list)))
        slices.append(slice(begin, end))
    return slices


def _host(x):
    """Host values of an NDArray (its storage on the CPU, no copy) or of an array-like."""
    from ..ndarray import NDArray
    if isinstance(x, NDArray):
        return x._host()
    return np.asarray(x)


def _take(a, axis, slc):
    if axis == 0:
        return a[slc]
    idx = [slice(None)] * a.ndim
    idx[axis] = slc
    return a[tuple(idx)]


def _load(src, dst, axis, slc, name):
    """Copy the ``slc`` part of ``src`` along ``axis`` into the NDArray ``dst``."""
    a = _host(src)
    part = _take(a, axis, slc) if axis >= 0 else a
    if part.shape != dst.shape:
        raise ShapeError('Executor group: input %r has shape %s for this device but the '
                         'executor was bound with %s; call reshape or bind with the new shapes'
                         % (name, part.shape, dst.shape))
    dst._copy_from(part)


def _batch_axis(desc):
    layout = getattr(desc, 'layout', None)
    if layout is None:
        return 0
    return layout.find('N')


def _merge(per_device, axis):
    """Concatenate one output's per-device arrays along ``axis``."""
    if len(per_device) == 1 or axis < 0:
        return per_device[0]
    ctx = per_device[0].context
    return NDArray._from_host(np.concatenate([t._host() for t in per_device], axis=axis), ctx)


def _merge_multi_context(outputs, major_axis):
    return [_merge(tensors, axis) for tensors, axis in zip(outputs, major_axis)]


class DataParallelExecutorGroup:
    """One executor per context, each bound on its slice of the batch.

    Parameters
    ----------
    symbol : Symbol
    contexts : list of Context
    workload : list of float
        Relative share of the batch for each context.
    data_shapes, label_shapes : list of DataDesc
        ``label_shapes`` may be None.
    param_names : list of str
        Arguments that are parameters (updated by the optimizer).
    for_training : bool
    inputs_need_grad : bool
        Whether the data arguments get gradients.
    shared_group : DataParallelExecutorGroup, optional
        Share parameter and gradient memory with this group (bucketing,
        rebinding).
    logger : logging.Logger
    fixed_param_names : list of str, optional
        Parameters with ``grad_req='null'``.
    grad_req : str, list or dict, default 'write'
    state_names : list of str, optional
        Arguments that hold state (no gradient, set by the user).
    group2ctxs : dict or list of dict, optional
        Model parallelism (``ctx_group`` attributes to contexts): one dict
        for all devices (a value may be a list with one context per device,
        or a single one), or one dict per device. See
        :func:`ffnumba.executor.simple_bind`.

    Notes
    -----
    **BLAS threads.** With two or more CPU contexts the executors run in
    threads at once, and each BLAS call would start its own full pool of BLAS
    threads. After the first pass the group therefore caps the
    thread count of every loaded OpenBLAS **process-wide** (threadpoolctl, or
    ``openblas_set_num_threads`` through ctypes) at ``max(1, cores //
    devices)``; a single CPU context at ``max(1, cores - 1)`` (OpenBLAS splits
    each GEMM statically and spin-waits for its slowest thread: with another
    process on a core, a GEMM over every core waits for time slices, 10x
    slower on 2 cores), unless ``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``
    or ``MKL_NUM_THREADS`` is set. The cap stays for the rest of the process,
    also for the user's own numpy/scipy code; it is never restored. The environment
    variable ``FFNUMBA_BLAS_THREADS`` (read at that moment) chooses: unset,
    the rules above; a positive integer, that cap; ``0``, leave BLAS alone.
    A GPU context never touches BLAS.
    """

    def __init__(self, symbol, contexts, workload, data_shapes, label_shapes, param_names,
                 for_training, inputs_need_grad, shared_group=None, logger=logging,
                 fixed_param_names=None, grad_req='write', state_names=None, group2ctxs=None):
        self.param_names = list(param_names)
        self.arg_names = symbol.list_arguments()
        self.aux_names = symbol.list_auxiliary_states()
        self.symbol = symbol
        self.contexts = list(contexts)
        self.workload = list(workload)
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.logger = get_logger(logger, 'ffnumba.module')
        self.fixed_param_names = list(fixed_param_names or [])
        self.state_names = list(state_names or [])
        self.shared_group = shared_group
        self.group2ctxs = per_device_groups(group2ctxs, len(self.contexts))
        if shared_group is not None:
            self.shared_data_arrays = shared_group.shared_data_arrays
        else:
            self.shared_data_arrays = [{} for _ in self.contexts]
        self.batch_size = None
        self.slices = None
        self.execs = []
        self._output_layouts = None
        self._default_execs = None
        self._warm = False
        self.data_shapes = None
        self.label_shapes = None
        self.data_names = [d[0] for d in data_shapes]
        self.label_names = [d[0] for d in label_shapes] if label_shapes else []
        self.output_names = symbol.list_outputs()
        self.grad_req = self._grad_req_dict(grad_req)
        self.bind_exec(data_shapes, label_shapes, shared_group)

    # ------------------------------------------------------------ binding
    def _grad_req_dict(self, grad_req):
        """The module's roles over ``grad_req``, normalised by the one normaliser.

        A str applies to the parameters that are not fixed (and to the data
        when ``inputs_need_grad``); labels and fixed parameters get 'null'. A
        dict starts from those roles with 'write' and overrides by name; a
        list gives one request per argument.
        """
        from .._executor_bind import norm_grad_req
        names = self.arg_names
        if not self.for_training:
            return {k: 'null' for k in names}
        if isinstance(grad_req, (str, dict)):
            default = grad_req if isinstance(grad_req, str) else 'write'
            out = {}
            for k in names:
                if k in self.param_names:
                    out[k] = 'null' if k in self.fixed_param_names else default
                elif k in self.data_names:
                    out[k] = default if self.inputs_need_grad else 'null'
                else:
                    out[k] = 'null'
            if isinstance(grad_req, dict):
                out.update(grad_req)
            grad_req = out
        return norm_grad_req(grad_req, names)

    def decide_slices(self, data_shapes):
        """Find the batch size from the layouts and split it by workload."""
        batch = None
        for desc in data_shapes:
            axis = _batch_axis(desc)
            if axis == -1:
                continue
            size = desc[1][axis]
            if batch is None:
                batch = size
            elif size != batch:
                raise ShapeError('Executor group: all data must have the same batch size: '
                                 'batch_size = %d, but %s has shape %s'
                                 % (batch, desc[0], tuple(desc[1])))
        self.batch_size = batch
        self.slices = _split_input_slice(batch, self.workload)
        return [_batch_axis(d) for d in data_shapes]

    def _sliced_shape(self, shapes, i, axes):
        from ..io import DataDesc
        out = []
        for desc, axis in zip(shapes, axes):
            shape = list(desc[1])
            if axis >= 0:
                shape[axis] = self.slices[i].stop - self.slices[i].start
            out.append(DataDesc(desc[0], tuple(shape), getattr(desc, 'dtype', np.float32),
                                getattr(desc, 'layout', 'NCHW')))
        return out

    def _bind_ith_exec(self, i, data_shapes, label_shapes, shared_group):
        """Bind the executor of context ``i``, sharing memory with ``shared_group``."""
        from ..context import check_device
        ctx = self.contexts[i]
        check_device(ctx)
        descs = self._sliced_shape(data_shapes, i, self.data_layouts)
        if label_shapes is not None:
            descs = descs + self._sliced_shape(label_shapes, i, self.label_layouts)
        shapes = {d[0]: tuple(d[1]) for d in descs}
        type_dict = {d[0]: getattr(d, 'dtype', np.float32) for d in descs}
        shapes = {k: v for k, v in shapes.items() if k in self.arg_names}
        type_dict = {k: v for k, v in type_dict.items() if k in self.arg_names}
        shared = shared_group.execs[i] if shared_group is not None else None
        return self.symbol.simple_bind(ctx, grad_req=self.grad_req, type_dict=type_dict,
                                       shared_arg_names=self.param_names, shared_exec=shared,
                                       shared_buffer=self.shared_data_arrays[i],
                                       group2ctx=self.group2ctxs[i], **shapes)

    def bind_exec(self, data_shapes, label_shapes, shared_group=None, reshape=False):
        """Bind (or, with ``reshape=True``, reshape) every executor."""
        self.data_layouts = self.decide_slices(data_shapes)
        self.label_layouts = [_batch_axis(d) for d in label_shapes] if label_shapes else []
        if label_shapes:
            for desc, axis in zip(label_shapes, self.label_layouts):
                if axis >= 0 and desc[1][axis] != self.batch_size:
                    raise ShapeError('Executor group: label %r has batch size %d but the data '
                                     'has %d' % (desc[0], desc[1][axis], self.batch_size))
        if reshape:
            for i, exe in enumerate(self.execs):
                descs = self._sliced_shape(data_shapes, i, self.data_layouts)
                if label_shapes is not None:
                    descs += self._sliced_shape(label_shapes, i, self.label_layouts)
                self.execs[i] = self._default_execs[i].reshape(
                    allow_up_sizing=True,
                    **{d[0]: tuple(d[1]) for d in descs if d[0] in self.arg_names})
        else:
            self.execs = [self._bind_ith_exec(i, data_shapes, label_shapes, shared_group)
                          for i in range(len(self.contexts))]
        self.data_shapes = list(data_shapes)
        self.label_shapes = list(label_shapes) if label_shapes is not None else None
        self._collect_arrays()

    def reshape(self, data_shapes, label_shapes):
        """Reshape the executors for new input shapes (memory shared with the originals)."""
        if list(data_shapes) == self.data_shapes and (
                label_shapes is None or list(label_shapes) == self.label_shapes):
            return
        if self._default_execs is None:
            self._default_execs = list(self.execs)
        self.bind_exec(data_shapes, label_shapes, reshape=True)

    def _collect_arrays(self):
        ex = self.execs
        self.data_arrays = [[(self.slices[i], e.arg_dict[name]) for i, e in enumerate(ex)]
                            for name in self.data_names]
        self.state_arrays = [[e.arg_dict[name] for e in ex] for name in self.state_names]
        if self.label_shapes is not None:
            self.label_arrays = [[(self.slices[i], e.arg_dict.get(name)) for i, e in enumerate(ex)]
                                 for name in self.label_names]
        else:
            self.label_arrays = None
        self.param_arrays = [[e.arg_arrays[i] for e in ex]
                             for i, name in enumerate(self.arg_names) if name in self.param_names]
        if self.for_training:
            self.grad_arrays = [[e.grad_arrays[i] for e in ex]
                                for i, name in enumerate(self.arg_names)
                                if name in self.param_names]
        else:
            self.grad_arrays = None
        data_idx = [self.arg_names.index(n) for n in self.data_names]
        if self.inputs_need_grad:
            self.input_grad_arrays = [[e.grad_arrays[i] for e in ex] for i in data_idx]
        else:
            self.input_grad_arrays = None
        self.aux_arrays = [[e.aux_arrays[i] for e in ex] for i in range(len(self.aux_names))]
        if self._output_layouts is None:
            self._output_layouts = []
            for i in range(len(self.output_names)):
                layout = None
                try:
                    layout = self.symbol[i].attr('__layout__')
                except Exception:  # a symbol without attr support: default axis 0
                    layout = None
                self._output_layouts.append(layout.find('N') if layout else 0)

    # ------------------------------------------------------------ params
    def set_params(self, arg_params, aux_params, allow_extra=False):
        """Copy ``arg_params``/``aux_params`` into every executor."""
        for exe in self.execs:
            exe.copy_params_from(arg_params, aux_params, allow_extra_params=allow_extra)

    def get_params(self, arg_params, aux_params):
        """Write the mean of the device copies into ``arg_params``/``aux_params``."""
        for names, blocks, dst in ((self.param_names, self.param_arrays, arg_params),
                                   (self.aux_names, self.aux_arrays, aux_params)):
            for name, block in zip(names, blocks):
                if len(block) == 1:
                    val = _host(block[0])
                else:
                    val = _host(block[0]).astype(np.float64)
                    for w in block[1:]:
                        val = val + _host(w)
                    val = val / len(block)
                dst[name]._copy_from(val)

    # ----------------------------------------------------------- compute
    def _run(self, fn):
        """Run ``fn(i)`` for each device; concurrently when there are several.

        The first call runs the devices one after another (it compiles the
        kernels and loads BLAS), then caps BLAS threads (see
        :func:`ffnumba.blas_threads._blas_thread_cap`) for the calls that follow.
        """
        n = len(self.execs)
        if self._warm and n == 1:
            fn(0)
            return
        if not self._warm:
            for i in range(n):
                fn(i)
            self._warm = True
            if all(host_compute(c) for c in self.contexts):
                cap = _blas_thread_cap(n)
                if cap is not None:
                    _limit_blas_threads(cap, shared=n > 1, contexts=n > 1)
            return
        with contexts_running():
            run_parallel(fn, n, 'exec')

    def _loader(self, data_batch):
        """Return ``load(i)`` copying device ``i``'s slice of ``data_batch``."""
        # a list of per-device batches; a namedtuple('Batch', ['data']) is one batch
        if isinstance(data_batch, (list, tuple)) and not hasattr(data_batch, 'data'):
            batches = data_batch

            def load(i):
                b = batches[i]
                for (_, dst), name, src in zip([d[i] for d in self.data_arrays],
                                               self.data_names, b.data):
                    _load(src, dst, -1, None, name)
                if self.label_arrays and getattr(b, 'label', None):
                    for (_, dst), src in zip([la[i] for la in self.label_arrays], b.label):
                        if dst is not None:
                            _load(src, dst, -1, None, 'label')
            return load
        data = data_batch.data
        label = getattr(data_batch, 'label', None) if self.label_arrays else None

        def load(i):
            for targets, name, src, axis in zip(self.data_arrays, self.data_names, data,
                                                 self.data_layouts):
                slc, dst = targets[i]
                _load(src, dst, axis, slc, name)
            if label:
                for targets, name, src, axis in zip(self.label_arrays, self.label_names, label,
                                                     self.label_layouts):
                    slc, dst = targets[i]
                    if dst is not None:
                        _load(src, dst, axis, slc, name)
        return load

    def forward(self, data_batch, is_train=None):
        """Load each device's slice and run every executor's forward."""
        if is_train is None:
            is_train = self.for_training
        load = self._loader(data_batch)
        execs = self.execs

        def step(i):
            load(i)
            execs[i].forward(is_train=is_train)
        self._run(step)

    def forward_backward(self, data_batch):
        """Forward (training) and backward in one pass per device thread."""
        load = self._loader(data_batch)
        execs = self.execs

        def step(i):
            load(i)
            execs[i].forward(is_train=True)
            execs[i].backward()
        self._run(step)

    def backward(self, out_grads=None):
        """Run backward on every executor; ``out_grads`` are sliced like outputs."""
        if not self.for_training:
            raise FFError('Executor group: re-bind with for_training=True to run backward')
        if out_grads is None:
            out_grads = []
        elif not isinstance(out_grads, (list, tuple)):
            out_grads = [out_grads]
        execs = self.execs

        def step(i):
            grads = []
            for grad, axis in zip(out_grads, self._output_layouts):
                g = _host(grad)
                part = _take(g, axis, self.slices[i]) if axis >= 0 else g
                from ..ndarray import array
                grads.append(array(part, ctx=self.contexts[i], dtype=part.dtype))
            execs[i].backward(out_grads=grads or None)
        self._run(step)

    # ----------------------------------------------------------- results
    def get_outputs(self, merge_multi_context=True, begin=0, end=None):
        """Outputs per output, merged along the batch axis or per device."""
        if end is None:
            end = len(self.output_names)
        outputs = [[exe.outputs[i] for exe in self.execs] for i in range(begin, end)]
        if merge_multi_context:
            outputs = _merge_multi_context(outputs, self._output_layouts[begin:end])
        return outputs

    def get_states(self, merge_multi_context=True):
        """The state arrays (``state_names``), merged or per device."""
        if merge_multi_context:
            return _merge_multi_context(self.state_arrays, [0] * len(self.state_arrays))
        return self.state_arrays

    def set_states(self, states=None, value=None):
        """Set the states from per-device lists of arrays, or fill with ``value``."""
        if states is not None:
            if value is not None:
                raise FFError('set_states: give either states or value, not both')
            for src_list, dst_list in zip(states, self.state_arrays):
                for src, dst in zip(src_list, dst_list):
                    _load(src, dst, -1, None, 'state')
        else:
            if value is None:
                raise FFError('set_states: give states or value')
            for dst_list in self.state_arrays:
                for dst in dst_list:
                    dst[:] = value

    def get_input_grads(self, merge_multi_context=True):
        """Gradients of the data inputs (bind with ``inputs_need_grad=True``)."""
        if not self.inputs_need_grad:
            raise FFError('get_input_grads: bind with inputs_need_grad=True first')
        if merge_multi_context:
            return _merge_multi_context(self.input_grad_arrays, self.data_layouts)
        return self.input_grad_arrays

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Update ``eval_metric`` once per device with its slice of the labels.

        Raises
        ------
        ShapeError
            When ``labels`` (not pre-sliced) holds a different number of arrays
            than the bound labels, or an array whose batch axis is not the
            batch size (slicing would silently drop or miss samples).
        """
        from ..ndarray import NDArray
        if not pre_sliced and self.label_layouts:
            if len(labels) != len(self.label_layouts):
                raise ShapeError('update_metric: %d label arrays for the %d bound labels %s'
                                 % (len(labels), len(self.label_layouts), self.label_names))
            for name, label, axis in zip(self.label_names, labels, self.label_layouts):
                shape = tuple(np.shape(label)) if not hasattr(label, 'shape') else label.shape
                if axis >= 0 and (len(shape) <= axis or shape[axis] != self.batch_size):
                    raise ShapeError('update_metric: label %r has shape %s but the batch size '
                                     'is %d' % (name, tuple(shape), self.batch_size))
        for i, exe in enumerate(self.execs):
            if pre_sliced:
                labels_slice = labels[i]
            else:
                labels_slice = []
                for label, axis in zip(labels, self.label_layouts or [0] * len(labels)):
                    if axis >= 0 and isinstance(label, NDArray):
                        labels_slice.append(label._host_slice(axis, self.slices[i]))
                    elif axis >= 0:
                        labels_slice.append(NDArray(np.ascontiguousarray(
                            _take(_host(label), axis, self.slices[i]))))
                    else:
                        labels_slice.append(label)
            preds = exe.outputs
            if hasattr(eval_metric, 'update_dict'):
                eval_metric.update_dict(OrderedDict(zip(self.label_names, labels_slice)),
                                        OrderedDict(zip(self.output_names, preds)))
            else:
                eval_metric.update(labels_slice, preds)

    def get_output_shapes(self):
        """``[(name, shape)]`` of the outputs for the whole batch (all devices)."""
        shapes = {d[0]: tuple(d[1]) for d in self.data_shapes}
        for d in self.label_shapes or []:
            if d[0] in self.arg_names:
                shapes[d[0]] = tuple(d[1])
        _, out_shapes, _ = self.symbol.infer_shape(**shapes)
        return list(zip(self.output_names, [tuple(s) for s in out_shapes]))

    def install_monitor(self, mon):
        """Install ``mon`` on every executor."""
        for exe in self.execs:
            mon.install(exe)
