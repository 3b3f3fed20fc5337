"""MXNet's ``mx.contrib.svrg_optimization.svrg_module``: the same
:class:`~ffnumba.module.svrg_module.SVRGModule` as ``ff.mod.SVRGModule``."""
from ...module.svrg_module import SVRGModule

__all__ = ['SVRGModule']
