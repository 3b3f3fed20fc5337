"""Input for sequence models: sentence encoding and a bucketing iterator (MXNet ``mx.rnn``).

Source: MXNet 1.9.1 ``python/mxnet/rnn/io.py``. Shuffling draws from
:func:`ffnumba.random.generator` (``ff.random.seed`` repeats a run) instead
of Python's and numpy's global generators.
"""
import bisect
import logging

import numpy as np

from .. import ndarray
from .. import random as _random
from ..base import FFError, ParamError
from ..io import DataBatch, DataDesc, DataIter

__all__ = ['encode_sentences', 'BucketSentenceIter']

logger = logging.getLogger(__name__)


def encode_sentences(sentences, vocab=None, invalid_label=-1, invalid_key='\n',
                     start_label=0, unknown_token=None):
    """Encode token lists as integer lists, building or extending a vocabulary.

    Parameters
    ----------
    sentences : list of list of str
    vocab : dict of str to int, optional
        An existing vocabulary; None builds one (``{invalid_key: invalid_label}`` to start).
    invalid_label : int, default -1
        The code of ``invalid_key`` (skipped when numbering new tokens).
    invalid_key : str, default '\\n'
    start_label : int, default 0
        The first code of a new token.
    unknown_token : str, optional
        Tokens not in a given ``vocab`` map to this token's code (added once);
        without it such a token raises.

    Returns
    -------
    (list of list of int, dict of str to int)

    Raises
    ------
    FFError
        For a token missing from a given ``vocab`` when ``unknown_token`` is None.
    """
    idx = start_label
    if vocab is None:
        vocab = {invalid_key: invalid_label}
        new_vocab = True
    else:
        new_vocab = False
    res = []
    for sent in sentences:
        coded = []
        for word in sent:
            if word not in vocab:
                if not (new_vocab or unknown_token):
                    raise FFError('encode_sentences: unknown token %r (give unknown_token= to '
                                  'map unknown tokens to one code)' % (word,))
                if idx == invalid_label:
                    idx += 1
                if unknown_token:
                    word = unknown_token
                if word not in vocab:
                    vocab[word] = idx
                    idx += 1
            coded.append(vocab[word])
        res.append(coded)
    return res, vocab


class BucketSentenceIter(DataIter):
    """Batches of equal-length (padded) sentences for a language model, by bucket.

    Each sentence goes to the smallest bucket that holds it, padded with
    ``invalid_label``; the label of step t is token t + 1 (the last step's
    label is ``invalid_label``). Every batch carries its ``bucket_key`` (the
    bucket length), which :class:`~ffnumba.module.BucketingModule` uses to pick
    the unrolled network.

    Parameters
    ----------
    sentences : list of list of int
        Encoded sentences (:func:`encode_sentences`).
    batch_size : int
    buckets : list of int, optional
        Bucket lengths; default: every length that at least ``batch_size``
        sentences have.
    invalid_label : int, default -1
    data_name, label_name : str, default 'data', 'softmax_label'
    dtype : str, default 'float32'
    layout : {'NT', 'TN'}, default 'NT'
        Batch major ``(batch_size, length)`` or time major.

    Raises
    ------
    ParamError
        For a bad layout, or when no bucket gets a full batch.
    """

    def __init__(self, sentences, batch_size, buckets=None, invalid_label=-1,
                 data_name='data', label_name='softmax_label', dtype='float32', layout='NT'):
        super().__init__(batch_size)
        if layout not in ('NT', 'TN'):
            raise ParamError("BucketSentenceIter: `layout` must be 'NT' (batch major) or 'TN' "
                             "(time major). Received: layout=%r" % (layout,))
        if not buckets:
            buckets = [i for i, j in enumerate(np.bincount([len(s) for s in sentences]))
                       if j >= batch_size]
        buckets = sorted(buckets)
        data = [[] for _ in buckets]
        ndiscard = 0
        for sent in sentences:
            buck = bisect.bisect_left(buckets, len(sent))
            if buck == len(buckets):
                ndiscard += 1
                continue
            buff = np.full((buckets[buck],), invalid_label, dtype=dtype)
            buff[:len(sent)] = sent
            data[buck].append(buff)
        if ndiscard:
            logger.warning('discarded %d sentences longer than the largest bucket.', ndiscard)
        keep = [i for i, d in enumerate(data) if d]
        self.buckets = [buckets[i] for i in keep]
        self.data = [np.asarray(data[i], dtype=dtype) for i in keep]
        if not self.buckets:
            raise ParamError('BucketSentenceIter: no sentence fits the buckets %s' % (buckets,))
        self.data_name, self.label_name = data_name, label_name
        self.dtype = dtype
        self.invalid_label = invalid_label
        self.layout = layout
        self.major_axis = layout.find('N')
        self.default_bucket_key = max(self.buckets)
        shape = ((batch_size, self.default_bucket_key) if self.major_axis == 0
                 else (self.default_bucket_key, batch_size))
        self.provide_data = [DataDesc(data_name, shape, layout=layout)]
        self.provide_label = [DataDesc(label_name, shape, layout=layout)]
        self.idx = []
        for i, buck in enumerate(self.data):
            self.idx.extend([(i, j) for j in range(0, len(buck) - batch_size + 1, batch_size)])
        if not self.idx:
            raise ParamError('BucketSentenceIter: no bucket holds a full batch of %d sentences'
                             % batch_size)
        self.curr_idx = 0
        self.nddata, self.ndlabel = [], []
        self.reset()

    def reset(self):
        """Shuffle the batch order and each bucket's sentences; start again."""
        self.curr_idx = 0
        rng = _random.generator()
        self.idx = [self.idx[k] for k in rng.permutation(len(self.idx))]
        for buck in self.data:
            rng.shuffle(buck)
        self.nddata, self.ndlabel = [], []
        for buck in self.data:
            label = np.empty_like(buck)
            label[:, :-1] = buck[:, 1:]
            label[:, -1] = self.invalid_label
            self.nddata.append(buck.copy())
            self.ndlabel.append(label)

    def next(self):
        """The next :class:`~ffnumba.io.DataBatch` (with ``bucket_key``)."""
        if self.curr_idx == len(self.idx):
            raise StopIteration
        i, j = self.idx[self.curr_idx]
        self.curr_idx += 1
        data = self.nddata[i][j:j + self.batch_size]
        label = self.ndlabel[i][j:j + self.batch_size]
        if self.major_axis == 1:
            data, label = data.T, label.T
        data = ndarray.array(np.ascontiguousarray(data), dtype=self.dtype)
        label = ndarray.array(np.ascontiguousarray(label), dtype=self.dtype)
        return DataBatch([data], [label], pad=0, bucket_key=self.buckets[i],
                         provide_data=[DataDesc(self.data_name, data.shape, layout=self.layout)],
                         provide_label=[DataDesc(self.label_name, label.shape,
                                                 layout=self.layout)])
