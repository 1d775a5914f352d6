//! The reference backend: an ndarray interpreter on exact sizes.
//!
//! It runs every op with no plugin and is the oracle for the XLA path.
//! Dynamic tensors are held at their real size, so padding never exists
//! here; sizes are still returned as "device" values so the runtime treats
//! both backends alike (materialising a size counts the same).

mod collective;
mod conv;
mod elementwise;
mod eval;
mod indexing;
mod kernels;
mod layout;
mod loops;
mod placed;
mod window;

use super::{Backend, DeviceBuffer, ExecArgs, ExecOutputs, ExecutableRef, SizeArg, Storage};
use crate::error::{Error, Result};
use crate::host::HostArray;
use crate::ir::program::{Program, VarSource};
use std::sync::Arc;

/// The embedded interpreter. Several instances stand for several devices
/// (`reference`, `reference:1`, ..): they share the host's memory, and
/// each is a device of its own for tensors and compiled programs.
#[derive(Default)]
pub(crate) struct ReferenceBackend {
    index: usize,
    /// Runs each program after the XLA lowering's passes
    /// (`ir::passes::LOWERING`), for the tests that check the passes keep
    /// every value.
    passes: bool,
}

impl ReferenceBackend {
    /// Reference device `index` (0 is `Device::reference()`).
    pub(crate) fn device(index: usize) -> ReferenceBackend {
        ReferenceBackend {
            index,
            passes: false,
        }
    }

    /// A reference device that runs each program after the lowering
    /// passes (`debug::reference_after_passes`).
    pub(crate) fn after_passes() -> ReferenceBackend {
        ReferenceBackend {
            index: 0,
            passes: true,
        }
    }
}

/// Each parameter's array and the sizes of its dynamic dimensions.
type Params = Vec<(HostArray, Vec<i64>)>;

/// The parameters of one execution as arrays of their real shapes and
/// their dynamic sizes, and the size arguments: `pick` chooses the part
/// of a size buffer to read (a replica's, in a group), `value` makes
/// parameter `k`'s array from its buffer and its dynamic sizes.
fn exec_inputs<'a>(
    args: &ExecArgs<'a>,
    pick: impl Fn(&'a DeviceBuffer) -> Result<&'a DeviceBuffer>,
    value: impl Fn(usize, &'a DeviceBuffer, &[i64]) -> Result<HostArray>,
) -> Result<(Params, Vec<i64>)> {
    let size = |s: &SizeArg<'a>| -> Result<i64> {
        match s {
            SizeArg::Host(v) => Ok(*v),
            SizeArg::Device(b) => read_size(&SizeArg::Device(pick(b)?)),
        }
    };
    let params = args
        .params
        .iter()
        .enumerate()
        .map(|(k, (b, sizes))| {
            let s = sizes.iter().map(size).collect::<Result<Vec<_>>>()?;
            Ok((value(k, b, &s)?, s))
        })
        .collect::<Result<_>>()?;
    let vars = args.vars.iter().map(size).collect::<Result<Vec<_>>>()?;
    Ok((params, vars))
}

/// The outputs of an execution of `program` that computed `values` (see
/// `ExecOutputs` for their order).
fn exec_outputs(
    program: &Program,
    values: &[HostArray],
    var_args: &[i64],
) -> Result<Vec<Option<DeviceBuffer>>> {
    let mut out = Vec::with_capacity(program.outputs.len() + program.size_outputs.len());
    for &o in &program.outputs {
        let a = values
            .get(o)
            .ok_or_else(|| err("execute", "missing output"))?;
        out.push(Some(DeviceBuffer::new(Storage::Reference(Box::new(
            a.clone(),
        )))));
        for (d, e) in program.nodes[o].shape.iter().enumerate() {
            if e.as_const().is_none() {
                out.push(Some(DeviceBuffer::new(Storage::ReferenceSize(
                    a.shape()[d] as i64,
                ))));
            }
        }
    }
    for &k in &program.size_outputs {
        let v = match &program.vars[k].source {
            VarSource::Dim { node, dim } => values[*node].shape()[*dim] as i64,
            VarSource::Arg(a) => var_args[*a],
        };
        out.push(Some(DeviceBuffer::new(Storage::ReferenceSize(v))));
    }
    if program.nodes.iter().any(|n| !n.op.checks().is_empty()) {
        // A failed check stopped the evaluation with its error.
        out.push(Some(DeviceBuffer::new(Storage::ReferenceSize(-1))));
    }
    Ok(out)
}

