"""The JSON spec taas's kernel writes (kernel/lang/spec.c) for a torch module built from the
layers and torchvision blocks taas trains: what the fixture generators and the benchmarks
hand to the training core for the same model PyTorch runs."""
import torch.nn as nn
from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet


def pair(v):
    return list(v) if isinstance(v, tuple) else [v, v]


def spec(m):
    """The JSON spec the kernel writes for the same model (kernel/lang/spec.c)."""
    if isinstance(m, nn.Sequential):
        return {"type": "Sequential", "layers": [spec(c) for c in m]}
    if isinstance(m, (BasicBlock, Bottleneck)):
        b = isinstance(m, Bottleneck)
        planes = m.conv3.out_channels // 4 if b else m.conv2.out_channels
        width = m.conv2.out_channels
        groups = m.conv2.groups
        return {"type": "Bottleneck" if b else "BasicBlock", "inplanes": m.conv1.in_channels, "planes": planes,
                "stride": m.stride, "downsample": spec(m.downsample) if m.downsample is not None else None,
                "groups": groups, "base_width": width * 64 // (planes * groups), "dilation": 1, "norm_layer": None}
    if isinstance(m, ResNet):
        s = {"type": "ResNet", "zero_init_residual": False}
        for name in ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool", "fc"]:
            s[name] = spec(getattr(m, name))
        return s
    if isinstance(m, nn.Conv2d):
        return {"type": "Conv2d", "in_channels": m.in_channels, "out_channels": m.out_channels,
                "kernel_size": pair(m.kernel_size), "stride": pair(m.stride), "padding": pair(m.padding),
                "dilation": pair(m.dilation), "groups": m.groups, "bias": m.bias is not None,
                "padding_mode": "zeros"}
    if isinstance(m, nn.BatchNorm2d):
        return {"type": "BatchNorm2d", "num_features": m.num_features, "eps": m.eps, "momentum": m.momentum,
                "affine": True, "track_running_stats": True}
    if isinstance(m, nn.ReLU):
        return {"type": "ReLU", "inplace": m.inplace}
    if isinstance(m, nn.MaxPool2d):
        return {"type": "MaxPool2d", "kernel_size": pair(m.kernel_size), "stride": pair(m.stride),
                "padding": pair(m.padding), "dilation": pair(m.dilation), "return_indices": False,
                "ceil_mode": False}
    if isinstance(m, nn.AdaptiveAvgPool2d):
        return {"type": "AdaptiveAvgPool2d", "output_size": pair(m.output_size)}
    if isinstance(m, nn.Identity):
        return {"type": "Identity"}
    if isinstance(m, nn.Flatten):
        return {"type": "Flatten", "start_dim": 1, "end_dim": -1}
    if isinstance(m, nn.Linear):
        return {"type": "Linear", "in_features": m.in_features, "out_features": m.out_features,
                "bias": m.bias is not None}
    raise TypeError(type(m).__name__)
