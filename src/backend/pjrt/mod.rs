//! The XLA backend: programs lowered to StableHLO text, compiled and run by
//! a PJRT plugin through the project's own FFI layer (`ffi`).
//!
//! Device data are PJRT buffers, always STATIC at the bound shape (see the
//! entry convention in `lower`); a dynamic tensor's sizes are separate i32
//! scalar buffers. Results stay on the device and feed the next program
//! directly; only `download` and `read_size` copy to the host.
//!
//! On a GPU the same backend runs on JAX's CUDA plugin (`jax-cuda13-pjrt`,
//! found by discovery; checked on one H200 with the PJRT test suites).
//! Reads go through `PJRT_Buffer_ToHostBuffer` there (a GPU buffer is not
//! on the CPU), and uploads are copies.

pub mod ffi;

mod at_exit;
pub(crate) mod discover;
mod lower;
pub(crate) mod persistent;
mod placed;
pub(crate) mod recording;
mod spmd;

use super::{Backend, DeviceBuffer, ExecArgs, ExecOutputs, ExecutableRef, SizeArg, Storage};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::host::HostArray;
use crate::ir::program::Program;
use crate::metrics;
use ffi::dispatch::{Completion, PendingBuffer};
use ffi::{Buffer, Client, CompileOptions, ElementType, Executable, OptionValue};
use ffi::{PjrtError, Plugin};
use smallvec::SmallVec;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// A compiled program.
pub(crate) struct PjrtExecutable {
    pub exe: Arc<Executable>,
    num_var_args: usize,
    /// The program's size checks, in the order of its check status (the
    /// last result; none when empty).
    checks: Vec<crate::ir::check::SizeCheck>,
    /// Set once the program has run to completion once (see `execute`).
    ran_once: AtomicBool,
    /// How long its last run inside the execute call took, in µs (see
    /// [`LONG_PROGRAM_US`]).
    last_run_us: Arc<AtomicU64>,
    /// For a group's program (`placed`): the launch slot of each member
    /// (empty on one device).
    slot_of: Vec<usize>,
    /// For a mesh's program: the sharding XLA chose for each output, in
    /// `ExecOutputs` order (`None`: whole on every device).
    shardings: Vec<Option<Arc<crate::ir::sharding::Sharding>>>,
}

impl PjrtExecutable {
    /// `exe`, compiled from `program` lowered as `lowered`; `slot_of` and
    /// `shardings` as the fields say (empty on one device).
    fn new(
        exe: Executable,
        program: &Program,
        lowered: &lower::Lowered,
        slot_of: Vec<usize>,
        shardings: Vec<Option<Arc<crate::ir::sharding::Sharding>>>,
    ) -> PjrtExecutable {
        PjrtExecutable {
            exe: Arc::new(exe),
            num_var_args: lowered.num_var_args,
            checks: match lowered.checked {
                true => program.checks(),
                false => Vec::new(),
            },
            ran_once: AtomicBool::new(false),
            last_run_us: Arc::new(AtomicU64::new(0)),
            slot_of,
            shardings,
        }
    }

    /// An internal error unless `args` pass the size arguments it takes.
    fn check_vars(&self, args: &ExecArgs<'_>) -> Result<()> {
        if args.vars.len() == self.num_var_args {
            return Ok(());
        }
        Err(Error::internal(
            "pjrt execute",
            format!(
                "{} size arguments for a program that takes {}",
                args.vars.len(),
                self.num_var_args
            ),
        ))
    }
}

/// A program whose last run took at least this long (µs) runs on the
/// dispatch thread of an inline CPU client (`ffi::dispatch`); a shorter
/// one inside the execute call. The hand-over costs two thread wake-ups
/// (tens of µs on a small VM), which a step of 1 ms pays for.
pub(crate) const LONG_PROGRAM_US: u64 = 1000;

