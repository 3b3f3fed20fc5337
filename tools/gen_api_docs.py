"""Generate the API reference pages ``docs/api/*.md`` from the live code.

Every page is built with :mod:`inspect` from the docstrings and signatures
of the imported package (no sphinx): one page per public module, plus an
operator page built from the op registry (``ffnumba.ops.list_ops()`` /
``get_op(name)``): names, aliases, arguments, auxiliary states, outputs,
typed params (type, default, range, doc line) and whether GPU kernels exist.

Usage::

    python tools/gen_api_docs.py            # writes docs/api/
    python tools/gen_api_docs.py --check    # exit 1 if the pages are stale

The output is deterministic (sorted, no dates, no memory addresses), so
running it twice gives the same files. Pages in ``docs/api/`` that the
generator does not produce are removed.
"""
import argparse
import importlib
import inspect
import os
import re
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, 'docs', 'api')

#: (file stem, title, modules documented on the page, public names or None for ``__all__``).
PAGES = [
    ('context', 'Contexts, random seeds and errors', ['ffnumba.context', 'ffnumba.random',
                                                      'ffnumba.base'], None),
    ('symbol', 'Symbols (ff.sym)', ['ffnumba.symbol'], None),
    ('operators', 'Operators', [], None),
    ('ndarray', 'NDArray (ff.nd)', ['ffnumba.ndarray'],
     ['NDArray', 'array', 'zeros', 'ones', 'empty', 'full', 'arange', 'concat', 'concatenate',
      'from_numpy', 'save', 'load', 'dumps', 'loads', 'waitall']),
    ('executor', 'Executor', ['ffnumba.executor'], None),
    ('module', 'Module API (ff.mod)', ['ffnumba.module'], None),
    ('model', 'FeedForward and checkpoints (ff.model)', ['ffnumba.model'],
     ['FeedForward', 'save_checkpoint', 'load_checkpoint', 'load_params', 'BatchEndParam']),
    ('optimizer', 'Optimizers (ff.optimizer)', ['ffnumba.optimizer'], None),
    ('lr_scheduler', 'Learning-rate schedulers (ff.lr_scheduler)', ['ffnumba.lr_scheduler'], None),
    ('metric', 'Metrics (ff.metric)', ['ffnumba.metric'], None),
    ('io', 'Data iterators (ff.io)', ['ffnumba.io'], None),
    ('callback', 'Callbacks (ff.callback)', ['ffnumba.callback'], None),
    ('initializer', 'Initializers (ff.init)', ['ffnumba.initializer'], None),
    ('kvstore', 'Key-value stores (ff.kv)', ['ffnumba.kvstore'], None),
    ('monitor', 'Monitor (ff.monitor)', ['ffnumba.monitor'], None),
    ('datasets', 'Datasets (ff.datasets)', ['ffnumba.datasets'], None),
    ('testing', 'Testing tools (ff.testing)', ['ffnumba.testing', 'ffnumba.testing.op_case',
                                               'ffnumba.testing.strategies'], None),
]

#: Pages written only when their module exists (front ends still being added).
OPTIONAL_PAGES = [
    ('layers', 'Keras-style layers (ff.layers)', ['ffnumba.layers'], None),
    ('viz', 'Visualization (ff.viz)', ['ffnumba.viz'], None),
    ('rnn', 'Recurrent cells and bucketing (ff.rnn)', ['ffnumba.rnn'], None),
]


def _pages():
    """PAGES plus the optional pages whose module can be found."""
    import importlib.util
    out = list(PAGES)
    for page in OPTIONAL_PAGES:
        if importlib.util.find_spec(page[2][0]) is not None:
            out.append(page)
    return out

#: numpydoc sections whose entries are ``name : type`` lines with indented text.
_ENTRY_SECTIONS = {'Parameters', 'Other Parameters', 'Returns', 'Yields', 'Raises', 'Warns',
                   'Attributes', 'Class attributes', 'Keyword Arguments'}


# ------------------------------------------------------------------ text helpers
def _roles(text):
    """Turn reST roles and literals into Markdown code spans."""
    text = re.sub(r':(?:class|func|meth|mod|attr|data|obj|exc):`~?([^`]+)`', r'`\1`', text)
    return text.replace('``', '`')


def _is_rule(line, prev):
    s = line.strip()
    return bool(s) and set(s) == {'-'} and prev.strip() and len(s) >= len(prev.strip()) - 1


