//! The replicated XLA backend: one program compiled for `n` replicas
//! (`num_replicas = n`, a device assignment naming `n` distinct devices of
//! one client) and run on all of them by one `Execute`.
//!
//! A buffer of this backend holds one PJRT buffer per replica
//! ([`Storage::Replicas`]), replica `r`'s on device `r` of the backend,
//! so every result feeds the next program where it is: nothing leaves the
//! devices between steps. Collectives in the program (`lower/collective.rs`)
//! name the replicas `0..n`. Reading a value reads replica 0's.
//!
//! Sizes too are per replica (a `SizeCell` of a replicated device is always
//! passed as its buffer, never as a host copy), which is how each
//! replica's part of an uneven batch has its own length;
//! `parallel::replica_values` reads every replica's value.
//!
//! Traps the FFI keeps away (all measured on the CPU plugins): a device
//! assignment naming a device twice aborts the plugin, so `CompileOptions`
//! are validated before every compile (an `Error` naming the replica count
//! and the distinct devices); a launch the plugin refuses for a misplaced
//! argument leaves its next collective hanging, so every argument's device
//! is checked first; each launch gets its own launch id (the CPU plugin
//! keys a collective's meeting by it), and launches on several devices are
//! serialized per client.

use super::ffi::dispatch::Completion;
use super::ffi::{Buffer, Client, CompileOptions, Event, PjrtError};
use super::{at_exit, backend_err, check_result_layout, dump, lower, PjrtBackend, PjrtExecutable};
use crate::backend::Storage;
use crate::backend::{Backend, DeviceBuffer, ExecArgs, ExecOutputs, ExecutableRef, SizeArg};
use crate::error::{Error, Result};
use crate::host::HostArray;
use crate::ir::program::Program;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// True when `backend` is a PJRT backend (one device or replicated) of
/// `client`.
pub(super) fn same_client(backend: &dyn Backend, client: &Client) -> bool {
    let Some(any) = backend.as_any() else {
        return false;
    };
    if let Some(b) = any.downcast_ref::<PjrtBackend>() {
        return b.client.same(client);
    }
    if let Some(b) = any.downcast_ref::<PjrtReplicas>() {
        return b.members[0].client.same(client);
    }
    false
}

/// Replicas over distinct devices of one PJRT client.
pub(crate) struct PjrtReplicas {
    /// One backend per replica, on its device (each with its own execution
    /// in flight): they upload, download and read statuses.
    members: Vec<PjrtBackend>,
    name: String,
    /// True for an SPMD backend: one program of `n` partitions, which
    /// XLA's partitioner splits by the arguments' shardings (see
    /// `super::spmd`); device `p` runs partition `p`.
    partitioned: bool,
}

/// A program compiled for the replicas (or partitions).
struct ReplicatedExecutable {
    inner: PjrtExecutable,
    /// The launch slot of each replica.
    slot_of: Vec<usize>,
    /// In partition mode, the sharding XLA chose for each output, in
    /// `ExecOutputs` order (`None`: whole on every device).
    shardings: Vec<Option<Arc<crate::ir::sharding::Sharding>>>,
}

impl PjrtReplicas {
    /// Replicas on `devices` (replica `r` on `devices[r]`), which must be
    /// distinct devices of one client.
    pub(crate) fn new(devices: &[&PjrtBackend]) -> Result<PjrtReplicas> {
        PjrtReplicas::with_mode(devices, false)
    }

    /// One SPMD program of `devices.len()` partitions, partition `p` on
    /// `devices[p]` (distinct devices of one client).
    pub(crate) fn partitioned(devices: &[&PjrtBackend]) -> Result<PjrtReplicas> {
        PjrtReplicas::with_mode(devices, true)
    }

