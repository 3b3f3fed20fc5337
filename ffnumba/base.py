"""Errors and sentinels shared by every ffnumba module.

Every error a user can trigger derives from :class:`FFError`. The subclasses
also derive from the builtin that fits (``ValueError`` for bad shapes and
parameter values, ``TypeError`` for bad dtypes), so ``except ValueError``
written against MXNet keeps working.
"""

import os

import numpy as np

__all__ = ['get_logger', 'FFError', 'MXNetError', 'ShapeError', 'ParamError', 'DTypeError',
           'NotImplementedForSymbol', '_Null', 'data_dir', 'data_dir_default', 'py_str',
           'string_types', 'numeric_types', 'integer_types']

#: MXNet's default real type.
mx_real_t = np.float32

#: MXNet's type tuples for isinstance checks.
string_types = (str,)
numeric_types = (float, int, np.generic)
integer_types = (int, np.integer)


def py_str(x):
    """``bytes`` decoded as UTF-8; a ``str`` unchanged (MXNet ``base.py_str``)."""
    return x.decode('utf-8') if isinstance(x, bytes) else x


def data_dir_default():
    """``~/.mxnet`` (``%APPDATA%/mxnet`` on Windows), MXNet's data directory."""
    if os.name == 'nt':
        return os.path.join(os.environ.get('APPDATA', ''), 'mxnet')
    return os.path.join(os.path.expanduser('~'), '.mxnet')


def data_dir():
    """Where downloaded data lives: ``$MXNET_HOME``, else :func:`data_dir_default`."""
    return os.getenv('MXNET_HOME', data_dir_default())


def _as_list(obj):
    """``obj`` if it is a list or tuple, else ``[obj]``."""
    return obj if isinstance(obj, (list, tuple)) else [obj]


class FFError(Exception):
    """Base class of every user-facing ffnumba error (MXNet: ``MXNetError``)."""


#: MXNet's name for the base error, so ``except mx.base.MXNetError`` ports unchanged.
MXNetError = FFError


class ShapeError(FFError, ValueError):
    """Shapes that do not fit: inference conflicts, bad input shapes."""


class ParamError(FFError, ValueError):
    """An operator, optimizer or API parameter with a bad name or value."""


class DTypeError(FFError, TypeError):
    """An unsupported or inconsistent dtype."""


class NotImplementedForSymbol(FFError):
    """An NDArray-only operation applied to a Symbol (``bool(symbol)``...).

    Parameters
    ----------
    function : callable or str
        What was called.
    alias : str, optional
        The operator it stands for.
    *args
        The arguments (their types go into the message).
    """

    def __init__(self, function, alias=None, *args):
        super().__init__()
        self.function = getattr(function, '__name__', str(function))
        self.alias = alias
        self.args = [str(type(a)) for a in args]

    def __str__(self):
        msg = 'Function %s' % self.function
        if self.alias:
            msg += ' (namely operator "%s")' % self.alias
        if self.args:
            msg += ' with arguments (%s)' % ', '.join(self.args)
        return msg + ' is not implemented for Symbol and only available in NDArray.'


class _NullType:
    """Marks an argument the caller did not give (MXNet's ``_Null``)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self):
        return '_Null'

    def __bool__(self):
        return False


_Null = _NullType()


def get_logger(logger, name):
    """The logger a training API writes to: ``logger`` itself, or the ``ffnumba`` one.

    MXNet's APIs take ``logger=logging`` (the module) by default, whose
    module-level calls configure the root logger behind the user's back (a
    later ``logging.basicConfig`` then silently does nothing). ffnumba maps
    ``None`` and the ``logging`` module to ``logging.getLogger(name)``, a
    logger under ``ffnumba`` whose records propagate to the user's handlers;
    any other logger is used as given.

    Parameters
    ----------
    logger : logging.Logger, the logging module, or None
    name : str
        Logger name to use in place of the ``logging`` module, e.g. ``'ffnumba.module'``.

    Returns
    -------
    logging.Logger
    """
    import logging
    if logger is None or logger is logging:
        return logging.getLogger(name)
    return logger
