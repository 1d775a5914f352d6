//! A small ResNet (torchvision's layout and parameter names, width 8) and
//! a seeded synthetic image set, shared by `train_cnn`, the model
//! benchmark and the PyTorch fixture test.

use lazyxla::nn::{AdaptiveAvgPool2d, BatchNorm2d, Conv2d, Linear, Module, Sequential};
use lazyxla::Tensor;

/// Image side, channels and classes of the synthetic set.
pub const IMAGE: usize = 32;
pub const CHANNELS: usize = 3;
pub const CLASSES: usize = 4;

/// torchvision's `BasicBlock`: two 3x3 convolutions with batch norm, and
/// a 1x1 convolution with batch norm on the shortcut when the shape
/// changes. Parameter names as torchvision's (`conv1.weight`,
/// `bn1.running_mean`, `downsample.0.weight`).
pub struct BasicBlock {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    conv2: Conv2d,
    bn2: BatchNorm2d,
    downsample: Option<Sequential>,
}

impl BasicBlock {
    pub fn new(cin: usize, cout: usize, stride: usize, seed: u64) -> BasicBlock {
        let conv3 = |i, o, s, seed| {
            Conv2d::new(i, o, (3, 3), seed)
                .stride((s, s))
                .padding((1, 1))
                .bias(false)
        };
        let downsample = (stride != 1 || cin != cout).then(|| {
            Sequential::new()
                .add(
                    Conv2d::new(cin, cout, (1, 1), seed + 2)
                        .stride((stride, stride))
                        .bias(false),
                )
                .add(BatchNorm2d::new(cout))
        });
        BasicBlock {
            conv1: conv3(cin, cout, stride, seed),
            bn1: BatchNorm2d::new(cout),
            conv2: conv3(cout, cout, 1, seed + 1),
            bn2: BatchNorm2d::new(cout),
            downsample,
        }
    }
}

impl Module for BasicBlock {
    fn forward(&self, x: &Tensor) -> Tensor {
        let y = self.bn1.forward(&self.conv1.forward(x)).relu();
        let y = self.bn2.forward(&self.conv2.forward(&y));
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
        ];
        if let Some(d) = &self.downsample {
            c.push(("downsample".into(), d));
        }
        c
    }
}

/// conv3x3(3 -> 8) + BN + ReLU, `layer1` (a block 8 -> 8), `layer2` (a
/// block 8 -> 16, stride 2), global average pooling, `fc` (16 -> classes).
pub struct SmallResNet {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    layer1: Sequential,
    layer2: Sequential,
    avgpool: AdaptiveAvgPool2d,
    fc: Linear,
}

impl SmallResNet {
    pub fn new(classes: usize, seed: u64) -> SmallResNet {
        SmallResNet {
            conv1: Conv2d::new(CHANNELS, 8, (3, 3), seed)
                .padding((1, 1))
                .bias(false),
            bn1: BatchNorm2d::new(8),
            layer1: Sequential::new().add(BasicBlock::new(8, 8, 1, seed + 10)),
            layer2: Sequential::new().add(BasicBlock::new(8, 16, 2, seed + 20)),
            avgpool: AdaptiveAvgPool2d::new((1, 1)),
            fc: Linear::new(16, classes, seed + 30),
        }
    }
}

impl Module for SmallResNet {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.bn1.forward(&self.conv1.forward(x)).relu();
        let h = self.layer2.forward(&self.layer1.forward(&h));
        let h = self.avgpool.forward(&h).reshape(&[-1, 16]);
        self.fc.forward(&h)
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("conv1".into(), &self.conv1),
            ("bn1".into(), &self.bn1),
            ("layer1".into(), &self.layer1),
            ("layer2".into(), &self.layer2),
            ("avgpool".into(), &self.avgpool),
            ("fc".into(), &self.fc),
        ]
    }
}

/// A seeded batch of `n` noisy images, each showing one of four patterns
/// (horizontal stripes, vertical stripes, a filled square, a diagonal
/// band) at a random phase or place and colour: `[n, 3, 32, 32]` F32 and
/// the I64 classes.
pub fn images(n: usize, seed: u64) -> (Vec<f32>, Vec<i64>) {
    let mut s = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut x = Vec::with_capacity(n * CHANNELS * IMAGE * IMAGE);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let class = (next() * CLASSES as f64) as usize % CLASSES;
        let phase = (next() * 8.0) as usize;
        let (cx, cy) = (4 + (next() * 16.0) as usize, 4 + (next() * 16.0) as usize);
        let colour: Vec<f64> = (0..CHANNELS).map(|_| 0.5 + next()).collect();
        for tint in &colour {
            for i in 0..IMAGE {
                for j in 0..IMAGE {
                    let on = match class {
                        0 => (i + phase) % 8 < 4,
                        1 => (j + phase) % 8 < 4,
                        2 => (cy..cy + 10).contains(&i) && (cx..cx + 10).contains(&j),
                        _ => (i + IMAGE - j + phase) % 16 < 5,
                    };
                    let v = if on { *tint } else { 0.0 } + (next() - 0.5) * 0.8;
                    x.push(v as f32);
                }
            }
        }
        y.push(class as i64);
    }
    (x, y)
}

/// [`images`] as tensors.
pub fn batch(n: usize, seed: u64) -> (Tensor, Tensor) {
    let (x, y) = images(n, seed);
    (
        Tensor::from_vec(x, &[n, CHANNELS, IMAGE, IMAGE]).unwrap(),
        Tensor::from_vec(y, &[n]).unwrap(),
    )
}
