"""A character language model: Embedding + 2-layer LSTM trained with BucketingModule.

    python examples/lstm_bucketing.py                    # fused LSTM, 4 epochs
    python examples/lstm_bucketing.py --stack cells      # unrolled LSTMCells (slower)
    python examples/lstm_bucketing.py --epochs 1 --max-lines 3000 --num-hidden 64

MXNet's ``example/rnn/bucketing`` recipe: every line of text is a sentence of
characters; ``mx.rnn.BucketSentenceIter`` groups lines into buckets by length
(padding with 0, the ignored label), and ``BucketingModule`` binds one
unrolled network per bucket length, all sharing one set of weights. The
model predicts each next character; the per-epoch perplexity (``Perplexity``
metric, padding ignored) is compared with the unigram perplexity of the same
validation text (character frequencies of the training text). Measured here
(seed 0, defaults, a shared 2-core machine): validation perplexity 9.00, 6.96,
6.42, 6.04 after epochs 1-4 against a unigram perplexity of 24.25; 164 s.

Data: the fortune-cookie collection of the Debian package ``fortunes``
(``apt-get install fortunes``; files under ``/usr/share/games/fortunes``): quotations
and prose from literature, science, people and more. The collection is
distributed under the BSD licence of BSD ``fortune(6)`` (Ken Arnold, The Regents of
the University of California; the cookie file from Karl Lehenbauer's postings);
see ``/usr/share/doc/fortunes/copyright``. Nothing is downloaded at run time.
"""
import argparse
import logging
import math
import os
import time

# The recurrent part is many small GEMMs (batch x hidden per time step): one BLAS
# thread runs them faster than a pool that spins between steps, most of all on a
# busy machine. Set before numpy loads BLAS; an explicit setting wins.
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

import numpy as np  # noqa: E402

import ffnumba as ff  # noqa: E402

FORTUNES = '/usr/share/games/fortunes'
FILES = ('literature', 'wisdom', 'people', 'science', 'humorists', 'education', 'platitudes')
BUCKETS = [16, 32, 48, 64, 80]
PAD = 0


