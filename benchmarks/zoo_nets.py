"""MXNet's classic image-classification symbols, written against any ``sym`` module.

Each builder takes the symbol module (``ffnumba.sym`` or ``mxnet.sym``) and returns a
``SoftmaxOutput`` symbol, so ``benchmarks/zoo.py`` runs the very same graph on ffnumba
and on MXNet 1.9.1. The layer plans follow the networks' papers and the layouts of
MXNet's ``example/image-classification/symbols`` (written here from the papers, not
copied), scaled to the small inputs the benchmark uses (28x28 grey, 32x32 or 64x64 RGB).

NETS maps a name to ``(builder, input shape without batch)``.
"""


def _conv(S, x, ch, k, s=1, p=0, g=1, name=None, bias=True):
    return S.Convolution(x, num_filter=ch, kernel=(k, k), stride=(s, s), pad=(p, p),
                         num_group=g, no_bias=not bias, name=name)


def _cbr(S, x, ch, k, s=1, p=0, g=1, name='c', act='relu', bn=True):
    """Convolution, BatchNorm, activation (Inception-BN's ConvFactory, MobileNet's block)."""
    x = _conv(S, x, ch, k, s, p, g, name=name + '_conv', bias=not bn)
    if bn:
        x = S.BatchNorm(x, fix_gamma=False, eps=2e-5, name=name + '_bn')
    if act == 'relu6':
        return S.clip(x, a_min=0, a_max=6, name=name + '_relu6')
    if act:
        return S.Activation(x, act_type=act, name=name + '_' + act)
    return x


def _head(S, x, classes=10, pool=True):
    if pool:
        x = S.Pooling(x, global_pool=True, kernel=(1, 1), pool_type='avg', name='gpool')
    x = S.FullyConnected(S.Flatten(x), num_hidden=classes, name='fc')
    return S.SoftmaxOutput(x, name='softmax')


def mlp(S):
    x = S.Flatten(S.Variable('data'))
    x = S.Activation(S.FullyConnected(x, num_hidden=128, name='fc1'), act_type='relu')
    x = S.Activation(S.FullyConnected(x, num_hidden=64, name='fc2'), act_type='relu')
    return S.SoftmaxOutput(S.FullyConnected(x, num_hidden=10, name='fc3'), name='softmax')


def lenet(S):
    x = S.Variable('data')
    for i, ch in enumerate((20, 50)):
        x = S.Activation(_conv(S, x, ch, 5, name='conv%d' % i), act_type='tanh')
        x = S.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type='max')
    x = S.Activation(S.FullyConnected(S.Flatten(x), num_hidden=500), act_type='tanh')
    return S.SoftmaxOutput(S.FullyConnected(x, num_hidden=10), name='softmax')


def alexnet(S):
    x = S.Variable('data')
    x = S.Activation(_conv(S, x, 64, 11, 4, 2, name='conv1'), act_type='relu')
    x = S.LRN(x, alpha=1e-4, beta=0.75, knorm=2, nsize=5)
    x = S.Pooling(x, kernel=(3, 3), stride=(2, 2), pool_type='max')
    x = S.Activation(_conv(S, x, 192, 5, 1, 2, name='conv2'), act_type='relu')
    x = S.Pooling(x, kernel=(3, 3), stride=(2, 2), pool_type='max')
    for i, ch in enumerate((384, 256, 256)):
        x = S.Activation(_conv(S, x, ch, 3, 1, 1, name='conv%d' % (i + 3)), act_type='relu')
    x = S.Flatten(x)
    for i in range(2):
        x = S.Activation(S.FullyConnected(x, num_hidden=1024, name='fc%d' % i), act_type='relu')
        x = S.Dropout(x, p=0.5)
    return S.SoftmaxOutput(S.FullyConnected(x, num_hidden=10, name='fc'), name='softmax')


def _vgg(S, bn):
    x = S.Variable('data')
    for stage, (n, ch) in enumerate(((1, 64), (1, 128), (2, 256), (2, 512), (2, 512))):
        for i in range(n):
            x = _cbr(S, x, ch, 3, 1, 1, name='s%d_%d' % (stage, i), bn=bn)
        x = S.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type='max')
    x = S.Flatten(x)
    for i in range(2):
        x = S.Activation(S.FullyConnected(x, num_hidden=512, name='fc%d' % i), act_type='relu')
        x = S.Dropout(x, p=0.5)
    return S.SoftmaxOutput(S.FullyConnected(x, num_hidden=10, name='fc'), name='softmax')


def vgg11(S):
    return _vgg(S, bn=False)


def vgg11_bn(S):
    return _vgg(S, bn=True)


