//! Matrix products rewritten into the forms XLA's CPU backend runs in its
//! fast kernels, with no transposed copy of an operand.
//!
//! - **Swapped**: a transpose that swaps the lhs and rhs free dims of a
//!   dot without batch dims that nothing else uses (a weight's gradient,
//!   `(x^T g)^T`) becomes the dot that gives the transposed result
//!   directly (`g^T x`, the form JAX emits), the old dot dropped. The
//!   transposed dot became a generic loop with a transposed copy (the
//!   transformer's weight gradients). The swapped dot reads the same
//!   operands with the same contraction, so its padding needs are the
//!   dot's, and its result's dims (rhs free, then lhs free) carry the
//!   transpose's sizes.
//! - **Folded**: a dot with batch dims whose rhs is a transpose of the
//!   non-batch dims (attention's `q . k^T`) reads the transpose's operand,
//!   its contracted dims renamed through the permutation and its free
//!   dims in the same order. XLA's CPU backend copies the transposed
//!   operand otherwise (a whole key cache, every layer, every step of a
//!   decode). The transpose stays for its other readers (if none, XLA
//!   drops it).
//! - **Turned around**: a few rows times a transposed 2-D matrix (`h @
//!   W^T`: a decode step's tied head, `Linear` on one row), both static,
//!   becomes `dot_general(W, h)` contracting both last dims, transposed
//!   back. XLA's CPU backend copies `W` into its transpose for it on every
//!   run (28 ms against 5 ms for GPT-2's `[1, 768] . [768, 50257]`); so it
//!   runs in its matrix-vector kernel on `W` as it is.
//!
//! Each form is decided on the pass's input, once: a dot a form made is
//! not rewritten again (a swapped dot whose operand is a transposed matrix
//! stays swapped).

use super::Rewrite;
use crate::ir::program::{PNode, Program, VarSource};
use crate::ir::{Dot, Op};

/// A transpose rewritten as the dot it transposes with operands swapped:
/// `lhs . rhs` contracted by `form`; `dot` is the node it replaces.
#[derive(Clone, Debug)]
struct Swapped {
    dot: usize,
    lhs: usize,
    rhs: usize,
    form: Dot,
}

/// The swapped transposes of `program` (see the module docs), by node.
fn swapped_dots(program: &Program, pinned: &[usize]) -> Vec<Option<Swapped>> {
    let mut uses = super::uses(program);
    // Nodes read from outside (a loop's saved products) or whose sizes
    // are read stay.
    for &p in pinned {
        uses[p] += 1;
    }
    for v in &program.vars {
        if let VarSource::Dim { node, .. } = v.source {
            uses[node] += 1;
        }
    }
    program
        .nodes
        .iter()
        .map(|n| {
            let Op::Transpose { perm } = &n.op else {
                return None;
            };
            let j = n.inputs[0];
            let d = &program.nodes[j];
            let Op::Dot(dot) = &d.op else {
                return None;
            };
            let (a, b) = (d.inputs[0], d.inputs[1]);
            let fa = dot.lhs_free(program.nodes[a].shape.len()).len();
            let fb = dot.rhs_free(program.nodes[b].shape.len()).len();
            let swap: Vec<usize> = (fa..fa + fb).chain(0..fa).collect();
            (dot.batch == 0 && uses[j] == 1 && *perm == swap).then(|| Swapped {
                dot: j,
                lhs: b,
                rhs: a,
                form: Dot {
                    batch: 0,
                    lhs_contract: dot.rhs_contract.clone(),
                    raw: None,
                    rhs_contract: dot.lhs_contract.clone(),
                },
            })
        })
        .collect()
}

/// Node `j`, or the node it zeroes the padding of (`shared_fill`).
fn through_fill(program: &Program, j: usize) -> usize {
    match program.nodes[j].op {
        Op::FillPadding { .. } => program.nodes[j].inputs[0],
        _ => j,
    }
}