    fn with_mode(devices: &[&PjrtBackend], partitioned: bool) -> Result<PjrtReplicas> {
        let first = devices
            .first()
            .ok_or_else(|| Error::invalid("replicas", "no devices given; pass at least one"))?;
        if let Some(d) = devices.iter().find(|d| !d.client.same(&first.client)) {
            return Err(Error::invalid(
                "replicas",
                format!(
                    "{} and {} belong to different PJRT clients; replicas must be devices of one client",
                    first.name, d.name
                ),
            ));
        }
        let ordinals: Vec<usize> = devices.iter().map(|d| d.device).collect();
        let ids: Vec<i64> = ordinals
            .iter()
            .map(|&o| first.client.device_ids()[o])
            .collect();
        CompileOptions::replicas(devices.len())
            .on_devices(&ids)
            .validate(first.client.device_ids())
            .map_err(|e| Error::invalid("replicas", e.message))?;
        let platform = first.client.platform_name().to_lowercase();
        let list: Vec<String> = ordinals.iter().map(|o| o.to_string()).collect();
        let name = match partitioned {
            true => format!("pjrt:{platform}<{}>", list.join(",")),
            false => format!("pjrt:{platform}[{}]", list.join(",")),
        };
        Ok(PjrtReplicas {
            members: ordinals.iter().map(|&o| first.sibling(o)).collect(),
            name,
            partitioned,
        })
    }

    fn n(&self) -> usize {
        self.members.len()
    }

    fn replicated(&self, op: &'static str, buffers: Vec<DeviceBuffer>) -> Result<DeviceBuffer> {
        if buffers.len() != self.n() {
            return Err(Error::internal(
                op,
                format!("{} buffers for {} replicas", buffers.len(), self.n()),
            ));
        }
        Ok(DeviceBuffer::new(Storage::Replicas(buffers.into())))
    }

    /// The PJRT buffer of replica `r` of a replicated buffer.
    fn part<'a>(&self, b: &'a DeviceBuffer, r: usize, op: &'static str) -> Result<&'a Buffer> {
        self.members[r].buffer(b.replica(r)?, op)
    }

