//! The dimension numbers of the dot primitive (`Op::Dot`, StableHLO's
//! `dot_general` with its batch dims leading).
//!
//! The leading `batch` dims of both operands pair up (equal sizes); each
//! `lhs_contract[i]` pairs with `rhs_contract[i]` (equal sizes) and is
//! summed over; every other dim is free. The result is `[batch.., lhs
//! free.., rhs free..]`, each group in operand order: StableHLO's layout,
//! so the lowering needs no transpose. `torch.matmul` of two batched
//! operands is `batch = r - 2, [r - 1] x [r - 2]`; a batch `[.., m, k]`
//! times a plain matrix `[k, n]` is `batch = 0, [r - 1] x [0]` (no
//! broadcast of the matrix), and its weight gradient contracts every
//! leading dim at once: `[.., m, k] . [.., m, n]` over `[0..r-1] x
//! [0..r-1]` gives `[k, n]`.

use super::node::Node;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::symint::Shape;

/// Dimension numbers of a dot: batch dims `0..batch` of both operands,
/// contracted pairs `(lhs_contract[i], rhs_contract[i])`, each at or after
/// `batch` and listed once.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Dot {
    /// The number of leading batch dims, the same in both operands.
    pub batch: usize,
    /// The lhs dims summed over, in pair order.
    pub lhs_contract: Vec<usize>,
    /// The rhs dims summed over, paired with `lhs_contract`.
    pub rhs_contract: Vec<usize>,
    /// The operand whose padding the product leaves as it is, its result
    /// checked instead (`ir::passes::checked_dot`); `None` until that
    /// lowering pass decides, and always on the reference backend, which
    /// holds no padding.
    pub raw: Option<Side>,
}

/// An operand of a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The left operand.
    Lhs,
    /// The right operand.
    Rhs,
}

/// The dims of an operand of rank `rank` that are neither batch nor
/// contracted, ascending.
fn free(batch: usize, contract: &[usize], rank: usize) -> Vec<usize> {
    (batch..rank).filter(|d| !contract.contains(d)).collect()
}

/// The inverse of the permutation `p` (`inv[p[j]] = j`).
fn inverse(p: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; p.len()];
    for (j, &d) in p.iter().enumerate() {
        inv[d] = j;
    }
    inv
}

impl Dot {
    /// `torch.matmul` of two operands of rank `rank` with equal batch dims:
    /// `[.., m, k] . [.., k, n]`.
    pub(crate) fn matmul(rank: usize) -> Dot {
        Dot {
            batch: rank - 2,
            lhs_contract: vec![rank - 1],
            rhs_contract: vec![rank - 2],
            raw: None,
        }
    }

    /// The lhs free dims for an lhs of rank `rank`.
    pub(crate) fn lhs_free(&self, rank: usize) -> Vec<usize> {
        free(self.batch, &self.lhs_contract, rank)
    }

    /// The rhs free dims for an rhs of rank `rank`.
    pub(crate) fn rhs_free(&self, rank: usize) -> Vec<usize> {
        free(self.batch, &self.rhs_contract, rank)
    }

    /// The printer's description.
    pub(crate) fn describe(&self) -> String {
        let raw = match self.raw {
            None => "",
            Some(Side::Lhs) => " raw=lhs",
            Some(Side::Rhs) => " raw=rhs",
        };
        format!(
            "batch={} contract={:?}x{:?}{raw}",
            self.batch, self.lhs_contract, self.rhs_contract
        )
    }

