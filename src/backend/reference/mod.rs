//! The reference backend: an ndarray interpreter on exact sizes.
//!
//! It runs every op with no plugin and is the oracle for the XLA path.
//! Dynamic tensors are held at their real size, so padding never exists
//! here; sizes are still returned as "device" values so the runtime treats
//! both backends alike (materialising a size counts the same).

mod conv;
mod eval;
mod kernels;
mod loops;
mod window;

use super::{Backend, DeviceBuffer, ExecArgs, ExecOutputs, ExecutableRef, SizeArg, Storage};
use crate::host::HostArray;
use crate::ir::program::{Program, VarSource};
use crate::{Error, Result};
use std::sync::Arc;

/// The embedded interpreter.
#[derive(Default)]
pub(crate) struct ReferenceBackend;

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
        "reference".into()
    }

    fn compile(&self, program: &Program) -> Result<ExecutableRef> {
        // The plan is the program itself; nothing to prepare.
        Ok(Arc::new(program.clone()))
    }

    fn synchronize(&self) -> Result<()> {
        // `execute` runs to completion before it returns.
        Ok(())
    }

    fn execute(&self, exe: &ExecutableRef, args: &ExecArgs<'_>) -> Result<ExecOutputs> {
        let program = exe
            .downcast_ref::<Program>()
            .ok_or_else(|| err("execute", "an executable from another backend"))?;
        let params: Vec<(HostArray, Vec<i64>)> = args
            .params
            .iter()
            .map(|(b, sizes)| {
                let a = array(b, "execute")?;
                let s = sizes.iter().map(read_size).collect::<Result<Vec<_>>>()?;
                Ok((a.clone(), s))
            })
            .collect::<Result<_>>()?;
        let var_args = args
            .vars
            .iter()
            .map(read_size)
            .collect::<Result<Vec<_>>>()?;
        let values = eval::run(program, params, &var_args)?;
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
            // A failed check stopped the evaluation above with its error.
            out.push(Some(DeviceBuffer::new(Storage::ReferenceSize(-1))));
        }
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
