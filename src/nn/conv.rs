//! Convolution layers: `Conv1d`, `Conv2d`, `ConvTranspose2d`, with
//! PyTorch's default initialisation (seeded).

use super::layers::uniform;
use super::{named, Module};
use crate::tensor::Tensor;

/// What a layer's parameters are drawn from: PyTorch's
/// `kaiming_uniform_(a = sqrt(5))`, i.e. weight and bias uniform in
/// `±1 / sqrt(fan_in)`, where `fan_in` is the weight's dim 1 times the
/// kernel size (`in / groups` for a convolution, `out / groups` for a
/// transposed one).
#[derive(Clone, Debug)]
struct Init {
    layer: &'static str,
    in_channels: usize,
    out_channels: usize,
    kernel: Vec<usize>,
    groups: usize,
    bias: bool,
    transposed: bool,
    seed: u64,
}

impl Init {
    /// Fresh parameters (the same for the same settings and seed).
    #[track_caller]
    fn draw(&self) -> (Tensor, Option<Tensor>) {
        let g = self.groups;
        if g == 0 || !self.in_channels.is_multiple_of(g) || !self.out_channels.is_multiple_of(g) {
            panic!(
                "{}: groups {g} must be at least 1 and divide both in_channels {} and out_channels {}",
                self.layer, self.in_channels, self.out_channels
            );
        }
        let mut shape = if self.transposed {
            vec![self.in_channels, self.out_channels / g]
        } else {
            vec![self.out_channels, self.in_channels / g]
        };
        shape.extend(&self.kernel);
        let fan_in: usize = shape[1..].iter().product();
        let bound = 1.0 / (fan_in.max(1) as f64).sqrt();
        let weight = uniform(&shape, -bound, bound, self.seed).requires_grad(true);
        let bias = self.bias.then(|| {
            uniform(&[self.out_channels], -bound, bound, self.seed ^ 0x5eed_b1a5)
                .requires_grad(true)
        });
        (weight, bias)
    }
}

/// A per-dim setting given as one size (1-d layers) or a pair (2-d).
trait Dims<const N: usize> {
    fn dims(self) -> [usize; N];
}

impl Dims<1> for usize {
    #[track_caller]
    fn dims(self) -> [usize; 1] {
        [self]
    }
}

impl Dims<2> for (usize, usize) {
    #[track_caller]
    fn dims(self) -> [usize; 2] {
        [self.0, self.1]
    }
}

/// `[a, b]` as PyTorch's `(a, b)`.
#[track_caller]
fn pair(v: [usize; 2]) -> (usize, usize) {
    (v[0], v[1])
}

macro_rules! conv_layer {
    (
        $(#[$doc:meta])*
        $name:ident, $dims:literal, $arg:ty, $transposed:literal
        $(, $extra:ident = $default:expr)*
    ) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name {
            /// The weight: `[out, in / groups, kernel..]`, or `[in, out /
            /// groups, kernel..]` for a transposed convolution.
            pub weight: Tensor,
            /// `[out]`, if the layer has a bias.
            pub bias: Option<Tensor>,
            init: Init,
            stride: [usize; $dims],
            padding: [usize; $dims],
            dilation: [usize; $dims],
            $($extra: [usize; $dims],)*
        }

        impl $name {
            /// A layer with bias, stride 1, no padding, dilation 1, one
            /// group; `seed` makes the initialisation reproducible.
            #[track_caller]
            pub fn new(in_channels: usize, out_channels: usize, kernel: $arg, seed: u64) -> $name {
                let init = Init {
                    layer: stringify!($name),
                    in_channels,
                    out_channels,
                    kernel: kernel.dims().to_vec(),
                    groups: 1,
                    bias: true,
                    transposed: $transposed,
                    seed,
                };
                let (weight, bias) = init.draw();
                $name {
                    weight,
                    bias,
                    init,
                    stride: [1; $dims],
                    padding: [0; $dims],
                    dilation: [1; $dims],
                    $($extra: $default,)*
                }
            }

            /// The stride.
            #[track_caller]
            pub fn stride(mut self, stride: $arg) -> $name {
                self.stride = stride.dims();
                self
            }

            /// Zero padding on both sides of each spatial dim.
            #[track_caller]
            pub fn padding(mut self, padding: $arg) -> $name {
                self.padding = padding.dims();
                self
            }

            /// The kernel dilation.
            #[track_caller]
            pub fn dilation(mut self, dilation: $arg) -> $name {
                self.dilation = dilation.dims();
                self
            }

            /// Channel groups (draws the parameters again, for the new
            /// weight shape). Panics unless it divides both channel counts.
            #[track_caller]
            pub fn groups(mut self, groups: usize) -> $name {
                self.init.groups = groups;
                (self.weight, self.bias) = self.init.draw();
                self
            }

            /// With or without a bias (draws the parameters again).
            #[track_caller]
            pub fn bias(mut self, bias: bool) -> $name {
                self.init.bias = bias;
                (self.weight, self.bias) = self.init.draw();
                self
            }
        }

        impl $name {
            #[track_caller]
            fn params(&self) -> Vec<(String, Tensor)> {
                let mut p = vec![named("weight", &self.weight)];
                p.extend(self.bias.iter().map(|b| named("bias", b)));
                p
            }
        }
    };
}