/// The PJRT backend: one device of a client of one plugin (the client is
/// shared by the backends of all its devices).
///
/// Executions are asynchronous: `execute` starts the program and returns,
/// so the host records and traces the next step while the device runs this
/// one. It then waits for the previous execution, so at most two are in
/// flight (the device never waits for the host between steps, and the
/// host never runs more than a step ahead, which bounds the memory that
/// queued steps hold). A one-device CPU client runs short programs inside
/// the execute call and hands long ones to the dispatch thread
/// (`backend::cpu_dispatch`, `ffi::dispatch`).
pub(crate) struct PjrtBackend {
    /// The completion event of the execution in flight, if any.
    in_flight: at_exit::InFlight,
    client: Client,
    /// The device's ordinal among the client's addressable devices.
    device: usize,
    name: String,
    /// The client runs programs inline and hands long ones to the
    /// dispatch thread (`backend::cpu_dispatch`, the default for one CPU
    /// device).
    dispatch_long: bool,
}

impl Drop for PjrtBackend {
    fn drop(&mut self) {
        // Nothing may outlive the client while it still runs.
        let _ = self.synchronize();
    }
}

/// The buffer of a size argument: its own, or for a size known on the
/// host the next one `uploaded` for it.
fn size_arg<'a>(
    s: &SizeArg<'a>,
    uploaded: &mut std::slice::Iter<'a, DeviceBuffer>,
) -> Result<&'a DeviceBuffer> {
    match *s {
        SizeArg::Device(b) => Ok(b),
        SizeArg::Host(_) => uploaded
            .next()
            .ok_or_else(|| Error::internal("pjrt execute", "a host size not uploaded")),
    }
}

fn backend_err(name: &str, op: &'static str, e: PjrtError) -> Error {
    Error::Backend {
        backend: name.to_string(),
        op,
        message: e.message,
    }
}

fn element_type(d: DType) -> ElementType {
    match d {
        DType::Bool => ElementType::Pred,
        DType::I32 => ElementType::S32,
        DType::I64 => ElementType::S64,
        DType::F16 => ElementType::F16,
        DType::BF16 => ElementType::BF16,
        DType::F32 => ElementType::F32,
        DType::F64 => ElementType::F64,
    }
}

fn dtype_of(e: ElementType) -> Option<DType> {
    Some(match e {
        ElementType::Pred => DType::Bool,
        ElementType::S32 => DType::I32,
        ElementType::S64 => DType::I64,
        ElementType::F16 => DType::F16,
        ElementType::BF16 => DType::BF16,
        ElementType::F32 => DType::F32,
        ElementType::F64 => DType::F64,
        _ => return None,
    })
}

impl PjrtBackend {
    /// Loads the plugin at `path`, creates a client, and returns one
    /// backend per device it exposes (ordinal order): every addressable
    /// device, less a CPU client's spare (see `open_client`); a CPU
    /// client exposes as many as [`crate::set_cpu_device_count`] or
    /// `LAZYXLA_CPU_DEVICES` asks for, else one.
    pub(crate) fn open_all(path: &Path) -> Result<Vec<PjrtBackend>> {
        let (first, exposed) = PjrtBackend::open_client(path)?;
        Ok(first.with_siblings(exposed))
    }

