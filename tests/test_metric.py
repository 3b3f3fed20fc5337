"""Tests of ffnumba.metric: MXNet 1.9.1 golden numbers, numpy references, API rules."""
import json
import math
import os

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba.ndarray as nd
from ffnumba import metric
from ffnumba.base import FFError, ParamError, ShapeError

GOLDEN = os.path.join(os.path.dirname(__file__), 'data', 'mx_metric_golden.json')
with open(GOLDEN) as _f:
    _G = json.load(_f)


def _close(a, b, tol=1e-5):
    if isinstance(b, float) and math.isnan(b):
        return math.isnan(a)
    return abs(a - b) <= tol * max(1.0, abs(b))


@pytest.mark.parametrize('case', _G['cases'], ids=lambda c: '%s-%s' % (c['metric'], c['kwargs']))
@pytest.mark.parametrize('as_nd', [False, True], ids=['numpy', 'ndarray'])
def test_against_mxnet_golden(case, as_nd):
    m = metric.create(case['metric'], **case['kwargs'])
    assert m.get()[0] == case['name']
    conv = (lambda a: nd.array(a)) if as_nd else (lambda a: np.asarray(a, dtype=np.float32))
    for i, ((label, pred), step) in enumerate(zip(case['batches'], case['steps'])):
        m.update([conv(label)], [conv(pred)])
        assert _close(m.get()[1], step['get']), (i, m.get(), step)
        assert _close(m.get_global()[1], step['global']), (i, m.get_global(), step)
        if 'after_reset_local' in step:
            m.reset_local()
            local, glob = step['after_reset_local']
            assert _close(m.get()[1], local) and _close(m.get_global()[1], glob)
    m.reset()
    assert math.isnan(m.get()[1]) and math.isnan(m.get_global()[1])


def test_composite_golden():
    comp = metric.create(['acc', 'ce'])
    label, pred = _G['composite']['batch']
    comp.update([np.array(label)], [np.array(pred)])
    names, values = comp.get()
    gnames, gvalues = _G['composite']['get']
    assert names == gnames
    np.testing.assert_allclose(values, gvalues, rtol=1e-6)
    assert comp.get_name_value() == list(zip(names, values))
    assert isinstance(comp.get_metric(1), metric.CrossEntropy)
    with pytest.raises(ParamError, match='out of range'):
        comp.get_metric(5)


@given(n=st.integers(1, 30), c=st.integers(2, 6), seed=st.integers(0, 2 ** 16))
def test_accuracy_and_ce_match_numpy(n, c, seed):
    rng = np.random.default_rng(seed)
    p = rng.random((n, c)).astype(np.float32) + 1e-3
    p /= p.sum(1, keepdims=True)
    y = rng.integers(0, c, n)
    acc = metric.Accuracy()
    acc.update([y], [p])
    assert acc.get()[1] == pytest.approx(np.mean(p.argmax(1) == y))
    assert acc.num_inst == n
    ce = metric.CrossEntropy()
    ce.update([nd.array(y)], [nd.array(p)])
    assert ce.get()[1] == pytest.approx(np.mean(-np.log(p[np.arange(n), y] + 1e-12)), rel=1e-5)


@given(nb=st.integers(1, 4), n=st.integers(2, 9), seed=st.integers(0, 2 ** 16))
def test_regression_metrics_are_batch_means(nb, n, seed):
    rng = np.random.default_rng(seed)
    batches = [(rng.normal(size=n), rng.normal(size=n)) for _ in range(nb)]
    for name, f in (('mae', lambda d: np.abs(d).mean()), ('mse', lambda d: (d ** 2).mean()),
                    ('rmse', lambda d: np.sqrt((d ** 2).mean()))):
        m = metric.create(name)
        for y, p in batches:
            m.update([y], [p])
        assert m.num_inst == nb
        assert m.get()[1] == pytest.approx(np.mean([f(y - p) for y, p in batches]))