def _inception_v1(S, x, c1, c3r, c3, c5r, c5, cp, name):
    a = _cbr(S, x, c1, 1, name=name + '_1x1', bn=False)
    b = _cbr(S, _cbr(S, x, c3r, 1, name=name + '_3r', bn=False), c3, 3, 1, 1,
             name=name + '_3x3', bn=False)
    c = _cbr(S, _cbr(S, x, c5r, 1, name=name + '_5r', bn=False), c5, 5, 1, 2,
             name=name + '_5x5', bn=False)
    d = S.Pooling(x, kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type='max')
    d = _cbr(S, d, cp, 1, name=name + '_proj', bn=False)
    return S.Concat(a, b, c, d, name=name + '_concat')


def googlenet(S):
    x = S.Variable('data')
    x = _cbr(S, x, 64, 7, 2, 3, name='conv1', bn=False)
    x = S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='max')
    x = _cbr(S, x, 64, 1, name='conv2r', bn=False)
    x = _cbr(S, x, 192, 3, 1, 1, name='conv2', bn=False)
    x = S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='max')
    x = _inception_v1(S, x, 64, 96, 128, 16, 32, 32, 'in3a')
    x = _inception_v1(S, x, 128, 128, 192, 32, 96, 64, 'in3b')
    x = S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='max')
    for name, cfg in (('in4a', (192, 96, 208, 16, 48, 64)), ('in4b', (160, 112, 224, 24, 64, 64)),
                      ('in4c', (128, 128, 256, 24, 64, 64)), ('in4d', (112, 144, 288, 32, 64, 64)),
                      ('in4e', (256, 160, 320, 32, 128, 128))):
        x = _inception_v1(S, x, *cfg, name=name)
    x = S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='max')
    x = _inception_v1(S, x, 256, 160, 320, 32, 128, 128, 'in5a')
    x = _inception_v1(S, x, 384, 192, 384, 48, 128, 128, 'in5b')
    return _head(S, x)


def _inception_bn_a(S, x, c1, c3r, c3, cd3r, cd3, pool, cp, name):
    a = _cbr(S, x, c1, 1, name=name + '_1x1')
    b = _cbr(S, _cbr(S, x, c3r, 1, name=name + '_3r'), c3, 3, 1, 1, name=name + '_3x3')
    c = _cbr(S, x, cd3r, 1, name=name + '_d3r')
    c = _cbr(S, _cbr(S, c, cd3, 3, 1, 1, name=name + '_d3a'), cd3, 3, 1, 1, name=name + '_d3b')
    d = S.Pooling(x, kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type=pool)
    d = _cbr(S, d, cp, 1, name=name + '_proj')
    return S.Concat(a, b, c, d, name=name + '_concat')


def _inception_bn_b(S, x, c3r, c3, cd3r, cd3, name):
    b = _cbr(S, _cbr(S, x, c3r, 1, name=name + '_3r'), c3, 3, 2, 1, name=name + '_3x3')
    c = _cbr(S, x, cd3r, 1, name=name + '_d3r')
    c = _cbr(S, _cbr(S, c, cd3, 3, 1, 1, name=name + '_d3a'), cd3, 3, 2, 1, name=name + '_d3b')
    d = S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='max')
    return S.Concat(b, c, d, name=name + '_concat')


def inception_bn(S):
    x = S.Variable('data')
    x = _cbr(S, x, 64, 7, 2, 3, name='conv1')
    x = S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='max')
    x = _cbr(S, _cbr(S, x, 64, 1, name='conv2r'), 192, 3, 1, 1, name='conv2')
    x = S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='max')
    x = _inception_bn_a(S, x, 64, 64, 64, 64, 96, 'avg', 32, 'in3a')
    x = _inception_bn_a(S, x, 64, 64, 96, 64, 96, 'avg', 64, 'in3b')
    x = _inception_bn_b(S, x, 128, 160, 64, 96, 'in3c')
    x = _inception_bn_a(S, x, 224, 64, 96, 96, 128, 'avg', 128, 'in4a')
    x = _inception_bn_a(S, x, 192, 96, 128, 96, 128, 'avg', 128, 'in4b')
    x = _inception_bn_b(S, x, 128, 192, 192, 256, 'in4e')
    x = _inception_bn_a(S, x, 352, 192, 320, 160, 224, 'avg', 128, 'in5a')
    x = _inception_bn_a(S, x, 352, 192, 320, 192, 224, 'max', 128, 'in5b')
    return _head(S, x)


