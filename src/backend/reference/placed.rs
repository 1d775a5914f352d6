//! The reference backend's devices in a group (`backend::group`), the
//! oracle of the XLA backend's groups.
//!
//! Replicas run as `n` threads of this process, one evaluation each, which
//! meet at every collective (`collective.rs`). A mesh runs the
//! unpartitioned program once on whole values, put together from their
//! pieces, so a sharded step computes what the same step computes on one
//! device; its results are cut into pieces again where the program
//! constrains them (`Op::Sharding`) and whole on every device elsewhere
//! (XLA may choose other shardings: they read the same).

use super::collective::{as_replica, Exchange};
use super::{array, copy_buffer, err, eval, exec_inputs, exec_outputs, ReferenceBackend};
use crate::backend::group::{self, Member, PlacedOutput, Placement};
use crate::backend::{DeviceBuffer, ExecArgs, ExecOutputs, ExecutableRef, Storage};
use crate::error::{Error, Result};
use crate::host::HostArray;
use crate::ir::program::Program;
use crate::ir::Op;
use std::sync::Arc;

impl Member for ReferenceBackend {
    fn platform(&self) -> String {
        "reference".into()
    }

    fn ordinal(&self) -> usize {
        self.index
    }

    fn upload_size(&self, v: i64) -> Result<DeviceBuffer> {
        Ok(DeviceBuffer::new(Storage::ReferenceSize(v)))
    }

    fn compile_placed(
        _members: &[ReferenceBackend],
        _placement: Placement,
        program: &Program,
    ) -> Result<ExecutableRef> {
        Ok(Arc::new(program.clone()))
    }

    fn execute_placed(
        members: &[ReferenceBackend],
        placement: Placement,
        exe: &ExecutableRef,
        args: &ExecArgs<'_>,
    ) -> Result<Vec<PlacedOutput>> {
        let program = exe
            .downcast_ref::<Program>()
            .ok_or_else(|| err("execute", "an executable from another backend"))?;
        match placement {
            Placement::Mesh(_) => run_whole(program, members.len(), args),
            Placement::One | Placement::Replicas(_) => run_replicas(program, members.len(), args),
        }
    }
}

/// `n` replicas of `program`, one thread each, meeting at collectives.
fn run_replicas(program: &Program, n: usize, args: &ExecArgs<'_>) -> Result<Vec<PlacedOutput>> {
    let inputs = (0..n)
        .map(|r| {
            exec_inputs(
                args,
                |b| b.replica(r),
                |_, b, _| array(b.replica(r)?, "execute").cloned(),
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let exchange = Exchange::new(n);
    let results: Vec<Result<Vec<Option<DeviceBuffer>>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = inputs
            .into_iter()
            .enumerate()
            .map(|(r, (params, vars))| {
                let exchange = &exchange;
                scope.spawn(move || {
                    let out = as_replica(exchange, r, || {
                        let values = eval::run(program, params, &vars)?;
                        exec_outputs(program, &values, &vars)
                    });
                    if out.is_err() {
                        exchange.fail(r);
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(err("execute", "a replica's evaluation panicked")))
            })
            .collect()
    });
    // The error of the replica that failed first, rather than the
    // others' note that it stopped.
    let first = exchange.first_failed();
    let mut per_replica = Vec::with_capacity(n);
    let mut errors: Vec<(usize, Error)> = Vec::new();
    for (r, out) in results.into_iter().enumerate() {
        match out {
            Ok(out) => per_replica.push(out),
            Err(e) => errors.push((r, e)),
        }
    }
    if !errors.is_empty() {
        let at = errors
            .iter()
            .position(|(r, _)| Some(*r) == first)
            .unwrap_or(0);
        return Err(errors.swap_remove(at).1);
    }
    let count = per_replica.first().map_or(0, Vec::len);
    let mut iters: Vec<_> = per_replica.into_iter().map(Vec::into_iter).collect();
    (0..count)
        .map(|_| {
            let parts = iters
                .iter_mut()
                .map(|it| it.next().flatten())
                .collect::<Option<Vec<DeviceBuffer>>>()
                .ok_or_else(|| Error::internal("execute", "a replica returned too few outputs"))?;
            Ok(PlacedOutput {
                parts,
                sharding: None,
            })
        })
        .collect()
}

/// The whole value of parameter `k` of a mesh's program from its buffer:
/// its pieces put together (at the real shape, the parameter's shape
/// with its dynamic `sizes`), or its first device's copy of a whole one.
fn whole(program: &Program, k: usize, b: &DeviceBuffer, sizes: &[i64]) -> Result<HostArray> {
    let Storage::Shards(s) = b.storage() else {
        return array(b.replica(0)?, "execute").cloned();
    };
    let mut dynamic = sizes.iter();
    let dims = program
        .params
        .get(k)
        .map(|&p| &program.nodes[p].shape)
        .ok_or_else(|| err("execute", "more arguments than parameters"))?
        .iter()
        .map(|e| match e.as_const() {
            Some(c) => Ok(c as usize),
            None => dynamic
                .next()
                .map(|&v| v as usize)
                .ok_or_else(|| err("execute", "a dynamic dim with no size")),
        })
        .collect::<Result<Vec<usize>>>()?;
    let pieces = s
        .parts
        .iter()
        .map(|p| array(p, "execute").cloned())
        .collect::<Result<Vec<_>>>()?;
    group::assemble(&pieces, &dims, &s.sharding)
}

/// `program` run once on whole values, its results whole on every
/// device or cut into pieces where the program constrains them.
fn run_whole(program: &Program, n: usize, args: &ExecArgs<'_>) -> Result<Vec<PlacedOutput>> {
    let (params, vars) = exec_inputs(
        args,
        |b| b.replica(0),
        |k, b, sizes| whole(program, k, b, sizes),
    )?;
    let values = eval::run(program, params, &vars)?;
    let out = exec_outputs(program, &values, &vars)?;
    // The sharding each flat output is constrained to, if any.
    let mut constrained = vec![None; out.len()];
    let mut at = 0;
    for &o in &program.outputs {
        let node = &program.nodes[o];
        if let Op::Sharding(s) = &node.op {
            if !s.is_replicated() {
                constrained[at] = Some(s.clone());
            }
        }
        at += ExecOutputs::of_result(&node.shape);
    }
    out.into_iter()
        .zip(constrained)
        .map(|(b, sharding)| {
            let b = b.ok_or_else(|| err("execute", "missing output"))?;
            let parts = match &sharding {
                Some(s) => {
                    let a = array(&b, "execute")?;
                    (0..n)
                        .map(|p| {
                            let piece = group::piece(a, s, p);
                            DeviceBuffer::new(Storage::Reference(Box::new(piece)))
                        })
                        .collect()
                }
                None => (0..n)
                    .map(|_| copy_buffer(&b))
                    .collect::<Result<Vec<_>>>()?,
            };
            Ok(PlacedOutput { parts, sharding })
        })
        .collect()
}
