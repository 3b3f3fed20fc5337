"""``ff.contrib``: MXNet's contrib import paths for what ffnumba provides
(``ff.contrib.svrg_optimization.svrg_module.SVRGModule``)."""
from . import svrg_optimization
