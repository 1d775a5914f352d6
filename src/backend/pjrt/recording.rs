//! A PJRT backend wrapper that records executions, for the benchmarks:
//! they compare a lazyxla step with the same executable called directly
//! through the FFI. The production path never sees it; a benchmark runs
//! its steps on a device built with `debug::pjrt_recording`.

use super::ffi::{Buffer, ElementType, Executable, PjrtError};
use super::{PjrtBackend, PjrtExecutable};
use crate::backend::{Backend, DeviceBuffer, ExecArgs, ExecOutputs, ExecutableRef, SizeArg};
use crate::error::{Error, Result};
use crate::host::HostArray;
use crate::ir::program::Program;
use parking_lot::Mutex;
use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One recorded execution: the executable, copies of its argument buffers,
/// and which buffers it read and wrote.
#[derive(Debug, Clone)]
pub struct RecordedExecution {
    /// The compiled program.
    pub exe: Arc<Executable>,
    /// Copies of the argument buffers, in parameter order (size arguments
    /// included): the runtime owns the buffers it passed and may release
    /// them after the step.
    pub args: Vec<Arc<Buffer>>,
    /// The identity ([`Buffer::id`]) of each argument buffer passed (a
    /// size known on the host gets its copy's, which nothing else has).
    pub arg_ids: Vec<usize>,
    /// The identity of each result buffer, in order (sizes included): an
    /// argument of a later execution with the same identity is that result.
    pub output_ids: Vec<usize>,
}

/// Switches recording on and off and returns what was recorded.
#[derive(Debug, Clone, Default)]
pub struct Recorder(Arc<State>);

#[derive(Debug, Default)]
struct State {
    on: AtomicBool,
    /// The last two executions, oldest first.
    last: Mutex<Vec<RecordedExecution>>,
}

impl Recorder {
    /// Records the executions from now on (the last two are kept).
    pub fn start(&self) {
        self.0.on.store(true, Ordering::Relaxed);
    }

    /// Stops recording and forgets what was recorded.
    pub fn stop(&self) {
        self.0.on.store(false, Ordering::Relaxed);
        self.0.last.lock().clear();
    }

    /// The last two executions recorded, oldest first.
    pub fn last(&self) -> Vec<RecordedExecution> {
        self.0.last.lock().clone()
    }
}

/// `inner` (a PJRT backend) with its executions recorded while the
/// [`Recorder`] is on.
pub(crate) struct RecordingBackend {
    inner: Arc<dyn Backend>,
    recorder: Recorder,
}

impl RecordingBackend {
    /// Wraps `inner`, which must be a PJRT backend.
    pub(crate) fn new(inner: Arc<dyn Backend>) -> Result<(RecordingBackend, Recorder)> {
        if pjrt(&*inner).is_none() {
            return Err(Error::Plugin(format!(
                "{} is not a PJRT device: only PJRT executions can be recorded",
                inner.name()
            )));
        }
        let recorder = Recorder::default();
        Ok((
            RecordingBackend {
                inner,
                recorder: recorder.clone(),
            },
            recorder,
        ))
    }

    /// Records one execution: copies of its arguments in the entry's
    /// order, and the identities of its arguments and results.
    fn record(
        &self,
        exe: &ExecutableRef,
        args: &ExecArgs<'_>,
        outputs: &ExecOutputs,
    ) -> std::result::Result<(), PjrtError> {
        let (Some(backend), Some(pe)) = (pjrt(&*self.inner), exe.downcast_ref::<PjrtExecutable>())
        else {
            return Ok(());
        };
        let client = &backend.client;
        let mut copies = Vec::new();
        let mut ids = Vec::new();
        let mut copy = |b: &Buffer| -> std::result::Result<(), PjrtError> {
            let bytes = b.to_host()?;
            copies.push(Arc::new(client.buffer_from_host(
                &bytes,
                b.element_type(),
                b.dims(),
                0,
            )?));
            ids.push(b.id());
            Ok(())
        };
        let size = |s: &SizeArg<'_>, copy: &mut dyn FnMut(&Buffer) -> _| match s {
            SizeArg::Device(b) => match b.pjrt() {
                Some(b) => copy(b?),
                None => Ok(()),
            },
            SizeArg::Host(v) => {
                let b = client.buffer_from_host(
                    &(*v as i32).to_ne_bytes(),
                    ElementType::S32,
                    &[],
                    0,
                )?;
                copy(&b)
            }
        };
        for (b, sizes) in &args.params {
            if let Some(b) = b.pjrt() {
                copy(b?)?;
            }
            for s in sizes {
                size(s, &mut copy)?;
            }
        }
        for s in &args.vars {
            size(s, &mut copy)?;
        }
        let output_ids = outputs
            .buffers()
            .filter_map(|b| b.and_then(DeviceBuffer::pjrt)?.ok().map(Buffer::id))
            .collect();
        let mut last = self.recorder.0.last.lock();
        if last.len() == 2 {
            last.remove(0);
        }
        last.push(RecordedExecution {
            exe: pe.exe.clone(),
            args: copies,
            arg_ids: ids,
            output_ids,
        });
        Ok(())
    }
}

fn pjrt(b: &dyn Backend) -> Option<&PjrtBackend> {
    b.as_any()?.downcast_ref::<PjrtBackend>()
}

impl Backend for RecordingBackend {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn compile(&self, program: &Program) -> Result<ExecutableRef> {
        self.inner.compile(program)
    }
    fn execute(&self, exe: &ExecutableRef, args: &ExecArgs<'_>) -> Result<ExecOutputs> {
        let out = self.inner.execute(exe, args)?;
        if self.recorder.0.on.load(Ordering::Relaxed) {
            // A measuring aid never fails the step: a copy that fails
            // leaves this execution unrecorded.
            let _ = self.record(exe, args, &out);
        }
        Ok(out)
    }
    fn synchronize(&self) -> Result<()> {
        self.inner.synchronize()
    }
    fn upload(&self, host: &HostArray, bound: &[usize]) -> Result<DeviceBuffer> {
        self.inner.upload(host, bound)
    }
    fn upload_owned(
        &self,
        host: &std::sync::Arc<HostArray>,
        bound: &[usize],
    ) -> Result<DeviceBuffer> {
        self.inner.upload_owned(host, bound)
    }
    fn download(&self, buffer: &DeviceBuffer, shape: &[usize]) -> Result<HostArray> {
        self.inner.download(buffer, shape)
    }
    fn read_size(&self, buffer: &DeviceBuffer) -> Result<i64> {
        self.inner.read_size(buffer)
    }
    fn check_status(&self, exe: &ExecutableRef, status: &DeviceBuffer) -> Result<()> {
        self.inner.check_status(exe, status)
    }
    fn as_any(&self) -> Option<&dyn Any> {
        self.inner.as_any()
    }
}