def docstring_to_md(doc):
    """A numpydoc docstring as Markdown.

    Section headers become bold lines, ``Parameters``-like entries become
    bullet lists, doctests and other indented or ``::`` blocks become fenced
    ``text`` blocks, reST tables are fenced verbatim.
    """
    if not doc:
        return '*No docstring.*\n'
    lines = inspect.cleandoc(doc).splitlines()
    out = []
    section = None
    i = 0
    n = len(lines)

    def fence(block):
        while block and not block[-1].strip():
            block.pop()
        if not block:
            return
        width = min(len(b) - len(b.lstrip()) for b in block if b.strip())
        out.append('```text')
        out.extend(b[width:] if b.strip() else '' for b in block)
        out.append('```')
        out.append('')

    while i < n:
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < n else ''
        if line.strip() and not line.startswith(' ') and _is_rule(nxt, line):
            section = line.strip()
            out.append('')
            out.append('**%s**' % section)
            out.append('')
            i += 2
            continue
        stripped = line.strip()
        # doctest blocks
        if stripped.startswith('>>>'):
            block = []
            while i < n and lines[i].strip():
                block.append(lines[i])
                i += 1
            fence(block)
            continue
        # reST simple tables
        if stripped and set(stripped.replace(' ', '')) == {'='}:
            block = []
            while i < n and lines[i].strip():
                block.append(lines[i])
                i += 1
            fence(block)
            continue
        if section in _ENTRY_SECTIONS and stripped:
            if not line.startswith(' '):
                out.append('- `%s`' % stripped.replace('`', ''))
            else:
                out.append('  ' + _roles(stripped))
            i += 1
            continue
        # indented literal blocks (after '::' or anywhere outside entry sections)
        if line.startswith(' ') and stripped:
            block = []
            while i < n and (lines[i].startswith(' ') or not lines[i].strip()):
                if not lines[i].strip() and (i + 1 >= n or not lines[i + 1].startswith(' ')):
                    break
                block.append(lines[i])
                i += 1
            fence(block)
            continue
        if stripped.endswith('::'):
            line = line.rstrip()[:-1]
        out.append(_roles(line))
        i += 1
    text = '\n'.join(out).strip() + '\n'
    return re.sub(r'\n{3,}', '\n\n', text)


class _Repr:
    """A default value shown by a stable repr (no memory addresses)."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def _stable(value):
    if isinstance(value, types.ModuleType):
        return _Repr(value.__name__)
    if isinstance(value, type):
        return _Repr(value.__name__)
    if inspect.isfunction(value) or inspect.isbuiltin(value):
        return _Repr(value.__name__)
    r = repr(value)
    if ' at 0x' in r or ' object at ' in r:
        return _Repr('<%s>' % type(value).__name__)
    return value


def signature(obj, name):
    """``name(params)`` with stable default values, or ``name(...)``."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return '%s(...)' % name
    params = []
    for p in sig.parameters.values():
        if p.default is not inspect.Parameter.empty:
            p = p.replace(default=_stable(p.default))
        params.append(p.replace(annotation=inspect.Parameter.empty))
    sig = sig.replace(parameters=params, return_annotation=inspect.Signature.empty)
    return '%s%s' % (name, sig)


# ------------------------------------------------------------------ objects
def _public_names(mod, names):
    if names is not None:
        return list(names)
    if hasattr(mod, '__all__'):
        return [n for n in mod.__all__ if not n.startswith('_')]
    return sorted(n for n in vars(mod) if not n.startswith('_')
                  and not isinstance(getattr(mod, n), types.ModuleType))


def _own_members(cls):
    """Public methods and properties a class defines or inherits from ffnumba classes."""
    seen = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not klass.__module__.startswith('ffnumba'):
            continue
        for k, v in vars(klass).items():
            if k.startswith('_') and k not in ('__call__',):
                continue
            seen[k] = (klass, v)
    out = []
    for k in sorted(seen):
        klass, v = seen[k]
        v = _with_inherited_doc(cls, k, v)
        if isinstance(v, (staticmethod, classmethod)):
            out.append((k, 'method', v.__func__))
        elif inspect.isfunction(v):
            out.append((k, 'method', v))
        elif isinstance(v, property):
            out.append((k, 'property', v))
    return out


def _with_inherited_doc(cls, name, v):
    """``v``, or a stand-in carrying the docstring of the overridden method."""
    func = v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
    if getattr(func, '__doc__', None) or not (inspect.isfunction(func) or
                                             isinstance(func, property)):
        return v
    for klass in cls.__mro__[1:]:
        base = vars(klass).get(name)
        if base is None:
            continue
        base = base.__func__ if isinstance(base, (staticmethod, classmethod)) else base
        doc = getattr(base, '__doc__', None)
        if doc:
            if isinstance(func, property):
                return property(func.fget, doc=doc)
            def proxy(*a, **k):
                pass
            proxy.__signature__ = inspect.signature(func)
            proxy.__doc__ = doc
            return proxy
    return v


