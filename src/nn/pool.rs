//! Pooling layers: [`MaxPool2d`], [`AvgPool2d`] and [`AdaptiveAvgPool2d`]
//! over NCHW (or CHW) tensors, with PyTorch's defaults (stride = kernel,
//! no padding). They have no parameters.

use super::Module;
use crate::tensor::Tensor;

/// A pooling layer over a fixed window: the struct (kernel, stride,
/// padding), its builder and its `Module` impl calling the tensor method.
macro_rules! window_pool {
    ($(#[$doc:meta])* $name:ident, $method:ident, $fill:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $name {
            /// Window size (height, width).
            pub kernel: (usize, usize),
            /// Step between windows (default: the kernel).
            pub stride: (usize, usize),
            #[doc = concat!($fill, " padding on each side of H and W (default: none).")]
            pub padding: (usize, usize),
        }

        impl $name {
            /// A layer with stride = kernel and no padding.
            ///
            /// ```
            #[doc = concat!("use lazyxla::nn::{", stringify!($name), ", Module};")]
            /// let x = lazyxla::Tensor::ones(&[1, 1, 4, 4], lazyxla::DType::F32);
            #[doc = concat!("let y = ", stringify!($name), "::new((2, 2)).forward(&x);")]
            /// assert_eq!(y.concrete_shape().unwrap(), vec![1, 1, 2, 2]);
            /// ```
            #[track_caller]
            pub fn new(kernel: (usize, usize)) -> $name {
                $name {
                    kernel,
                    stride: kernel,
                    padding: (0, 0),
                }
            }

            /// Sets the stride.
            ///
            /// ```
            #[doc = concat!("use lazyxla::nn::{", stringify!($name), ", Module};")]
            /// let x = lazyxla::Tensor::ones(&[1, 1, 5, 5], lazyxla::DType::F32);
            #[doc = concat!("let y = ", stringify!($name), "::new((3, 3)).stride((1, 1)).forward(&x);")]
            /// assert_eq!(y.concrete_shape().unwrap(), vec![1, 1, 3, 3]);
            /// ```
            #[track_caller]
            pub fn stride(mut self, stride: (usize, usize)) -> $name {
                self.stride = stride;
                self
            }

            /// Sets the padding.
            ///
            /// ```
            #[doc = concat!("use lazyxla::nn::{", stringify!($name), ", Module};")]
            /// let x = lazyxla::Tensor::ones(&[1, 1, 4, 4], lazyxla::DType::F32);
            #[doc = concat!("let y = ", stringify!($name), "::new((3, 3)).stride((1, 1)).padding((1, 1)).forward(&x);")]
            /// assert_eq!(y.concrete_shape().unwrap(), vec![1, 1, 4, 4]);
            /// ```
            #[track_caller]
            pub fn padding(mut self, padding: (usize, usize)) -> $name {
                self.padding = padding;
                self
            }
        }

        impl Module for $name {
            #[track_caller]
            fn forward(&self, x: &Tensor) -> Tensor {
                x.$method(self.kernel, self.stride, self.padding)
            }
        }
    };
}

window_pool! {
    /// Max pooling, as `torch.nn.MaxPool2d` (see [`Tensor::max_pool2d`]).
    ///
    /// ```
    /// use lazyxla::nn::{MaxPool2d, Module};
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec((0..16).map(|v| v as f32).collect(), &[1, 1, 4, 4]).unwrap();
    /// let y = MaxPool2d::new((2, 2)).forward(&x);
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![5.0, 7.0, 13.0, 15.0]);
    /// ```
    MaxPool2d, max_pool2d, "`-inf`"
}

window_pool! {
    /// Average pooling, as `torch.nn.AvgPool2d` with `count_include_pad`
    /// (see [`Tensor::avg_pool2d`]).
    ///
    /// ```
    /// use lazyxla::nn::{AvgPool2d, Module};
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 1, 2, 2]).unwrap();
    /// let y = AvgPool2d::new((2, 2)).forward(&x);
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.5]);
    /// ```
    AvgPool2d, avg_pool2d, "Zero"
}

/// Adaptive average pooling to a fixed output size, as
/// `torch.nn.AdaptiveAvgPool2d` (see [`Tensor::adaptive_avg_pool2d`]).
///
/// ```
/// use lazyxla::nn::{AdaptiveAvgPool2d, Module};
/// use lazyxla::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 1, 2, 2]).unwrap();
/// let y = AdaptiveAvgPool2d::new((1, 1)).forward(&x);
/// assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.5]);
/// ```
#[derive(Clone, Debug)]
pub struct AdaptiveAvgPool2d {
    /// Output size (height, width).
    pub output: (usize, usize),
}

impl AdaptiveAvgPool2d {
    /// A layer pooling to `output`.
    ///
    /// ```
    /// use lazyxla::nn::{AdaptiveAvgPool2d, Module};
    /// let x = lazyxla::Tensor::ones(&[2, 3, 5, 5], lazyxla::DType::F32);
    /// let y = AdaptiveAvgPool2d::new((1, 1)).forward(&x);
    /// assert_eq!(y.concrete_shape().unwrap(), vec![2, 3, 1, 1]);
    /// ```
    #[track_caller]
    pub fn new(output: (usize, usize)) -> AdaptiveAvgPool2d {
        AdaptiveAvgPool2d { output }
    }
}

impl Module for AdaptiveAvgPool2d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.adaptive_avg_pool2d(self.output)
    }
}
