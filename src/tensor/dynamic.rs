//! Ops whose result size depends on data, and the bridges between dynamic
//! and static tensors.

use super::dim::{DimIndex, ResolveDim};
use super::Tensor;
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{Lit, Node, Op};
use crate::runtime::device_data::DeviceData;
use crate::runtime::{auto_dynamic, size_values};
use crate::symint::{SizeExpr, VarRef};
use smallvec::SmallVec;
use std::sync::Arc;

/// The op name of automatic dynamic dims (`runtime::auto_dynamic`).
const AUTOMATIC: &str = "automatic dynamic";

/// The variable of a dim automatic dynamic dims made dynamic, with its
/// value.
fn automatic_var(e: &SizeExpr) -> Option<(VarRef, i64)> {
    let v = e.as_var()?;
    if !auto_dynamic::is_auto(v.id()) {
        return None;
    }
    let value = size_values::cell(v)?.known()?;
    Some((v.clone(), value))
}

/// True when a dim of `n` was made dynamic by automatic dynamic dims.
pub(super) fn has_automatic(n: &Node) -> bool {
    n.shape.iter().any(|e| automatic_var(e).is_some())
}

/// `n` with each dim automatic dynamic dims made dynamic back at its
/// value, checked when the program runs: the program is specialized to
/// that size, as it was before the dim became dynamic.
pub(super) fn specialized(n: &Arc<Node>) -> crate::Result<Arc<Node>> {
    let mut shape = n.shape.clone();
    let mut checks = Vec::new();
    for e in shape.iter_mut() {
        if let Some((v, value)) = automatic_var(e) {
            let fixed = SizeExpr::constant(value);
            checks.push(crate::ir::check::SizeCheck::equal(
                AUTOMATIC,
                &SizeExpr::var(v),
                &fixed,
            ));
            *e = fixed;
        }
    }
    super::guard::guard_node(n, shape, checks, &[])
}

impl Tensor {
    /// Coordinates of the nonzero elements, row-major: I64 of shape
    /// `[<=numel, rank]`. Starts a dynamic zone.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let b = a.nonzero();
    /// assert_eq!(b.size(0).to_string(), "<=3");
    /// assert_eq!(b.to_vec::<i64>().unwrap(), vec![0, 2]);
    /// ```
    #[track_caller]
    pub fn nonzero(&self) -> Tensor {
        Tensor::apply(Op::Nonzero, &[self], SmallVec::new())
    }

