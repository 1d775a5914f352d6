"""The PyTorch side of `benches/mask_rcnn.rs`: torchvision's `MaskRCNN`
configured to the sizes of `examples/models/mask_rcnn.rs` (the same
backbone, anchors, proposal counts, sampling, RoIAlign sizes and heads),
trained with SGD in PyTorch eager on the CPU, on the batches the Rust side
wrote (`DATA`, a safetensors file), timed as the Rust side times itself.

Usage: python torch_mask_rcnn.py DATA [STEPS] [--xla]. Prints one line

    RESULT mask_rcnn torch first_ms=<f> step_ms=<f> cpu_ms=<f> compiles=0

With `--xla` the model runs on PyTorch/XLA's device (`PJRT_DEVICE=CPU`,
torch_xla installed beside a matching torch), `torch_xla.sync()` ends each
step, the side is named `torch_xla` and `compiles` counts XLA compiles
over the whole run (torch_xla's `CompileTime` metric).

first_ms: the first step; step_ms: the median wall time of a step after
two warm-up steps (forward, backward, SGD update and the loss read);
cpu_ms: process CPU time per timed step. Needs torch, torchvision and
safetensors (the benchmark's own venv; CI never runs this).
"""

import statistics
import sys
import time

import torch
import torch.nn as nn
from safetensors.torch import load_file
from torchvision.models.detection import MaskRCNN
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor
from torchvision.ops import MultiScaleRoIAlign

WIDTH, IMAGE, CLASSES, BATCH = 16, 128, 3, 2


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        s = x if self.downsample is None else self.downsample(x)
        return torch.relu(y + s)


class Backbone(nn.Module):
    """Stem (stride 2), layer1 (stride 2), layer2 (stride 2): stride 8."""

    def __init__(self, w):
        super().__init__()
        self.conv1 = nn.Conv2d(3, w, 3, 2, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        self.layer1 = nn.Sequential(BasicBlock(w, w, 2))
        self.layer2 = nn.Sequential(BasicBlock(w, 2 * w, 2))
        self.out_channels = 2 * w

    def forward(self, x):
        return self.layer2(self.layer1(torch.relu(self.bn1(self.conv1(x)))))


def model():
    c = 2 * WIDTH
    return MaskRCNN(
        Backbone(WIDTH),
        num_classes=None,
        min_size=IMAGE,
        max_size=IMAGE,
        image_mean=[0.0, 0.0, 0.0],
        image_std=[1.0, 1.0, 1.0],
        rpn_anchor_generator=AnchorGenerator(((16, 32, 64),), ((0.5, 1.0, 2.0),)),
        rpn_pre_nms_top_n_train=300,
        rpn_post_nms_top_n_train=100,
        rpn_batch_size_per_image=256,
        box_roi_pool=MultiScaleRoIAlign(["0"], 7, 2),
        box_head=TwoMLPHead(c * 49, 128),
        box_predictor=FastRCNNPredictor(128, CLASSES + 1),
        box_batch_size_per_image=64,
        mask_roi_pool=MultiScaleRoIAlign(["0"], 14, 2),
        mask_head=MaskRCNNHeads(c, (c, c), 1),
        mask_predictor=MaskRCNNPredictor(c, c, CLASSES + 1),
    )


def main():
    xla = "--xla" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--xla"]
    data = load_file(args[0])
    steps = int(args[1]) if len(args) > 1 else 50
    torch.manual_seed(0)
    device = torch.device("cpu")
    if xla:
        import torch_xla
        import torch_xla.debug.metrics as met
        device = torch_xla.device()
    net = model().to(device)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
    batches = []
    for i in range(steps + 2):
        images = [x.to(device) for x in data[f"step{i}.images"].unbind(0)]
        targets = [
            {
                "boxes": data[f"step{i}.image{b}.boxes"].to(device),
                "labels": data[f"step{i}.image{b}.labels"].to(device),
                "masks": data[f"step{i}.image{b}.masks"].to(torch.uint8).to(device),
            }
            for b in range(BATCH)
        ]
        batches.append((images, targets))
    times = []
    cpu0 = None
    first = None
    for i, (images, targets) in enumerate(batches):
        if i == 2:
            cpu0 = time.process_time()
        t0 = time.perf_counter()
        losses = net(images, targets)
        loss = sum(losses.values())
        opt.zero_grad()
        loss.backward()
        opt.step()
        if xla:
            torch_xla.sync()
        float(loss.detach())
        dt = (time.perf_counter() - t0) * 1e3
        if first is None:
            first = dt
        if i >= 2:
            times.append(dt)
    cpu = (time.process_time() - cpu0) * 1e3 / len(times)
    side, compiles = "torch", 0
    if xla:
        side = "torch_xla"
        data = met.metric_data("CompileTime")
        compiles = data[0] if data else 0
    print(f"RESULT mask_rcnn {side} first_ms={first:.3f} step_ms={statistics.median(times):.3f} "
          f"cpu_ms={cpu:.3f} compiles={compiles}")


if __name__ == "__main__":
    main()