/// A copy of a reference buffer (or of a replicated one's first
/// replica); a split value's pieces are put together by the caller.
fn copy_buffer(b: &DeviceBuffer) -> Result<DeviceBuffer> {
    Ok(match b.storage() {
        Storage::Reference(a) => DeviceBuffer::new(Storage::Reference(a.clone())),
        Storage::ReferenceSize(v) => DeviceBuffer::new(Storage::ReferenceSize(*v)),
        Storage::Replicas(_) => copy_buffer(b.replica(0)?)?,
        Storage::Shards(_) => return Err(err("copy", "the pieces of a split value")),
        Storage::Pjrt(_) | Storage::PjrtPending(_) => {
            return Err(err("copy", "a buffer from another backend"))
        }
    })
}

/// True when `b` is a reference backend (one device or a group).
fn is_reference(b: &dyn Backend) -> bool {
    b.as_any().is_some_and(|a| {
        a.downcast_ref::<ReferenceBackend>().is_some()
            || a.downcast_ref::<super::group::Group<ReferenceBackend>>()
                .is_some()
    })
}

pub(crate) fn err(op: &'static str, message: impl Into<String>) -> Error {
    Error::Backend {
        backend: "reference".into(),
        op,
        message: message.into(),
    }
}

fn read_size(s: &SizeArg) -> Result<i64> {
    match s {
        SizeArg::Host(v) => Ok(*v),
        SizeArg::Device(b) => match b.storage() {
            Storage::ReferenceSize(v) => Ok(*v),
            _ => Err(err("execute", "a size from another backend")),
        },
    }
}

fn array<'a>(b: &'a DeviceBuffer, op: &'static str) -> Result<&'a HostArray> {
    match b.storage() {
        Storage::Reference(a) => Ok(a),
        _ => Err(err(op, "a buffer from another backend")),
    }
}

impl Backend for ReferenceBackend {
    fn name(&self) -> String {
        match (self.index, self.passes) {
            (_, true) => "reference+passes".into(),
            (0, false) => "reference".into(),
            (k, false) => format!("reference:{k}"),
        }
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn copy_from(&self, from: &dyn Backend, buffer: &DeviceBuffer) -> Result<Option<DeviceBuffer>> {
        // A split value is put together on the host.
        if !is_reference(from) || buffer.sharding().is_some() {
            return Ok(None);
        }
        copy_buffer(buffer).map(Some)
    }

    fn compile(&self, program: &Program) -> Result<ExecutableRef> {
        // The plan is the program itself; nothing to prepare.
        Ok(Arc::new(match self.passes {
            true => crate::ir::passes::lowering(program).into_owned(),
            false => program.clone(),
        }))
    }

    fn synchronize(&self) -> Result<()> {
        // `execute` runs to completion before it returns.
        Ok(())
    }

    fn execute(&self, exe: &ExecutableRef, args: &ExecArgs<'_>) -> Result<ExecOutputs> {
        let program = exe
            .downcast_ref::<Program>()
            .ok_or_else(|| err("execute", "an executable from another backend"))?;
        let (params, var_args) = exec_inputs(args, Ok, |_, b, _| array(b, "execute").cloned())?;
        let values = eval::run(program, params, &var_args)?;
        let out = exec_outputs(program, &values, &var_args)?;
        Ok(ExecOutputs::new(out))
    }

    fn check_status(&self, _exe: &ExecutableRef, status: &DeviceBuffer) -> Result<()> {
        match read_size(&SizeArg::Device(status))? {
            -1 => Ok(()),
            s => Err(err("execute", format!("a check status of {s}"))),
        }
    }

    fn upload(&self, host: &HostArray, _bound: &[usize]) -> Result<DeviceBuffer> {
        Ok(DeviceBuffer::new(Storage::Reference(Box::new(
            host.clone(),
        ))))
    }

    fn download(&self, buffer: &DeviceBuffer, shape: &[usize]) -> Result<HostArray> {
        let a = array(buffer, "download")?;
        if a.shape() != shape {
            return Err(err(
                "download",
                format!("buffer shape {:?} differs from {:?}", a.shape(), shape),
            ));
        }
        Ok(a.clone())
    }

    fn read_size(&self, buffer: &DeviceBuffer) -> Result<i64> {
        read_size(&SizeArg::Device(buffer))
    }
}
