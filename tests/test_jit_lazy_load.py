"""Cached kernels load without parsing their LLVM IR (``ffnumba._jit_cache._lazy_shared``).

In fresh interpreters sharing one ``NUMBA_CACHE_DIR``: the first compiles and caches
a kernel that calls a helper; the second loads both, runs the kernel (nothing parsed),
reads the same defined-symbol names from the object file as numba reads from the IR,
and then compiles a new function that links the cached helper in (the IR parsed then).
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_KERNELS = '''
from numba import njit


@njit(cache=True)
def helper(x):
    return x * 2.0 + 1.0


@njit(cache=True)
def outer(x):
    return helper(x) - 3.0
'''

_RUN = r'''
import json, sys
import ffnumba          # installs the lazy load
import llvmlite.binding as ll
from numba import njit
from numba.core import event
from ffnumba import _jit_cache
compiled = []

class L(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data['dispatcher'].py_func.__name__)

    def on_end(self, ev):
        pass

event.register('numba:compile', L())
read = []       # the names read from each object file loaded
real_read = _jit_cache._elf_defined_symbols
_jit_cache._elf_defined_symbols = lambda obj: read.append(real_read(obj)) or read[-1]
import gc
import weakref
import lazy_kernels as k
from numba.core.codegen import CPUCodeLibrary
out = {'outer': k.outer(2.0)}
# one of ffnumba's kernels, with helpers linked in (FullyConnected with a ReLU-free GEMM)
fc = ffnumba.nd.FullyConnected(ffnumba.nd.ones((2, 3)), ffnumba.nd.ones((4, 3)),
                               ffnumba.nd.zeros(4), num_hidden=4)
out['fc'] = fc.asnumpy().tolist()
out['compiled'] = [n for n in compiled if n in ('outer', 'helper')]
out['ff_compiled'] = len(compiled) - len(out['compiled'])
lib = k.outer.overloads[k.outer.signatures[0]].library
out['lazy'] = lib._shared_module is None and '_ff_bitcode' in lib.__dict__
if out['lazy']:
    def ir_names(bitcode):
        mod = ll.parse_bitcode(bitcode)
        return sorted(gv.name for gs in (mod.functions, mod.global_variables) for gv in gs
                      if not gv.is_declaration)
    lazy = [o.__dict__['_ff_bitcode'] for o in gc.get_objects()     # (not numba's proxies)
            if not isinstance(o, weakref.ProxyTypes) and isinstance(o, CPUCodeLibrary)
            and '_ff_bitcode' in o.__dict__]
    # every lazily loaded library: the names read from its object file are those numba
    # reads from its IR (compared as collections: the loads are not tied to libraries here)
    out['same_names'] = (sorted(ir_names(b) for b in lazy)
                         == sorted(sorted(n) for n in read))
    out['libraries'] = len(lazy)
    out['names'] = sum(len(n) for n in read)
    # a new, uncached function that links the cached helper in: its IR is parsed now
    third = njit(lambda x: k.helper(x) * 10.0)
    out['third'] = third(2.0)
    hlib = k.helper.overloads[k.helper.signatures[0]].library
    out['helper_parsed'] = hlib._shared_module is not None
print(json.dumps(out))
'''


def _run(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / 'cache'),
               PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT, os.environ.get('PYTHONPATH', '')]))
    proc = subprocess.run([sys.executable, '-c', _RUN], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_cached_kernel_loads_without_its_ir_and_links_on_demand(tmp_path):
    (tmp_path / 'lazy_kernels.py').write_text(_KERNELS)
    cold = _run(tmp_path)
    assert cold['outer'] == 2.0 and cold['compiled'] == ['outer', 'helper']
    assert cold['fc'] == [[3.0] * 4] * 2 and cold['ff_compiled'] > 0
    assert not cold['lazy']                     # compiled here: numba's own library
    warm = _run(tmp_path)
    assert warm['compiled'] == [] and warm['ff_compiled'] == 0
    assert warm['outer'] == 2.0 and warm['fc'] == cold['fc']
    assert warm['lazy'] and warm['same_names'] and warm['libraries'] >= 2
    assert warm['names'] > 2 * warm['libraries']
    assert warm['third'] == 50.0 and warm['helper_parsed']


def test_elf_reader_refuses_what_is_not_elf64():
    from ffnumba._jit_cache import _elf_defined_symbols
    assert _elf_defined_symbols(b'') is None
    assert _elf_defined_symbols(b'\x7fELF\x01\x01' + b'\0' * 100) is None    # 32-bit
    assert _elf_defined_symbols(b'MZ' + b'\0' * 100) is None                 # PE
    header = bytearray(b'\x7fELF\x02\x01' + b'\0' * 58)
    assert _elf_defined_symbols(bytes(header)) is None       # no section, so no symbol table
    header[0x28:0x30] = (10 ** 6).to_bytes(8, 'little')      # section headers past the end
    header[0x3C:0x3E] = (3).to_bytes(2, 'little')
    assert _elf_defined_symbols(bytes(header)) is None
