"""``mx.util`` names MXNet 1.x code reaches for.

ffnumba has MXNet's legacy shape semantics only (a 0 in a shape means
"unknown", there are no 0-d arrays), so the NumPy-shape switches exist to let
code that mentions them import and run where it does not switch them on:
``is_np_shape()`` is False, ``np_shape(False)`` and ``set_np_shape(False)``
are no-ops, and switching NumPy shapes on raises
:class:`~ffnumba.base.FFError`. ``getenv``/``setenv`` read and write the
process environment (MXNet's go through its C library).
"""
import contextlib
import functools
import os

from .base import FFError

__all__ = ['getenv', 'setenv', 'is_np_shape', 'set_np_shape', 'np_shape', 'use_np_shape']


def getenv(name):
    """The value of environment variable ``name``, or None."""
    return os.environ.get(name)


def setenv(name, value):
    """Set (or with ``value=None`` unset) environment variable ``name``."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = str(value)


def is_np_shape():
    """False: ffnumba always uses MXNet's legacy shape semantics."""
    return False


def _refuse(what):
    raise FFError('%s: NumPy shape semantics (0-d and zero-size arrays) are not available in '
                  'ffnumba; it has MXNet\'s legacy shape semantics only' % what)


def set_np_shape(active):
    """Turn NumPy shape semantics on (raises FFError) or off (a no-op); returns False."""
    if active:
        _refuse('set_np_shape(True)')
    return False


@contextlib.contextmanager
def np_shape(active=True):
    """``with np_shape(False):`` is a no-op; ``np_shape(True)`` raises FFError."""
    if active:
        _refuse('np_shape(True)')
    yield


def use_np_shape(func):
    """Decorator: the function (or class) raises FFError when called, since it
    needs NumPy shape semantics."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        _refuse(getattr(func, '__name__', 'use_np_shape'))
    return wrapper
