//! The XLA backend's devices in a group (`backend::group`): one program
//! compiled for `n` replicas (`num_replicas = n`) or `n` partitions
//! (`num_partitions = n`, SPMD), with a device assignment naming `n`
//! distinct devices of one client, and run on all of them by one
//! `Execute`. Every result stays where it was computed, each device's
//! part on its device, and feeds the next program there: nothing leaves
//! the devices between steps. Collectives in a replicated program
//! (`lower/collective.rs`) name the replicas `0..n`; a mesh program's
//! results keep the shardings XLA chose (`super::spmd`).
//!
//! Sizes too are per replica (a `SizeCell` of a replicated device is
//! always passed as its buffer, never as a host copy), which is how each
//! replica's part of an uneven batch has its own length.
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
use super::ffi::{Buffer, Client, CompileOptions, Event};
use super::{at_exit, backend_err, check_result_layout, dump, lower, PjrtBackend, PjrtExecutable};
use crate::backend::group::{Group, Member, PlacedOutput, Placement};
use crate::backend::{Backend, DeviceBuffer, ExecArgs, ExecutableRef, SizeArg};
use crate::error::{Error, Result};
use crate::ir::program::Program;
use smallvec::SmallVec;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// True when `backend` is a PJRT backend (one device or a group) of
/// `client`.
pub(super) fn same_client(backend: &dyn Backend, client: &Client) -> bool {
    let Some(any) = backend.as_any() else {
        return false;
    };
    if let Some(b) = any.downcast_ref::<PjrtBackend>() {
        return b.client.same(client);
    }
    if let Some(g) = any.downcast_ref::<Group<PjrtBackend>>() {
        return g.members()[0].client.same(client);
    }
    false
}

impl PjrtBackend {
    /// The members of a group on `devices` (member `r` on `devices[r]`),
    /// which must be distinct devices of one client: each with its own
    /// execution in flight.
    pub(crate) fn group_members(devices: &[&PjrtBackend]) -> Result<Vec<PjrtBackend>> {
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
        let ids: Vec<i64> = devices
            .iter()
            .map(|d| first.client.device_ids()[d.device])
            .collect();
        CompileOptions::replicas(devices.len())
            .on_devices(&ids)
            .validate(first.client.device_ids())
            .map_err(|e| Error::invalid("replicas", e.message))?;
        Ok(devices.iter().map(|d| first.sibling(d.device)).collect())
    }

    /// Member `r`'s PJRT buffer of a group buffer.
    fn part<'a>(&self, b: &'a DeviceBuffer, r: usize, op: &'static str) -> Result<&'a Buffer> {
        self.buffer(b.replica(r)?, op)
    }
}

/// The StableHLO module for `program` on `placement`: its lowering,
/// declared for the placement's replicas and partitions (XLA obeys the
/// compile options; the attributes say the same for readers of a dump).
fn module(program: &Program, placement: Placement) -> Result<lower::Lowered> {
    let n = placement.devices();
    let mut lowered = match placement {
        Placement::Mesh(_) => {
            if lower::collective_replicas(program).next().is_some() {
                return Err(Error::invalid(
                    "sharding",
                    "a collective between replicas (all_reduce, all_gather, reduce_scatter, replica_id) in a sharded program; XLA's partitioner inserts the collectives of a sharded program itself",
                ));
            }
            lower::lower_with(program, true)?
        }
        Placement::One | Placement::Replicas(_) => {
            if let Some(k) = lower::collective_replicas(program).find(|&k| k != n) {
                return Err(Error::internal(
                    "pjrt compile",
                    format!("a collective over {k} replicas in a program for {n} replicas"),
                ));
            }
            lower::lower(program)?
        }
    };
    lowered.text = format!(
        "module @lazyxla attributes {{mhlo.num_replicas = {} : i32, mhlo.num_partitions = {} : i32}} {{\n{}}}\n",
        placement.replicas(),
        placement.partitions(),
        lowered.text
    );
    Ok(lowered)
}