/// For dot node `i` with batch dims whose rhs is a transpose of the
/// non-batch dims, the transpose and the same dot on its operand (see the
/// module docs). A fill of the transpose's padding does not reach the
/// folded dot, which reads the operand.
fn folded_rhs_transpose(program: &Program, i: usize) -> Option<(usize, Dot)> {
    let n = &program.nodes[i];
    let Op::Dot(dot) = &n.op else { return None };
    let t = through_fill(program, n.inputs[1]);
    let Op::Transpose { perm } = &program.nodes[t].op else {
        return None;
    };
    if dot.batch == 0 || (0..dot.batch).any(|d| perm[d] != d) {
        return None;
    }
    let free: Vec<usize> = dot.rhs_free(perm.len()).iter().map(|&d| perm[d]).collect();
    if free.windows(2).any(|w| w[0] > w[1]) {
        return None;
    }
    let folded = Dot {
        batch: dot.batch,
        lhs_contract: dot.lhs_contract.clone(),
        rhs_contract: dot.rhs_contract.iter().map(|&d| perm[d]).collect(),
        raw: None,
    };
    Some((t, folded))
}

/// True when dot node `i` is a few rows times a transposed 2-D matrix,
/// both static (see the module docs).
fn vector_times_transposed(program: &Program, i: usize) -> bool {
    let n = &program.nodes[i];
    let Op::Dot(dot) = &n.op else { return false };
    let (a, b) = (&program.nodes[n.inputs[0]], &program.nodes[n.inputs[1]]);
    let is_static = |x: &PNode| x.shape.iter().all(|e| e.as_const().is_some());
    let elements = |x: &PNode, dims: Vec<usize>| -> i64 {
        dims.iter()
            .map(|&d| x.shape[d].as_const().unwrap_or(0))
            .product()
    };
    let transposed = matches!(&b.op, Op::Transpose { perm } if perm[..] == [1, 0]);
    dot.batch == 0
        && transposed
        && is_static(a)
        && is_static(b)
        && elements(a, dot.lhs_free(a.shape.len())) <= 16
        && elements(b, dot.rhs_free(b.shape.len())) >= 256
}

/// The pass (see the module docs).
pub(crate) fn run(program: &Program, pinned: &mut [usize]) -> Option<Program> {
    let swapped = swapped_dots(program, pinned);
    // Per node: whether it is a dot a swapped transpose replaces.
    let mut dropped = vec![false; program.nodes.len()];
    for s in swapped.iter().flatten() {
        dropped[s.dot] = true;
    }
    // A transpose swapped into a dot is no transpose to fold or turn.
    let plain_transpose = |t: usize| swapped[t].is_none();
    let folded: Vec<Option<(usize, Dot)>> = (0..program.nodes.len())
        .map(|i| {
            folded_rhs_transpose(program, i).filter(|(t, _)| !dropped[i] && plain_transpose(*t))
        })
        .collect();
    let turned: Vec<bool> = (0..program.nodes.len())
        .map(|i| {
            !dropped[i]
                && vector_times_transposed(program, i)
                && plain_transpose(program.nodes[i].inputs[1])
        })
        .collect();
    if !dropped.contains(&true) && folded.iter().all(Option::is_none) && !turned.contains(&true) {
        return None;
    }
    let mut r = Rewrite::new(program);
    for (i, n) in program.nodes.iter().enumerate() {
        if dropped[i] {
            continue;
        }
        let Op::Dot(dot) = &n.op else {
            if let Some(s) = &swapped[i] {
                let k = r.push(PNode {
                    op: Op::Dot(s.form.clone()),
                    inputs: smallvec::smallvec![r.value(s.lhs), r.value(s.rhs)],
                    dtype: n.dtype,
                    shape: n.shape.clone(),
                });
                r.place(i, k);
            } else {
                r.copy(i);
            }
            continue;
        };
        if let Some((t, form)) = &folded[i] {
            let k = r.push(PNode {
                op: Op::Dot(form.clone()),
                inputs: smallvec::smallvec![
                    r.value(n.inputs[0]),
                    r.value(program.nodes[*t].inputs[0])
                ],
                dtype: n.dtype,
                shape: n.shape.clone(),
            });
            r.place(i, k);
        } else if turned[i] {
            let k = turn_around(&mut r, program, i, dot);
            r.place(i, k);
        } else {
            r.copy(i);
        }
    }
    Some(r.finish(pinned))
}

