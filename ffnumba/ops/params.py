"""Typed operator parameters, parsed from Python values or MXNet JSON strings.

An op declares its parameters as a :class:`Params` subclass whose class
attributes are :class:`Field` objects::

    class FullyConnectedParam(Params):
        num_hidden = Field(int, doc='Number of hidden units.', low=1)
        no_bias = Field(bool, False, 'Disable the bias.')

Strings appear only at the JSON boundary: ``Params.parse`` turns ``'True'``,
``'(3, 3)'`` or ``'None'`` into typed values, and ``to_attrs`` writes back the
strings MXNet stores (``str(value)`` of what the user gave).
"""
import ast
import math

import numpy as np

from ..base import ParamError

__all__ = ['Field', 'Params', 'Shape', 'REQUIRED', 'require_finite']


class _Required:
    def __repr__(self):
        return 'REQUIRED'


REQUIRED = _Required()


class Shape(tuple):
    """Marker type for tuple-of-int fields (``kernel=(3, 3)``)."""


_KIND_NAMES = {int: 'an int', float: 'a float', bool: 'a bool', str: 'a str',
               Shape: 'a tuple of ints', 'dtype': 'a bool, int, uint or float dtype name'}


class Field:
    """One typed parameter.

    Parameters
    ----------
    kind : {int, float, bool, str, Shape, 'dtype'}
        The value type.
    default : object, default REQUIRED
        Default value; ``REQUIRED`` means the user must give it.
    doc : str
        One line for the generated docstring.
    low, high : number, optional
        Inclusive bounds for numbers (for ``Shape``, bounds on every entry).
    choices : sequence of str, optional
        Allowed values for a str field.
    optional : bool, default False
        Whether ``None`` is a valid value.
    allow_nonfinite : bool, default False
        Whether a float field accepts NaN and +-inf. Off by default: a NaN
        passes every ``low``/``high`` comparison and an inf slips past a lower
        bound, and either silently poisons every output (``eps=nan``). Fields
        where they mean something (a clip bound of inf, a scalar operand)
        opt in.
    """

    def __init__(self, kind, default=REQUIRED, doc='', low=None, high=None,
                 choices=None, optional=False, allow_nonfinite=False):
        self.kind = kind
        self.default = default
        self.doc = doc
        self.low = low
        self.high = high
        self.choices = tuple(choices) if choices is not None else None
        self.optional = optional or default is None
        self.allow_nonfinite = allow_nonfinite
        self.name = None  # set by Params.__init_subclass__

    def rule(self):
        """Human-readable description of the valid values."""
        base = _KIND_NAMES.get(self.kind, str(self.kind))
        if self.choices:
            base = 'one of %s' % (', '.join(repr(c) for c in self.choices))
        parts = [base]
        if self.low is not None:
            parts.append('>= %s' % self.low)
        if self.high is not None:
            parts.append('<= %s' % self.high)
        if self.optional:
            parts.append('or None')
        return ' '.join(parts)

    def parse(self, op_name, value):
        """Convert a Python value or an MXNet attr string to the typed value."""
        def bad():
            return ParamError('%s: `%s` must be %s. Received: %s=%r'
                              % (op_name, self.name, self.rule(), self.name, value))
        v = value
        if isinstance(v, str) and self.kind is not str:
            s = v.strip()
            if s in ('None', ''):
                v = None
            elif self.kind is bool:
                low = s.lower()
                if low in ('true', '1'):
                    v = True
                elif low in ('false', '0'):
                    v = False
                else:
                    raise bad()
            elif self.kind == 'dtype':
                v = s
            elif self.kind is float and s.lower().lstrip('+-') in ('inf', 'infinity', 'nan'):
                v = float(s)        # str(float('inf')) in MXNet JSON attrs
            else:
                try:
                    v = ast.literal_eval(s)
                except (ValueError, SyntaxError):
                    raise bad() from None
        if v is None:
            if self.optional:
                return None
            raise bad()
        if self.kind is bool:
            if isinstance(v, (bool, np.bool_)) or (isinstance(v, (int, np.integer)) and v in (0, 1)):
                return bool(v)
            raise bad()
        if self.kind is int:
            if isinstance(v, (bool, np.bool_)):
                v = int(v)
            if isinstance(v, (float, np.floating)) and float(v).is_integer():
                v = int(v)
            if not isinstance(v, (int, np.integer)):
                raise bad()
            v = int(v)
            if not -2 ** 63 <= v < 2 ** 63:     # kernels and shapes hold int64
                raise bad()
        elif self.kind is float:
            if not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, bool):
                raise bad()
            v = float(v)
            if not self.allow_nonfinite and not math.isfinite(v):
                raise ParamError('%s: `%s` must be a finite float (not nan or inf). '
                                 'Received: %s=%r' % (op_name, self.name, self.name, value))
        elif self.kind is str:
            if not isinstance(v, str):
                raise bad()
            if self.choices and v not in self.choices:
                raise bad()
            return v
        elif self.kind is Shape:
            if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
                v = (int(v),)
            if isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype.kind in 'iu':
                v = v.tolist()      # MXNet takes a numpy array of ints as a shape
            if not isinstance(v, (tuple, list)):
                raise bad()
            if any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in v):
                raise bad()
            v = Shape(int(x) for x in v)
            if any(not -2 ** 63 <= x < 2 ** 63 for x in v):
                raise bad()
            if any((self.low is not None and x < self.low) or
                   (self.high is not None and x > self.high) for x in v):
                raise bad()
            return v
        elif self.kind == 'dtype':
            try:
                dt = np.dtype(v)
            except TypeError:
                raise bad() from None
            if dt.kind not in 'biuf':      # no kernel takes object, string, complex or time
                raise bad()
            return dt.name
        if self.low is not None and v < self.low:
            raise bad()
        if self.high is not None and v > self.high:
            raise bad()
        return v


