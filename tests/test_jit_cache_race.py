"""numba's disk cache shared by processes that compile at once (ffnumba._jit_cache._safe_save).

Found in CI: two fuzz workers saved entries of one template kernel at the same moment,
both under the same data-file number, and a float32 entry came to hold a float64 kernel
(``TypeError: can't unbox array`` in ``exp`` backward).
"""
import subprocess
import sys
import textwrap
import time

from numba.core.caching import IndexDataCacheFile

from ffnumba import _jit_cache

#: saves per writer process: enough that two writers overlap many times over
N = 150

_WRITER = textwrap.dedent('''
    import sys, time
    from numba.core.caching import IndexDataCacheFile
    from ffnumba import _jit_cache
    path, who, n, start, safe = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    f = IndexDataCacheFile(path, 'kernel-12.py311', (1.0, 2))
    if safe == '1':
        f.save = _jit_cache._safe_save.__get__(f)
    while time.time() < start:
        pass
    for i in range(n):
        f.save((who, i), ('code of', who, i, 'x' * 2000))
''')


def _race(tmp_path, safe):
    start = time.time() + 3.0       # both writers import first, then start together
    procs = [subprocess.Popen([sys.executable, '-c', _WRITER, str(tmp_path), who, str(N),
                               repr(start), safe]) for who in ('a', 'b')]
    assert [p.wait(120) for p in procs] == [0, 0]
    f = IndexDataCacheFile(str(tmp_path), 'kernel-12.py311', (1.0, 2))
    index = f._load_index()
    wrong = [k for k in index if f.load(k)[1:3] != k]
    return index, wrong


def test_two_processes_saving_at_once_keep_every_entry_with_its_own_code(tmp_path):
    index, wrong = _race(tmp_path, '1')
    assert wrong == []
    assert sorted(index) == sorted((w, i) for w in 'ab' for i in range(N))


def test_data_file_named_by_key_and_source_stamp_and_written_before_the_index(tmp_path):
    calls = []
    files = [IndexDataCacheFile(str(tmp_path), 'k-1.py311', stamp) for stamp in ((1.0, 2), (3.0, 2))]
    for f in files:
        f.save = _jit_cache._safe_save.__get__(f)
        real_data, real_index = f._save_data, f._save_index
        f._save_data = lambda name, d, real=real_data: (calls.append('data'), real(name, d))
        f._save_index = lambda o, real=real_index: (calls.append('index'), real(o))
    files[0].save(('sig', 1), 'one')
    files[0].save(('sig', 2), 'two')
    names = [files[0]._load_index()[k] for k in (('sig', 1), ('sig', 2))]
    files[1].save(('sig', 1), 'one, new source')
    names.append(files[1]._load_index()[('sig', 1)])
    assert calls == ['data', 'index'] * 3
    assert len(set(names)) == 3
    assert files[1].load(('sig', 1)) == 'one, new source'
    assert files[0].load(('sig', 2)) is None       # the index of the old source stamp is gone
    # the old source's data files are removed by the next save (and numba's numbered ones)
    (tmp_path / 'k-1.py311.3.nbc').write_bytes(b'numbered')
    (tmp_path / 'k-10.py311.1.nbc').write_bytes(b'another function')
    files[1].save(('sig', 3), 'three')
    assert sorted(p.name for p in tmp_path.glob('*.nbc')) == sorted(
        [names[2], files[1]._load_index()[('sig', 3)], 'k-10.py311.1.nbc'])


def test_ffnumba_kernels_save_through_it():
    from ffnumba.ops.nn import _bn_kernels
    assert _bn_kernels._affine._cache._cache_file.save.__func__ is _jit_cache._safe_save