def document_object(qual, obj, level=3):
    h = '#' * level
    lines = []
    if inspect.isclass(obj):
        lines.append('%s class `%s`' % (h, qual))
        lines.append('')
        lines.append('```python')
        lines.append(signature(obj, qual))
        lines.append('```')
        lines.append('')
        lines.append(docstring_to_md(obj.__doc__))
        for k, kind, member in _own_members(obj):
            if kind == 'property':
                doc = member.__doc__ or ''
                first = _roles(inspect.cleandoc(doc).splitlines()[0]) if doc.strip() else ''
                lines.append('- property `%s.%s`%s' % (qual, k, (': ' + first) if first else ''))
                continue
            lines.append('')
            lines.append('%s# `%s.%s`' % (h, qual, k))
            lines.append('')
            lines.append('```python')
            lines.append(signature(member, k))
            lines.append('```')
            lines.append('')
            lines.append(docstring_to_md(member.__doc__))
        lines.append('')
    elif callable(obj):
        lines.append('%s `%s`' % (h, qual))
        lines.append('')
        lines.append('```python')
        lines.append(signature(obj, qual))
        lines.append('```')
        lines.append('')
        lines.append(docstring_to_md(obj.__doc__))
    else:
        lines.append('%s `%s`' % (h, qual))
        lines.append('')
        r = repr(_stable(obj))
        if len(r) > 200:
            r = r[:200] + ' ...'
        lines.append('Value: `%s`' % r.replace('`', "'"))
        lines.append('')
    return '\n'.join(lines)


def module_page(title, modnames, names):
    lines = ['# %s' % title, '',
             '*Generated by `tools/gen_api_docs.py` from the docstrings; do not edit.*', '']
    for modname in modnames:
        mod = importlib.import_module(modname)
        if len(modnames) > 1:
            lines.append('## Module `%s`' % modname)
            lines.append('')
        lines.append(docstring_to_md(mod.__doc__))
        lines.append('')
        pub = _public_names(mod, names if modname == modnames[0] else None)
        if modname == 'ffnumba.testing':
            pub = pub + ['OpCase']
        short = modname.replace('ffnumba.', 'ff.').replace('ff.ndarray', 'ff.nd') \
            .replace('ff.symbol', 'ff.sym').replace('ff.initializer', 'ff.init') \
            .replace('ff.kvstore', 'ff.kv').replace('ff.module', 'ff.mod')
        for name in pub:
            if name == 'OpCase' and modname == 'ffnumba.testing':
                continue   # documented with its own module below
            try:
                obj = getattr(mod, name)
            except AttributeError:
                lines.append('### `%s.%s`\n\n*Listed in `__all__` but missing.*\n' % (short, name))
                continue
            if isinstance(obj, types.ModuleType):
                continue
            lines.append(document_object('%s.%s' % (short, name), obj))
    return '\n'.join(lines)


# ------------------------------------------------------------------ operators
def _default_params(op):
    from ffnumba.ops.params import REQUIRED
    cls = op.params
    p = object.__new__(cls)
    vals = {k: (None if f.default is REQUIRED else f.default) for k, f in cls._fields.items()}
    object.__setattr__(p, '_values', vals)
    object.__setattr__(p, '_raw', {})
    object.__setattr__(p, 'op_name', op.name)
    return p


def _names(fn, op):
    if op.variadic and fn is op.list_arguments:
        return '`*data` (count: `%s`)' % op.variadic
    try:
        got = list(fn(_default_params(op)))
    except Exception:   # depends on a required param
        return 'depends on params'
    return ', '.join('`%s`' % x for x in got) if got else '-'


def _kind(f):
    from ffnumba.ops.params import Shape
    kinds = {int: 'int', float: 'float', bool: 'bool', str: 'str', Shape: 'tuple of int',
             'dtype': 'dtype name'}
    t = kinds.get(f.kind, str(f.kind))
    if f.choices:
        t = '{%s}' % ', '.join("'%s'" % c for c in f.choices)
    if f.optional:
        t += ' or None'
    return t


def _cell(s):
    return str(s).replace('|', '\\|').replace('\n', ' ')