    /// [`PjrtBackend::open_all`] for process `node_id` of `num_nodes` of a
    /// multi-host job whose processes share `store` (the create options
    /// `node_id` and `num_nodes` and the key-value callbacks, which the
    /// GPU plugin reads; every addressable device is exposed).
    pub(crate) fn open_distributed(
        path: &Path,
        node_id: usize,
        num_nodes: usize,
        store: std::sync::Arc<dyn ffi::KeyValueStore>,
    ) -> Result<Vec<PjrtBackend>> {
        let plugin = Plugin::load(path).map_err(|e| Error::Plugin(e.message))?;
        let (major, minor) = plugin.api_version();
        let options = [
            ("node_id", OptionValue::Int64(node_id as i64)),
            ("num_nodes", OptionValue::Int64(num_nodes as i64)),
        ];
        let client = Client::with_store(plugin, &options, Some(store)).map_err(|e| {
            Error::Plugin(format!(
                "PJRT plugin {} (C API {major}.{minor}) failed to create the client of node {node_id} of {num_nodes}: {} (the CPU plugins do not run across processes)",
                path.display(),
                e.message
            ))
        })?;
        let exposed = client.device_count();
        let name = format!("pjrt:{}", client.platform_name().to_lowercase());
        let first = PjrtBackend {
            in_flight: at_exit::in_flight_slot(),
            client,
            device: 0,
            name,
            dispatch_long: false,
        };
        Ok(first.with_siblings(exposed))
    }

    /// This backend (device 0) and those of its client's devices `1..n`.
    fn with_siblings(self, n: usize) -> Vec<PjrtBackend> {
        let mut all: Vec<PjrtBackend> = (1..n).map(|k| self.sibling(k)).collect();
        all.insert(0, self);
        all
    }

    /// Loads the plugin at `path` and creates its client: the backend of
    /// its first device, and how many of its devices lazyxla exposes.
    ///
    /// A CPU client makes as many devices as `backend::cpu_devices` says
    /// (one unless asked otherwise), plus a spare when that is more than
    /// one. The CPU plugin runs a program's replicas on a thread pool of
    /// one thread per device (at least), and a launch on EVERY device can
    /// then wait for good in its first collective, one replica short of a
    /// thread, until the plugin aborts the process (measured with
    /// `xla-cpu-pjrt` 0.81 on 2 cores: 4 replicas of a 3-layer MLP on a
    /// 4-device client hang; on a 5-device client they run). The spare
    /// device is never used: it only sizes the pool. A plugin of another
    /// platform exposes every device it has.
    fn open_client(path: &Path) -> Result<(PjrtBackend, usize)> {
        let plugin = Plugin::load(path).map_err(|e| Error::Plugin(e.message))?;
        let (major, minor) = plugin.api_version();
        let failed = |e: PjrtError| {
            Error::Plugin(format!(
                "PJRT plugin {} (C API {major}.{minor}) failed to create a client: {}",
                path.display(),
                e.message
            ))
        };
        let (n, asked) = crate::backend::cpu_devices::fixed()?;
        let spare = usize::from(n > 1);
        let count = ("cpu_device_count", OptionValue::Int64((n + spare) as i64));
        use crate::backend::cpu_dispatch::{self, Mode};
        let mode = cpu_dispatch::wanted(n)?;
        let inline = mode != Mode::Asynchronous;
        let is_cpu = |c: &Client| c.platform_name().eq_ignore_ascii_case("cpu");
        // A plugin that does not know the dispatch option refuses it: it
        // is then asked for the count alone, and dispatches as it does.
        let with_inline = if inline {
            let asynchronous = ("asynchronous", OptionValue::Bool(false));
            Client::with_options(plugin.clone(), &[count.clone(), asynchronous]).ok()
        } else {
            None
        };
        let dispatches_inline = with_inline.is_some();
        let created = match with_inline {
            Some(c) => Ok(c),
            None => Client::with_options(plugin.clone(), &[count]),
        };
        let (client, exposed) = match created {
            Ok(c) if is_cpu(&c) => (c, n),
            // Another platform that ignores the option: every device.
            Ok(c) => {
                let all = c.device_count();
                (c, all)
            }
            Err(e) => match Client::new(plugin.clone()) {
                // The option is for CPU plugins; others go without.
                Ok(c) if !is_cpu(&c) => {
                    let all = c.device_count();
                    (c, all)
                }
                // A CPU plugin that refuses the count: as it is, unless a
                // count was asked for.
                Ok(c) if !asked => (c, n),
                _ => {
                    return Err(failed(PjrtError {
                        message: format!("{} (asking for {n} CPU devices)", e.message),
                        code: e.code,
                    }))
                }
            },
        };
        let exposed = exposed.min(client.device_count());
        let dispatch_long = is_cpu(&client) && dispatches_inline && mode == Mode::Auto;
        if is_cpu(&client) {
            if mode == Mode::Inline && !dispatches_inline {
                eprintln!(
                    "lazyxla: the PJRT plugin {} (C API {major}.{minor}) does not know the CPU \
                     client option for inline dispatch; its programs run on its worker threads",
                    path.display()
                );
            }
            cpu_dispatch::fix(!dispatches_inline, n, mode == Mode::Auto);
        }
        let name = format!("pjrt:{}", client.platform_name().to_lowercase());
        let first = PjrtBackend {
            in_flight: at_exit::in_flight_slot(),
            client,
            device: 0,
            name,
            dispatch_long,
        };
        Ok((first, exposed))
    }

