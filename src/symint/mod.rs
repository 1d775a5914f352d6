//! Sizes without values: canonical size expressions over size variables,
//! with correct lower and upper bounds. The user-facing `SymInt` wraps an
//! expression with the graph that computes it (`tensor::sym_int`); the
//! values of computed variables are runtime state (`runtime::size_values`).

pub(crate) mod expr;
pub(crate) mod var;

pub(crate) use expr::SizeExpr;

/// A shape: one size expression per dimension, inline up to rank 4 (most
/// tensors), so building or cloning a node's shape allocates nothing.
pub(crate) type Shape = smallvec::SmallVec<[SizeExpr; 4]>;
pub(crate) use var::VarRef;

#[cfg(test)]
mod tests;