def operators_page():
    import ffnumba.ops as ops
    from ffnumba.ops.params import REQUIRED
    names = ops.list_ops()
    lines = ['# Operators', '',
             '*Generated by `tools/gen_api_docs.py` from the operator registry; do not edit.*',
             '',
             'Every operator below is reachable as `ff.sym.<name>(...)` (and each alias as '
             'well). Inputs can be given by position or keyword; an omitted parameter input '
             '(a weight, a bias, an auxiliary state) becomes a Variable named '
             '`{node}_{input}`. Params are keyword-only; strings such as `\'(3, 3)\'` are '
             'accepted as MXNet stores them in JSON. Arguments are listed for the default '
             'params (some ops drop `bias` with `no_bias=True`).', '',
             '%d operators, %d with GPU kernels. Without GPU kernels '
             '(`ffnumba.ops.gpu_missing()`): %s.' % (len(names), sum('gpu' in ops.get_op(n).forward for n in names),
                      ', '.join('`%s`' % x for x in ops.gpu_missing()) or 'none'), '',
             '| operator | aliases | arguments | auxiliary states | outputs | GPU | loss head |',
             '| --- | --- | --- | --- | --- | --- | --- |']
    for n in names:
        op = ops.get_op(n)
        lines.append('| [`%s`](#%s) | %s | %s | %s | %s | %s | %s |' % (
            n, n.lower(),
            ', '.join('`%s`' % a for a in op.aliases) or '-',
            _cell(_names(op.list_arguments, op)), _cell(_names(op.list_aux, op)),
            _cell(_names(op.list_outputs, op)),
            'yes' if 'gpu' in op.forward else 'no', 'yes' if op.is_loss else ''))
    lines.append('')
    for n in names:
        op = ops.get_op(n)
        lines.append('## %s' % n)
        lines.append('')
        if op.aliases:
            lines.append('Aliases: %s.' % ', '.join('`%s`' % a for a in op.aliases))
            lines.append('')
        lines.append('GPU kernels: %s.%s' % ('yes' if 'gpu' in op.forward else 'no',
                                            ' Loss head (backward ignores head gradients).'
                                            if op.is_loss else ''))
        lines.append('')
        body = inspect.cleandoc(op.doc or '') or 'Apply the %s operator.' % n
        lines.append(docstring_to_md(body))
        lines.append('')
        lines.append('Arguments: %s. Auxiliary states: %s. Outputs: %s.'
                     % (_names(op.list_arguments, op), _names(op.list_aux, op),
                        _names(op.list_outputs, op)))
        lines.append('')
        if op.input_docs:
            for k in op.input_docs:
                lines.append('- `%s`: %s' % (k, _roles(op.input_docs[k])))
            lines.append('')
        fields = op.params._fields
        if fields:
            lines.append('| param | type | default | range | description |')
            lines.append('| --- | --- | --- | --- | --- |')
            for k, f in fields.items():
                rng = []
                if f.low is not None:
                    rng.append('>= %s' % f.low)
                if f.high is not None:
                    rng.append('<= %s' % f.high)
                default = 'required' if f.default is REQUIRED else '`%r`' % (f.default,)
                lines.append('| `%s` | %s | %s | %s | %s |' % (
                    k, _cell(_kind(f)), _cell(default), ', '.join(rng) or '',
                    _cell(_roles(f.doc))))
            lines.append('')
        ignored = getattr(op.params, '_ignored', ())
        if ignored:
            lines.append('Accepted and ignored (MXNet compatibility): %s.'
                         % ', '.join('`%s`' % x for x in ignored))
            lines.append('')
    return '\n'.join(lines)


def index_page():
    lines = ['# API reference', '',
             '*Generated by `tools/gen_api_docs.py`; do not edit. Re-run it after changing '
             'a docstring.*', '']
    for stem, title, mods, _ in _pages():
        lines.append('- [%s](%s.md)' % (title, stem))
    lines.append('')
    return '\n'.join(lines)


def build():
    """``{file name: text}`` of every page."""
    sys.path.insert(0, ROOT)
    import ffnumba  # noqa: F401  (imports every op family)
    pages = {'index.md': index_page()}
    for stem, title, mods, names in _pages():
        text = operators_page() if stem == 'operators' else module_page(title, mods, names)
        pages[stem + '.md'] = re.sub(r'\n{3,}', '\n\n', text).rstrip() + '\n'
    return pages


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', default=OUT_DIR, help='output folder (default docs/api)')
    ap.add_argument('--check', action='store_true', help='only report stale pages')
    args = ap.parse_args(argv)
    pages = build()
    os.makedirs(args.out, exist_ok=True)
    stale = []
    for fname, text in sorted(pages.items()):
        path = os.path.join(args.out, fname)
        old = None
        if os.path.exists(path):
            with open(path, encoding='utf-8') as f:
                old = f.read()
        if old != text:
            stale.append(fname)
            if not args.check:
                tmp = path + '.tmp'
                with open(tmp, 'w', encoding='utf-8') as f:
                    f.write(text)
                os.replace(tmp, path)
    extra = sorted(f for f in os.listdir(args.out) if f.endswith('.md') and f not in pages)
    if not args.check:
        for f in extra:
            os.remove(os.path.join(args.out, f))
    if args.check:
        if stale or extra:
            print('stale: %s' % ', '.join(stale + extra))
            return 1
        print('docs/api is up to date (%d pages)' % len(pages))
        return 0
    print('wrote %d of %d pages to %s' % (len(stale), len(pages), args.out))
    return 0


if __name__ == '__main__':
    sys.exit(main())