    /// A backend of device `ordinal` of the same client, with its own
    /// execution in flight (a replicated backend holds one per replica).
    fn sibling(&self, ordinal: usize) -> PjrtBackend {
        let platform = self.client.platform_name().to_lowercase();
        PjrtBackend {
            in_flight: at_exit::in_flight_slot(),
            client: self.client.clone(),
            dispatch_long: false,
            device: ordinal,
            name: match ordinal {
                0 => format!("pjrt:{platform}"),
                k => format!("pjrt:{platform}:{k}"),
            },
        }
    }

    /// Waits for the execution in flight; its error names the failed step.
    fn wait_in_flight(&self, op: &'static str) -> Result<()> {
        let event = self.in_flight.lock().take();
        self.wait_for(event, op)
    }

    fn wait_for(&self, event: Option<Completion>, op: &'static str) -> Result<()> {
        let Some(event) = event else {
            return Ok(());
        };
        metrics::time(metrics::Timer::DeviceWaitTime, || event.wait())
            .map_err(|e| self.failed_earlier(op, e))
    }

    /// The error of `op` on the results of a program that failed.
    fn failed_earlier(&self, op: &'static str, e: PjrtError) -> Error {
        Error::Backend {
            backend: self.name.clone(),
            op,
            message: format!(
                "an earlier program failed on the device, so the tensors it computed hold no values: {}",
                e.message
            ),
        }
    }

    fn buffer<'a>(&self, b: &'a DeviceBuffer, op: &'static str) -> Result<&'a Buffer> {
        match b.pjrt() {
            Some(Ok(b)) => Ok(b),
            Some(Err(e)) => Err(self.failed_earlier(op, e)),
            None => Err(Error::Backend {
                backend: self.name.clone(),
                op,
                message: "a buffer from another backend".into(),
            }),
        }
    }

    fn upload_i32(&self, v: i64) -> Result<DeviceBuffer> {
        let v = i32::try_from(v).map_err(|_| Error::Backend {
            backend: self.name.clone(),
            op: "execute",
            message: format!("size {v} does not fit in i32"),
        })?;
        let b = self
            .client
            .buffer_from_host(&v.to_ne_bytes(), ElementType::S32, &[], self.device)
            .map_err(|e| backend_err(&self.name, "upload", e))?;
        Ok(DeviceBuffer::new(Storage::Pjrt(b)))
    }
}

/// Host data lent to a buffer (`upload_owned`).
struct Lent(Arc<HostArray>);

// SAFETY: a `HostArray` behind an `Arc` is never written (it has no
// interior mutability), and its elements do not move while it lives;
// `upload_owned` lends only contiguous arrays, whose bytes these are.
unsafe impl ffi::LentBytes for Lent {
    fn lent_bytes(&self) -> &[u8] {
        self.0.native_bytes().unwrap_or_default()
    }
}

