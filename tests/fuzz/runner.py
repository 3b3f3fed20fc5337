"""The parent: batches of trials in child processes under time and memory limits."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import queue
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Text that must never reach a user inside an FFError message (internals leaking).
LEAK = re.compile('|'.join([
    r'(?<!ff)numba', r'TypingError', r'nopython', r'LLVM', r'llvmlite', r'Traceback',
    r'cannot reshape array of size', r'newaxis', r'object has no attribute', r'NoneType',
    r'unsupported operand', r'index \d+ is out of bounds', r'list index out of range',
    r'invalid literal for', r'not subscriptable', r'object is not iterable',
    r'positional argument', r'unhashable type', r'could not convert',
    r'\b(ValueError|TypeError|KeyError|IndexError|AttributeError|ZeroDivisionError|'
    r'OverflowError|RecursionError|MemoryError|UnicodeDecodeError|struct\.error)\b',
    r'ufunc', r'operands could not be broadcast together with remapped',
]))

STATUSES = ('clean', 'crash', 'hang', 'nonff', 'leak', 'wrong')


def classify(status, msg):
    """Final class of a trial from the child's ``(status, message)``."""
    if status == 'ok':
        return 'clean'
    if status == 'fferror':
        return 'leak' if LEAK.search(msg) else 'clean'
    return status


def _reader(stream, q):
    for line in stream:
        q.put(line)
    q.put(None)


def _run_child(trials, timeout, mem, results, on_result):
    """Run ``trials`` in one child; return the index after the last trial it answered."""
    env = dict(os.environ)
    env['PYTHONPATH'] = ROOT + os.pathsep + env.get('PYTHONPATH', '')
    env.setdefault('NUMBA_NUM_THREADS', '1')
    env.setdefault('OMP_NUM_THREADS', '1')
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, '-m', 'tests.fuzz.child', str(mem)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                cwd=ROOT, env=env, text=True, start_new_session=True)
        proc.stdin.write(json.dumps(trials))
        proc.stdin.close()
        q = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
        current, budget = None, timeout * 3       # the first trial also pays the imports
        while True:
            try:
                line = q.get(timeout=budget)
            except queue.Empty:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                i = current if current is not None else 0
                on_result(trials[i], 'hang', 'no answer within %ss' % budget)
                return i + 1
            if line is None:
                rc = proc.wait()
                if current is None:
                    if len(results) and rc == 0:
                        return len(trials)
                    err.seek(0)
                    tail = err.read().decode(errors='replace')[-500:]
                    on_result(trials[0], 'crash', 'child failed to start (rc %s): %s'
                              % (rc, tail))
                    return 1
                err.seek(0)
                tail = err.read().decode(errors='replace').strip().splitlines()[-3:]
                sig = -rc if rc < 0 else None
                on_result(trials[current], 'crash', 'process died (%s): %s'
                          % ('signal %d' % sig if sig else 'rc %s' % rc, ' | '.join(tail)))
                return current + 1
            msg = json.loads(line)
            if 'start' in msg:
                current, budget = msg['start'], (timeout if msg['start'] else timeout * 3)
            else:
                on_result(trials[msg['done']], msg['status'], msg['msg'])
                results.append(msg['done'])
                current = None
                if msg['done'] == len(trials) - 1:
                    proc.wait()
                    return len(trials)


def run(trials, timeout=60.0, mem=6 << 30, batch=400, verbose=False, log=None, workers=2):
    """Run every trial; returns ``(counts, findings)``.

    ``findings``: list of ``(class, trial, message)`` for every trial not ``clean``.
    A crash or a hang ends its child; the rest of the batch goes on in a new one.
    ``workers`` children run at once, each on every ``workers``-th trial.
    """
    counts = dict.fromkeys(('trials', 'ran', 'fferror') + STATUSES, 0)
    findings = []
    lock = threading.Lock()

    def on_result(trial, status, msg):
        with lock:
            _record(trial, status, msg)

    def _record(trial, status, msg):
        c = classify(status, msg)
        counts['trials'] += 1
        counts[c] += 1
        if c == 'clean':
            counts['ran' if status == 'ok' else 'fferror'] += 1
        if c != 'clean':
            findings.append((c, trial, msg))
            if verbose:
                print('%-6s %s  %s' % (c, json.dumps(trial), msg[:300]), file=log or sys.stdout,
                      flush=True)

    def worker(share):
        for start in range(0, len(share), batch):
            todo = share[start:start + batch]
            while todo:
                done = _run_child(todo, timeout, mem, [], on_result)
                todo = todo[done:]

    shares = [trials[k::workers] for k in range(max(1, workers))]
    threads = [threading.Thread(target=worker, args=(sh,)) for sh in shares if sh]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts, findings


def summary(counts, elapsed=None):
    """One line: trials, clean FFErrors/successes, crashes, hangs, leaks, wrong results."""
    s = ('trials %(trials)d  clean %(clean)d (ran %(ran)d, clean FFErrors %(fferror)d)  crashes %(crash)d  hangs %(hang)d  '
         'leaks %(leak)d (non-FFError %(nonff)d)  wrong %(wrong)d' % counts)
    if elapsed is not None:
        s += '  (%.0f s)' % elapsed
    return s