/// Dot node `i` (`h . w^T`, `w` a 2-D matrix) as `w . h` contracting
/// `w`'s last dim, its result transposed back; the transpose's index.
fn turn_around(r: &mut Rewrite, program: &Program, i: usize, dot: &Dot) -> usize {
    let n = &program.nodes[i];
    let (a, t) = (n.inputs[0], n.inputs[1]);
    let w = program.nodes[t].inputs[0];
    // `w^T`'s contracted dim 0 is `w`'s dim 1, its free dim 1 `w`'s 0.
    let form = Dot {
        batch: 0,
        lhs_contract: dot.rhs_contract.iter().map(|&d| 1 - d).collect(),
        raw: None,
        rhs_contract: dot.lhs_contract.clone(),
    };
    let fa = dot.lhs_free(program.nodes[a].shape.len()).len();
    let fb = 1;
    let shape = n.shape[fa..]
        .iter()
        .chain(&n.shape[..fa])
        .cloned()
        .collect();
    let d = r.push(PNode {
        op: Op::Dot(form),
        inputs: smallvec::smallvec![r.value(w), r.value(a)],
        dtype: n.dtype,
        shape,
    });
    let perm: Vec<usize> = (fb..fb + fa).chain(0..fb).collect();
    r.push(PNode {
        op: Op::Transpose { perm },
        inputs: smallvec::smallvec![d],
        dtype: n.dtype,
        shape: n.shape.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{before_after, program_of};
    use crate::{Device, Tensor};

    fn run(p: &crate::ir::program::Program) -> Option<crate::ir::program::Program> {
        super::run(p, &mut Vec::new())
    }

    fn matrix(rows: usize, cols: usize) -> Tensor {
        let v: Vec<f32> = (0..rows * cols).map(|k| (k % 7) as f32 - 3.0).collect();
        Tensor::from_vec(v, &[rows, cols]).unwrap()
    }

    /// `(x^T g)^T` is `g^T x`: one dot with swapped operands, no transpose
    /// of its result.
    #[test]
    fn a_transposed_product_is_swapped() {
        Device::reference().scoped(|| {
            let (x, g) = (matrix(4, 3), matrix(4, 2));
            let y = x.transpose(0, 1).matmul(&g).transpose(0, 1);
            let p = program_of(&[&y]);
            let text = before_after(&p, &run);
            insta::assert_snapshot!("dot_forms_swapped", text);
        });
    }

    /// `q . k^T` with a batch dim reads `k` itself.
    #[test]
    fn a_transposed_batched_rhs_is_folded() {
        Device::reference().scoped(|| {
            let q = Tensor::from_vec((0..12).map(|k| k as f32).collect(), &[2, 3, 2]).unwrap();
            let k = Tensor::from_vec((0..8).map(|k| k as f32).collect(), &[2, 2, 2]).unwrap();
            let s = q.matmul(&k.transpose(1, 2));
            let p = program_of(&[&s]);
            let text = before_after(&p, &run);
            insta::assert_snapshot!("dot_forms_folded", text);
        });
    }

    /// One row times a wide transposed matrix: `w . h`, transposed back.
    #[test]
    fn a_row_times_a_transposed_matrix_is_turned_around() {
        Device::reference().scoped(|| {
            let (h, w) = (matrix(1, 4), matrix(300, 4));
            let y = h.matmul(&w.transpose(0, 1));
            let p = program_of(&[&y]);
            let text = before_after(&p, &run);
            insta::assert_snapshot!("dot_forms_turned", text);
        });
    }

    /// A transposed product whose dot is read elsewhere stays as it is.
    #[test]
    fn a_dot_read_twice_is_not_swapped() {
        Device::reference().scoped(|| {
            let (x, g) = (matrix(4, 3), matrix(4, 2));
            let d = x.transpose(0, 1).matmul(&g);
            let y = d.transpose(0, 1);
            let p = program_of(&[&y, &d]);
            assert_eq!(run(&p), None);
        });
    }
}