/// True unless `LAZYXLA_PJRT_DONATE=0` (read once): the switch that
/// turns buffer donation off (DESIGN.md "Donated buffers"), to compare
/// memory and time with and without it.
pub(crate) fn donation_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("LAZYXLA_PJRT_DONATE").as_deref() != Ok("0"))
}

/// The StableHLO text of `program`.
pub(crate) fn lower_text(program: &Program) -> Result<String> {
    Ok(lower::lower(program)?.text)
}

/// The IR text a dump shows: the traced `program` and, when the lowering
/// passes rewrote it, the program they gave (what the emitter translated).
pub(crate) fn dump_ir(program: &Program, lowered: &lower::Lowered) -> String {
    let mut ir = crate::ir::print::print_program(program);
    if let Some(p) = &lowered.passed {
        ir.push_str("\n# after the lowering passes:\n");
        ir.push_str(&crate::ir::print::print_program(p));
    }
    ir
}

/// Writes the IR text and the StableHLO text of a program to
/// `LAZYXLA_DUMP`, else (on a compile failure) to a directory under the
/// system temp dir; returns the StableHLO file's path.
fn dump(ir: &str, text: &str, failed: bool) -> Option<PathBuf> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let dir = match std::env::var_os("LAZYXLA_DUMP") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ if failed => std::env::temp_dir().join(format!("lazyxla-dump-{}", std::process::id())),
        _ => return None,
    };
    std::fs::create_dir_all(&dir).ok()?;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let stem = format!("program-{}-{n:04}", std::process::id());
    let ir_path = dir.join(format!("{stem}.ir.txt"));
    let hlo = dir.join(format!("{stem}.stablehlo.mlir"));
    std::fs::write(&ir_path, ir).ok()?;
    std::fs::write(&hlo, text).ok()?;
    Some(hlo)
}

impl PjrtBackend {
    /// Compiles StableHLO `text` (lowered from the program printed as `ir`),
    /// dumping both per `LAZYXLA_DUMP`; on failure the error holds XLA's
    /// message and where the program was dumped (a temp dir when
    /// `LAZYXLA_DUMP` is unset).
    pub(crate) fn compile_text(&self, ir: &str, text: &str) -> Result<Executable> {
        let ok_dump = dump(ir, text, false);
        let options = match self.device {
            // Device 0 is where the client puts a one-device program.
            0 => ffi::Client::default_compile_options().to_vec(),
            k => {
                let id = self.client.device_ids()[k];
                let options = CompileOptions::replicas(1).on_devices(&[id]);
                options
                    .validate(self.client.device_ids())
                    .map_err(|e| Error::Compile {
                        backend: self.name.clone(),
                        message: e.message,
                    })?;
                options.encode()
            }
        };
        let compiled = persistent::compile(&self.client, text, &options, || {
            self.client.compile_encoded(text, &options)
        });
        compiled.map_err(|e| {
            let path = ok_dump.or_else(|| dump(ir, text, true));
            let where_ = match path {
                Some(p) => format!(" (program dumped to {})", p.display()),
                None => " (the program could not be dumped)".into(),
            };
            Error::Compile {
                backend: self.name.clone(),
                message: format!("{}{where_}", e.message),
            }
        })
    }
}

impl PjrtBackend {
    /// Reads a program's check status (`i32[3]`, see `lower`), once the
    /// program has completed, and turns a failed check into its error.
    fn read_status(
        &self,
        checks: &[crate::ir::check::SizeCheck],
        status: &DeviceBuffer,
    ) -> Result<()> {
        let mut bytes = [0u8; 12];
        let b = self.buffer(status, "execute")?;
        // In place on the CPU plugin (see `Buffer::read_in_place`).
        b.to_host_exact(&mut bytes)
            .map_err(|e| backend_err(&self.name, "execute", e))?;
        let v: Vec<i32> = bytes
            .chunks_exact(4)
            .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        match v[..] {
            [-1, _, _] => Ok(()),
            [k, l, r] if k >= 0 && (k as usize) < checks.len() => {
                Err(checks[k as usize].failure(l as i64, r as i64))
            }
            _ => Err(Error::internal(
                "pjrt execute",
                format!("a check status of {v:?} for {} checks", checks.len()),
            )),
        }
    }
}

