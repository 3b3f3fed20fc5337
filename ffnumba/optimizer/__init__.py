"""``ff.optimizer``: MXNet's optimizers as fused numba updates, and the Updater.

``create('adam', learning_rate=0.01)`` finds an optimizer by name (any case);
``get_updater(opt)`` applies it to (index, grad, weight) triples and saves its
states in a safe (non-pickle) format.
"""
from .base import Optimizer, register, create, get_registry_names
from .sgd import SGD, ccSGD, NAG, Signum, SGLD, DCASGD
from .adam import Adam, Adamax, Nadam, FTML
from .adaptive import AdaGrad, RMSProp, AdaDelta, Ftrl
from .lamb import LAMB, LARS
from .updater import Updater, get_updater, import_mxnet_states
from . import update_ops  # noqa: F401  (registers sgd_update, adam_update, ... as operators)

__all__ = ['Optimizer', 'register', 'create', 'get_registry_names', 'SGD', 'ccSGD', 'NAG',
           'Signum', 'SGLD', 'DCASGD', 'Adam', 'Adamax', 'Nadam', 'FTML', 'AdaGrad',
           'RMSProp', 'AdaDelta', 'Ftrl', 'LAMB', 'LARS', 'Updater', 'get_updater',
           'import_mxnet_states']
