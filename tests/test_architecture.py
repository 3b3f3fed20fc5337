"""Guards of the layering (docs/architecture.md): one-way imports, no cycles, small files.

The import graph is read with the standard library's ``ast`` from every
module of the package, function-level imports included (a lazy import is
still an arrow). ``LAYERS`` below is the one table of layers; the table in
``docs/architecture.md`` must list the same layers and modules, in order.
"""
import ast
import fnmatch
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, 'ffnumba')
DOC = os.path.join(ROOT, 'docs', 'architecture.md')

#: Layers from the bottom up. A module may import modules of its own layer or
#: of a layer below; never one above. Patterns are fnmatch patterns on dotted
#: module names; the first layer whose pattern matches owns the module.
LAYERS = [
    ('foundation', ['ffnumba.base', 'ffnumba.attribute', 'ffnumba.name', 'ffnumba.random',
                    'ffnumba.dtype', 'ffnumba.context', 'ffnumba.registry',
                    'ffnumba.compile_notice', 'ffnumba.blas_threads', 'ffnumba.thread_pool',
                    'ffnumba.util']),
    ('jit', ['ffnumba._jit_cache', 'ffnumba._jit_link', 'ffnumba._scipy_blas', 'ffnumba.jit']),
    ('ops', ['ffnumba.ops', 'ffnumba.ops.*']),
    ('ndarray', ['ffnumba.ndarray', 'ffnumba.ndarray.*']),
    ('graph', ['ffnumba.symbol.graph', 'ffnumba.symbol.infer', 'ffnumba.symbol.infer_partial']),
    ('executor', ['ffnumba._memory_plan', 'ffnumba._executor_bind', 'ffnumba._executor_fuse',
                  'ffnumba._executor_train_fuse', 'ffnumba._executor_run', 'ffnumba._executor_branches', 'ffnumba._compile_claims', 'ffnumba._compile_ahead',
                  'ffnumba.executor']),
    ('symbol', ['ffnumba.symbol', 'ffnumba.symbol.*']),
    ('training parts', ['ffnumba.initializer', 'ffnumba.lr_scheduler', 'ffnumba.metric',
                        'ffnumba._metric_*', 'ffnumba.optimizer', 'ffnumba.optimizer.*', 'ffnumba.kvstore',
                        'ffnumba.kvstore.*', 'ffnumba.io', 'ffnumba.io.*', 'ffnumba.datasets',
                        'ffnumba.monitor', 'ffnumba.checkpoint', 'ffnumba.callback']),
    ('module', ['ffnumba.module', 'ffnumba.module.*']),
    ('model', ['ffnumba.model']),
    ('front ends', ['ffnumba.layers', 'ffnumba.layers.*', 'ffnumba.viz', 'ffnumba.testing',
                    'ffnumba.testing.*', 'ffnumba.test_utils', 'ffnumba.rnn', 'ffnumba.rnn.*',
                    'ffnumba.contrib', 'ffnumba.contrib.*']),
    ('package', ['ffnumba']),
]

#: Arrows forbidden even where the layers would allow them.
FORBIDDEN = [
    # ff.layers builds symbols and trains through Module; it never touches kernels.
    ('ffnumba.layers*', 'ffnumba.ops*'),
    ('ffnumba.layers*', 'ffnumba.jit'),
    ('ffnumba.layers*', 'ffnumba.executor'),
    ('ffnumba.layers*', 'ffnumba._executor_bind'),
    ('ffnumba.layers*', 'ffnumba._memory_plan'),
    # the graph layer computes no numbers and holds no arrays
    ('ffnumba.symbol.graph', 'ffnumba.ndarray*'),
    ('ffnumba.symbol.infer', 'ffnumba.ndarray*'),
]

#: Upward arrows that exist today, each with the work that removes it. This
#: list may only shrink: an entry that no longer occurs fails the test.
KNOWN_UPWARD = {
    # (none: imperative ff.nd.<Op> calls the registry's kernels directly)
}

#: Soft cap on lines per file (STYLE.md), and the files over it today with the
#: line count they may not exceed. An entry may only go down; one that fits
#: under the cap must be removed.
MAX_LINES = 600
OVER_CAP = {}


