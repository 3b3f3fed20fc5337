"""The user guide's code runs: every ```python block of docs/index.md, data.md, guide/*.md.

Blocks of one file run in order in one namespace and a working folder of
their own. All files run in one separate Python process (a guide may register
an operator or seed the generators: nothing leaks into the other tests, and
the interpreter starts once). Blocks meant only for reading are fenced with
another language (```text, ```bash). The API pages are generated: a second
test checks that ``tools/gen_api_docs.py --check`` finds them up to date.
"""
import glob
import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, 'docs')
GUIDES = ([os.path.join(DOCS, 'index.md'), os.path.join(DOCS, 'data.md')] +
          sorted(glob.glob(os.path.join(DOCS, 'guide', '*.md'))))

_FENCE = re.compile(r'^```python[ \t]*\n(.*?)^```[ \t]*$', re.S | re.M)

# Runs every guide in one process (one interpreter start-up and one numba cache load for
# all): per guide a fresh namespace and working folder, its blocks in order, each block
# written to a real file first (numba's cache=True needs the source on disk).
_RUNNER = r"""
import contextlib, io, json, os, sys, traceback
spec, out = sys.argv[1], sys.argv[2]
jobs = json.load(open(spec))
results = {}
for job in jobs:
    os.makedirs(job['cwd'])
    os.chdir(job['cwd'])
    ns = {'__name__': '__docs__'}
    buf = io.StringIO()
    results[job['name']] = {'ok': True}
    for i, (line, src) in enumerate(job['blocks']):
        fname = os.path.join(job['src'], 'block%02d_line%d.py' % (i + 1, line))
        os.makedirs(job['src'], exist_ok=True)
        with open(fname, 'w') as f:
            f.write(src)
        try:
            with contextlib.redirect_stdout(buf):
                exec(compile(src, fname, 'exec'), ns)
        except BaseException:
            results[job['name']] = {'ok': False, 'error': buf.getvalue()[-3000:] + '\n' +
                                    traceback.format_exc() +
                                    '\nFAILED: python block %d (line %d of %s)'
                                    % (i + 1, line, job['name'])}
            break
    with open(out, 'w') as f:
        json.dump(results, f)
"""


def _run_all(folder):
    jobs = [{'name': os.path.relpath(p, DOCS), 'blocks': python_blocks(p),
             'cwd': os.path.join(folder, 'run', str(k)), 'src': os.path.join(folder, 'src', str(k))}
            for k, p in enumerate(GUIDES)]
    spec = os.path.join(folder, 'jobs.json')
    out = os.path.join(folder, 'results.json')
    with open(spec, 'w') as f:
        json.dump(jobs, f)
    env = dict(os.environ)
    env['PYTHONPATH'] = ROOT + os.pathsep + env.get('PYTHONPATH', '')
    proc = subprocess.run([sys.executable, '-c', _RUNNER, spec, out], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)
    if not os.path.exists(out):
        return {'__crash__': proc.stdout[-4000:] + proc.stderr[-6000:]}
    with open(out) as f:
        return json.load(f)


@pytest.fixture(scope='module')
def guide_results(tmp_path_factory):
    return _run_all(str(tmp_path_factory.mktemp('docs')))


def python_blocks(path):
    """``[(first line number, source), ...]`` of the ```python blocks of ``path``."""
    with open(path, encoding='utf-8') as f:
        text = f.read()
    return [(text.count('\n', 0, m.start(1)) + 1, m.group(1)) for m in _FENCE.finditer(text)]


def test_every_guide_page_exists():
    names = {os.path.relpath(p, DOCS) for p in GUIDES}
    for need in ('index.md', 'guide/symbols_and_executors.md', 'guide/training.md',
                 'guide/operators.md', 'guide/optimizers.md', 'guide/files.md',
                 'guide/devices.md', 'guide/migrating_from_mxnet.md', 'guide/testing.md'):
        assert need in names, need
    assert os.path.exists(os.path.join(DOCS, 'data.md'))


def test_no_unlabelled_fences():
    """Every opening fence says ``python`` (run) or something else (not run)."""
    for path in GUIDES:
        with open(path, encoding='utf-8') as f:
            lines = f.read().splitlines()
        inside = False
        for n, line in enumerate(lines, 1):
            if line.startswith('```'):
                if not inside:
                    assert line.strip() != '```', '%s:%d: fence without a language' % (path, n)
                inside = not inside
        assert not inside, '%s: unclosed fence' % path


@pytest.mark.parametrize('path', GUIDES, ids=[os.path.relpath(p, DOCS) for p in GUIDES])
def test_guide_examples_run(path, guide_results):
    name = os.path.relpath(path, DOCS)
    assert python_blocks(path), '%s has no python example' % name
    if '__crash__' in guide_results:
        pytest.fail('the docs runner crashed:\n' + guide_results['__crash__'], pytrace=False)
    res = guide_results[name]
    if not res['ok']:
        pytest.fail(res['error'], pytrace=False)


def test_api_pages_up_to_date():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, 'tools', 'gen_api_docs.py'),
                           '--check'], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
