//! Executing one compiled program on several devices at once: one
//! `PJRT_LoadedExecutable_Execute` with one argument list, one output
//! list and one completion event per device.
//!
//! A program compiled for `n` replicas (or partitions) has `n` launch
//! slots; slot `i` runs on the `i`-th entry of
//! `PJRT_LoadedExecutable_AddressableDevices`, and its arguments must live
//! on that device (the plugin says so cleanly otherwise). With a device
//! assignment, slot `i` is replica `i`, on the device the assignment
//! names (measured on both CPU plugins).

use smallvec::{smallvec, SmallVec};
use std::ptr::null_mut;

use super::{new_args, plugin_slice, sys, Buffer, Event, Executable, PjrtError};

/// A fresh nonzero launch id (wrapping past `i32::MAX` back to 1).
fn next_launch_id() -> std::ffi::c_int {
    use std::sync::atomic::{AtomicI32, Ordering};
    static NEXT: AtomicI32 = AtomicI32::new(1);
    loop {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        if id > 0 {
            return id;
        }
        // Wrapped around: start again from 1 (races give a duplicate at
        // worst, two billion launches apart).
        let _ = NEXT.compare_exchange(id + 1, 1, Ordering::Relaxed, Ordering::Relaxed);
    }
}

impl Executable {
    /// The client ordinal (see [`super::Client::buffer_from_host`]) of the
    /// device each launch slot runs on, in slot order.
    pub fn launch_devices(&self) -> Result<&[usize], PjrtError> {
        if let Some(d) = self.launch_devices.get() {
            return Ok(d);
        }
        let plugin = &self.client.plugin;
        let get = api_fn!(plugin, PJRT_LoadedExecutable_AddressableDevices)?;
        let mut args = new_args::<sys::LoadedExecutableAddressableDevicesArgs>();
        args.executable = self.raw;
        // SAFETY: valid args for a live loaded executable; the returned
        // array is owned by it.
        unsafe { plugin.call(get, &mut args, "PJRT_LoadedExecutable_AddressableDevices") }?;
        // SAFETY: pointer and length from the plugin, valid while the
        // executable is.
        let devices =
            unsafe { plugin_slice(args.addressable_devices, args.num_addressable_devices) };
        let ordinals = devices
            .iter()
            .map(|d| {
                self.client
                    .devices
                    .iter()
                    .position(|c| c == d)
                    .ok_or_else(|| {
                        PjrtError::local(
                            "the executable runs on a device its client does not list as addressable",
                        )
                    })
            })
            .collect::<Result<Vec<usize>, PjrtError>>()?;
        Ok(self.launch_devices.get_or_init(|| ordinals))
    }

    /// Starts the program on every launch slot at once: `lists[i]` are the
    /// arguments of slot `i` (on device [`Executable::launch_devices`]`[i]`).
    /// Returns each slot's results and completion event (see
    /// [`Executable::execute_replicas_into`]).
    pub fn execute_replicas(
        &self,
        lists: &[&[&Buffer]],
    ) -> Result<(Vec<Vec<Buffer>>, Vec<Event>), PjrtError> {
        self.execute_replicas_into(lists, &[], |_, b| b)
    }

