"""Argument checks shared by the module classes and FeedForward.

Everything a user hands to ``bind``, ``forward``, ``fit``, ``set_params`` or
a checkpoint loader is validated here, so a mistake surfaces as an
:class:`~ffnumba.base.FFError` naming the argument instead of a traceback from
deep inside the executors.
"""
import warnings

from ..base import FFError, ParamError, ShapeError
from ..context import Context
from ..ndarray import NDArray


class _MissingParamError(FFError, RuntimeError):
    """A parameter is neither given nor allowed to be missing."""


def _check_input_names(symbol, names, typename, throw):
    """Raise (or warn) when ``names`` are not arguments of ``symbol``."""
    if not hasattr(symbol, 'list_arguments'):
        raise ParamError('Module: `symbol` must be a Symbol. Received: %s'
                         % type(symbol).__name__)
    args = symbol.list_arguments()
    for name in names:
        if name in args:
            continue
        candidates = [a for a in args if not a.endswith(('_weight', '_bias', '_gamma', '_beta'))]
        msg = ("You created Module with Module(..., %s_names=%s) but input with name '%s' is "
               "not found in symbol.list_arguments(). Did you mean one of:\n\t%s"
               % (typename, list(names), name, '\n\t'.join(candidates)))
        if throw:
            raise ParamError(msg)
        warnings.warn(msg, stacklevel=3)


class _DescTypeError(ParamError, TypeError):
    """A data/label description of the wrong type (a ``TypeError`` too, as in MXNet)."""


def _as_desc(x):
    """``x`` as a DataDesc with a checked shape (a tuple of ints, batch axis >= 1)."""
    from ..io import DataDesc
    from ..symbol.infer import as_shape
    if not isinstance(x, DataDesc):
        if not (isinstance(x, (tuple, list)) and len(x) == 2 and isinstance(x[0], str)):
            raise _DescTypeError('Module: a data/label description must be a DataDesc or a '
                                 '(name, shape) pair. Received: %r' % (x,))
        x = DataDesc(x[0], as_shape(x[0], x[1]))
    shape = as_shape(x.name, x.shape)
    axis = DataDesc.get_batch_axis(x.layout)
    if 0 <= axis < len(shape) and shape[axis] == 0:
        raise ShapeError('Module: %s has batch size 0 (shape %s); a batch needs at least '
                         'one sample' % (x.name, shape))
    return x


def _check_contexts(what, context):
    """``context`` (a Context or a list of them) as a non-empty list."""
    ctxs = [context] if isinstance(context, Context) else context
    if not isinstance(ctxs, (list, tuple)) or not ctxs \
            or not all(isinstance(c, Context) for c in ctxs):
        raise ParamError('%s: `context` must be a Context or a non-empty list of Contexts '
                         '(ff.cpu(i), ff.gpu(i)). Received: %r' % (what, context))
    return list(ctxs)


def _check_param_dicts(what, arg_params, aux_params):
    """Raise a ParamError unless both are None or dicts."""
    for name, params in (('arg_params', arg_params), ('aux_params', aux_params)):
        if params is not None and not isinstance(params, dict):
            raise ParamError('Module.%s: `%s` must be a dict of str to NDArray. Received: %s'
                             % (what, name, type(params).__name__))


def _copy_param(name, src, dst):
    """Copy a given parameter value (NDArray or array-like) into ``dst``."""
    from ..executor import _host_values
    if not isinstance(src, NDArray):
        src = _host_values('parameter %s' % name, src)
    if tuple(src.shape) != dst.shape:
        raise ShapeError('Module: parameter %s has shape %s, the module needs %s'
                         % (name, tuple(src.shape), dst.shape))
    dst._copy_from(src)


def _check_batch(data_batch, data_names):
    """Raise a ParamError unless ``data_batch`` can feed ``data_names``."""
    batches = data_batch if isinstance(data_batch, list) and data_batch else [data_batch]
    for b in batches:
        data = getattr(b, 'data', None)
        if not isinstance(data, (list, tuple)):
            raise ParamError('Module.forward: `data_batch` must be a DataBatch whose `data` is '
                             'a list of arrays. Received: %s' % type(b).__name__)
        if len(data) != len(data_names):
            raise ParamError('Module.forward: the batch has %d data arrays but the module '
                             'has %d data names %s' % (len(data), len(data_names),
                                                       list(data_names)))


