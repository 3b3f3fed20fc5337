"""Errors and sentinels shared by every ffnumba module.

Every error a user can trigger derives from :class:`FFError`. The subclasses
also derive from the builtin that fits (``ValueError`` for bad shapes and
parameter values, ``TypeError`` for bad dtypes), so ``except ValueError``
written against MXNet keeps working.
"""

__all__ = ['get_logger', 'FFError', 'MXNetError', 'ShapeError', 'ParamError', 'DTypeError', '_Null']


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
