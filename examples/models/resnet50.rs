//! torchvision's ResNet-50: `Bottleneck` blocks `[3, 4, 6, 3]`, the
//! stride on the 3x3 convolution (torchvision's "v1.5"), and torchvision's
//! parameter names (`layer2.0.downsample.1.running_var`), so a state dict
//! saved by `torchvision.models.resnet50()` loads as it is. Used by the
//! bigger-model benchmark (`benches/workloads/big.rs`).

use lazyxla::nn::{AdaptiveAvgPool2d, BatchNorm2d, Conv2d, Linear, MaxPool2d, Module, Sequential};
use lazyxla::Tensor;

/// Output channels are `width * EXPANSION`.
const EXPANSION: usize = 4;

/// torchvision's `Bottleneck`: 1x1 down to `width`, 3x3 (carrying the
/// stride), 1x1 up to `width * 4`, each with batch norm; a 1x1
/// convolution with batch norm on the shortcut when the shape changes.
pub struct Bottleneck {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    conv2: Conv2d,
    bn2: BatchNorm2d,
    conv3: Conv2d,
    bn3: BatchNorm2d,
    downsample: Option<Sequential>,
}

impl Bottleneck {
    pub fn new(cin: usize, width: usize, stride: usize, seed: u64) -> Bottleneck {
        let cout = width * EXPANSION;
        let downsample = (stride != 1 || cin != cout).then(|| {
            Sequential::new()
                .add(
                    Conv2d::new(cin, cout, (1, 1), seed + 3)
                        .stride((stride, stride))
                        .bias(false),
                )
                .add(BatchNorm2d::new(cout))
        });
        Bottleneck {
            conv1: Conv2d::new(cin, width, (1, 1), seed).bias(false),
            bn1: BatchNorm2d::new(width),
            conv2: Conv2d::new(width, width, (3, 3), seed + 1)
                .stride((stride, stride))
                .padding((1, 1))
                .bias(false),
            bn2: BatchNorm2d::new(width),
            conv3: Conv2d::new(width, cout, (1, 1), seed + 2).bias(false),
            bn3: BatchNorm2d::new(cout),
            downsample,
        }
    }
}

impl Module for Bottleneck {
    fn forward(&self, x: &Tensor) -> Tensor {
        let y = self.bn1.forward(&self.conv1.forward(x)).relu();
        let y = self.bn2.forward(&self.conv2.forward(&y)).relu();
        let y = self.bn3.forward(&self.conv3.forward(&y));
        let shortcut = match &self.downsample {
            Some(d) => d.forward(x),
            None => x.clone(),
        };
        (&y + &shortcut).relu()
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        let mut c: Vec<(String, &dyn Module)> = vec![
            ("conv1".into(), &self.conv1),
            ("bn1".into(), &self.bn1),
            ("conv2".into(), &self.conv2),
            ("bn2".into(), &self.bn2),
            ("conv3".into(), &self.conv3),
            ("bn3".into(), &self.bn3),
        ];
        if let Some(d) = &self.downsample {
            c.push(("downsample".into(), d));
        }
        c
    }
}

/// ResNet-50 for `classes` classes on NCHW images of 3 channels.
pub struct ResNet50 {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    maxpool: MaxPool2d,
    layers: [Sequential; 4],
    avgpool: AdaptiveAvgPool2d,
    fc: Linear,
}

impl ResNet50 {
    pub fn new(classes: usize, seed: u64) -> ResNet50 {
        let mut cin = 64;
        let mut layer = |width: usize, blocks: usize, stride: usize, seed: u64| {
            let mut s = Sequential::new();
            for b in 0..blocks {
                let stride = if b == 0 { stride } else { 1 };
                s = s.add(Bottleneck::new(cin, width, stride, seed + 10 * b as u64));
                cin = width * EXPANSION;
            }
            s
        };
        let layers = [
            layer(64, 3, 1, seed + 100),
            layer(128, 4, 2, seed + 200),
            layer(256, 6, 2, seed + 300),
            layer(512, 3, 2, seed + 400),
        ];
        ResNet50 {
            conv1: Conv2d::new(3, 64, (7, 7), seed)
                .stride((2, 2))
                .padding((3, 3))
                .bias(false),
            bn1: BatchNorm2d::new(64),
            maxpool: MaxPool2d::new((3, 3)).stride((2, 2)).padding((1, 1)),
            layers,
            avgpool: AdaptiveAvgPool2d::new((1, 1)),
            fc: Linear::new(512 * EXPANSION, classes, seed + 500),
        }
    }
}

impl Module for ResNet50 {
    fn forward(&self, x: &Tensor) -> Tensor {
        let mut h = self.bn1.forward(&self.conv1.forward(x)).relu();
        h = self.maxpool.forward(&h);
        for l in &self.layers {
            h = l.forward(&h);
        }
        let h = self
            .avgpool
            .forward(&h)
            .reshape(&[-1, (512 * EXPANSION) as i64]);
        self.fc.forward(&h)
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        let mut c: Vec<(String, &dyn Module)> = vec![
            ("conv1".into(), &self.conv1),
            ("bn1".into(), &self.bn1),
            ("maxpool".into(), &self.maxpool),
        ];
        for (i, l) in self.layers.iter().enumerate() {
            c.push((format!("layer{}", i + 1), l));
        }
        c.push(("avgpool".into(), &self.avgpool));
        c.push(("fc".into(), &self.fc));
        c
    }
}