    /// Starts the program on every launch slot at once: `lists[i]` are the
    /// arguments of slot `i` (on device [`Executable::launch_devices`]`[i]`),
    /// all lists of one length. Returns, per slot, its results in order,
    /// each handed to `wrap(slot, buffer)` as it is taken, and the event
    /// that fires when the slot's results are computed.
    ///
    /// As [`Executable::execute_async`]: results may be used at once,
    /// dropping either early is safe, and arguments are donated only at
    /// the positions in `donate` (sorted; in every slot, as
    /// [`Executable::execute_async_donating`] does on one device).
    pub(crate) fn execute_replicas_into<T>(
        &self,
        lists: &[&[&Buffer]],
        donate: &[usize],
        mut wrap: impl FnMut(usize, Buffer) -> T,
    ) -> Result<(Vec<Vec<T>>, Vec<Event>), PjrtError> {
        let plugin = &self.client.plugin;
        let n = lists.len();
        let num_args = lists.first().map_or(0, |l| l.len());
        if n == 0 {
            return Err(PjrtError::local("execute on no device"));
        }
        if let Some(i) = lists.iter().position(|l| l.len() != num_args) {
            return Err(PjrtError::local(format!(
                "launch slot {i} has {} arguments, slot 0 has {num_args}",
                lists[i].len()
            )));
        }
        let devices = self.launch_devices()?;
        if devices.len() != n {
            return Err(PjrtError::local(format!(
                "{n} argument lists for a program of {} launch slots",
                devices.len()
            )));
        }
        for (slot, list) in lists.iter().enumerate() {
            for (i, b) in list.iter().enumerate() {
                if !b.same_client(&self.client) {
                    return Err(PjrtError::local(format!(
                        "argument {i} of launch slot {slot} belongs to a different PJRT client than the executable"
                    )));
                }
                // Checked here, not by the plugin: a launch the CPU plugin
                // refuses for a misplaced argument leaves its client
                // unable to run the next collective (measured: it hangs).
                let d = b.device_ordinal()?;
                if d != devices[slot] {
                    return Err(PjrtError::local(format!(
                        "argument {i} of launch slot {slot} is on device {d}, but the slot runs on device {}",
                        devices[slot]
                    )));
                }
            }
        }
        let execute = api_fn!(plugin, PJRT_LoadedExecutable_Execute)?;

        let arg_ptrs: Vec<SmallVec<[*mut sys::Buffer; 32]>> = lists
            .iter()
            .map(|l| l.iter().map(|b| b.raw()).collect())
            .collect();
        let arg_lists: SmallVec<[*const *mut sys::Buffer; 8]> =
            arg_ptrs.iter().map(|l| l.as_ptr()).collect();
        let mut outputs: Vec<SmallVec<[*mut sys::Buffer; 32]>> = (0..n)
            .map(|_| smallvec![null_mut(); self.num_outputs])
            .collect();
        let output_lists: SmallVec<[*mut *mut sys::Buffer; 8]> =
            outputs.iter_mut().map(|l| l.as_mut_ptr()).collect();
        let mut done: SmallVec<[*mut sys::Event; 8]> = smallvec![null_mut(); n];
        let non_donatable = self.non_donatable(num_args, donate);

        let mut options = new_args::<sys::ExecuteOptions>();
        options.non_donatable_input_indices = non_donatable.as_ptr();
        options.num_non_donatable_input_indices = non_donatable.len();
        // A launch id of its own: the CPU plugin keys a collective's
        // meeting by it (`RunId`), and with the default 0 two launches in
        // flight would meet under one key.
        options.launch_id = next_launch_id();

        let mut call = new_args::<sys::LoadedExecutableExecuteArgs>();
        call.executable = self.raw;
        call.options = &mut options;
        call.argument_lists = arg_lists.as_ptr();
        call.num_devices = n;
        call.num_args = num_args;
        call.output_lists = output_lists.as_ptr();
        call.device_complete_events = done.as_mut_ptr();
        call.execute_device = null_mut();
        // One launch on several devices at a time, so that every device
        // queues concurrent launches in one order: interleaved, two
        // programs' collectives could wait on each other for good (not
        // seen on the CPU plugins; the lock costs one uncontended lock).
        let launched = {
            let _one = self
                .client
                .launch
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            // SAFETY: `n` argument lists of `num_args` live buffers of
            // this client, `n` output lists of `num_outputs` slots and `n`
            // event slots, all locals that outlive the call.
            unsafe { plugin.call(execute, &mut call, "PJRT_LoadedExecutable_Execute") }
        };
        launched?;

        // Own every event and result, even after an error, so nothing
        // leaks on failure.
        let events: Vec<Event> = done
            .iter()
            .map(|&e| Event::adopt(plugin, e, "PJRT_LoadedExecutable_Execute"))
            .collect();
        let known = self.output_shapes.get();
        let mut first: Option<Vec<_>> = known
            .is_none()
            .then(|| Vec::with_capacity(self.num_outputs));
        let mut results = Vec::with_capacity(n);
        let mut error = None;
        for (slot, outs) in outputs.iter().enumerate() {
            let mut slot_results = Vec::with_capacity(outs.len());
            for (k, &raw) in outs.iter().enumerate().filter(|(_, raw)| !raw.is_null()) {
                let mut result = Buffer::adopt(&self.client, raw);
                let _ = result.device.set(devices[slot]);
                if error.is_some() {
                    continue;
                }
                match known.and_then(|shapes| shapes[k].as_ref()) {
                    Some(shape) => result.shape = shape.clone(),
                    None => {
                        if let Err(e) = result.read_shape() {
                            error = Some(e);
                            continue;
                        }
                    }
                }
                if let (0, Some(first)) = (slot, &mut first) {
                    let shape = &result.shape;
                    first.push(shape.dynamic_dims.is_empty().then(|| shape.clone()));
                }
                slot_results.push(wrap(slot, result));
            }
            if error.is_none() && slot_results.len() != self.num_outputs {
                error = Some(PjrtError::local(format!(
                    "PJRT_LoadedExecutable_Execute returned fewer than the {} declared outputs on launch slot {slot}",
                    self.num_outputs
                )));
            }
            results.push(slot_results);
        }
        if let Some(e) = error {
            return Err(e);
        }
        if let Some(first) = first {
            let _ = self.output_shapes.set(first);
        }
        Ok((results, events))
    }
}