def test_topk_accuracy():
    p = np.array([[0.1, 0.2, 0.7], [0.5, 0.3, 0.2], [0.2, 0.5, 0.3]])
    m = metric.TopKAccuracy(top_k=2)
    assert m.name == 'top_k_accuracy_2'
    m.update([np.array([1, 2, 0])], [p])
    assert m.get()[1] == pytest.approx(1 / 3)
    big = metric.TopKAccuracy(top_k=5)     # more than the classes: every sample is a hit
    big.update([np.array([1, 2, 0])], [p])
    assert big.get()[1] == 1.0
    with pytest.raises(ParamError, match='top_k'):
        metric.TopKAccuracy(top_k=1)


def test_f1_mcc_reject_multiclass():
    with pytest.raises(ParamError, match='binary'):
        metric.F1().update([np.array([0, 1, 2])], [np.eye(3)[:, :2]])
    with pytest.raises(ParamError, match='average'):
        metric.MCC(average='weighted')


def test_f1_micro_pools_counts():
    y1, p1 = np.array([1, 1, 0, 0]), np.array([[0, 1], [1, 0], [0, 1], [1, 0]])
    y2, p2 = np.array([1, 1]), np.array([[0, 1], [0, 1]])
    micro, macro = metric.F1(average='micro'), metric.F1()
    for m in (micro, macro):
        m.update([y1], [p1])
        m.update([y2], [p2])
    # pooled: tp=3, fp=1, fn=1 -> P=R=0.75
    assert micro.get()[1] == pytest.approx(0.75)
    assert macro.get()[1] == pytest.approx((0.5 + 1.0) / 2)


def test_perplexity_ignore_label_and_axis():
    p = np.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]], dtype=np.float32)
    y = np.array([0, 1, 1])
    m = metric.Perplexity(ignore_label=None)
    m.update([y], [p])
    assert m.get()[1] == pytest.approx(math.exp(-np.log([0.5, 0.1, 0.8]).mean()), rel=1e-6)
    m = metric.Perplexity(ignore_label=1)
    m.update([y], [p])
    assert m.get()[1] == pytest.approx(2.0, rel=1e-6)
    m = metric.Perplexity(ignore_label=None, axis=0)
    m.update([y], [p.T.copy()])      # classes on axis 0
    assert m.get()[1] == pytest.approx(math.exp(-np.log([0.5, 0.1, 0.8]).mean()), rel=1e-6)
    with pytest.raises(ShapeError, match='shape mismatch'):
        metric.Perplexity(None).update([np.zeros(4)], [p])


def test_pearson_macro_and_micro():
    rng = np.random.default_rng(3)
    batches = [(rng.normal(size=7), rng.normal(size=7)) for _ in range(3)]
    macro, micro = metric.create('pearsonr'), metric.PearsonCorrelation(average='micro')
    for y, p in batches:
        macro.update([y], [p])
        micro.update([y], [p])
    assert macro.get()[1] == pytest.approx(np.mean([np.corrcoef(p, y)[0, 1] for y, p in batches]))
    ys, ps = np.concatenate([b[0] for b in batches]), np.concatenate([b[1] for b in batches])
    assert micro.get()[1] == pytest.approx(np.corrcoef(ps, ys)[0, 1])


def test_loss_and_custom_metrics():
    loss = metric.create('loss')
    loss.update(None, [np.array([1.0, 2.0, 3.0])])
    assert loss.get() == ('loss', 2.0)
    assert metric.create('torch').name == 'torch' and metric.create('caffe').name == 'caffe'

    def my_acc(label, pred):
        return float((pred.argmax(1) == label).mean())
    m = metric.create(my_acc)
    assert m.name == 'my_acc'
    m.update([np.array([0, 1])], [np.array([[1, 0], [1, 0]])])
    assert m.get() == ('my_acc', 0.5)
    lam = metric.CustomMetric(lambda y, p: (3.0, 4))
    assert lam.name == 'custom(<lambda>)'
    lam.update([np.zeros(2)], [np.zeros(2)])
    assert (lam.sum_metric, lam.num_inst) == (3.0, 4)
    wrapped = metric.np(my_acc)
    assert isinstance(wrapped, metric.CustomMetric) and wrapped.name == 'my_acc'
    extra = metric.np(lambda y, p: 1.0, allow_extra_outputs=True)
    extra.update([np.zeros(2)], [np.zeros(2), np.zeros(3)])
    assert extra.num_inst == 1
    with pytest.raises(FFError, match='serialized'):
        m.get_config()