def _res_unit(S, x, ch, stride, match, bottleneck, v2, name, groups=1):
    """One residual unit: v1 (post-activation, He et al. 2015) or v2 (pre-activation, 2016)."""
    mid = ch // 4 if bottleneck else ch
    if groups > 1:
        mid = ch // 2
    if v2:
        pre = S.Activation(S.BatchNorm(x, fix_gamma=False, name=name + '_bn0'), act_type='relu')
        src = pre
    else:
        src = x
    if bottleneck:
        plan = ((mid, 1, 1, 0, 1), (mid, 3, stride, 1, groups), (ch, 1, 1, 0, 1))
    else:
        plan = ((mid, 3, stride, 1, 1), (ch, 3, 1, 1, 1))
    y = src
    for i, (c, k, s, p, g) in enumerate(plan):
        last = i == len(plan) - 1
        if v2:
            if i:
                y = S.Activation(S.BatchNorm(y, fix_gamma=False, name='%s_bn%d' % (name, i)),
                                 act_type='relu')
            y = _conv(S, y, c, k, s, p, g, name='%s_conv%d' % (name, i), bias=False)
        else:
            y = _cbr(S, y, c, k, s, p, g, name='%s_%d' % (name, i), act=None if last else 'relu')
    short = x
    if not match:
        short = _conv(S, src, ch, 1, stride, 0, name=name + '_sc', bias=False)
        if not v2:
            short = S.BatchNorm(short, fix_gamma=False, name=name + '_sc_bn')
    out = y + short
    return out if v2 else S.Activation(out, act_type='relu')


def _resnet(S, units, bottleneck, v2, widths, groups=1):
    x = S.Variable('data')
    x = _cbr(S, x, 64, 3, 1, 1, name='stem', act=None if v2 else 'relu', bn=not v2)
    for stage, (n, ch) in enumerate(zip(units, widths)):
        for i in range(n):
            stride = 2 if stage and not i else 1
            x = _res_unit(S, x, ch, stride, match=i > 0, bottleneck=bottleneck, v2=v2,
                          name='s%d_u%d' % (stage, i), groups=groups)
    if v2:
        x = S.Activation(S.BatchNorm(x, fix_gamma=False, name='bn_out'), act_type='relu')
    return _head(S, x)


def resnet18_v1(S):
    return _resnet(S, (2, 2, 2, 2), False, False, (64, 128, 256, 512))


def resnet18_v2(S):
    return _resnet(S, (2, 2, 2, 2), False, True, (64, 128, 256, 512))


def resnet50_v1(S):
    return _resnet(S, (3, 4, 6, 3), True, False, (256, 512, 1024, 2048))


def resnet50_v2(S):
    return _resnet(S, (3, 4, 6, 3), True, True, (256, 512, 1024, 2048))


def resnext50(S):
    """ResNeXt-50 32x4d (Xie et al. 2017): bottleneck units with 32 groups."""
    return _resnet(S, (3, 4, 6, 3), True, False, (256, 512, 1024, 2048), groups=32)


def mobilenet_v1(S):
    x = _cbr(S, S.Variable('data'), 32, 3, 2, 1, name='conv0')
    plan = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)) + ((512, 1),) * 5 \
        + ((1024, 2), (1024, 1))
    cin = 32
    for i, (ch, s) in enumerate(plan):
        x = _cbr(S, x, cin, 3, s, 1, g=cin, name='dw%d' % i)
        x = _cbr(S, x, ch, 1, name='pw%d' % i)
        cin = ch
    return _head(S, x)


def mobilenet_v2(S):
    x = _cbr(S, S.Variable('data'), 32, 3, 2, 1, name='conv0', act='relu6')
    cin = 32
    k = 0
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            stride = s if i == 0 else 1
            hid = cin * t
            y = x if t == 1 else _cbr(S, x, hid, 1, name='b%d_exp' % k, act='relu6')
            y = _cbr(S, y, hid, 3, stride, 1, g=hid, name='b%d_dw' % k, act='relu6')
            y = _cbr(S, y, c, 1, name='b%d_pw' % k, act=None)
            x = x + y if stride == 1 and cin == c else y
            cin = c
            k += 1
    x = _cbr(S, x, 1280, 1, name='conv_last', act='relu6')
    return _head(S, x)


NETS = {
    'mlp': (mlp, (1, 28, 28)),
    'lenet': (lenet, (1, 28, 28)),
    'alexnet': (alexnet, (3, 64, 64)),
    'vgg11': (vgg11, (3, 32, 32)),
    'vgg11_bn': (vgg11_bn, (3, 32, 32)),
    'googlenet': (googlenet, (3, 64, 64)),
    'inception_bn': (inception_bn, (3, 64, 64)),
    'resnet18_v1_32': (resnet18_v1, (3, 32, 32)),
    'resnet18_v2_32': (resnet18_v2, (3, 32, 32)),
    'resnet18_v1_64': (resnet18_v1, (3, 64, 64)),
    'resnet18_v2_64': (resnet18_v2, (3, 64, 64)),
    'resnet50_v1_32': (resnet50_v1, (3, 32, 32)),
    'resnet50_v2_32': (resnet50_v2, (3, 32, 32)),
    'resnet50_v1_64': (resnet50_v1, (3, 64, 64)),
    'resnet50_v2_64': (resnet50_v2, (3, 64, 64)),
    'resnext50': (resnext50, (3, 32, 32)),
    'mobilenet_v1': (mobilenet_v1, (3, 64, 64)),
    'mobilenet_v2': (mobilenet_v2, (3, 64, 64)),
}