/// The runtime finds each result's size outputs by its shape (see
/// `ExecOutputs`): an internal error unless the lowering laid them out so.
fn check_result_layout(program: &Program, lowered: &lower::Lowered) -> Result<()> {
    let by_shape = program
        .outputs
        .iter()
        .map(|&o| ExecOutputs::of_result(&program.nodes[o].shape));
    if by_shape.eq(lowered.output_dynamic.iter().map(|d| 1 + d)) {
        Ok(())
    } else {
        Err(Error::internal(
            "pjrt compile",
            "the lowered results' dynamic dimensions differ from the program's shapes",
        ))
    }
}

impl Backend for PjrtBackend {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn donates(&self) -> bool {
        donation_enabled()
    }

    fn compile(&self, program: &Program) -> Result<ExecutableRef> {
        let lowered = lower::lower(program)?;
        check_result_layout(program, &lowered)?;
        let ir = dump_ir(program, &lowered);
        let exe = self.compile_text(&ir, &lowered.text)?;
        let exe = PjrtExecutable::new(exe, program, &lowered, Vec::new(), Vec::new());
        Ok(Arc::new(exe))
    }

    fn execute(&self, exe: &ExecutableRef, args: &ExecArgs<'_>) -> Result<ExecOutputs> {
        let pe = exe
            .downcast_ref::<PjrtExecutable>()
            .ok_or_else(|| Error::Backend {
                backend: self.name.clone(),
                op: "execute",
                message: "an executable from another backend".into(),
            })?;
        pe.check_vars(args)?;
        // Sizes known on the host become device scalars first, so that
        // every argument can then be borrowed in order.
        let mut host_sizes: SmallVec<[DeviceBuffer; 4]> = SmallVec::new();
        for s in args.params.iter().flat_map(|(_, s)| s).chain(&args.vars) {
            if let SizeArg::Host(v) = s {
                host_sizes.push(self.upload_i32(*v)?);
            }
        }
        let mut uploaded = host_sizes.iter();
        let count = args.params.iter().map(|(_, s)| 1 + s.len()).sum::<usize>() + args.vars.len();
        let mut refs: SmallVec<[&Buffer; 16]> = SmallVec::with_capacity(count);
        let mut donate: SmallVec<[usize; 4]> = SmallVec::new();
        // `args.donate` is sorted (`ExecArgs::donate`): a search, not a
        // scan, per parameter.
        debug_assert!(args.donate.windows(2).all(|w| w[0] < w[1]));
        for (k, (b, sizes)) in args.params.iter().enumerate() {
            if args.donate.binary_search(&k).is_ok() {
                donate.push(refs.len());
            }
            refs.push(self.buffer(b, "execute")?);
            for s in sizes {
                refs.push(self.buffer(size_arg(s, &mut uploaded)?, "execute")?);
            }
        }
        for s in &args.vars {
            refs.push(self.buffer(size_arg(s, &mut uploaded)?, "execute")?);
        }
        let long = self.dispatch_long
            && pe.last_run_us.load(Ordering::Relaxed) >= LONG_PROGRAM_US
            && crate::backend::cpu_dispatch::long_on_thread();
        // SAFETY: the arguments are live buffers of this client, and a
        // buffer is dropped only through `Buffer`'s `Drop`, which defers it
        // while the run may name it. Where the thread cannot start, the
        // program runs inline.
        let dispatched = long
            .then(|| unsafe { ffi::dispatch::execute(&pe.exe, &refs, &donate, &pe.last_run_us) })
            .and_then(|r| r.ok());
        let (out, done) = if let Some(run) = dispatched {
            metrics::inc(metrics::Counter::ExecuteDispatched);
            let out = (0..pe.exe.num_outputs())
                .map(|k| {
                    let p = PendingBuffer::new(run.clone(), k);
                    Some(DeviceBuffer::new(Storage::PjrtPending(Box::new(p))))
                })
                .collect();
            (out, Completion::Run(run))
        } else {
            let start = std::time::Instant::now();
            let (out, done) = pe
                .exe
                .execute_async_into(&refs, &donate, |b| {
                    Some(DeviceBuffer::new(Storage::Pjrt(b)))
                })
                .map_err(|e| backend_err(&self.name, "execute", e))?;
            // A client that dispatches inline returns with the program done.
            if done.is_ready() {
                metrics::inc(metrics::Counter::ExecuteInline);
                pe.last_run_us
                    .store(start.elapsed().as_micros() as u64, Ordering::Relaxed);
            }
            (out, Completion::Event(done))
        };
        // Started before waiting for the previous execution, so the device
        // goes from one step to the next without waiting for the host.
        let previous = self.in_flight.lock().replace(done);
        if let Err(e) = self.wait_for(previous, "execute") {
            // This step read what the failed one computed: drop its
            // results (the tensors stay pending) and its outcome.
            let _ = self.in_flight.lock().take().map(Completion::wait);
            return Err(e);
        }
        if !pe.ran_once.load(Ordering::Relaxed) {
            // A program's first run creates plugin state on first use (JIT
            // kernels and other function-local statics), whose destructors
            // the C++ runtime runs at exit in reverse order of creation. So
            // the first run completes here, and only then is the exit
            // handler that waits for running programs registered (again):
            // it runs before those destructors, never after.
            let done = self.in_flight.lock().take();
            if let Some(done) = done {
                done.wait()
                    .map_err(|e| backend_err(&self.name, "execute", e))?;
            }
            pe.ran_once.store(true, Ordering::Relaxed);
            at_exit::register();
        }
        Ok(ExecOutputs::new(out))
    }

