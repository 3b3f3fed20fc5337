"""numba's BLAS module (``scipy.linalg.cython_blas``) loaded without ``scipy.linalg``.

numba imports ``scipy.linalg.cython_blas`` when it sets up its CPU target (the first
compile or cache load of any process: ``numba.np.arraymath`` checks for a BLAS), and
its ``np.dot`` calls the BLAS functions that module exports. Importing it the usual
way runs ``scipy/linalg/__init__.py`` first, which imports all of ``scipy.linalg``
(decompositions, ``scipy.sparse`` pieces, ...): about 85 ms here, 16% of a warm LeNet
start, spent by every process for a module numba only reads function pointers from.

:func:`preload` loads the extension module from its file on its own (about 2 ms) and
puts it in ``sys.modules`` under its real name, so numba's import finds it there. The
module object is the one a normal import makes (the same file, name and exports); only
its package is not imported. When the program imports ``scipy.linalg`` later, a one-shot
finder (:class:`_AttachOnImport`) gives the package its ``cython_blas`` attribute, as a
normal import does. Nothing happens where SciPy is missing or ``scipy.linalg`` is already
imported, or when the file is not where SciPy keeps it: numba then imports it as usual.

It imports only the standard library (the ``jit`` layer).
"""
import importlib.machinery
import importlib.util
import os
import sys

__all__ = ['preload']

_NAME = 'scipy.linalg.cython_blas'
_PACKAGE = 'scipy.linalg'


def preload():
    """Load ``scipy.linalg.cython_blas`` without ``scipy.linalg``; True when this call did.

    Returns
    -------
    bool
        False when it is already loaded, ``scipy.linalg`` is imported, SciPy is missing
        or the extension file is not found or fails to load (numba imports it itself).
    """
    if _NAME in sys.modules or _PACKAGE in sys.modules:
        return False
    try:
        import scipy
        folder = os.path.join(os.path.dirname(scipy.__file__), 'linalg')
        path = next((os.path.join(folder, 'cython_blas' + s)
                     for s in importlib.machinery.EXTENSION_SUFFIXES
                     if os.path.exists(os.path.join(folder, 'cython_blas' + s))), None)
        if path is None:
            return False
        spec = importlib.util.spec_from_file_location(_NAME, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception:   # noqa: BLE001 -- any failure: numba imports it the usual way
        return False
    sys.modules[_NAME] = module
    sys.meta_path.insert(0, _AttachOnImport())
    return True


class _AttachOnImport:
    """A ``sys.meta_path`` finder, used once: when ``scipy.linalg`` is imported, it is
    imported as usual and then given its ``cython_blas`` attribute (the preloaded module)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _PACKAGE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)   # the real finders now
        if spec is None or spec.loader is None:
            return spec
        real = spec.loader.exec_module

        def exec_module(module):
            real(module)
            if _NAME in sys.modules and not hasattr(module, 'cython_blas'):
                module.cython_blas = sys.modules[_NAME]
        spec.loader.exec_module = exec_module
        return spec
