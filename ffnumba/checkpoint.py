"""Checkpoint files: the one home of ``save_checkpoint``, ``load_checkpoint``, ``load_params``.

Everything that writes or reads a training file goes through here, over the
binary NDArray codec of :mod:`ffnumba.ndarray.params_io`:

===========================  ==========================================================
file                         written by
===========================  ==========================================================
``prefix-symbol.json``       :func:`save_symbol` (MXNet JSON, atomic write)
``prefix-%04d.params``       :func:`save_params` (``arg:NAME`` / ``aux:NAME`` on the CPU)
``prefix-%04d.states``       :func:`save_states` (the optimizer-state payload)
===========================  ==========================================================

Every write goes to a temporary name in the same folder and is renamed
(:func:`~ffnumba.ndarray.params_io.atomic_write`); every failed read raises an
:class:`~ffnumba.base.FFError` naming the file. ``ff.model.save_checkpoint``,
``ff.model.load_checkpoint``, ``ff.model.load_params``, ``Module.load`` and
``Module.save_checkpoint`` all call these functions (reference ``mxnet_api.md``
sections 7 and 14).
"""
import logging
import os

from .base import FFError
from .context import cpu
from .ndarray import params_io

_LOG = logging.getLogger(__name__)

__all__ = ['save_checkpoint', 'load_checkpoint', 'load_params', 'save_params',
           'load_params_file', 'split_params', 'save_symbol', 'save_states', 'read_states',
           'load_states', 'atomic_write_bytes']


def atomic_write_bytes(fname, payload):
    """Write ``payload`` (bytes) to ``fname`` through a temporary file and a rename.

    Raises
    ------
    FFError
        (``WriteError``) when the folder does not exist or the file cannot be written.
    """
    params_io.atomic_write(fname, [payload])


def save_symbol(fname, symbol):
    """Write ``symbol.tojson()`` to ``fname`` (UTF-8, atomic)."""
    atomic_write_bytes(fname, symbol.tojson().encode('utf-8'))


def save_params(fname, arg_params, aux_params):
    """Write ``arg:NAME`` / ``aux:NAME`` arrays, copied to the CPU, to ``fname`` (atomic).

    Parameters
    ----------
    fname : str
    arg_params, aux_params : dict of str to NDArray
        ``aux_params`` may be None.
    """
    data = {'arg:%s' % k: v.as_in_context(cpu()) for k, v in arg_params.items()}
    data.update({'aux:%s' % k: v.as_in_context(cpu()) for k, v in (aux_params or {}).items()})
    params_io.save(fname, data)


def split_params(save_dict, fname):
    """Split a loaded ``{'arg:x': ..., 'aux:y': ...}`` dict into ``(arg_params, aux_params)``.

    A file holding no arrays at all (MXNet writes one for a parameter-free net:
    0 arrays, 0 names) gives two empty dicts and MXNet's warning
    ``Params file '...' is empty``.

    Raises
    ------
    FFError
        ``Invalid param file`` for an unnamed list or a key without an
        ``arg:``/``aux:`` prefix.
    """
    if isinstance(save_dict, (list, dict)) and not save_dict:
        _LOG.warning("Params file '%s' is empty", fname)
        return {}, {}
    if not isinstance(save_dict, dict):
        raise FFError('Invalid param file %s: expected named arrays with arg:/aux: keys, '
                      'found an unnamed list' % fname)
    arg_params, aux_params = {}, {}
    for k, v in save_dict.items():
        tp, _, name = k.partition(':')
        if tp == 'arg' and name:
            arg_params[name] = v
        elif tp == 'aux' and name:
            aux_params[name] = v
        else:
            raise FFError('Invalid param file %s: key %r has no arg:/aux: prefix' % (fname, k))
    return arg_params, aux_params


def load_params_file(fname):
    """``(arg_params, aux_params)`` from one ``.params`` file (see :func:`split_params`)."""
    return split_params(params_io.load(fname), fname)


def save_checkpoint(prefix, epoch, symbol, arg_params, aux_params, remove_amp_cast=True):
    """Write ``prefix-symbol.json`` and ``prefix-%04d.params`` (atomic writes).

    Parameters
    ----------
    prefix : str
    epoch : int
    symbol : Symbol or None
        Not written when None.
    arg_params, aux_params : dict of str to NDArray
        Saved under ``arg:NAME`` / ``aux:NAME``, on the CPU.
    remove_amp_cast : bool, default True
        Accepted for MXNet compatibility (no AMP casts exist here).
    """
    if symbol is not None:
        save_symbol('%s-symbol.json' % prefix, symbol)
    param_name = '%s-%04d.params' % (prefix, epoch)
    save_params(param_name, arg_params, aux_params)
    _LOG.info('Saved checkpoint to "%s"', param_name)


def load_params(prefix, epoch):
    """``(arg_params, aux_params)`` from ``prefix-%04d.params``."""
    return load_params_file('%s-%04d.params' % (prefix, epoch))


def load_checkpoint(prefix, epoch):
    """``(symbol, arg_params, aux_params)`` from a checkpoint.

    Raises
    ------
    FFError
        When a file is missing, truncated or not a checkpoint.
    """
    from . import symbol as sym
    fname = '%s-symbol.json' % prefix
    if not os.path.exists(fname):
        raise FFError('load_checkpoint: symbol file %s does not exist' % fname)
    symbol = sym.load(fname)
    arg_params, aux_params = load_params(prefix, epoch)
    return symbol, arg_params, aux_params


def save_states(fname, payload):
    """Write an optimizer-state payload (``Updater.get_states()`` bytes) atomically."""
    atomic_write_bytes(fname, payload)


def read_states(fname, what='load_optimizer_states'):
    """The bytes of an optimizer-state file (a regular file: never ``/dev/zero`` or a pipe).

    Raises
    ------
    FFError
        ``{what}: cannot read {fname}: {reason}`` when the file cannot be read.
    """
    import stat
    try:
        with open(fname, 'rb') as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise FFError('%s: cannot read %s: not a regular file' % (what, fname))
            return f.read(st.st_size)
    except OSError as e:
        raise FFError('%s: cannot read %s: %s' % (what, fname, e.strerror or e)) from None


def load_states(updater, fname, what='load_optimizer_states'):
    """Read an optimizer-state file into ``updater`` (``Updater.set_states``).

    The one load path of ``.states`` files (``Module.load_optimizer_states``
    and ``KVStore.load_optimizer_states`` both call it).

    Raises
    ------
    FFError
        Naming ``fname``: when it cannot be read, is truncated or corrupted,
        is a pickle (MXNet's format, refused), or was written for another
        optimizer (then a ParamError).
    """
    payload = read_states(fname, what)
    try:
        updater.set_states(payload)
    except FFError as e:
        msg = str(e)
        if fname in msg:
            raise
        msg = '%s: %s: %s' % (what, fname, msg)
        try:
            err = type(e)(msg)
        except TypeError:
            err = FFError(msg)
        raise err from None
