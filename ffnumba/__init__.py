"""ffnumba: MXNet 1.x's symbolic deep-learning stack on numba.

``import ffnumba as ff`` gives MXNet 1.x's Python API: ``ff.sym`` (graphs),
``ff.nd`` (arrays), ``ff.mod`` and ``ff.FeedForward`` (training), ``ff.init``,
``ff.optimizer``, ``ff.lr_scheduler``, ``ff.metric``, ``ff.io``,
``ff.callback``, ``ff.kv``, ``ff.monitor``, ``ff.datasets`` and
``ff.testing``. Every user-facing error derives from :class:`ff.base.FFError`.
"""
__version__ = '0.1.0'   # the one version string; pyproject.toml reads it

import logging as _logging
# A library logs, the application decides where to: records go to the handlers the user
# configures (logging.basicConfig, or a handler on the 'ffnumba' logger); nothing here
# configures the root logger.
_logging.getLogger(__name__).addHandler(_logging.NullHandler())

import sys as _sys


def _check_core_dependencies():
    """Raise a ModuleNotFoundError that says how to install ffnumba when a dependency
    the import needs (numpy, numba) is missing from this Python, instead of a traceback
    from deep inside the package. (scipy, also core, is only looked up by numba at the
    first matrix product: ``import ffnumba`` itself does not touch it.)"""
    import importlib.util
    for dep in ('numpy', 'numba'):
        if importlib.util.find_spec(dep) is None:
            raise ModuleNotFoundError(
                'ffnumba needs %r, which this Python (%s) does not have. Install ffnumba '
                'with its dependencies into this Python: `pip install -e .` in a checkout '
                '(or `pip install -e \'.[data]\'`, as README.md says); its core dependencies '
                'are numpy, numba, scipy and tqdm.' % (dep, _sys.executable), name=dep)


_check_core_dependencies()

from . import base  # noqa: E402
from .base import FFError, MXNetError
from .context import Context, cpu, gpu, cpu_pinned, current_context, num_gpus
from . import context
from . import random
from . import ndarray
from . import ndarray as nd
for _name in random.SAMPLERS:   # mx.random.uniform is mx.nd.random.uniform
    setattr(random, _name, getattr(ndarray.random, _name))
from . import ops
from . import symbol
from . import symbol as sym
from . import name
from .attribute import AttrScope
from . import executor
from . import initializer
from . import initializer as init
from . import optimizer
from . import lr_scheduler
from . import metric
from . import io
from . import callback
from . import kvstore
from . import kvstore as kv
from . import monitor
from . import monitor as mon
from . import model
from .model import FeedForward
from . import module
from . import module as mod
from . import datasets
from . import testing
from . import testing as test_utils
_sys.modules[__name__ + '.test_utils'] = testing  # `from ffnumba.test_utils import x`
from . import layers
from . import rnn
# MXNet's mx.init.FusedRNN: defined beside the RNN cells' weight layout, named in ff.init here
# (the package is the one layer above both).
initializer.FusedRNN = rnn.cells.FusedRNN
initializer.__all__.append('FusedRNN')
from . import contrib
from . import util
from .util import use_np_shape
from . import viz