def _format(value):
    """MXNet's string form of a param value: ``str(value)`` (a numpy array as a tuple)."""
    if isinstance(value, np.ndarray):
        value = tuple(value.tolist())
    return str(value)


class Params:
    """Base of every op's parameter record.

    Instances are immutable. ``Params.parse(op_name, kwargs)`` validates user
    kwargs (Python values or strings) and fills defaults; unknown names and
    missing required values raise :class:`~ffnumba.base.ParamError`.
    """

    _fields = {}
    #: Params MXNet accepts and this op ignores (``workspace``, ``cudnn_tune``...).
    _ignored = ()

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        fields = dict(getattr(cls, '_fields', {}))
        for name, val in list(vars(cls).items()):
            if isinstance(val, Field):
                val.name = name
                fields[name] = val
                # drop the class attribute so ``p.name`` reaches __getattr__ (the value)
                delattr(cls, name)
        cls._fields = fields

    @classmethod
    def parse(cls, op_name, kwargs, partial=False):
        """Validate ``kwargs`` and return a new instance.

        Parameters
        ----------
        op_name : str
            Operator name, for error messages.
        kwargs : dict
            Param values (Python values or MXNet attr strings).
        partial : bool, default False
            A record for naming inputs only (generated docstrings, signatures
            and positional-input mapping; it never reaches a kernel): a
            missing required param is None instead of an error, and the
            cross-field :meth:`validate` is skipped (it needs those values).
            Given values are still parsed.

        Raises
        ------
        ParamError
            For an unknown name, a value its field refuses, a missing required
            param or a failed cross-field check (the last two unless ``partial``).
        """
        self = object.__new__(cls)
        values, raw = {}, {}
        for k, v in kwargs.items():
            if k in cls._fields:
                values[k] = cls._fields[k].parse(op_name, v)
                raw[k] = v if isinstance(v, str) else _format(v)
            elif k in cls._ignored:
                raw[k] = v if isinstance(v, str) else _format(v)
            else:
                valid = ', '.join(list(cls._fields) + list(cls._ignored)) or 'none'
                raise ParamError('%s: unknown parameter `%s`. Valid parameters: %s'
                                 % (op_name, k, valid))
        for name, f in cls._fields.items():
            if name not in values:
                if f.default is REQUIRED and partial:
                    values[name] = None
                    continue
                if f.default is REQUIRED:
                    raise ParamError('%s: required parameter `%s` is missing (%s: %s)'
                                     % (op_name, name, f.rule(), f.doc))
                values[name] = f.default
        object.__setattr__(self, '_values', values)
        object.__setattr__(self, '_raw', raw)
        object.__setattr__(self, 'op_name', op_name)
        if not partial:
            cls.validate(self)
        # plain instance attributes: kernels read ``p.kernel`` on every call (no __getattr__)
        self.__dict__.update((k, v) for k, v in values.items() if not hasattr(cls, k))
        return self

    def validate(self):
        """Cross-field checks; subclasses override and raise ParamError."""

    def __getattr__(self, name):
        try:
            return self.__dict__['_values'][name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        raise AttributeError('%s params are immutable' % self.op_name)

    def to_attrs(self):
        """The user-given params as MXNet stores them in JSON (all strings)."""
        return dict(self._raw)

    def as_dict(self):
        """Every param, typed, defaults included."""
        return dict(self._values)

    def __eq__(self, other):
        return type(self) is type(other) and self._values == other._values

    def __hash__(self):
        return hash((type(self), tuple(sorted((k, repr(v)) for k, v in self._values.items()))))

    def __repr__(self):
        return '%s(%s)' % (type(self).__name__,
                           ', '.join('%s=%r' % kv for kv in self._values.items()))


class NoParams(Params):
    """Params of an operator that takes none."""


def require_finite(p, *names):
    """Raise ParamError unless each float param in ``names`` is finite (not nan or inf).

    Parameters
    ----------
    p : Params
        The parsed params (``p.op_name`` names the operator in the message).
    *names : str
        Float fields to check; ``None`` values are skipped.

    Raises
    ------
    ParamError
        ``{Op}: `{name}` must be a finite float. Received: {name}=nan``.
    """
    for n in names:
        v = getattr(p, n)
        if v is not None and not np.isfinite(v):
            raise ParamError('%s: `%s` must be a finite float. Received: %s=%r'
                             % (p.op_name, n, n, v))
