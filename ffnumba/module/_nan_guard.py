"""Stop training on the first batch whose outputs are not finite (Keras' ``TerminateOnNaN``).

``fit`` calls :func:`check_batch` after ``forward_backward`` and before
``update``: when an output of the batch holds NaN or inf, training stops with
an :class:`~ffnumba.base.FFError` naming the epoch and the batch (and the
data or label array holding NaN/inf, if one does), and the parameters are
still the last finite ones, as the poisoned gradients were never applied.

The check is on by default. Turn it off for one module with
``mod.nan_check = False`` (the outputs are then copied to the host once per
batch less), or for the process with the environment variable
``FFNUMBA_NAN_CHECK=0``. A module whose ``get_outputs`` is not implemented
is not checked.
"""
import os

import numpy as np

from ..base import FFError

__all__ = ['check_batch', 'enabled']


def enabled(module):
    """Whether ``fit`` checks the outputs of ``module`` (see the module docstring)."""
    if os.environ.get('FFNUMBA_NAN_CHECK', '1').strip().lower() in ('0', 'false', 'no', 'off'):
        return False
    return bool(getattr(module, 'nan_check', True))


def _bad_inputs(batch):
    found = []
    batches = batch if isinstance(batch, list) else [batch]
    for b in batches:
        for kind, arrays in (('data', b.data), ('label', b.label)):
            for i, a in enumerate(arrays or ()):
                host = a.asnumpy() if hasattr(a, 'asnumpy') else np.asarray(a)
                if host.dtype.kind == 'f' and not np.isfinite(host).all():
                    bad = np.argwhere(~np.isfinite(host))[0]
                    found.append('%s[%d] at index %s' % (kind, i, tuple(int(x) for x in bad)))
    return found


def check_batch(module, batch, epoch, nbatch):
    """Raise FFError when the outputs of the batch just run hold NaN or inf.

    Parameters
    ----------
    module : BaseModule
        After ``forward_backward(batch)``.
    batch : DataBatch or list of DataBatch
    epoch, nbatch : int
        For the message (``nbatch`` counts from 0).

    Raises
    ------
    FFError
        ``fit: epoch E batch B: the outputs hold NaN/inf ...``.
    """
    if not enabled(module):
        return
    try:
        outputs = module.get_outputs()
    except NotImplementedError:  # a module that has no outputs to check (MXNet's BaseModule)
        return
    for k, out in enumerate(outputs):
        host = out.asnumpy()
        if host.dtype.kind != 'f' or np.isfinite(host).all():
            continue
        what = 'NaN' if np.isnan(host).any() else 'inf'
        cause = _bad_inputs(batch)
        cause = ('; the batch itself holds NaN/inf in %s' % ', '.join(cause)) if cause else \
            ' (the batch is finite: the parameters or the learning rate diverged)'
        raise FFError('fit: epoch %d batch %d: output %d holds %s%s. Training stopped before '
                      'this batch\'s update, so the parameters are the last finite ones. '
                      'Set mod.nan_check = False (or FFNUMBA_NAN_CHECK=0) to train anyway'
                      % (epoch, nbatch, k, what, cause))