/// Member `r`'s buffer of a size argument: its own part, or for a size
/// known on the host the next one `uploaded` for it on that member.
fn size_part<'a>(
    m: &PjrtBackend,
    s: &SizeArg<'a>,
    r: usize,
    uploaded: &mut std::slice::Iter<'a, DeviceBuffer>,
) -> Result<&'a Buffer> {
    match *s {
        SizeArg::Device(b) => m.part(b, r, "execute"),
        SizeArg::Host(_) => {
            let b = uploaded
                .next()
                .ok_or_else(|| Error::internal("pjrt execute", "a host size not uploaded"))?;
            m.buffer(b, "execute")
        }
    }
}

/// Waits for every member's execution in flight; the first error.
fn wait_all(members: &[PjrtBackend], op: &'static str) -> Result<()> {
    let mut first = Ok(());
    for m in members {
        let r = m.wait_in_flight(op);
        if first.is_ok() {
            first = r;
        }
    }
    first
}

impl Member for PjrtBackend {
    fn platform(&self) -> String {
        format!("pjrt:{}", self.client.platform_name().to_lowercase())
    }

    fn ordinal(&self) -> usize {
        self.device
    }

    fn upload_size(&self, v: i64) -> Result<DeviceBuffer> {
        self.upload_i32(v)
    }

