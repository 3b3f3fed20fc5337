"""``ff.mod`` (alias ``ff.module``): MXNet's module API.

:class:`BaseModule` owns the training loop (``fit``, ``score``, ``predict``);
:class:`Module` binds a symbol to one or more devices through one
:class:`DataParallelExecutorGroup`; :class:`BucketingModule`,
:class:`SequentialModule`, :class:`PythonModule`/:class:`PythonLossModule`
and :class:`SVRGModule` build on them.
"""
from .base_module import BaseModule, BatchEndParam
from .executor_group import DataParallelExecutorGroup
from .module import Module
from .bucketing_module import BucketingModule
from .sequential_module import SequentialModule
from .python_module import PythonModule, PythonLossModule
from .svrg_module import SVRGModule

__all__ = ['BaseModule', 'BatchEndParam', 'DataParallelExecutorGroup', 'Module',
           'BucketingModule', 'SequentialModule', 'PythonModule', 'PythonLossModule',
           'SVRGModule']
