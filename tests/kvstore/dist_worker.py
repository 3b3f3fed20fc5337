"""Worker script of tests/kvstore/test_dist_mpi.py, run under a real ``mpirun``.

``mpirun -np N python -m mpi4py tests/kvstore/dist_worker.py MODE``; MODE is
``equiv``, ``errors``, ``crash``, ``hang`` or ``uneven``. Lines starting with
``CHECK`` report what each rank saw; the test reads them.
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import ffnumba as ff  # noqa: E402
from ffnumba.base import FFError  # noqa: E402

B_LOCAL = 4     # samples per rank per batch
N_BATCH = 3     # batches per epoch


def say(text):
    """One write per line, so the lines of different ranks do not interleave."""
    sys.stdout.write('CHECK ' + text + '\n')
    sys.stdout.flush()


def mlp():
    data = ff.sym.Variable('data')
    h = ff.sym.Activation(ff.sym.FullyConnected(data, num_hidden=8, name='fc1'), act_type='tanh')
    out = ff.sym.FullyConnected(h, num_hidden=3, name='fc2')
    return ff.sym.SoftmaxOutput(out, name='softmax')


def dataset(size):
    rng = np.random.RandomState(7)
    n = B_LOCAL * size * N_BATCH
    x = rng.randn(n, 5).astype('float32')
    y = rng.randint(0, 3, n).astype('float32')
    shapes = {'fc1_weight': (8, 5), 'fc1_bias': (8,), 'fc2_weight': (3, 8), 'fc2_bias': (3,)}
    params = {k: ff.nd.array(rng.randn(*s).astype('float32') * 0.5) for k, s in shapes.items()}
    return x, y, params


def train(kind, kv, x, y, params, ctx, batch, num_parts=1, part_index=0):
    it = ff.io.NDArrayIter(x, y, batch_size=batch, num_parts=num_parts, part_index=part_index)
    args = {k: v.copy() for k, v in params.items()}
    opt = {'learning_rate': 0.2, 'momentum': 0.9}
    if kind == 'module':
        mod = ff.mod.Module(mlp(), context=ctx)
        mod.fit(it, kvstore=kv, optimizer='sgd', optimizer_params=opt, arg_params=args,
                num_epoch=2)
        got = mod.get_params()[0]
    else:
        model = ff.FeedForward(mlp(), ctx=ctx, num_epoch=2, optimizer='sgd', arg_params=args,
                               **opt)
        model.fit(it, kvstore=kv)
        got = model.arg_params
    return {k: v.asnumpy() for k, v in got.items()}


def equiv(comm, kv):
    size, rank = kv.num_workers, kv.rank
    x, y, params = dataset(size)
    cases = [(kind, ndev, '1') for kind in ('module', 'feedforward') for ndev in (1, 2)]
    # MXNET_UPDATE_ON_KVSTORE=0: the store only sums, each device runs the optimizer
    for kind, ndev, on_kv in cases + [('module', 2, '0')]:
        os.environ['MXNET_UPDATE_ON_KVSTORE'] = on_kv
        ctx = [ff.cpu(i) for i in range(ndev)]
        mine = train(kind, 'dist_sync', x, y, params, ctx, B_LOCAL, size, rank)
        blobs = comm.allgather({k: v.tobytes() for k, v in mine.items()})
        same = all(b == blobs[0] for b in blobs)
        ref = train(kind, 'local', x, y, params, [ff.cpu(0)], B_LOCAL * size)
        err = max(float(np.abs(mine[k] - ref[k]).max()) for k in ref)
        moved = max(float(np.abs(mine[k] - params[k].asnumpy()).max()) for k in ref)
        say('rank=%d kind=%s ndev=%d update_on_kvstore=%s identical=%s maxerr=%.3g moved=%.3g'
            % (rank, kind, ndev, on_kv, same, err, moved))


def expect_error(name, fn, rank):
    try:
        fn()
    except FFError as e:
        say('rank=%d case=%s raised: %s' % (rank, name, str(e).replace('\n', ' ')))
    else:
        say('rank=%d case=%s no error' % (rank, name))


def errors(comm, kv):
    rank = kv.rank
    nd = ff.nd
    kv.init(['p', 'q'], [nd.ones((2, 3)), nd.ones((4,))])
    # a push in a different key order
    keys = ['p', 'q'] if rank == 0 else ['q', 'p']
    vals = [nd.ones((2, 3)), nd.ones((4,))] if rank == 0 else [nd.ones((4,)), nd.ones((2, 3))]
    expect_error('order', lambda: kv.push(keys, vals), rank)
    # the same key with another shape: init
    expect_error('shape', lambda: kv.init('s', nd.ones((2, 2) if rank == 0 else (3, 2))), rank)
    # the same key with another dtype
    expect_error('dtype', lambda: kv.init('d', nd.ones((2,), dtype='float32' if rank == 0
                                                       else 'float16')), rank)
    # none of them left a key half-registered: 's' and 'd' can be initialised now
    kv.init(['s', 'd'], [nd.ones((2, 2)), nd.ones((3,), dtype='float16')])
    # a local error on one rank stops every rank
    expect_error('local', lambda: kv.push('p', nd.ones((2, 3)) if rank == 0 else nd.ones((9,))),
                 rank)
    # a push on one rank only meets the other rank's barrier
    expect_error('one-sided', lambda: kv.push('p', nd.ones((2, 3))) if rank == 0
                 else kv.barrier(), rank)
    # float16 keys all-reduce (summed in float32)
    out = nd.zeros((3,), dtype='float16')
    kv.pushpull('d', nd.array(np.full(3, 0.5 + rank, 'float16'), dtype='float16'), out=out)
    want = sum(0.5 + r for r in range(kv.num_workers))
    say('rank=%d case=float16 value=%s ok=%s' % (rank, out.asnumpy()[0],
                                                       bool(np.all(out.asnumpy() == want))))
    # fp16 transport of float32 gradients
    kv.set_gradient_compression({'type': 'fp16'})
    out = nd.zeros((2, 3))
    kv.pushpull('p', nd.array(np.full((2, 3), 1.0 / 3 + rank, 'float32')), out=out)
    want = sum(np.float32(np.float16(1.0 / 3 + r)) for r in range(kv.num_workers))
    say('rank=%d case=fp16 ok=%s' % (rank, bool(np.allclose(out.asnumpy(), want,
                                                                     rtol=2e-3))))
    # metric averaging is count-weighted over ranks
    m = ff.metric.Accuracy()
    m.update([nd.array([0, 1] if rank == 0 else [0, 0, 0])],
             [nd.array([[1, 0], [0, 1]] if rank == 0 else [[0, 1]] * 3)])
    say('rank=%d case=metric value=%s' % (rank, kv._metric_name_value(m)[0][1]))
    # uneven shards inside fit: raise on every rank, then the store still works
    x, y, params = dataset(kv.num_workers)
    n = len(x) - (B_LOCAL if rank == 0 else 0)
    expect_error('uneven', lambda: train('module', kv, x[:n], y[:n], params, [ff.cpu(0)],
                                         B_LOCAL), rank)
    kv.barrier()
    say('rank=%d case=done' % rank)


def run_async(comm):
    """dist_async: a sleeping worker does not stall the others; every push is applied."""
    kv = ff.kv.create('dist_async')
    rank, nd = kv.rank, ff.nd
    kv.set_optimizer(ff.optimizer.create('sgd', learning_rate=0.5, rescale_grad=1.0))
    kv.init('w', nd.zeros((4,)))
    out = nd.zeros((4,))
    kv.pushpull('w', nd.zeros((4,)), out=out)      # warm-up: compiles the update
    kv.barrier()
    if rank != 0:
        time.sleep(2)                              # a slow worker
    tic = time.monotonic()
    for _ in range(20 if rank == 0 else 10):
        kv.pushpull('w', nd.ones((4,)) * (1 if rank == 0 else 2), out=out)
    if rank == 0:
        say('rank=0 case=async-alone seconds=%.2f value=%s'
            % (time.monotonic() - tic, out.asnumpy()[0]))
    kv.barrier()
    kv.pull('w', out=out)
    want = -0.5 * (20 + 2 * 10 * (kv.num_workers - 1))
    say('rank=%d case=async-final ok=%s' % (rank, bool(np.all(out.asnumpy() == want))))
    if rank == 1:   # a bad push is refused (no collective: only the sender raises)
        expect_error('async-shape', lambda: kv.push('w', nd.ones((5,))), rank)
    kv.barrier()
    # Module.fit with uneven shards: allowed, nobody waits for the others
    x, y, params = dataset(kv.num_workers)
    n = len(x) - (B_LOCAL if rank == 0 else 0)
    got = train('module', 'dist_async', x[:n], y[:n], params, [ff.cpu(0)], B_LOCAL)
    moved = max(float(np.abs(got[k] - params[k].asnumpy()).max()) for k in got)
    say('rank=%d case=async-fit moved=%.3g' % (rank, moved))


def main():
    mode = sys.argv[1]
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    if mode == 'async':
        return run_async(comm)
    kv = ff.kv.create('dist_sync')
    if mode == 'equiv':
        equiv(comm, kv)
    elif mode == 'gpu':     # under NUMBA_ENABLE_CUDASIM=1: values kept on the (simulated) GPU
        size, rank = kv.num_workers, kv.rank
        x, y, params = dataset(size)
        mine = train('module', 'dist_device_sync', x, y, params, [ff.gpu(0)], B_LOCAL, size,
                     rank)
        same = all(b == comm.allgather({k: v.tobytes() for k, v in mine.items()})[0]
                   for b in comm.allgather({k: v.tobytes() for k, v in mine.items()}))
        ref = train('module', 'local', x, y, params, [ff.cpu(0)], B_LOCAL * size)
        say('rank=%d kind=gpu identical=%s maxerr=%.3g'
            % (rank, same, max(float(np.abs(mine[k] - ref[k]).max()) for k in ref)))
        dev = ff.kv.create('dist_device_sync')   # a value stored on the GPU
        dev.init('g', ff.nd.zeros((5,), ctx=ff.gpu(0)))
        out = ff.nd.zeros((5,), ctx=ff.gpu(0))
        dev.pushpull('g', [ff.nd.ones((5,), ctx=ff.gpu(0)) * (rank + 1)], out=out)
        say('rank=%d case=gpu-store on_gpu=%s sum_ok=%s'
            % (rank, dev._store['g'].context.device_type == 'gpu',
               bool(np.all(out.asnumpy() == sum(range(1, size + 1))))))
    elif mode == 'errors':
        errors(comm, kv)
    elif mode == 'crash':
        kv.init('w', ff.nd.ones((3,)))
        if kv.rank == 1:
            raise ValueError('worker 1 failed on purpose')
        kv.push('w', ff.nd.ones((3,)))    # rank 0 waits here until the job is aborted
        time.sleep(60)
    elif mode == 'die':
        kv.init('w', ff.nd.ones((3,)))
        if kv.rank == 1:
            os.kill(os.getpid(), 9)       # killed: no traceback, no Abort
        kv.push('w', ff.nd.ones((3,)))
        time.sleep(60)
    elif mode == 'hang':
        kv.timeout = float(sys.argv[2])
        kv.init('w', ff.nd.ones((3,)))
        if kv.rank == 1:
            time.sleep(60)                # a stuck peer
        kv.push('w', ff.nd.ones((3,)))
    elif mode == 'uneven':
        x, y, params = dataset(kv.num_workers)
        n = len(x) - (B_LOCAL if kv.rank == kv.num_workers - 1 else 0)
        train('module', kv, x[:n], y[:n], params, [ff.cpu(0)], B_LOCAL)
    say('rank=%d finished' % kv.rank)


if __name__ == '__main__':
    main()
