//! Reductions.

use super::dim::{DimIndex, ResolveDim};
use super::{size_deps_for, Tensor};
use crate::dtype::DType;
use crate::ir::{ArgKind, Op, ReduceKind};
use crate::symint::{Shape, SizeExpr};
use smallvec::SmallVec;

impl Tensor {
    #[track_caller]
    fn resolve_dims<D: DimIndex>(&self, op: &'static str, dims: &[D]) -> Vec<usize> {
        let shape = self.shape_exprs();
        let mut ds: Vec<usize> = dims.iter().map(|d| d.resolve(op, &shape)).collect();
        ds.sort_unstable();
        if ds.windows(2).any(|w| w[0] == w[1]) {
            panic!(
                "{op}: dims {:?} repeat a dimension (shape {}); list each dim once",
                ds,
                self.shape_string()
            );
        }
        ds
    }

    #[track_caller]
    fn reduce(&self, kind: ReduceKind, dims: Vec<usize>, keepdim: bool) -> Tensor {
        let x = match (kind, self.dtype()) {
            (ReduceKind::Sum | ReduceKind::Prod, DType::Bool | DType::I32) => {
                self.to_dtype(DType::I64)
            }
            (_, DType::Bool) => self.to_dtype(DType::I64),
            _ => self.clone(),
        };
        let r = Tensor::apply(
            Op::Reduce {
                kind,
                dims: dims.clone(),
            },
            &[&x],
            SmallVec::new(),
        );
        if keepdim {
            r.keep_dims(self, &dims)
        } else {
            r
        }
    }

    /// Max and min have no identity: reducing a dimension that is
    /// statically empty is an error, as in PyTorch. (A dynamic dimension
    /// whose real size is 0 reduces to the identity of XLA's reduction.)
    #[track_caller]
    fn check_nonempty(&self, op: &'static str, dims: &[usize]) {
        let shape = self.shape_exprs();
        if let Some(&d) = dims.iter().find(|&&d| shape[d].as_const() == Some(0)) {
            panic!(
                "{}",
                crate::Error::shape(
                    op,
                    format!(
                        "cannot reduce dimension {d} of {}: it has no elements and {op} has no identity; reduce over another dim, or check numel before reducing",
                        self.shape_string()
                    )
                )
            );
        }
    }

    /// The maximum over `dim`, kept as size 1, without the emptiness check
    /// (for softmax, whose result over an empty dim is empty anyway).
    #[track_caller]
    pub(crate) fn max_keepdim_unchecked(&self, dim: usize) -> Tensor {
        self.reduce(ReduceKind::Max, vec![dim], true)
    }

    /// `reduced` with size-1 dims put back at `dims` of `original`.
    #[track_caller]
    pub(crate) fn keep_dims(&self, original: &Tensor, dims: &[usize]) -> Tensor {
        let shape: Shape = original
            .shape_exprs()
            .iter()
            .enumerate()
            .map(|(i, e)| {
                if dims.contains(&i) {
                    SizeExpr::constant(1)
                } else {
                    e.clone()
                }
            })
            .collect();
        self.reshape_exprs(shape, &[original])
    }

    /// The sum of all elements (bool and i32 sum to i64, as in PyTorch).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(x.sum().item::<f32>().unwrap(), 10.0);
    /// ```
    #[track_caller]
    pub fn sum(&self) -> Tensor {
        self.reduce(ReduceKind::Sum, (0..self.rank()).collect(), false)
    }

    /// The sum over `dims`, keeping them as size 1 when `keepdim`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(x.sum_dims(&[0], false).to_vec::<f32>().unwrap(), vec![4.0, 6.0]);
    /// assert_eq!(x.sum_dims(&[1], true).concrete_shape().unwrap(), vec![2, 1]);
    /// ```
    #[track_caller]
    pub fn sum_dims<D: DimIndex>(&self, dims: &[D], keepdim: bool) -> Tensor {
        let ds = self.resolve_dims("sum_dims", dims);
        self.reduce(ReduceKind::Sum, ds, keepdim)
    }

    /// The mean of all elements (integers give F32).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(x.mean().item::<f32>().unwrap(), 2.5);
    /// ```
    #[track_caller]
    pub fn mean(&self) -> Tensor {
        let all: Vec<usize> = (0..self.rank()).collect();
        self.mean_over(all, false)
    }

    /// The mean over `dims`. Over a dynamic dimension it divides by the real
    /// size, not the bound.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(x.mean_dims(&[1], false).to_vec::<f32>().unwrap(), vec![1.5, 3.5]);
    /// ```
    #[track_caller]
    pub fn mean_dims<D: DimIndex>(&self, dims: &[D], keepdim: bool) -> Tensor {
        let ds = self.resolve_dims("mean_dims", dims);
        self.mean_over(ds, keepdim)
    }

    #[track_caller]
    fn mean_over(&self, dims: Vec<usize>, keepdim: bool) -> Tensor {
        let x = if self.dtype().is_float() {
            self.clone()
        } else {
            self.to_dtype(DType::F32)
        };
        let shape = x.shape_exprs();
        let count = dims
            .iter()
            .fold(SizeExpr::constant(1), |acc, &d| acc.mul(&shape[d]));
        let s = x.reduce(ReduceKind::Sum, dims, keepdim);
        match count.as_const() {
            Some(c) => s.div_scalar(c as f64),
            None => {
                let n = x.size_value(count).to_dtype(x.dtype());
                s.div(&n)
            }
        }
    }

