//! The reference SPMD backend: the oracle of sharded programs. It runs
//! the unpartitioned program on whole values, so a sharded step computes
//! what the same step computes on one device; a value keeps the sharding
//! it was given (`Storage::Shards` with one part, the whole value), and a
//! result is sharded where the program constrains it (`Op::Sharding`),
//! whole elsewhere (XLA may choose otherwise: it reads the same).

use super::{copy_buffer, err, eval, exec_inputs, exec_outputs, is_reference, read_size};
use crate::backend::{Backend, DeviceBuffer, ExecArgs, ExecOutputs, ExecutableRef, SizeArg};
use crate::backend::{Shards, Storage};
use crate::error::Result;
use crate::host::HostArray;
use crate::ir::program::Program;
use crate::ir::sharding::Sharding;
use crate::ir::Op;
use std::sync::Arc;

/// An SPMD program over `devices` reference devices, run whole.
pub(crate) struct ReferenceSpmd {
    /// The reference device index of each partition.
    devices: Vec<usize>,
}

impl ReferenceSpmd {
    /// Partitions on the reference devices `devices` (distinct indices).
    pub(crate) fn new(devices: Vec<usize>) -> ReferenceSpmd {
        ReferenceSpmd { devices }
    }
}

/// The whole value of a buffer of this backend.
fn whole(b: &DeviceBuffer) -> Result<&DeviceBuffer> {
    match b.storage() {
        Storage::Shards(s) => s.parts.first().ok_or_else(|| err("execute", "no parts")),
        _ => Ok(b),
    }
}

fn sharded(sharding: Arc<Sharding>, value: DeviceBuffer) -> DeviceBuffer {
    DeviceBuffer::new(Storage::Shards(Box::new(Shards {
        sharding,
        parts: vec![value].into(),
    })))
}

impl Backend for ReferenceSpmd {
    fn name(&self) -> String {
        let list: Vec<String> = self.devices.iter().map(|d| d.to_string()).collect();
        format!("reference<{}>", list.join(","))
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn partitions(&self) -> usize {
        self.devices.len()
    }

    fn compile(&self, program: &Program) -> Result<ExecutableRef> {
        Ok(Arc::new(program.clone()))
    }

    fn execute(&self, exe: &ExecutableRef, args: &ExecArgs<'_>) -> Result<ExecOutputs> {
        let program = exe
            .downcast_ref::<Program>()
            .ok_or_else(|| err("execute", "an executable from another backend"))?;
        let (params, var_args) = exec_inputs(args, whole)?;
        let values = eval::run(program, params, &var_args)?;
        let mut out = exec_outputs(program, &values, &var_args)?;
        // A result the program constrains keeps its sharding (an update
        // of a split value is constrained as it, `runtime::sync`).
        let mut at = 0;
        for &o in &program.outputs {
            let node = &program.nodes[o];
            let sharding = match &node.op {
                Op::Sharding(s) if !s.is_replicated() => Some(s.clone()),
                _ => None,
            };
            if let (Some(s), Some(b)) = (sharding, out.get_mut(at)) {
                if let Some(v) = b.take() {
                    *b = Some(sharded(s, v));
                }
            }
            at += ExecOutputs::of_result(&node.shape);
        }
        Ok(ExecOutputs::new(out))
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn upload(&self, host: &HostArray, _bound: &[usize]) -> Result<DeviceBuffer> {
        Ok(DeviceBuffer::new(Storage::Reference(Box::new(
            host.clone(),
        ))))
    }

    fn upload_sharded(&self, host: &HostArray, sharding: &Arc<Sharding>) -> Result<DeviceBuffer> {
        let value = DeviceBuffer::new(Storage::Reference(Box::new(host.clone())));
        Ok(sharded(sharding.clone(), value))
    }

    fn download(&self, buffer: &DeviceBuffer, shape: &[usize]) -> Result<HostArray> {
        let Storage::Reference(a) = whole(buffer)?.storage() else {
            return Err(err("download", "a buffer from another backend"));
        };
        if a.shape() != shape {
            return Err(err(
                "download",
                format!("buffer shape {:?} differs from {:?}", a.shape(), shape),
            ));
        }
        Ok((**a).clone())
    }

    fn check_status(&self, _exe: &ExecutableRef, status: &DeviceBuffer) -> Result<()> {
        match read_size(&SizeArg::Device(status))? {
            -1 => Ok(()),
            s => Err(err("execute", format!("a check status of {s}"))),
        }
    }

    fn read_size(&self, buffer: &DeviceBuffer) -> Result<i64> {
        read_size(&SizeArg::Device(whole(buffer)?))
    }

    fn copy_from(&self, from: &dyn Backend, buffer: &DeviceBuffer) -> Result<Option<DeviceBuffer>> {
        if !is_reference(from) {
            return Ok(None);
        }
        match buffer.storage() {
            Storage::Shards(s) => Ok(Some(sharded(
                s.sharding.clone(),
                copy_buffer(whole(buffer)?)?,
            ))),
            _ => copy_buffer(buffer).map(Some),
        }
    }
}