    fn compile_placed(
        members: &[PjrtBackend],
        placement: Placement,
        program: &Program,
    ) -> Result<ExecutableRef> {
        let first = &members[0];
        let n = members.len();
        let name = || Group::<PjrtBackend>::name_of(members, placement);
        let lowered = module(program, placement)?;
        check_result_layout(program, &lowered)?;
        let ir = super::dump_ir(program, &lowered);
        let client = &first.client;
        let ids: Vec<i64> = members
            .iter()
            .map(|m| client.device_ids()[m.device])
            .collect();
        let options = match placement {
            Placement::Mesh(_) => CompileOptions::partitions(n)
                .on_devices(&ids)
                .propagating_to_outputs(),
            Placement::One | Placement::Replicas(_) => CompileOptions::replicas(n).on_devices(&ids),
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
            if let Placement::Mesh(_) = placement {
                if let Some(why) = super::spmd::explain(program, &e.message) {
                    message = format!("{why}; XLA said: {message}");
                }
            }
            Error::Compile {
                backend: name(),
                message,
            }
        })?;
        // With an assignment, slot r is member r (measured); asked rather
        // than assumed, so another plugin's order is followed too.
        let slots = exe
            .launch_devices()
            .map_err(|e| backend_err(&name(), "compile", e))?
            .to_vec();
        let slot_of = members
            .iter()
            .map(|m| slots.iter().position(|&s| s == m.device))
            .collect::<Option<Vec<usize>>>()
            .filter(|_| slots.len() == n)
            .ok_or_else(|| {
                Error::internal(
                    "pjrt compile",
                    format!(
                        "the executable runs on devices {slots:?}, not on the group's {:?}",
                        members.iter().map(|m| m.device).collect::<Vec<_>>()
                    ),
                )
            })?;
        let shardings = match placement {
            Placement::Mesh(_) => {
                let outputs = exe.num_outputs();
                super::spmd::output_shardings(&exe, n, outputs)?
            }
            Placement::One | Placement::Replicas(_) => Vec::new(),
        };
        let exe = PjrtExecutable::new(exe, program, &lowered, slot_of, shardings);
        Ok(Arc::new(exe))
    }

    fn execute_placed(
        members: &[PjrtBackend],
        placement: Placement,
        exe: &ExecutableRef,
        args: &ExecArgs<'_>,
    ) -> Result<Vec<PlacedOutput>> {
        let name = || Group::<PjrtBackend>::name_of(members, placement);
        let pe = exe
            .downcast_ref::<PjrtExecutable>()
            .filter(|pe| pe.slot_of.len() == members.len())
            .ok_or_else(|| Error::Backend {
                backend: name(),
                op: "execute",
                message: "an executable compiled for another backend or placement".into(),
            })?;
        pe.check_vars(args)?;
        let n = members.len();
        // Sizes known on the host become one device scalar per member.
        let mut host_sizes: Vec<Vec<DeviceBuffer>> = (0..n).map(|_| Vec::new()).collect();
        for s in args.params.iter().flat_map(|(_, s)| s).chain(&args.vars) {
            if let SizeArg::Host(v) = s {
                for (r, m) in members.iter().enumerate() {
                    host_sizes[r].push(m.upload_i32(*v)?);
                }
            }
        }
        let mut lists: Vec<SmallVec<[&Buffer; 16]>> = vec![SmallVec::new(); n];
        // The same positions in every member's list. `args.donate` is
        // sorted (`ExecArgs::donate`): a search, not a scan, per parameter.
        let mut donate: SmallVec<[usize; 4]> = SmallVec::new();
        for (r, (list, m)) in lists.iter_mut().zip(members).enumerate() {
            let mut uploaded = host_sizes[r].iter();
            for (k, (b, sizes)) in args.params.iter().enumerate() {
                if r == 0 && args.donate.binary_search(&k).is_ok() {
                    donate.push(list.len());
                }
                list.push(m.part(b, r, "execute")?);
                for s in sizes {
                    list.push(size_part(m, s, r, &mut uploaded)?);
                }
            }
            for s in &args.vars {
                list.push(size_part(m, s, r, &mut uploaded)?);
            }
        }
        // Launch slot `pe.slot_of[r]` runs member `r`.
        let mut by_slot: Vec<&[&Buffer]> = vec![&[]; n];
        for (r, list) in lists.iter().enumerate() {
            by_slot[pe.slot_of[r]] = list;
        }
        let (mut outs, events) = pe
            .exe
            .execute_replicas_into(&by_slot, &donate, |_, b| {
                DeviceBuffer::new(crate::backend::Storage::Pjrt(b))
            })
            .map_err(|e| backend_err(&name(), "execute", e))?;
        // Each member's event replaces its previous one, which is then
        // waited for (at most two executions in flight, as on one device).
        let mut events: Vec<Option<Event>> = events.into_iter().map(Some).collect();
        let mut previous = Vec::with_capacity(n);
        for (r, m) in members.iter().enumerate() {
            let done = events[pe.slot_of[r]].take();
            previous.push(match done {
                Some(done) => m.in_flight.lock().replace(Completion::Event(done)),
                None => None,
            });
        }
        let mut failed = None;
        for (m, p) in members.iter().zip(previous) {
            if let Err(e) = m.wait_for(p, "execute") {
                failed.get_or_insert(e);
            }
        }
        if let Some(e) = failed {
            let _ = wait_all(members, "execute");
            return Err(e);
        }
        if !pe.ran_once.load(Ordering::Relaxed) {
            // As on one device (see `PjrtBackend::execute`): the first run
            // completes before the exit handler is registered again.
            wait_all(members, "execute")?;
            pe.ran_once.store(true, Ordering::Relaxed);
            at_exit::register();
        }
        // Output k of every member, in member order.
        let num_outputs = outs.first().map_or(0, Vec::len);
        let mut per_slot: Vec<std::vec::IntoIter<DeviceBuffer>> =
            outs.drain(..).map(Vec::into_iter).collect();
        let mut out = Vec::with_capacity(num_outputs);
        for k in 0..num_outputs {
            let mut parts: Vec<Option<DeviceBuffer>> = (0..n).map(|_| None).collect();
            for (slot, it) in per_slot.iter_mut().enumerate() {
                let r = pe.slot_of.iter().position(|&s| s == slot).unwrap_or(slot);
                parts[r] = it.next();
            }
            let parts = parts
                .into_iter()
                .collect::<Option<Vec<DeviceBuffer>>>()
                .ok_or_else(|| {
                    Error::internal("pjrt execute", "a device returned too few outputs")
                })?;
            out.push(PlacedOutput {
                parts,
                sharding: pe.shardings.get(k).cloned().flatten(),
            });
        }
        Ok(out)
    }
}