conv_layer!(
    /// 1-d convolution over `[N, C, L]` (PyTorch's `nn.Conv1d`).
    ///
    /// ```
    /// use lazyxla::nn::{Conv1d, Module};
    /// use lazyxla::{DType, Tensor};
    /// let conv = Conv1d::new(2, 4, 3, 0).padding(1);
    /// let y = conv.forward(&Tensor::ones(&[5, 2, 8], DType::F32));
    /// assert_eq!(y.upper_bounds(), vec![5, 4, 8]);
    /// ```
    Conv1d, 1, usize, false
);

conv_layer!(
    /// 2-d convolution over `[N, C, H, W]` (PyTorch's `nn.Conv2d`).
    ///
    /// ```
    /// use lazyxla::nn::{Conv2d, Module};
    /// use lazyxla::{DType, Tensor};
    /// let conv = Conv2d::new(4, 8, (3, 3), 0).stride((2, 2)).padding((1, 1)).groups(2);
    /// assert_eq!(conv.weight.upper_bounds(), vec![8, 2, 3, 3]);
    /// let y = conv.forward(&Tensor::ones(&[1, 4, 8, 8], DType::F32));
    /// assert_eq!(y.upper_bounds(), vec![1, 8, 4, 4]);
    /// ```
    Conv2d, 2, (usize, usize), false
);

conv_layer!(
    /// 2-d transposed convolution over `[N, C, H, W]` (PyTorch's
    /// `nn.ConvTranspose2d`); the weight is `[in, out / groups, kH, kW]`.
    ///
    /// ```
    /// use lazyxla::nn::{ConvTranspose2d, Module};
    /// use lazyxla::{DType, Tensor};
    /// let up = ConvTranspose2d::new(4, 2, (3, 3), 0)
    ///     .stride((2, 2))
    ///     .padding((1, 1))
    ///     .output_padding((1, 1));
    /// let y = up.forward(&Tensor::ones(&[1, 4, 5, 5], DType::F32));
    /// assert_eq!(y.upper_bounds(), vec![1, 2, 10, 10]);
    /// ```
    ConvTranspose2d, 2, (usize, usize), true,
    output_padding = [0; 2]
);

impl ConvTranspose2d {
    /// Extra size added to one side of each output dim (below the stride
    /// or the dilation), to pick among the input sizes a stride maps to
    /// the same output.
    #[track_caller]
    pub fn output_padding(mut self, output_padding: (usize, usize)) -> ConvTranspose2d {
        self.output_padding = [output_padding.0, output_padding.1];
        self
    }
}

impl Module for Conv1d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let (s, p, d) = (self.stride[0], self.padding[0], self.dilation[0]);
        x.conv1d(&self.weight, self.bias.as_ref(), s, p, d, self.init.groups)
    }

    #[track_caller]
    fn own_parameters(&self) -> Vec<(String, Tensor)> {
        self.params()
    }
}

impl Module for Conv2d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let (s, p, d) = (pair(self.stride), pair(self.padding), pair(self.dilation));
        x.conv2d(&self.weight, self.bias.as_ref(), s, p, d, self.init.groups)
    }

    #[track_caller]
    fn own_parameters(&self) -> Vec<(String, Tensor)> {
        self.params()
    }
}

impl Module for ConvTranspose2d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let (s, p, d) = (pair(self.stride), pair(self.padding), pair(self.dilation));
        let extra = pair(self.output_padding);
        x.conv_transpose2d(
            &self.weight,
            self.bias.as_ref(),
            s,
            p,
            extra,
            d,
            self.init.groups,
        )
    }

    #[track_caller]
    fn own_parameters(&self) -> Vec<(String, Tensor)> {
        self.params()
    }
}
