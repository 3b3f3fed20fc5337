"""Parameter updates through a kvstore: MXNet's ``_initialize_kvstore`` and ``_update_params*``.

Shared by :class:`~ffnumba.mod.Module` and the modules built on it. With
``update_on_kvstore`` the store sums the gradients, runs the optimizer and hands
the weights back; otherwise it only sums, and each device's copy is updated by
the local updater.
"""

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
        kvstore.pushpull([param_names[i] for i in live], [grad_arrays[i] for i in live],
                         out=[param_arrays[i] for i in live])


def _update_params(param_arrays, grad_arrays, updater, num_device, kvstore=None,
                   param_names=None):
    """Optionally sum the gradients in the kvstore, then update on each device.

    Device ``k``'s copy of parameter ``i`` uses updater index ``i*num_device+k``
    (the optimizer states are kept per device, as MXNet).
    """
    live = [i for i, grads in enumerate(grad_arrays) if grads[0] is not None]
    if kvstore and live:
        kvstore.pushpull([param_names[i] for i in live], [grad_arrays[i] for i in live])
    for index, (args, grads) in enumerate(zip(param_arrays, grad_arrays)):
        if grads[0] is None:
            continue
        for k, (w, g) in enumerate(zip(args, grads)):
            updater(index * num_device + k, g, w)
