//! The collectives on the reference backend: the replicas of one execution
//! run as threads of this process (`placed.rs`), each evaluating the
//! program with `eval::run`, and meet at every collective to exchange
//! their operands, as devices do. Outside a replicated execution a thread
//! is replica 0 of 1, so a collective is the identity.

use super::elementwise::binary;
use super::err;
use super::layout::concat;
use crate::error::Result;
use crate::host::HostArray;
use crate::ir::{BinaryOp, ReduceKind};
use crate::map_host_array;
use ndarray::Axis;
use parking_lot::{Condvar, Mutex};
use std::cell::RefCell;
use std::sync::Arc;

/// Where the replicas of one execution meet.
pub(super) struct Exchange {
    n: usize,
    round: Mutex<Round>,
    arrived: Condvar,
}

/// One collective's meeting: the operands so far, and the last complete
/// meeting's operands (read by the replicas that waited for it).
struct Round {
    generation: u64,
    operands: Vec<Option<HostArray>>,
    count: usize,
    complete: Option<Arc<Vec<HostArray>>>,
    /// A replica that stopped with an error (the others stop waiting).
    failed: Option<usize>,
}

impl Exchange {
    /// A meeting place for `n` replicas.
    pub(super) fn new(n: usize) -> Arc<Exchange> {
        Arc::new(Exchange {
            n,
            round: Mutex::new(Round {
                generation: 0,
                operands: vec![None; n],
                count: 0,
                complete: None,
                failed: None,
            }),
            arrived: Condvar::new(),
        })
    }

    /// Gives replica `r`'s `operand` and waits for every replica's.
    fn meet(&self, r: usize, operand: HostArray) -> Result<Arc<Vec<HostArray>>> {
        let mut s = self.round.lock();
        let gone = |f: usize| {
            err(
                "collective",
                format!("replica {f} stopped with an error before this collective"),
            )
        };
        if let Some(f) = s.failed {
            return Err(gone(f));
        }
        let generation = s.generation;
        s.operands[r] = Some(operand);
        s.count += 1;
        if s.count == self.n {
            let all: Vec<HostArray> = s.operands.iter_mut().filter_map(Option::take).collect();
            let all = Arc::new(all);
            s.complete = Some(all.clone());
            s.count = 0;
            s.generation += 1;
            self.arrived.notify_all();
            return Ok(all);
        }
        while s.generation == generation && s.failed.is_none() {
            self.arrived.wait(&mut s);
        }
        if s.generation == generation {
            return Err(gone(s.failed.unwrap_or(r)));
        }
        // The next meeting cannot complete before this replica joins it,
        // so `complete` is still this one's.
        s.complete
            .clone()
            .ok_or_else(|| err("collective", "a completed meeting without operands"))
    }

    /// The replica that stopped with an error first, if one did.
    pub(super) fn first_failed(&self) -> Option<usize> {
        self.round.lock().failed
    }

    /// Records that replica `r` stopped with an error: replicas waiting at
    /// a collective, or reaching one later, get an error instead.
    pub(super) fn fail(&self, r: usize) {
        let mut s = self.round.lock();
        s.failed.get_or_insert(r);
        self.arrived.notify_all();
    }
}

thread_local! {
    /// The replica this thread evaluates, and its meeting place.
    static REPLICA: RefCell<Option<(Arc<Exchange>, usize)>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread as replica `r` of `exchange`.
pub(super) fn as_replica<R>(exchange: &Arc<Exchange>, r: usize, f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            REPLICA.with(|c| *c.borrow_mut() = None);
        }
    }
    REPLICA.with(|c| *c.borrow_mut() = Some((exchange.clone(), r)));
    let _reset = Reset;
    f()
}

/// Every replica's `x`, in replica order, for a collective over
/// `replicas` replicas.
fn gather(op: &'static str, x: &HostArray, replicas: usize) -> Result<Arc<Vec<HostArray>>> {
    let here = REPLICA.with(|c| c.borrow().clone());
    let n = here.as_ref().map_or(1, |(e, _)| e.n);
    if n != replicas {
        return Err(err(
            op,
            format!("a collective over {replicas} replicas runs on {n}"),
        ));
    }
    match here {
        None => Ok(Arc::new(vec![x.clone()])),
        Some((e, r)) => e.meet(r, x.clone()),
    }
}

/// This thread's replica index.
fn index() -> usize {
    REPLICA.with(|c| c.borrow().as_ref().map_or(0, |(_, r)| *r))
}

/// Replica by replica, the elementwise combination by `kind` (in replica
/// order; NaN propagates through max and min, as in `reduce`).
pub(super) fn all_reduce(kind: ReduceKind, x: &HostArray, replicas: usize) -> Result<HostArray> {
    let all = gather("all_reduce", x, replicas)?;
    let op = match kind {
        ReduceKind::Sum => BinaryOp::Add,
        ReduceKind::Max => BinaryOp::Max,
        ReduceKind::Min => BinaryOp::Min,
        ReduceKind::Prod => BinaryOp::Mul,
    };
    let mut acc = all[0].clone();
    for y in &all[1..] {
        acc = binary(op, &acc, y)?;
    }
    Ok(acc)
}

/// The replicas' `x` concatenated along `dim`.
pub(super) fn all_gather(x: &HostArray, dim: usize, replicas: usize) -> Result<HostArray> {
    let all = gather("all_gather", x, replicas)?;
    let refs: Vec<&HostArray> = all.iter().collect();
    concat(&refs, dim)
}

/// The sum of the replicas' `x`, block `r` of `replicas` along `dim` for
/// replica `r`.
pub(super) fn reduce_scatter(x: &HostArray, dim: usize, replicas: usize) -> Result<HostArray> {
    let sum = all_reduce(ReduceKind::Sum, x, replicas)?;
    let block = sum.shape()[dim] / replicas;
    let start = index() * block;
    Ok(map_host_array!(&sum, a => a
        .slice_axis(Axis(dim), ndarray::Slice::from(start..start + block))
        .to_owned()))
}

/// This thread's replica index as an I64 scalar.
pub(super) fn replica_id() -> HostArray {
    HostArray::I64(ndarray::ArrayD::from_elem(
        ndarray::IxDyn(&[]),
        index() as i64,
    ))
}