def load_lines(files=FILES, max_lines=None, seed=0):
    """Text lines of the fortune files, shuffled by fortune; (train, valid) lists of str."""
    if not os.path.isdir(FORTUNES):
        raise ff.base.FFError('lstm_bucketing: the corpus is missing: %s. Install the Debian '
                              'package `fortunes` (apt-get install fortunes)' % FORTUNES)
    fortunes = []
    for name in files:
        with open(os.path.join(FORTUNES, name), encoding='latin-1') as fh:
            for block in fh.read().split('\n%\n'):
                lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
                if lines:
                    fortunes.append(lines)
    order = np.random.RandomState(seed).permutation(len(fortunes))
    n_valid = max(1, len(fortunes) // 10)
    valid = [ln for i in order[:n_valid] for ln in fortunes[i]]
    train = [ln for i in order[n_valid:] for ln in fortunes[i]]
    if max_lines:
        train, valid = train[:max_lines], valid[:max(1, max_lines // 10)]
    return train, valid


def unigram_perplexity(train, valid, vocab):
    """exp of the mean negative log frequency (add-one smoothed, from ``train``) of ``valid``."""
    counts = np.ones(len(vocab) + 1)
    for sent in train:
        np.add.at(counts, sent, 1)
    counts[PAD] = 0    # padding is never predicted
    with np.errstate(divide='ignore'):
        logp = np.log(counts / counts.sum())
    tokens = np.concatenate([np.asarray(s[1:], dtype=int) for s in valid if len(s) > 1])
    return float(np.exp(-logp[tokens].mean()))


def make_sym_gen(vocab_size, num_embed, num_hidden, num_layers, stack):
    def sym_gen(seq_len):
        data = ff.sym.Variable('data')                                  # (N, seq_len)
        label = ff.sym.Variable('softmax_label')
        embed = ff.sym.Embedding(data, input_dim=vocab_size, output_dim=num_embed, name='embed')
        if stack == 'fused':
            cell = ff.rnn.FusedRNNCell(num_hidden, num_layers=num_layers, mode='lstm',
                                       prefix='lstm_')
        else:
            cell = ff.rnn.SequentialRNNCell()
            for i in range(num_layers):
                cell.add(ff.rnn.LSTMCell(num_hidden, prefix='lstm_l%d_' % i))
        outputs, _ = cell.unroll(seq_len, embed, layout='NTC', merge_outputs=True)
        pred = ff.sym.Reshape(outputs, shape=(-1, num_hidden))
        pred = ff.sym.FullyConnected(pred, num_hidden=vocab_size, name='pred')
        label = ff.sym.Reshape(label, shape=(-1,))
        out = ff.sym.SoftmaxOutput(pred, label, ignore_label=PAD, use_ignore=True,
                                   normalization='valid', name='softmax')
        return out, ('data',), ('softmax_label',)
    return sym_gen


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--epochs', type=int, default=4)
    parser.add_argument('--num-hidden', type=int, default=128)
    parser.add_argument('--num-embed', type=int, default=32)
    parser.add_argument('--num-layers', type=int, default=2)
    parser.add_argument('--stack', default='fused', choices=['fused', 'cells'])
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--lr', type=float, default=0.01)
    parser.add_argument('--max-lines', type=int, default=0,
                        help='training lines used (0: all)')
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format='%(message)s')
    ff.random.seed(args.seed)

    train_txt, valid_txt = load_lines(max_lines=args.max_lines or None, seed=args.seed)
    coded, vocab = ff.rnn.encode_sentences([list(s) for s in train_txt + valid_txt],
                                           invalid_label=PAD, invalid_key='\n', start_label=1)
    train, valid = coded[:len(train_txt)], coded[len(train_txt):]
    vocab_size = max(vocab.values()) + 1
    uni = unigram_perplexity(train, valid, vocab)
    print('corpus: %d training lines, %d validation lines, %d characters in the vocabulary'
          % (len(train), len(valid), vocab_size))
    print('unigram perplexity of the validation text: %.2f' % uni)

    train_iter = ff.rnn.BucketSentenceIter(train, args.batch_size, buckets=BUCKETS,
                                           invalid_label=PAD)
    valid_iter = ff.rnn.BucketSentenceIter(valid, args.batch_size, buckets=BUCKETS,
                                           invalid_label=PAD)
    mod = ff.mod.BucketingModule(
        make_sym_gen(vocab_size, args.num_embed, args.num_hidden, args.num_layers, args.stack),
        default_bucket_key=train_iter.default_bucket_key, context=ff.cpu())
    history = []

    def log_perplexity(epoch, sym=None, arg=None, aux=None):
        ppl = dict(mod.score(valid_iter, ff.metric.Perplexity(PAD)))['perplexity']
        history.append(ppl)
        print('epoch %d: validation perplexity %.2f (unigram %.2f)' % (epoch, ppl, uni))

    tic = time.time()
    mod.fit(train_iter, eval_metric=ff.metric.Perplexity(PAD), optimizer='adam',
            optimizer_params={'learning_rate': args.lr, 'clip_gradient': 5.0},
            initializer=ff.init.Xavier(factor_type='in', magnitude=2.34),
            num_epoch=args.epochs, epoch_end_callback=log_perplexity,
            batch_end_callback=ff.callback.Speedometer(args.batch_size, 50))
    elapsed = time.time() - tic
    print('final validation perplexity: %.2f vs unigram %.2f (ratio %.2f); %d epochs in %.1f s'
          % (history[-1], uni, history[-1] / uni, args.epochs, elapsed))
    if not math.isfinite(history[-1]):
        raise SystemExit('training diverged')


if __name__ == '__main__':
    main()