def _parse_data_desc(data_names, label_names, data_shapes, label_shapes):
    """Turn shapes into DataDesc lists and check the names against the module's."""
    if not isinstance(data_shapes, (list, tuple)):
        raise ParamError('Module: `data_shapes` must be a list of DataDesc or (name, shape) '
                         'pairs. Received: %r' % (data_shapes,))
    data_shapes = [_as_desc(x) for x in data_shapes]
    names = [d.name for d in data_shapes]
    if sorted(names) != sorted(data_names):
        raise ParamError("Data provided by data_shapes don't match names specified by "
                         "data_names (%s vs. %s)" % (names, list(data_names)))
    if label_shapes is not None:
        label_shapes = [_as_desc(x) for x in label_shapes]
        lnames = [d.name for d in label_shapes]
        missing = [n for n in label_names if n not in lnames]
        if missing and label_shapes:
            raise ParamError(
                "Module: the data gives labels named %s but the symbol's label argument%s "
                "%s: the labels would never reach the loss and training would run at chance. "
                "Name the iterator's label after the symbol (e.g. NDArrayIter(..., "
                "label_name=%r)) or create the Module with label_names=%s."
                % (lnames, ' is' if len(missing) == 1 else 's are', missing, missing[0],
                   lnames))
        if sorted(lnames) != sorted(label_names):
            warnings.warn("Data provided by label_shapes don't match names specified by "
                          "label_names (%s vs. %s)" % (lnames, list(label_names)),
                          stacklevel=3)
        if not label_shapes:
            label_shapes = None
    return data_shapes, label_shapes


def _check_iter(what, field, it):
    """Raise a ParamError unless ``it`` looks like a DataIter."""
    if not all(hasattr(it, a) for a in ('provide_data', 'provide_label', 'reset', '__iter__')):
        raise ParamError('%s: `%s` must be a DataIter (e.g. ff.io.NDArrayIter). Received: %s'
                         % (what, field, type(it).__name__))


_EXHAUSTED = ('%s.fit: the training iterator gave no batch at epoch %d: the %s is exhausted '
              '(or empty). Call train_data.reset() before fit, or pass a fresh iterator.')


def _check_loaded_params(mod, loaded):
    """After ``Module.load``: every parameter and aux state of ``mod`` must be in the file.

    ``loaded`` is ``(params file name, allow_missing)`` or None (not loaded).
    Missing arrays raise an FFError naming them, or with ``allow_missing`` are
    bound as zeros with a warning (MXNet's behaviour).
    """
    if loaded is None:
        return
    fname, allow_missing = loaded
    missing = ([n for n in mod._param_names if n not in mod._arg_params]
               + [n for n in mod._aux_names if n not in mod._aux_params])
    if not missing:
        return
    if not allow_missing:
        raise FFError('Module.load: %s lacks %d array(s) the symbol needs: %s. Load a '
                      'checkpoint of the same network, or pass allow_missing=True to '
                      'Module.load to bind them as zeros (MXNet\'s behaviour) and '
                      'initialise them yourself (init_params(force_init=True, '
                      'allow_missing=True, arg_params=..., aux_params=...)).'
                      % (fname, len(missing), ', '.join(missing)))
    warnings.warn('Module.load: %s lacks %s; they are bound as zeros (allow_missing=True)'
                  % (fname, ', '.join(missing)), stacklevel=4)
    from .. import ndarray as nd
    group = mod._exec_group
    names = list(mod._param_names) + list(mod._aux_names)
    for name, devs in zip(names, list(group.param_arrays) + list(group.aux_arrays)):
        if name in missing:
            target = mod._arg_params if name in mod._param_names else mod._aux_params
            target[name] = nd.zeros(devs[0].shape, dtype=devs[0].dtype)


def per_device_groups(group2ctxs, n):
    """``group2ctxs`` as one ``{group: Context}`` (or None) per device.

    Raises
    ------
    ParamError
        For a list of the wrong length, or a group whose list of contexts
        has neither one nor ``n`` entries.
    """
    if group2ctxs is None:
        return [None] * n
    if isinstance(group2ctxs, (list, tuple)):
        if len(group2ctxs) != n:
            raise ParamError('group2ctxs: %d dicts for %d contexts' % (len(group2ctxs), n))
        return list(group2ctxs)
    if not isinstance(group2ctxs, dict):
        raise ParamError('group2ctxs must be a dict or a list of dicts. Received: %s'
                         % type(group2ctxs).__name__)
    out = [{} for _ in range(n)]
    for group, ctxs in group2ctxs.items():
        ctxs = list(ctxs) if isinstance(ctxs, (list, tuple)) else [ctxs]
        if len(ctxs) == 1:
            ctxs = ctxs * n
        if len(ctxs) != n:
            raise ParamError('group2ctxs[%r]: %d contexts for %d devices' % (group, len(ctxs), n))
        for i, c in enumerate(ctxs):
            out[i][group] = c
    return out