    /// Shape and dtype inference. Errors name `matmul`, the user-level op
    /// every dot comes from.
    pub(crate) fn infer(&self, a: &Node, b: &Node) -> Result<(DType, Shape)> {
        let name = "matmul";
        let (ra, rb) = (a.shape.len(), b.shape.len());
        let valid = |contract: &[usize], rank: usize| {
            self.batch <= rank
                && contract
                    .iter()
                    .enumerate()
                    .all(|(i, &d)| d >= self.batch && d < rank && !contract[..i].contains(&d))
        };
        if self.lhs_contract.len() != self.rhs_contract.len()
            || !valid(&self.lhs_contract, ra)
            || !valid(&self.rhs_contract, rb)
        {
            return Err(Error::internal(
                name,
                format!("dot dims {} for ranks {ra} and {rb}", self.describe()),
            ));
        }
        super::infer::same_dtype(name, a, b)?;
        if a.dtype == DType::Bool {
            return Err(Error::dtype(
                name,
                "bool operands are not supported; convert with to_dtype first",
            ));
        }
        let pairs = (0..self.batch).map(|d| (d, d)).chain(
            self.lhs_contract
                .iter()
                .copied()
                .zip(self.rhs_contract.iter().copied()),
        );
        for (da, db) in pairs {
            if a.shape[da] != b.shape[db] {
                return Err(super::infer::size_mismatch(
                    name,
                    &a.shape[da],
                    &b.shape[db],
                    &a.shape,
                    &b.shape,
                ));
            }
        }
        let mut out: Shape = a.shape[..self.batch].iter().cloned().collect();
        out.extend(self.lhs_free(ra).into_iter().map(|d| a.shape[d].clone()));
        out.extend(self.rhs_free(rb).into_iter().map(|d| b.shape[d].clone()));
        Ok((a.dtype, out))
    }

    /// The dots giving the operands' gradients from the result's gradient
    /// `g`, for operands of ranks `ra` and `rb`: `(dims of g . rhs, perm)`
    /// and `(dims of lhs . g, perm)`, where `perm` puts the dot's result
    /// in the operand's layout (identity for `torch.matmul`'s dims, and
    /// for a batch times a matrix). Each sums over exactly the dims the
    /// forward dot did not: the lhs gradient contracts `g`'s rhs-free dims
    /// with the rhs's free dims; the rhs gradient contracts the lhs's free
    /// dims with `g`'s lhs-free dims (all leading dims of a batch times a
    /// matrix, in one dot).
    pub(crate) fn grads(&self, ra: usize, rb: usize) -> [(Dot, Vec<usize>); 2] {
        let nb = self.batch;
        let (lf, rf) = (self.lhs_free(ra), self.rhs_free(rb));
        let g_lf: Vec<usize> = (nb..nb + lf.len()).collect();
        let g_rf: Vec<usize> = (nb + lf.len()..nb + lf.len() + rf.len()).collect();
        // The lhs dim each rhs contracted dim pairs with, and back.
        let partner = |from: &[usize], to: &[usize], d: usize| {
            to[from.iter().position(|&x| x == d).expect("a contracted dim")]
        };
        // g . rhs: [batch, lhs free, rhs's contracted dims ascending].
        let dl = Dot {
            batch: nb,
            lhs_contract: g_rf,
            rhs_contract: rf.clone(),
            raw: None,
        };
        let mut src: Vec<usize> = (0..nb).chain(lf.iter().copied()).collect();
        let mut rc = self.rhs_contract.clone();
        rc.sort_unstable();
        src.extend(
            rc.iter()
                .map(|&d| partner(&self.rhs_contract, &self.lhs_contract, d)),
        );
        let pl = inverse(&src);
        // lhs . g: [batch, lhs's contracted dims ascending, rhs free].
        let dr = Dot {
            batch: nb,
            lhs_contract: lf,
            rhs_contract: g_lf,
            raw: None,
        };
        let mut src: Vec<usize> = (0..nb).collect();
        let mut lc = self.lhs_contract.clone();
        lc.sort_unstable();
        src.extend(
            lc.iter()
                .map(|&d| partner(&self.lhs_contract, &self.rhs_contract, d)),
        );
        src.extend(rf);
        let pr = inverse(&src);
        [(dl, pl), (dr, pr)]
    }
}