    fn upload(&self, host: &HostArray, bound: &[usize]) -> Result<DeviceBuffer> {
        if host.shape().len() != bound.len() || host.shape().iter().zip(bound).any(|(h, b)| h > b) {
            return Err(Error::Backend {
                backend: self.name.clone(),
                op: "upload",
                message: format!(
                    "data of shape {:?} does not fit the bound {bound:?}",
                    host.shape()
                ),
            });
        }
        let padded;
        let full = if host.shape() == bound {
            host
        } else {
            padded = host.padded(bound, 0.0).ok_or_else(|| Error::Backend {
                backend: self.name.clone(),
                op: "upload",
                message: format!(
                    "data of shape {:?} does not fit the bound {bound:?}",
                    host.shape()
                ),
            })?;
            &padded
        };
        // The plugin copies the bytes once; a contiguous array is handed
        // over in place (`native_bytes`), others are laid out first.
        let laid_out;
        let data = match full.native_bytes() {
            Some(bytes) => bytes,
            None => {
                laid_out = full.to_bytes();
                &laid_out
            }
        };
        let dims: Vec<i64> = bound.iter().map(|&d| d as i64).collect();
        let b = self
            .client
            .buffer_from_host(data, element_type(host.dtype()), &dims, self.device)
            .map_err(|e| backend_err(&self.name, "upload", e))?;
        Ok(DeviceBuffer::new(Storage::Pjrt(b)))
    }

