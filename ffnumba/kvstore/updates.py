"""Parameter updates through a kvstore: MXNet's ``_initialize_kvstore`` and ``_update_params*``.

Shared by :class:`~ffnumba.mod.Module` and the modules built on it. With
``update_on_kvstore`` the store sums the gradients, runs the optimizer and hands
the weights back; otherwise it only sums, and each device's copy is updated by
the local updater.

With several CPU contexts and an in-process store (``'local'``/``'device'``)
whose keys chain (:meth:`ffnumba.kvstore.local.KVStore.chainable`: float32 or
float64, no gradient compression, an optimizer that defers its kernels), all
keys go to one ``pushpull``, which sums, updates and copies back each piece of
each key while it is in cache, the pieces of all keys split over the kernel
threads in one fork-join. Otherwise the parameters are split into groups of
about equal size and each group is
reduced (and, on the store, updated) on its own thread of the ``'update'``
pool (:func:`ffnumba.thread_pool.run_parallel`): the sums, copies and
optimizer kernels release the GIL. Each parameter is still summed in device
order and updated once, so the values are the serial ones bit for bit.
Inside a group each sum, update and copy runs on its thread alone
(:func:`ffnumba.thread_pool.single_thread`); a single group (one parameter
dominates) splits each of them over the kernel threads instead.
Updates on the devices (``update_on_kvstore=False``) stay on one thread: the
optimizer selects per-device state by a current context.
"""
import os

from ..ndarray._device import host_compute
from ..thread_pool import run_parallel, single_thread
from .local import _CHAIN_DTYPES, KVStore

__all__ = ['_initialize_kvstore', '_update_params_on_kvstore', '_update_params']


def _initialize_kvstore(kvstore, param_arrays, arg_params, param_names, update_on_kvstore):
    """Put the initial values into the kvstore (and on every device)."""
    for idx, devs in enumerate(param_arrays):
        name = param_names[idx]
        if update_on_kvstore:
            kvstore.broadcast(name, arg_params[name], out=devs)
        else:
            kvstore.init(name, arg_params[name])


def _update_params_on_kvstore(param_arrays, grad_arrays, kvstore, param_names):
    """Sum the gradients in the kvstore, update there, and pull the weights back."""
    live = [i for i, grads in enumerate(grad_arrays) if grads[0] is not None]
    if live:   # one call: a dist store checks and all-reduces the keys together
        _grouped(kvstore, live, grad_arrays, lambda g: kvstore.pushpull(
            [param_names[i] for i in g], [grad_arrays[i] for i in g],
            out=[param_arrays[i] for i in g]))


def _update_params(param_arrays, grad_arrays, updater, num_device, kvstore=None,
                   param_names=None):
    """Optionally sum the gradients in the kvstore, then update on each device.

    Device ``k``'s copy of parameter ``i`` uses updater index ``i*num_device+k``
    (the optimizer states are kept per device, as MXNet).
    """
    live = [i for i, grads in enumerate(grad_arrays) if grads[0] is not None]
    if kvstore and live:
        _grouped(kvstore, live, grad_arrays, lambda g: kvstore.pushpull(
            [param_names[i] for i in g], [grad_arrays[i] for i in g]))
    for k in range(num_device):       # one list per device, as MXNet 1.9.1's _update_params
        if live:
            updater([i * num_device + k for i in live], [grad_arrays[i][k] for i in live],
                    [param_arrays[i][k] for i in live])


#: Fewest gradient elements (all parameters, one device) worth splitting over threads.
PAR_MIN_ELEMS = 1 << 14

#: Largest share of the elements one group may hold for the split to pay.
MAX_GROUP_SHARE = 0.75


def _groups(live, grad_arrays, n):
    """``live`` split into ``n`` groups of about equal element count, each in index order.

    Largest parameter first into the lightest group (ties: the lowest group), so
    the split depends on the shapes only.
    """
    load = [0] * n
    member = [[] for _ in range(n)]
    for i in sorted(live, key=lambda i: -grad_arrays[i][0].size):
        g = load.index(min(load))
        member[g].append(i)
        load[g] += grad_arrays[i][0].size
    return [sorted(m) for m in member if m]


def _grouped(kvstore, live, grad_arrays, run):
    """``run(indices)`` for ``live`` in one call, or per group on the update pool.

    Groups only for an in-process store whose values all live on the host with
    several devices: a distributed store checks and all-reduces the keys of
    one call together.
    """
    ndev = len(grad_arrays[live[0]])
    nt = min(ndev, os.cpu_count() or 1, len(live))
    if (nt < 2 or type(kvstore) is not KVStore
            or sum(grad_arrays[i][0].size for i in live) < PAR_MIN_ELEMS
            or not all(host_compute(g.context) for i in live for g in grad_arrays[i])):
        run(live)
        return
    if kvstore.chainable() and all(grad_arrays[i][0].dtype in _CHAIN_DTYPES for i in live):
        run(live)        # one call: the keys' chains split over the kernel threads together
        return
    groups = _groups(live, grad_arrays, nt)
    sizes = [sum(grad_arrays[i][0].size for i in g) for g in groups]
    if len(groups) < 2 or max(sizes) > MAX_GROUP_SHARE * sum(sizes):
        run(live)        # one parameter dominates (LeNet's fc1): a thread hand-off only costs
        return
    def part(t):
        before = single_thread(True)     # the groups fill the cores: no split inside them
        try:
            run(groups[t])
        finally:
            single_thread(before)
    run_parallel(part, len(groups), 'update')
