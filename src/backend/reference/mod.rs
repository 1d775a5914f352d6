//! The reference backend: an ndarray interpreter on exact sizes.
//!
//! It runs every op with no plugin and is the oracle for the XLA path.
//! Dynamic tensors are held at their real size, so padding never exists
//! here; sizes are still returned as "device" values so the runtime treats
//! both backends alike (materialising a size counts the same).

mod eval;
mod kernels;

use super::{Backend, BufferRef, ExecArgs, ExecOutputs, ExecutableRef, SizeArg};
use crate::host::HostArray;
use crate::runtime::program::{Program, VarSource};
use crate::{Error, Result};
use std::sync::Arc;

/// A reference "device" buffer: the exact host array.
pub(crate) struct RefBuffer(pub HostArray);

/// A reference "device" size.
pub(crate) struct RefSize(pub i64);

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
        SizeArg::Device(b) => b
            .downcast_ref::<RefSize>()
            .map(|s| s.0)
            .ok_or_else(|| err("execute", "a size from another backend")),
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

    fn execute(&self, exe: &ExecutableRef, args: ExecArgs) -> Result<ExecOutputs> {
        let program = exe
            .downcast_ref::<Program>()
            .ok_or_else(|| err("execute", "an executable from another backend"))?;
        let params: Vec<(HostArray, Vec<i64>)> = args
            .params
            .iter()
            .map(|(b, sizes)| {
                let a = b
                    .downcast_ref::<RefBuffer>()
                    .ok_or_else(|| err("execute", "a buffer from another backend"))?;
                let s = sizes.iter().map(read_size).collect::<Result<Vec<_>>>()?;
                Ok((a.0.clone(), s))
            })
            .collect::<Result<_>>()?;
        let var_args = args
            .vars
            .iter()
            .map(read_size)
            .collect::<Result<Vec<_>>>()?;
        let values = eval::run(program, params, &var_args)?;
        let mut tensors = Vec::with_capacity(program.outputs.len());
        for &o in &program.outputs {
            let a = values
                .get(o)
                .ok_or_else(|| err("execute", "missing output"))?;
            let sizes = program.nodes[o]
                .shape
                .iter()
                .enumerate()
                .filter(|(_, e)| e.as_const().is_none())
                .map(|(d, _)| SizeArg::Device(Arc::new(RefSize(a.shape()[d] as i64))))
                .collect();
            tensors.push((Arc::new(RefBuffer(a.clone())) as BufferRef, sizes));
        }
        let mut sizes = Vec::new();
        for &k in &program.size_outputs {
            let v = match &program.vars[k].source {
                VarSource::Dim { node, dim } => values[*node].shape()[*dim] as i64,
                VarSource::Arg(a) => var_args[*a],
            };
            sizes.push(SizeArg::Device(Arc::new(RefSize(v))));
        }
        Ok(ExecOutputs { tensors, sizes })
    }

    fn upload(&self, host: &HostArray, _bound: &[usize]) -> Result<BufferRef> {
        Ok(Arc::new(RefBuffer(host.clone())))
    }

    fn download(&self, buffer: &BufferRef, shape: &[usize]) -> Result<HostArray> {
        let a = buffer
            .downcast_ref::<RefBuffer>()
            .ok_or_else(|| err("download", "a buffer from another backend"))?;
        if a.0.shape() != shape {
            return Err(err(
                "download",
                format!("buffer shape {:?} differs from {:?}", a.0.shape(), shape),
            ));
        }
        Ok(a.0.clone())
    }

    fn read_size(&self, buffer: &BufferRef) -> Result<i64> {
        read_size(&SizeArg::Device(buffer.clone()))
    }
}