    /// Replica `r`'s buffer of a size argument: its own, or for a size
    /// known on the host the next one `uploaded` for it on that replica.
    fn size_part<'a>(
        &'a self,
        s: &SizeArg<'a>,
        r: usize,
        uploaded: &mut std::slice::Iter<'a, DeviceBuffer>,
    ) -> Result<&'a Buffer> {
        match *s {
            SizeArg::Device(b) => self.part(b, r, "execute"),
            SizeArg::Host(_) => {
                let b = uploaded
                    .next()
                    .ok_or_else(|| Error::internal("pjrt execute", "a host size not uploaded"))?;
                self.members[r].buffer(b, "execute")
            }
        }
    }

    /// Waits for every replica's execution in flight.
    fn wait_all(&self, op: &'static str) -> Result<()> {
        let mut first = Ok(());
        for m in &self.members {
            let r = m.wait_in_flight(op);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// The StableHLO module for `program`: its lowering, declared for `n`
    /// replicas (XLA obeys the compile options; the attribute says the
    /// same for readers of a dump).
    fn module(&self, program: &Program) -> Result<lower::Lowered> {
        if self.partitioned {
            if lower::collective_replicas(program).next().is_some() {
                return Err(Error::invalid(
                    "sharding",
                    "a collective between replicas (all_reduce, all_gather, reduce_scatter, replica_id) in a sharded program; XLA's partitioner inserts the collectives of a sharded program itself",
                ));
            }
            let mut lowered = lower::lower_with(program, true)?;
            lowered.text = format!(
                "module @lazyxla attributes {{mhlo.num_replicas = 1 : i32, mhlo.num_partitions = {} : i32}} {{\n{}}}\n",
                self.n(),
                lowered.text
            );
            return Ok(lowered);
        }
        let mut lowered = lower::lower(program)?;
        if let Some(k) = lower::collective_replicas(program).find(|&k| k != self.n()) {
            return Err(Error::internal(
                "pjrt compile",
                format!(
                    "a collective over {k} replicas in a program for {} replicas",
                    self.n()
                ),
            ));
        }
        lowered.text = format!(
            "module @lazyxla attributes {{mhlo.num_replicas = {} : i32, mhlo.num_partitions = 1 : i32}} {{\n{}}}\n",
            self.n(),
            lowered.text
        );
        Ok(lowered)
    }
}

impl Backend for PjrtReplicas {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn replicas(&self) -> usize {
        // An SPMD program is one program over its devices, not replicas.
        match self.partitioned {
            true => 1,
            false => self.n(),
        }
    }

    fn partitions(&self) -> usize {
        match self.partitioned {
            true => self.n(),
            false => 1,
        }
    }

    fn donates(&self) -> bool {
        // A sharded program's aliased results carry their parameters'
        // shardings (`lower::lower_with`), so each device's piece of the
        // update is written into its piece of the parameter.
        super::donation_enabled()
    }

    fn upload_sharded(
        &self,
        host: &HostArray,
        sharding: &Arc<crate::ir::sharding::Sharding>,
    ) -> Result<DeviceBuffer> {
        if !self.partitioned || sharding.device_count() != self.n() {
            return Err(Error::internal(
                "upload",
                format!(
                    "a sharding of {} devices on {}",
                    sharding.device_count(),
                    self.name
                ),
            ));
        }
        let dims = host.shape();
        let bytes = host.to_bytes();
        let elt = host.dtype().size_in_bytes();
        let shard = sharding.shard_shape(dims);
        let parts = self
            .members
            .iter()
            .enumerate()
            .map(|(p, m)| {
                let piece = super::spmd::piece(&bytes, dims, sharding, p, elt);
                m.upload(&HostArray::from_bytes(host.dtype(), &shard, &piece), &shard)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(DeviceBuffer::new(Storage::Shards(Box::new(
            crate::backend::Shards {
                sharding: sharding.clone(),
                parts: parts.into(),
            },
        ))))
    }

    fn compile(&self, program: &Program) -> Result<ExecutableRef> {
        let lowered = self.module(program)?;
        check_result_layout(program, &lowered)?;
        let ir = super::dump_ir(program, &lowered);
        let client = &self.members[0].client;
        let ids: Vec<i64> = self
            .members
            .iter()
            .map(|m| client.device_ids()[m.device])
            .collect();
        let options = match self.partitioned {
            true => CompileOptions::partitions(self.n())
                .on_devices(&ids)
                .propagating_to_outputs(),
            false => CompileOptions::replicas(self.n()).on_devices(&ids),
        };
        let ok_dump = dump(&ir, &lowered.text, false);
        let encoded = options
            .validate(client.device_ids())
            .map(|()| options.encode());
        let compiled = encoded.and_then(|encoded| {
            super::persistent::compile(client, &lowered.text, &encoded, || {
                client.compile_encoded(&lowered.text, &encoded)
            })
        });
        let exe = compiled.map_err(|e| {
            let path = ok_dump.or_else(|| dump(&ir, &lowered.text, true));
            let where_ = match path {
                Some(p) => format!(" (program dumped to {})", p.display()),
                None => " (the program could not be dumped)".into(),
            };
            let mut message = format!("{}{where_}", e.message);
            if self.partitioned {
                if let Some(why) = super::spmd::explain(program, &e.message) {
                    message = format!("{why}; XLA said: {message}");
                }
            }
            Error::Compile {
                backend: self.name.clone(),
                message,
            }
        })?;
        // With an assignment, slot r is replica r (measured); asked rather
        // than assumed, so another plugin's order is followed too.
        let slots = exe
            .launch_devices()
            .map_err(|e| backend_err(&self.name, "compile", e))?
            .to_vec();
        let slot_of = self
            .members
            .iter()
            .map(|m| slots.iter().position(|&s| s == m.device))
            .collect::<Option<Vec<usize>>>()
            .filter(|_| slots.len() == self.n())
            .ok_or_else(|| {
                Error::internal(
                    "pjrt compile",
                    format!(
                        "the executable runs on devices {slots:?}, not on the replicas' {:?}",
                        self.members.iter().map(|m| m.device).collect::<Vec<_>>()
                    ),
                )
            })?;
        let shardings = match self.partitioned {
            true => {
                let outputs = exe.num_outputs();
                super::spmd::output_shardings(&exe, self.n(), outputs)?
            }
            false => Vec::new(),
        };
        Ok(Arc::new(ReplicatedExecutable {
            shardings,
            inner: PjrtExecutable {
                exe: Arc::new(exe),
                num_var_args: lowered.num_var_args,
                checks: if lowered.checked {
                    program.checks()
                } else {
                    Vec::new()
                },
                ran_once: AtomicBool::new(false),
                last_run_us: Default::default(),
            },
            slot_of,
        }))
    }

    fn execute(&self, exe: &ExecutableRef, args: &ExecArgs<'_>) -> Result<ExecOutputs> {
        let re = exe
            .downcast_ref::<ReplicatedExecutable>()
            .ok_or_else(|| Error::Backend {
                backend: self.name.clone(),
                op: "execute",
                message: "an executable from another backend".into(),
            })?;
        let pe = &re.inner;
        if args.vars.len() != pe.num_var_args {
            return Err(Error::internal(
                "pjrt execute",
                format!(
                    "{} size arguments for a program that takes {}",
                    args.vars.len(),
                    pe.num_var_args
                ),
            ));
        }
        let n = self.n();
        // Sizes known on the host become one device scalar per replica.
        let mut host_sizes: Vec<Vec<DeviceBuffer>> = (0..n).map(|_| Vec::new()).collect();
        for s in args.params.iter().flat_map(|(_, s)| s).chain(&args.vars) {
            if let SizeArg::Host(v) = s {
                for (r, m) in self.members.iter().enumerate() {
                    host_sizes[r].push(m.upload_i32(*v)?);
                }
            }
        }
        let mut lists: Vec<SmallVec<[&Buffer; 16]>> = vec![SmallVec::new(); n];
        // The same positions in every replica's list. `args.donate` is
        // sorted (`ExecArgs::donate`): a search, not a scan, per parameter.
        let mut donate: SmallVec<[usize; 4]> = SmallVec::new();
        for (r, list) in lists.iter_mut().enumerate() {
            let mut uploaded = host_sizes[r].iter();
            for (k, (b, sizes)) in args.params.iter().enumerate() {
                if r == 0 && args.donate.binary_search(&k).is_ok() {
                    donate.push(list.len());
                }
                list.push(self.part(b, r, "execute")?);
                for s in sizes {
                    list.push(self.size_part(s, r, &mut uploaded)?);
                }
            }
            for s in &args.vars {
                list.push(self.size_part(s, r, &mut uploaded)?);
            }
        }
        // Launch slot `re.slot_of[r]` runs replica `r`.
        let mut by_slot: Vec<&[&Buffer]> = vec![&[]; n];
        for (r, list) in lists.iter().enumerate() {
            by_slot[re.slot_of[r]] = list;
        }
        let (mut outs, events) = pe
            .exe
            .execute_replicas_into(&by_slot, &donate, |_, b| {
                DeviceBuffer::new(Storage::Pjrt(b))
            })
            .map_err(|e| backend_err(&self.name, "execute", e))?;
        // Each replica's event replaces its previous one, which is then
        // waited for (at most two executions in flight, as on one device).
        let mut events: Vec<Option<Event>> = events.into_iter().map(Some).collect();
        let mut previous = Vec::with_capacity(n);
        for (r, m) in self.members.iter().enumerate() {
            let done = events[re.slot_of[r]].take();
            previous.push(match done {
                Some(done) => m.in_flight.lock().replace(Completion::Event(done)),
                None => None,
            });
        }
        let mut failed = None;
        for (m, p) in self.members.iter().zip(previous) {
            if let Err(e) = m.wait_for(p, "execute") {
                failed.get_or_insert(e);
            }
        }
        if let Some(e) = failed {
            let _ = self.wait_all("execute");
            return Err(e);
        }
        if !pe.ran_once.load(Ordering::Relaxed) {
            // As on one device (see `PjrtBackend::execute`): the first run
            // completes before the exit handler is registered again.
            self.wait_all("execute")?;
            pe.ran_once.store(true, Ordering::Relaxed);
            at_exit::register();
        }
        // Output k of every replica, in replica order, as one buffer.
        let num_outputs = outs.first().map_or(0, Vec::len);
        let mut per_slot: Vec<std::vec::IntoIter<DeviceBuffer>> =
            outs.drain(..).map(Vec::into_iter).collect();
        let mut out = Vec::with_capacity(num_outputs);
        for _ in 0..num_outputs {
            let mut parts: Vec<Option<DeviceBuffer>> = (0..n).map(|_| None).collect();
            for (slot, it) in per_slot.iter_mut().enumerate() {
                let r = re.slot_of.iter().position(|&s| s == slot).unwrap_or(slot);
                parts[r] = it.next();
            }
            let parts = parts
                .into_iter()
                .collect::<Option<Vec<DeviceBuffer>>>()
                .ok_or_else(|| {
                    Error::internal("pjrt execute", "a replica returned too few outputs")
                })?;
            let sharded = re.shardings.get(out.len()).cloned().flatten();
            out.push(Some(match sharded {
                Some(sharding) if !sharding.is_replicated() => {
                    DeviceBuffer::new(Storage::Shards(Box::new(crate::backend::Shards {
                        sharding,
                        parts: parts.into(),
                    })))
                }
                _ => self.replicated("execute", parts)?,
            }));
        }
        Ok(ExecOutputs::new(out))
    }

    fn synchronize(&self) -> Result<()> {
        self.wait_all("synchronize")
    }

    fn upload(&self, host: &HostArray, bound: &[usize]) -> Result<DeviceBuffer> {
        let parts = self
            .members
            .iter()
            .map(|m| m.upload(host, bound))
            .collect::<Result<Vec<_>>>()?;
        self.replicated("upload", parts)
    }

    fn upload_replicas(&self, hosts: &[HostArray], bound: &[usize]) -> Result<DeviceBuffer> {
        if hosts.len() != self.n() {
            return Err(Error::internal(
                "upload",
                format!("{} arrays for {} replicas", hosts.len(), self.n()),
            ));
        }
        let parts = self
            .members
            .iter()
            .zip(hosts)
            .map(|(m, h)| m.upload(h, bound))
            .collect::<Result<Vec<_>>>()?;
        self.replicated("upload", parts)
    }

    fn upload_sizes(&self, sizes: &[i64]) -> Result<DeviceBuffer> {
        if sizes.len() != self.n() {
            return Err(Error::internal(
                "upload",
                format!("{} sizes for {} replicas", sizes.len(), self.n()),
            ));
        }
        let parts = self
            .members
            .iter()
            .zip(sizes)
            .map(|(m, &v)| m.upload_i32(v))
            .collect::<Result<Vec<_>>>()?;
        self.replicated("upload", parts)
    }

    fn download(&self, buffer: &DeviceBuffer, shape: &[usize]) -> Result<HostArray> {
        let Some(s) = buffer.sharding() else {
            return self.members[0].download(buffer.replica(0)?, shape);
        };
        // Each device's piece, placed into the whole value.
        let shard = s.shard_shape(shape);
        let mut dtype = None;
        let mut whole: Vec<u8> = Vec::new();
        for (p, m) in self.members.iter().enumerate() {
            let piece = m.download(buffer.replica(p)?, &shard)?;
            let elt = piece.dtype().size_in_bytes();
            if dtype.is_none() {
                dtype = Some(piece.dtype());
                whole = vec![0u8; shape.iter().product::<usize>() * elt];
            }
            super::spmd::place(&mut whole, shape, s, p, &piece.to_bytes(), elt);
        }
        let dtype = dtype.ok_or_else(|| Error::internal("download", "a value in no pieces"))?;
        Ok(HostArray::from_bytes(dtype, shape, &whole))
    }

    fn download_replicas(
        &self,
        buffer: &DeviceBuffer,
        shapes: &[Vec<usize>],
    ) -> Result<Vec<HostArray>> {
        self.members
            .iter()
            .zip(shapes)
            .enumerate()
            .map(|(r, (m, s))| m.download(buffer.replica(r)?, s))
            .collect()
    }

    fn check_status(&self, exe: &ExecutableRef, status: &DeviceBuffer) -> Result<()> {
        let re = exe
            .downcast_ref::<ReplicatedExecutable>()
            .ok_or_else(|| Error::internal("pjrt check", "an executable from another backend"))?;
        // Read in place on the CPU plugin: every replica must be done.
        self.wait_all("execute")?;
        for (r, m) in self.members.iter().enumerate() {
            m.read_status(&re.inner.checks, status.replica(r)?)?;
        }
        Ok(())
    }

    fn read_size(&self, buffer: &DeviceBuffer) -> Result<i64> {
        self.members[0].read_size(buffer.replica(0)?)
    }

    fn read_sizes(&self, buffer: &DeviceBuffer) -> Result<Vec<i64>> {
        self.members
            .iter()
            .enumerate()
            .map(|(r, m)| m.read_size(buffer.replica(r)?))
            .collect()
    }

    fn copy_from(&self, from: &dyn Backend, buffer: &DeviceBuffer) -> Result<Option<DeviceBuffer>> {
        if !same_client(from, &self.members[0].client) {
            return Ok(None);
        }
        let copy = |m: &PjrtBackend, b: &DeviceBuffer| -> Result<DeviceBuffer> {
            let Some(b) = b.pjrt() else {
                return Err(Error::internal(
                    "copy",
                    "a PJRT backend's buffer is no PJRT buffer",
                ));
            };
            let b = b.map_err(|e| backend_err(&m.name, "copy", e))?;
            same_device_copy(m, b)
        };
        let parts = match buffer.storage() {
            Storage::Shards(s) if self.partitioned && s.parts.len() == self.n() => {
                let parts = self
                    .members
                    .iter()
                    .zip(s.parts.iter())
                    .map(|(m, b)| copy(m, b))
                    .collect::<Result<Vec<_>>>()?;
                return Ok(Some(DeviceBuffer::new(Storage::Shards(Box::new(
                    crate::backend::Shards {
                        sharding: s.sharding.clone(),
                        parts: parts.into(),
                    },
                )))));
            }
            // Pieces: put together on the host.
            Storage::Shards(_) => return Ok(None),
            Storage::Replicas(src) if src.len() == self.n() => self
                .members
                .iter()
                .zip(src.iter())
                .map(|(m, b)| copy(m, b))
                .collect::<Result<Vec<_>>>()?,
            // One value (or another replica count's first replica) to
            // every replica.
            Storage::Replicas(_) => {
                let b = buffer.replica(0)?;
                self.members
                    .iter()
                    .map(|m| copy(m, b))
                    .collect::<Result<Vec<_>>>()?
            }
            _ => self
                .members
                .iter()
                .map(|m| copy(m, buffer))
                .collect::<Result<Vec<_>>>()?,
        };
        self.replicated("copy between devices", parts).map(Some)
    }
}

/// A copy of `b` on `m`'s device.
fn same_device_copy(m: &PjrtBackend, b: &Buffer) -> Result<DeviceBuffer> {
    let copy = m
        .client
        .copy_to_device(b, m.device)
        .map_err(|e: PjrtError| backend_err(&m.name, "copy between devices", e))?;
    Ok(DeviceBuffer::new(Storage::Pjrt(copy)))
}
