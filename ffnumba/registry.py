"""One ``register``/``create`` registry shared by optimizers, metrics,
initializers and learning-rate schedulers (MXNet ``mx.registry``).

Names are case-insensitive, as in MXNet: ``@register`` stores the lower-cased
class name (and any aliases) and ``create('Adam')`` finds it.
"""
import inspect
import json

from .base import ParamError

__all__ = ['get_registry', 'get_register_func', 'get_alias_func', 'get_create_func']

_REGISTRIES = {}


def get_registry(base_class):
    """The ``{name: class}`` dict for a base class (a copy)."""
    return dict(_REGISTRIES.setdefault(base_class, {}))


def get_register_func(base_class, nickname):
    """A ``@register`` decorator for subclasses of ``base_class``.

    ``nickname`` names the kind in errors (``'optimizer'``).
    """
    reg = _REGISTRIES.setdefault(base_class, {})

    def register(klass, name=None):
        if not (isinstance(klass, type) and issubclass(klass, base_class)):
            raise ParamError('Can only register subclass of %s' % base_class.__name__)
        reg[(name or klass.__name__).lower()] = klass
        return klass
    register.__doc__ = 'Register a %s class under its lower-cased name.' % nickname
    return register


def get_alias_func(base_class, nickname):
    """A decorator ``@alias('a', 'b')`` adding extra registry names."""
    reg = _REGISTRIES.setdefault(base_class, {})

    def alias(*aliases):
        def reg_fn(klass):
            for a in aliases:
                reg[a.lower()] = klass
            return klass
        return reg_fn
    return alias


def get_create_func(base_class, nickname):
    """A ``create(name_or_instance, *args, **kwargs)`` function.

    Accepts an instance (returned as is), a registered name (any case), or a
    JSON string ``'["name", {kwargs}]'`` as MXNet's ``dumps()`` writes.

    Raises
    ------
    ParamError
        For an unknown name (listing the valid ones) or arguments the class
        does not take.
    """
    reg = _REGISTRIES.setdefault(base_class, {})

    def create(*args, **kwargs):
        if not args:
            name, args = kwargs.pop(nickname), ()
        else:
            name, args = args[0], args[1:]
        if isinstance(name, base_class):
            if args or kwargs:
                raise ParamError('%s is already an instance; additional arguments are invalid'
                                 % nickname)
            return name
        if isinstance(name, dict):
            return create(**name)
        if not isinstance(name, str):
            raise ParamError('%s must be of string type or an instance of %s. Received: %r'
                             % (nickname, base_class.__name__, name))
        if name.startswith('['):
            if args or kwargs:
                raise ParamError('%s: a JSON spec takes no extra arguments' % nickname)
            name, kwargs = json.loads(name)
            return create(name, **kwargs)
        if name.startswith('{'):
            return create(**json.loads(name))
        key = name.lower()
        if key not in reg:
            raise ParamError('Cannot find %s %r. Valid names: %s'
                             % (nickname, name, ', '.join(sorted(reg))))
        klass = reg[key]
        try:
            inspect.signature(klass).bind(*args, **kwargs)
        except TypeError as e:
            raise ParamError('%s %r: %s. Signature: %s%s'
                             % (nickname, name, e, klass.__name__, inspect.signature(klass))) from None
        except ValueError:  # no introspectable signature: let the call decide
            pass
        return klass(*args, **kwargs)
    create.__doc__ = 'Create a %s by name, JSON spec or instance.' % nickname
    return create