    /// On a CPU plugin, large host data at the alignment the plugin needs
    /// (`host::LEND_ALIGN`, as `Tensor::from_slice` lays it out) is lent to
    /// the buffer instead of copied: the plugin's copy was most of the
    /// time an upload took. The data stays alive until the plugin no
    /// longer reads it.
    fn upload_owned(&self, host: &Arc<HostArray>, bound: &[usize]) -> Result<DeviceBuffer> {
        let lendable = self.name.split(':').nth(1) == Some("cpu")
            && host.shape() == bound
            && host.native_bytes().is_some_and(|b| {
                b.len() >= crate::host::LEND_MIN_BYTES
                    && (b.as_ptr() as usize).is_multiple_of(crate::host::LEND_ALIGN)
            });
        if !lendable {
            return self.upload(host, bound);
        }
        let dims: Vec<i64> = bound.iter().map(|&d| d as i64).collect();
        let b = self
            .client
            .buffer_from_lent_host(
                Arc::new(Lent(host.clone())),
                element_type(host.dtype()),
                &dims,
                self.device,
            )
            .map_err(|e| backend_err(&self.name, "upload", e))?;
        Ok(DeviceBuffer::new(Storage::Pjrt(b)))
    }

    fn copy_from(&self, from: &dyn Backend, buffer: &DeviceBuffer) -> Result<Option<DeviceBuffer>> {
        let source = match buffer.storage() {
            // A replicated value's first replica (what reading it gives).
            Storage::Replicas(_) => buffer.replica(0)?,
            // Pieces: put together on the host.
            Storage::Shards(_) => return Ok(None),
            _ => buffer,
        };
        let (Some(b), true) = (source.pjrt(), placed::same_client(from, &self.client)) else {
            return Ok(None);
        };
        let b = b.map_err(|e| self.failed_earlier("copy between devices", e))?;
        let copy = self
            .client
            .copy_to_device(b, self.device)
            .map_err(|e| backend_err(&self.name, "copy between devices", e))?;
        Ok(Some(DeviceBuffer::new(Storage::Pjrt(copy))))
    }

    fn download(&self, buffer: &DeviceBuffer, shape: &[usize]) -> Result<HostArray> {
        let b = self.buffer(buffer, "download")?;
        let err = |m: String| Error::Backend {
            backend: self.name.clone(),
            op: "download",
            message: m,
        };
        let dtype = dtype_of(b.element_type())
            .ok_or_else(|| err(format!("unsupported element type {:?}", b.element_type())))?;
        let dims: Vec<usize> = b.unpadded_dims().iter().map(|&d| d as usize).collect();
        if dims.len() != shape.len() || dims.iter().zip(shape).any(|(d, s)| s > d) {
            return Err(err(format!(
                "the real shape {shape:?} does not fit the buffer {dims:?}"
            )));
        }
        // One transfer, straight into the array's memory.
        let full = HostArray::filled_with(dtype, &dims, |out| b.to_host_into(out))
            .map_err(|e| backend_err(&self.name, "download", e))?;
        if dims == shape {
            return Ok(full);
        }
        Ok(crate::map_host_array!(&full, a => a
            .slice_each_axis(|ax| ndarray::Slice::from(0..shape[ax.axis.index()]))
            .to_owned()))
    }

    fn synchronize(&self) -> Result<()> {
        self.wait_in_flight("synchronize")
    }

    fn check_status(&self, exe: &ExecutableRef, status: &DeviceBuffer) -> Result<()> {
        let pe = exe
            .downcast_ref::<PjrtExecutable>()
            .ok_or_else(|| Error::internal("pjrt check", "an executable from another backend"))?;
        // The status is read in place on the CPU plugin, which needs the
        // program completed: wait for the execution in flight (a status
        // of an earlier one is complete already, see `execute`).
        let done = self.in_flight.lock().take();
        if let Some(done) = done {
            done.wait()
                .map_err(|e| backend_err(&self.name, "execute", e))?;
        }
        self.read_status(&pe.checks, status)
    }

    fn read_size(&self, buffer: &DeviceBuffer) -> Result<i64> {
        let b = self.buffer(buffer, "read_size")?;
        let mut arr = [0u8; 4];
        b.to_host_exact(&mut arr)
            .map_err(|e| backend_err(&self.name, "read_size", e))?;
        Ok(i32::from_ne_bytes(arr) as i64)
    }
}