def test_mismatched_lengths_message():
    with pytest.raises(ShapeError, match=r'Shape of labels 1 does not match shape of '
                                         r'predictions 2') as info:
        metric.Accuracy().update([np.zeros(2)], [np.zeros((2, 2)), np.zeros((2, 2))])
    assert isinstance(info.value, ValueError)


def test_registry_names_and_config():
    names = {'acc': metric.Accuracy, 'accuracy': metric.Accuracy, 'f1': metric.F1,
             'mcc': metric.MCC, 'mae': metric.MAE, 'mse': metric.MSE, 'rmse': metric.RMSE,
             'ce': metric.CrossEntropy, 'crossentropy': metric.CrossEntropy,
             'nll_loss': metric.NegativeLogLikelihood, 'pearsonr': metric.PearsonCorrelation,
             'pcc': metric.PCC, 'loss': metric.Loss, 'composite': metric.CompositeEvalMetric,
             'top_k_acc': metric.TopKAccuracy, 'top_k_accuracy': metric.TopKAccuracy}
    for name, klass in names.items():
        kwargs = {'top_k': 3} if klass is metric.TopKAccuracy else {}
        assert type(metric.create(name, **kwargs)) is klass
    assert type(metric.create('perplexity', ignore_label=None)) is metric.Perplexity
    assert type(metric.create('CustomMetric', lambda y, p: 0.)) is metric.CustomMetric
    with pytest.raises(ParamError, match='Cannot find metric'):
        metric.create('nope')
    inst = metric.Accuracy()
    assert metric.create(inst) is inst
    cfg = metric.create(['acc', 'mse']).get_config()
    clone = metric.create(cfg)
    assert [type(m) for m in clone.metrics] == [metric.Accuracy, metric.MSE]

    @metric.register
    class Half(metric.EvalMetric):
        def __init__(self):
            super().__init__('half')

        def update(self, labels, preds):
            self.sum_metric += 0.5
            self.num_inst += 1
    half = metric.create('half')
    half.update([], [])
    assert half.get() == ('half', 0.5) and half.get_global() == ('half', 0.5)
    assert half.get_global_name_value() == [('half', 0.5)]


def test_update_dict_selects_names():
    m = metric.Accuracy(output_names=['out'], label_names=['lab'])
    m.update_dict({'lab': np.array([1, 0]), 'other': np.array([9, 9])},
                  {'out': np.array([[0, 1], [0, 1]]), 'x': np.zeros((2, 2))})
    assert m.get()[1] == 0.5
    comp = metric.CompositeEvalMetric(['acc'], label_names=['lab'], output_names=['out'])
    comp.update_dict({'lab': np.array([1, 0]), 'zz': np.zeros(3)},
                     {'out': np.array([[0, 1], [1, 0]]), 'yy': np.zeros(3)})
    assert comp.get() == (['accuracy'], [1.0])
    assert str(metric.MSE()) == "EvalMetric: {'mse': nan}"


@pytest.mark.parametrize('name', ['ce', 'nll_loss'])
def test_log_losses_reject_labels_out_of_range(name):
    pred = nd.array(np.full((3, 3), 1 / 3.))
    for bad in ([0, 1, 3], [0, -1, 2]):  # too large; negative would wrap silently
        m = metric.create(name)
        with pytest.raises(ParamError, match=r'\[0, 3\)'):
            m.update([nd.array(bad)], [pred])
    with pytest.raises(ShapeError, match='2-D'):
        metric.create(name).update([nd.array([0, 1, 2])], [nd.array(np.ones((3, 3, 1)))])
