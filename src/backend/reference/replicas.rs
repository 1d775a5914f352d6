//! The replicated reference backend: `n` replicas of a program run as `n`
//! threads of this process, which meet at every collective
//! (`collective.rs`). It is the oracle for the XLA replicated backend:
//! same buffers (one per replica, [`Storage::Replicas`]), same results.

use super::collective::{as_replica, Exchange};
use super::{copy_buffer, err, eval, exec_inputs, exec_outputs, is_reference, read_size};
use crate::backend::Storage;
use crate::backend::{Backend, DeviceBuffer, ExecArgs, ExecOutputs, ExecutableRef, SizeArg};
use crate::error::{Error, Result};
use crate::host::HostArray;
use crate::ir::program::Program;
use std::sync::Arc;

/// `n` replicas on reference devices.
pub(crate) struct ReferenceReplicas {
    /// The reference device index of each replica.
    devices: Vec<usize>,
}

impl ReferenceReplicas {
    /// Replicas on the reference devices `devices` (distinct indices).
    pub(crate) fn new(devices: Vec<usize>) -> ReferenceReplicas {
        ReferenceReplicas { devices }
    }

    fn n(&self) -> usize {
        self.devices.len()
    }

    fn replicated(&self, op: &'static str, parts: Vec<DeviceBuffer>) -> Result<DeviceBuffer> {
        if parts.len() != self.n() {
            return Err(Error::internal(
                op,
                format!("{} buffers for {} replicas", parts.len(), self.n()),
            ));
        }
        Ok(DeviceBuffer::new(Storage::Replicas(parts.into())))
    }
}

impl Backend for ReferenceReplicas {
    fn name(&self) -> String {
        let list: Vec<String> = self.devices.iter().map(|d| d.to_string()).collect();
        format!("reference[{}]", list.join(","))
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn replicas(&self) -> usize {
        self.n()
    }

    fn compile(&self, program: &Program) -> Result<ExecutableRef> {
        Ok(Arc::new(program.clone()))
    }

    fn execute(&self, exe: &ExecutableRef, args: &ExecArgs<'_>) -> Result<ExecOutputs> {
        let program = exe
            .downcast_ref::<Program>()
            .ok_or_else(|| err("execute", "an executable from another backend"))?;
        let n = self.n();
        let inputs = (0..n)
            .map(|r| exec_inputs(args, |b| b.replica(r)))
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
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let parts = iters
                .iter_mut()
                .map(|it| it.next().flatten())
                .collect::<Option<Vec<DeviceBuffer>>>()
                .ok_or_else(|| Error::internal("execute", "a replica returned too few outputs"))?;
            out.push(Some(self.replicated("execute", parts)?));
        }
        Ok(ExecOutputs::new(out))
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn upload(&self, host: &HostArray, _bound: &[usize]) -> Result<DeviceBuffer> {
        let parts = (0..self.n())
            .map(|_| DeviceBuffer::new(Storage::Reference(Box::new(host.clone()))))
            .collect();
        self.replicated("upload", parts)
    }

    fn upload_replicas(&self, hosts: &[HostArray], _bound: &[usize]) -> Result<DeviceBuffer> {
        let parts = hosts
            .iter()
            .map(|h| DeviceBuffer::new(Storage::Reference(Box::new(h.clone()))))
            .collect();
        self.replicated("upload", parts)
    }

    fn upload_sizes(&self, sizes: &[i64]) -> Result<DeviceBuffer> {
        let parts = sizes
            .iter()
            .map(|&v| DeviceBuffer::new(Storage::ReferenceSize(v)))
            .collect();
        self.replicated("upload", parts)
    }

    fn download(&self, buffer: &DeviceBuffer, shape: &[usize]) -> Result<HostArray> {
        self.download_replicas(buffer, &[shape.to_vec()])
            .map(|mut v| v.remove(0))
    }

    fn download_replicas(
        &self,
        buffer: &DeviceBuffer,
        shapes: &[Vec<usize>],
    ) -> Result<Vec<HostArray>> {
        shapes
            .iter()
            .enumerate()
            .map(|(r, shape)| {
                let Storage::Reference(a) = buffer.replica(r)?.storage() else {
                    return Err(err("download", "a buffer from another backend"));
                };
                if a.shape() != shape.as_slice() {
                    return Err(err(
                        "download",
                        format!("buffer shape {:?} differs from {:?}", a.shape(), shape),
                    ));
                }
                Ok((**a).clone())
            })
            .collect()
    }

    fn check_status(&self, _exe: &ExecutableRef, status: &DeviceBuffer) -> Result<()> {
        for s in self.read_sizes(status)? {
            if s != -1 {
                return Err(err("execute", format!("a check status of {s}")));
            }
        }
        Ok(())
    }

    fn read_size(&self, buffer: &DeviceBuffer) -> Result<i64> {
        read_size(&SizeArg::Device(buffer.replica(0)?))
    }

    fn read_sizes(&self, buffer: &DeviceBuffer) -> Result<Vec<i64>> {
        (0..self.n())
            .map(|r| read_size(&SizeArg::Device(buffer.replica(r)?)))
            .collect()
    }

    fn copy_from(&self, from: &dyn Backend, buffer: &DeviceBuffer) -> Result<Option<DeviceBuffer>> {
        if !is_reference(from) {
            return Ok(None);
        }
        let parts = match buffer.storage() {
            Storage::Replicas(src) if src.len() == self.n() => {
                src.iter().map(copy_buffer).collect::<Result<Vec<_>>>()?
            }
            _ => (0..self.n())
                .map(|_| copy_buffer(buffer))
                .collect::<Result<Vec<_>>>()?,
        };
        self.replicated("copy between devices", parts).map(Some)
    }
}
