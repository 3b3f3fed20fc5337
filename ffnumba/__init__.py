"""ffnumba: MXNet 1.x's symbolic deep-learning stack on numba."""
from . import base
from .base import FFError, MXNetError
from .context import Context, cpu, gpu, cpu_pinned, current_context, num_gpus
from . import random
