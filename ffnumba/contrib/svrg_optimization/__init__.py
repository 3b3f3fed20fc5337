"""MXNet's ``mx.contrib.svrg_optimization`` path to :class:`ffnumba.module.SVRGModule`."""
from . import svrg_module
from .svrg_module import SVRGModule