    /// A size expression of this tensor's shape as an I64 scalar tensor.
    #[track_caller]
    pub(crate) fn size_value(&self, e: SizeExpr) -> Tensor {
        let node = self.node();
        let deps = size_deps_for(std::slice::from_ref(&e), std::slice::from_ref(&node));
        Tensor::try_apply_on(Op::SizeOf(e), &[], deps, self.device())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The product of all elements (bool and i32 multiply in i64, as
    /// PyTorch; an empty tensor gives 1). Over a dynamic dim only the real
    /// elements count. The gradient is PyTorch's, zeros included: each
    /// element gets the product of the others.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![2.0f32, 0.0, 3.0], &[3]).unwrap().requires_grad(true);
    /// let p = x.prod();
    /// p.backward();
    /// assert_eq!(p.item::<f32>().unwrap(), 0.0);
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![0.0, 6.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn prod(&self) -> Tensor {
        let all: Vec<usize> = (0..self.rank()).collect();
        self.prod_dims(&all)
    }

    /// The product over `dims` (sorted, distinct), removed from the shape.
    #[track_caller]
    pub(crate) fn prod_dims(&self, dims: &[usize]) -> Tensor {
        self.reduce(ReduceKind::Prod, dims.to_vec(), false)
    }

    /// True (a Bool scalar) when some element is nonzero (NaN counts as
    /// nonzero); false for an empty tensor. Over a dynamic dim only the
    /// real elements count.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32, 2.0, 0.0], &[3]).unwrap();
    /// assert!(x.any().item::<bool>().unwrap());
    /// assert!(!x.masked_select(&x.eq_scalar(0.0)).any().item::<bool>().unwrap());
    /// ```
    #[track_caller]
    pub fn any(&self) -> Tensor {
        // A count of true elements: the sum ignores a dynamic dim's padding.
        self.to_bool().to_dtype(DType::I64).sum().gt_scalar(0.0)
    }

    /// True (a Bool scalar) when every element is nonzero (NaN counts as
    /// nonzero); true for an empty tensor. Over a dynamic dim only the
    /// real elements count.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1i64, 2, 0], &[3]).unwrap();
    /// assert!(!x.all().item::<bool>().unwrap());
    /// assert!(x.masked_select(&x.gt_scalar(0.0)).all().item::<bool>().unwrap());
    /// ```
    #[track_caller]
    pub fn all(&self) -> Tensor {
        self.to_bool()
            .logical_not()
            .to_dtype(DType::I64)
            .sum()
            .eq_scalar(0.0)
    }

    /// The largest element.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(x.max().item::<f32>().unwrap(), 4.0);
    /// ```
    #[track_caller]
    pub fn max(&self) -> Tensor {
        let all: Vec<usize> = (0..self.rank()).collect();
        self.check_nonempty("max", &all);
        self.reduce(ReduceKind::Max, all, false)
    }

    /// The largest elements over `dims`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(x.max_dims(&[0], false).to_vec::<f32>().unwrap(), vec![3.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn max_dims<D: DimIndex>(&self, dims: &[D], keepdim: bool) -> Tensor {
        let ds = self.resolve_dims("max_dims", dims);
        self.check_nonempty("max_dims", &ds);
        self.reduce(ReduceKind::Max, ds, keepdim)
    }

    /// The smallest element.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(x.min().item::<f32>().unwrap(), 1.0);
    /// ```
    #[track_caller]
    pub fn min(&self) -> Tensor {
        let all: Vec<usize> = (0..self.rank()).collect();
        self.check_nonempty("min", &all);
        self.reduce(ReduceKind::Min, all, false)
    }

    /// The smallest elements over `dims`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(x.min_dims(&[1], false).to_vec::<f32>().unwrap(), vec![1.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn min_dims<D: DimIndex>(&self, dims: &[D], keepdim: bool) -> Tensor {
        let ds = self.resolve_dims("min_dims", dims);
        self.check_nonempty("min_dims", &ds);
        self.reduce(ReduceKind::Min, ds, keepdim)
    }

    /// The index (I64) of the first largest element along `dim`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 5.0, 7.0, 2.0], &[2, 2]).unwrap();
    /// assert_eq!(x.argmax(1).to_vec::<i64>().unwrap(), vec![1, 0]);
    /// ```
    #[track_caller]
    pub fn argmax(&self, dim: impl DimIndex) -> Tensor {
        let d = dim.resolve("argmax", &self.shape_exprs());
        self.check_nonempty("argmax", &[d]);
        Tensor::apply(
            Op::ArgReduce {
                kind: ArgKind::Max,
                dim: d,
            },
            &[self],
            SmallVec::new(),
        )
    }

    /// The index (I64) of the first smallest element along `dim`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 5.0, 7.0, 2.0], &[2, 2]).unwrap();
    /// assert_eq!(x.argmin(1).to_vec::<i64>().unwrap(), vec![0, 1]);
    /// ```
    #[track_caller]
    pub fn argmin(&self, dim: impl DimIndex) -> Tensor {
        let d = dim.resolve("argmin", &self.shape_exprs());
        self.check_nonempty("argmin", &[d]);
        Tensor::apply(
            Op::ArgReduce {
                kind: ArgKind::Min,
                dim: d,
            },
            &[self],
            SmallVec::new(),
        )
    }
}