    /// The elements where `mask` (broadcast with `self`) is true, in
    /// row-major order: shape `[<=numel]`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let picked = x.masked_select(&x.gt_scalar(0.5));
    /// assert_eq!(picked.shape_string(), "[<=3]");
    /// assert_eq!(picked.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn masked_select(&self, mask: &Tensor) -> Tensor {
        let m = if mask.dtype() == DType::Bool {
            mask.clone()
        } else {
            mask.ne_scalar(0.0)
        };
        let shape = super::broadcast::broadcast_shapes(
            "masked_select",
            &self.shape_exprs(),
            &m.shape_exprs(),
        );
        let x = self.broadcast_for("masked_select", &shape, &[&m]);
        let m = m.broadcast_for("masked_select", &shape, &[self]);
        Tensor::apply(Op::MaskedSelect, &[&x, &m], SmallVec::new())
    }

    /// The sorted distinct values of all elements: shape `[<=numel]`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![3i64, 1, 3, 2], &[4]).unwrap();
    /// assert_eq!(x.unique().to_vec::<i64>().unwrap(), vec![1, 2, 3]);
    /// ```
    #[track_caller]
    pub fn unique(&self) -> Tensor {
        let flat = if self.rank() == 1 {
            self.clone()
        } else {
            self.flatten()
        };
        Tensor::apply(Op::Unique, &[&flat], SmallVec::new())
    }

    /// The sorted distinct values and how often each occurs (I64), both of
    /// the same dynamic size.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![3i64, 1, 3], &[3]).unwrap();
    /// let (values, counts) = x.unique_with_counts();
    /// assert_eq!(values.to_vec::<i64>().unwrap(), vec![1, 3]);
    /// assert_eq!(counts.to_vec::<i64>().unwrap(), vec![1, 2]);
    /// ```
    #[track_caller]
    pub fn unique_with_counts(&self) -> (Tensor, Tensor) {
        let flat = if self.rank() == 1 {
            self.clone()
        } else {
            self.flatten()
        };
        let u = Tensor::apply(Op::Unique, &[&flat], SmallVec::new());
        let c = Tensor::apply(Op::UniqueCounts, &[&flat, &u], SmallVec::new());
        (u, c)
    }

    /// Declares dimension `dim` dynamic with `upper_bound`, for inputs whose
    /// size varies between steps: programs are compiled for the bound, so a
    /// loop over varying lengths compiles once.
    ///
    /// Panics when the length exceeds the bound (never a silent truncation).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32; 3], &[3]).unwrap().mark_dynamic(0, 8);
    /// assert_eq!(x.size(0).to_string(), "<=8");
    /// assert_eq!(x.sum().item::<f32>().unwrap(), 3.0);
    /// ```
    #[track_caller]
    pub fn mark_dynamic(&self, dim: impl DimIndex, upper_bound: usize) -> Tensor {
        match self.try_mark_dynamic(dim, upper_bound) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        }
    }

    /// [`mark_dynamic`](Tensor::mark_dynamic) returning an error instead of
    /// panicking.
    ///
    /// ```
    /// let x = lazyxla::Tensor::ones(&[5, 2], lazyxla::DType::F32);
    /// assert_eq!(x.try_mark_dynamic(0, 8).unwrap().shape_string(), "[<=8, 2]");
    /// assert!(x.try_mark_dynamic(0, 4).is_err()); // 5 rows do not fit 4
    /// ```
    #[track_caller]
    pub fn try_mark_dynamic(
        &self,
        dim: impl DimIndex,
        upper_bound: usize,
    ) -> crate::Result<Tensor> {
        self.mark_dynamic_with("mark_dynamic", dim, upper_bound, None)
    }

    /// Declares dimension `dim` dynamic with the same size as dimension
    /// `other_dim` of the dynamic tensor `other` (for example the targets
    /// of a batch whose inputs were marked with `mark_dynamic`), so the two
    /// can meet in elementwise ops. Panics when the lengths differ.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32; 6], &[3, 2]).unwrap().mark_dynamic(0, 8);
    /// let y = Tensor::from_vec(vec![2.0f32; 3], &[3, 1]).unwrap().mark_dynamic_as(0, &x, 0);
    /// assert_eq!((&x * &y).sum().item::<f32>().unwrap(), 12.0);
    /// ```
    #[track_caller]
    pub fn mark_dynamic_as(
        &self,
        dim: impl DimIndex,
        other: &Tensor,
        other_dim: impl DimIndex,
    ) -> Tensor {
        let theirs = other.shape_exprs();
        let od = other_dim.resolve("mark_dynamic_as", &theirs);
        let Some(var) = theirs[od].as_var().cloned() else {
            panic!(
                "mark_dynamic_as: dimension {od} of {} is not a dynamic input dimension; mark it with mark_dynamic first",
                other.shape_string()
            );
        };
        match self.mark_dynamic_with("mark_dynamic_as", dim, var.0.hi as usize, Some(var)) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        }
    }

    #[track_caller]
    fn mark_dynamic_with(
        &self,
        op: &'static str,
        dim: impl DimIndex,
        upper_bound: usize,
        same_as: Option<VarRef>,
    ) -> crate::Result<Tensor> {
        let shape = self.shape_exprs();
        let d = dim.resolve("mark_dynamic", &shape);
        let Some(len) = shape[d].as_const() else {
            return Err(Error::DynamicUnsupported {
                op,
                dim: d,
                shape: self.shape_string(),
            });
        };
        if len as usize > upper_bound {
            return Err(Error::BoundExceeded {
                op: "mark_dynamic",
                dim: d,
                len: len as usize,
                bound: upper_bound,
            });
        }
        let host = match crate::runtime::device_data::of(&self.node()).and_then(|d| d.host_copy()) {
            Some(h) => h,
            None => Arc::new(self.to_host()?),
        };
        let var = match same_as {
            Some(v) => {
                let theirs = size_values::cell(&v).and_then(|c| c.known());
                if theirs != Some(len) {
                    return Err(Error::invalid(
                        "mark_dynamic_as",
                        format!("dimension {d} of {} has length {len}, the other tensor's has {theirs:?}; they must be equal", self.shape_string()),
                    ));
                }
                v
            }
            None => {
                let hi = i64::try_from(upper_bound).unwrap_or(i64::MAX);
                match op {
                    AUTOMATIC => {
                        let v = size_values::known_var_with(0, hi, len, Some(auto_dynamic::forget));
                        auto_dynamic::mark(v.id());
                        v
                    }
                    _ => size_values::known_var(0, hi, len),
                }
            }
        };
        let cell = size_values::cell(&var)
            .ok_or_else(|| Error::internal(op, "a known size without its value"))?;
        let mut new_shape = shape.clone();
        new_shape[d] = SizeExpr::var(var);
        crate::ir::infer::check_representable(op, self.dtype(), &new_shape)?;
        let mut bound: Vec<usize> = host.shape().to_vec();
        bound[d] = upper_bound;
        let mut sizes: crate::runtime::device_data::SizeCells =
            smallvec::smallvec![None; shape.len()];
        // Other dims marked dynamic before keep their bounds and sizes.
        for (j, e) in shape.iter().enumerate() {
            if j == d || e.as_const().is_some() {
                continue;
            }
            let cell = e.as_var().and_then(size_values::cell).ok_or_else(|| {
                Error::DynamicUnsupported {
                    op,
                    dim: j,
                    shape: self.shape_string(),
                }
            })?;
            bound[j] = e.hi() as usize;
            sizes[j] = Some(cell);
        }
        // A bound of 0 leaves the dimension static (a variable whose
        // bounds meet is a constant), and a static dimension has no size.
        if new_shape[d].as_const().is_none() {
            sizes[d] = Some(cell);
        }
        let data = DeviceData::from_host(self.device().clone(), host, bound, sizes);
        Ok(Tensor::data(self.device(), self.dtype(), new_shape, data))
    }

    /// This host data with the dims automatic dynamic dims chose for data
    /// made at `at` made dynamic (`runtime::auto_dynamic`).
    pub(crate) fn automatic_dynamic(self, at: &'static std::panic::Location<'static>) -> Tensor {
        let Some(dims) = auto_dynamic::dims_at(at) else {
            return self;
        };
        let mut t = self;
        for d in dims {
            let Some(len) = t.shape_exprs().get(d).and_then(SizeExpr::as_const) else {
                continue;
            };
            let bound = auto_dynamic::bound_for(len as usize);
            if let Ok(dynamic) = t.mark_dynamic_with(AUTOMATIC, d, bound, None) {
                t = dynamic;
            }
        }
        t
    }

    /// This tensor with the dims automatic dynamic dims made dynamic back
    /// at their values (checked when the program runs), for an op that
    /// needs them static; `None` when it has no such dim.
    #[track_caller]
    pub(crate) fn with_automatic_static(&self) -> Option<Tensor> {
        if !auto_dynamic::any() {
            return None;
        }
        let n = self.input_node();
        if !has_automatic(&n) {
            return None;
        }
        let node = specialized(&n).unwrap_or_else(|e| panic!("{e}"));
        Some(Tensor::from_node(node, self.device()))
    }

    /// A static tensor of the bound shape: the real elements, then `fill`.
    /// The way out of a dynamic zone for ops that need static shapes.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let picked = x.masked_select(&x.gt_scalar(0.5)); // [<=3]
    /// let padded = picked.pad_to_bound(-1.0);
    /// assert!(!padded.is_dynamic());
    /// assert_eq!(padded.to_vec::<f32>().unwrap(), vec![1.0, 2.0, -1.0]);
    /// ```
    #[track_caller]
    pub fn pad_to_bound(&self, fill: f64) -> Tensor {
        if !self.is_dynamic() {
            return self.clone();
        }
        Tensor::apply(Op::PadToBound { fill: Lit(fill) }, &[self], SmallVec::new())
    }
}