def _modules():
    mods = {}
    for folder, _, files in os.walk(PKG):
        for f in files:
            if f.endswith('.py'):
                path = os.path.join(folder, f)
                rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, '.')
                if rel.endswith('.__init__'):
                    rel = rel[:-len('.__init__')]
                mods[rel] = path
    return mods


def _targets(mod, is_pkg, node, mods):
    """Dotted names of ffnumba modules that an Import/ImportFrom node loads."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names if a.name.split('.')[0] == 'ffnumba']
    elif node.level:
        base = mod.split('.') if is_pkg else mod.split('.')[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = '.'.join(base + ([node.module] if node.module else []))
        names = [target + '.' + a.name if target + '.' + a.name in mods else target
                 for a in node.names]
    elif node.module and node.module.split('.')[0] == 'ffnumba':
        names = [node.module + '.' + a.name if node.module + '.' + a.name in mods
                 else node.module for a in node.names]
    else:
        names = []
    out = set()
    for t in names:
        while t not in mods and '.' in t:
            t = t.rsplit('.', 1)[0]
        if t in mods and t != mod:
            out.add(t)
    return out


def import_graph():
    """``{module: set of modules it imports}`` over the whole package."""
    mods = _modules()
    graph = {}
    for mod, path in mods.items():
        with open(path, encoding='utf-8') as f:
            tree = ast.parse(f.read(), path)
        is_pkg = path.endswith('__init__.py')
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                deps |= _targets(mod, is_pkg, node, mods)
        graph[mod] = deps
    return graph


def layer_of(mod):
    for i, (_, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatchcase(mod, p) for p in patterns):
            return i
    return None


def cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@pytest.fixture(scope='module')
def graph():
    return import_graph()


def test_the_graph_reader_sees_function_level_imports(graph):
    # callback imports checkpoint inside a function: the reader must see it
    assert 'ffnumba.checkpoint' in graph['ffnumba.callback']
    assert 'ffnumba.executor' in graph['ffnumba.symbol.symbol']     # Symbol.bind, lazily
    assert 'ffnumba.jit' in graph['ffnumba.optimizer.kernels']


def test_no_import_cycles(graph):
    assert cycles(graph) == []


def test_cycle_finder_finds_a_cycle():
    fake = {'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}
    assert cycles(fake) == [['a', 'b', 'c']]


def test_every_module_has_a_layer(graph):
    assert [m for m in sorted(graph) if layer_of(m) is None] == []


def test_no_upward_arrows(graph):
    up = []
    for mod, deps in sorted(graph.items()):
        for dep in sorted(deps):
            if layer_of(dep) is None or layer_of(mod) is None:
                continue     # test_every_module_has_a_layer reports these
            if layer_of(dep) > layer_of(mod) and (mod, dep) not in KNOWN_UPWARD:
                up.append('%s (%s) -> %s (%s)' % (mod, LAYERS[layer_of(mod)][0], dep,
                                                 LAYERS[layer_of(dep)][0]))
    assert up == []


def test_known_upward_arrows_only_shrink(graph):
    stale = [k for k in KNOWN_UPWARD if k[1] not in graph.get(k[0], ())]
    assert stale == [], 'remove these entries from KNOWN_UPWARD: %s' % stale


def test_no_forbidden_arrows(graph):
    bad = ['%s -> %s' % (mod, dep) for mod, deps in sorted(graph.items()) for dep in sorted(deps)
           for src, dst in FORBIDDEN
           if fnmatch.fnmatchcase(mod, src) and fnmatch.fnmatchcase(dep, dst)]
    assert bad == []


def _doc_layers():
    with open(DOC, encoding='utf-8') as f:
        text = f.read()
    block = text.split('<!-- layers:begin -->')[1].split('<!-- layers:end -->')[0]
    rows = []
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        rows.append((int(cells[0]), cells[1], re.findall(r'`([^`]+)`', cells[2])))
    return rows


def test_docs_layer_table_matches_the_test():
    rows = _doc_layers()
    assert [r[0] for r in rows] == list(range(1, len(LAYERS) + 1))
    assert [(name, pats) for _, name, pats in rows] == [(n, list(p)) for n, p in LAYERS]


def _line_counts():
    out = {}
    for folder, _, files in os.walk(PKG):
        for f in files:
            if f.endswith('.py'):
                path = os.path.join(folder, f)
                with open(path, encoding='utf-8') as fh:
                    out[os.path.relpath(path, ROOT).replace(os.sep, '/')] = sum(1 for _ in fh)
    return out


def test_files_stay_under_the_soft_cap():
    counts = _line_counts()
    over = {p: n for p, n in counts.items() if n > OVER_CAP.get(p, MAX_LINES)}
    assert over == {}, 'files over %d lines (split them): %s' % (MAX_LINES, over)


def test_over_cap_allow_list_only_shrinks():
    counts = _line_counts()
    stale = {p: counts.get(p) for p, n in OVER_CAP.items() if counts.get(p, 0) <= MAX_LINES}
    assert stale == {}, 'these files fit the cap now; remove them from OVER_CAP: %s' % stale


# ------------------------------------------------------------------ device branches
#: The modules that may ask which device an array lives on (docs/architecture.md, "Who
#: owns which fact"): the device vocabulary (``context``), the NDArray device primitives
#: (``ndarray/``, see ``ndarray/_device.py``) and kernel-level code (the operators'
#: kernels, the kernel infrastructure, the optimizers' kernel dispatch). Everything
#: else moves values through the NDArray primitives.
DEVICE_AWARE = ['ffnumba.context', 'ffnumba.ndarray', 'ffnumba.ndarray.*', 'ffnumba.ops',
                'ffnumba.ops.*', 'ffnumba.jit', 'ffnumba.optimizer.kernels']

_DEVICE_NAMES = {'gpu', 'cpu', 'cpu_pinned', 'cpu_shared'}
_DEVICE_CALLS = {'copy_to_host', 'copy_to_device', 'to_device', 'device_array',
                 'device_array_like', 'synchronize'}
_DEVICE_FLAGS = {'is_gpu', '_is_gpu', '_gpu'}


def device_branches(tree):
    """``(line, what)`` for each place a module branches on the device or moves memory
    between host and device by hand."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and \
                all(isinstance(o, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)) for o in node.ops):
            # (``'gpu' in op.forward`` asks the registry, it does not branch on an array)
            consts = [c.value for c in [node.left] + node.comparators
                      if isinstance(c, ast.Constant) and isinstance(c.value, str)]
            if _DEVICE_NAMES & set(consts):
                out.append((node.lineno, 'compares with %r' % sorted(_DEVICE_NAMES & set(consts))))
        elif isinstance(node, ast.Attribute):
            if node.attr in _DEVICE_CALLS | _DEVICE_FLAGS:
                out.append((node.lineno, '.%s' % node.attr))
            elif isinstance(node.value, ast.Name) and node.value.id == 'cuda':
                out.append((node.lineno, 'cuda.%s' % node.attr))
        elif isinstance(node, ast.Name) and node.id in _DEVICE_FLAGS:
            out.append((node.lineno, node.id))
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split('.')[0] == 'numba' and \
                ('cuda' in node.module.split('.') or any(a.name == 'cuda' for a in node.names)):
            out.append((node.lineno, 'imports numba.cuda'))
        elif isinstance(node, ast.Import) and any(a.name.startswith('numba.cuda')
                                                  for a in node.names):
            out.append((node.lineno, 'imports numba.cuda'))
    return sorted(out)


def test_device_branches_only_in_device_aware_modules():
    bad = []
    for mod, path in sorted(_modules().items()):
        if any(fnmatch.fnmatchcase(mod, p) for p in DEVICE_AWARE):
            continue
        with open(path, encoding='utf-8') as f:
            tree = ast.parse(f.read(), path)
        bad += ['%s:%d %s' % (mod, line, what) for line, what in device_branches(tree)]
    assert bad == [], ('device branches outside %s (use the NDArray device primitives of '
                       'ndarray/_device.py): %s' % (DEVICE_AWARE, bad))


def test_device_branch_finder_finds_branches():
    src = ("if a.context.device_type == 'gpu':\n    x = a._data.copy_to_host()\n"
           "from numba import cuda\ny = cuda.to_device(x)\nz = _is_gpu(ctx)\n")
    found = [what for _, what in device_branches(ast.parse(src))]
    assert found == ["compares with ['gpu']", '.copy_to_host', 'imports numba.cuda',
                     '.to_device', '_is_gpu']


def test_docs_name_the_device_aware_modules():
    with open(DOC, encoding='utf-8') as f:
        text = f.read()
    assert all('`%s`' % p in text for p in DEVICE_AWARE), DEVICE_AWARE
