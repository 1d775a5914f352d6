//! Compiled programs: compilation from MLIR text and single-device execution.

use smallvec::{smallvec, SmallVec};
use std::ptr::null_mut;
use std::sync::{Arc, OnceLock};

use super::buffer::BufferShape;
use super::{new_args, sys, Buffer, ClientInner, Event, PjrtError, Plugin};

/// A program compiled and loaded onto one device of its client, owned by this
/// value (`PJRT_LoadedExecutable_Destroy` on drop).
pub struct Executable {
    pub(super) client: Arc<ClientInner>,
    pub(super) raw: *mut sys::LoadedExecutable,
    pub(super) num_outputs: usize,
    /// Per result, its shape if static, read from the first execution's
    /// results: a static result type has the same shape on every run
    /// (and on every replica).
    pub(super) output_shapes: OnceLock<Vec<Option<Arc<BufferShape>>>>,
    /// `0..n` for `n` arguments: the indices that must not be donated.
    pub(super) non_donatable: OnceLock<Vec<i64>>,
    /// The client ordinal of the device of each launch slot, asked once
    /// (see `replicas`).
    pub(super) launch_devices: OnceLock<Vec<usize>>,
}

// SAFETY: PJRT loaded executables may be executed concurrently from any
// thread; this value is the sole owner of the pointer.
unsafe impl Send for Executable {}
// SAFETY: as above; `execute` takes `&self` and PJRT's Execute is thread-safe.
unsafe impl Sync for Executable {}

impl std::fmt::Debug for Executable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executable")
            .field("num_outputs", &self.num_outputs)
            .finish()
    }
}

impl Drop for Executable {
    fn drop(&mut self) {
        let plugin = &self.client.plugin;
        if let Ok(destroy) = api_fn!(plugin, PJRT_LoadedExecutable_Destroy) {
            let mut args = new_args::<sys::LoadedExecutableDestroyArgs>();
            args.executable = self.raw;
            // SAFETY: we own the executable and its client is still alive.
            let _ = unsafe { plugin.call(destroy, &mut args, "PJRT_LoadedExecutable_Destroy") };
        }
    }
}

/// A `PJRT_Executable` obtained from a loaded executable; the C API hands out
/// a fresh one per call, which the caller must destroy.
struct UnloadedExecutable<'a> {
    plugin: &'a Plugin,
    raw: *mut sys::Executable,
}

impl Drop for UnloadedExecutable<'_> {
    fn drop(&mut self) {
        if let Ok(destroy) = api_fn!(self.plugin, PJRT_Executable_Destroy) {
            let mut args = new_args::<sys::ExecutableDestroyArgs>();
            args.executable = self.raw;
            // SAFETY: we own this handle; the loaded executable is unaffected.
            let _ = unsafe {
                self.plugin
                    .call(destroy, &mut args, "PJRT_Executable_Destroy")
            };
        }
    }
}

/// See [`super::Client::compile`].
pub(super) fn compile(
    client: &Arc<ClientInner>,
    mlir_text: &str,
    compile_options: &[u8],
) -> Result<Executable, PjrtError> {
    const FORMAT: &str = "mlir";
    let plugin = &client.plugin;
    let compile = api_fn!(plugin, PJRT_Client_Compile)?;

    // MLIR's lexer finds the end of text by the NUL that LLVM memory buffers
    // normally carry one past `code_size`, and reads past the end without it
    // (the 0.115 CPU plugin segfaults on `"bad"`); so hand it a terminated copy.
    let mut code = Vec::with_capacity(mlir_text.len() + 1);
    code.extend_from_slice(mlir_text.as_bytes());
    code.push(0);

    let mut program = new_args::<sys::Program>();
    // The C field is `char*` only because serialization writes through it;
    // compilation only reads.
    program.code = code.as_mut_ptr().cast();
    program.code_size = mlir_text.len();
    program.format = FORMAT.as_ptr().cast();
    program.format_size = FORMAT.len();

    let mut args = new_args::<sys::ClientCompileArgs>();
    args.client = client.raw;
    args.program = &program;
    args.compile_options = compile_options.as_ptr().cast();
    args.compile_options_size = compile_options.len();
    // SAFETY: all pointers are valid for the duration of the call, which
    // copies what it keeps.
    unsafe { plugin.call(compile, &mut args, "PJRT_Client_Compile") }?;
    let mut executable = Executable {
        client: client.clone(),
        raw: args.executable,
        num_outputs: 0,
        output_shapes: OnceLock::new(),
        non_donatable: OnceLock::new(),
        launch_devices: OnceLock::new(),
    };
    executable.num_outputs = executable.query_num_outputs()?;
    Ok(executable)
}

/// See [`super::Client::deserialize`].
pub(super) fn deserialize(
    client: &Arc<ClientInner>,
    bytes: &[u8],
) -> Result<Executable, PjrtError> {
    let plugin = &client.plugin;
    let load = api_fn!(plugin, PJRT_Executable_DeserializeAndLoad)?;
    let mut args = new_args::<sys::ExecutableDeserializeAndLoadArgs>();
    args.client = client.raw;
    args.serialized_executable = bytes.as_ptr().cast();
    args.serialized_executable_size = bytes.len();
    // SAFETY: the bytes outlive the call, which copies what it keeps; the
    // other pointers are null (options from the serialized executable).
    unsafe { plugin.call(load, &mut args, "PJRT_Executable_DeserializeAndLoad") }?;
    let mut executable = Executable {
        client: client.clone(),
        raw: args.loaded_executable,
        num_outputs: 0,
        output_shapes: OnceLock::new(),
        non_donatable: OnceLock::new(),
        launch_devices: OnceLock::new(),
    };
    executable.num_outputs = executable.query_num_outputs()?;
    Ok(executable)
}

impl Executable {
    /// The plugin's serialization of the compiled program
    /// (`PJRT_Executable_Serialize`), which
    /// [`Client::deserialize`](super::Client::deserialize) loads again on
    /// a client of the same plugin. Not stable across plugin versions.
    pub fn serialize(&self) -> Result<Vec<u8>, PjrtError> {
        let plugin = &*self.client.plugin;
        let get = api_fn!(plugin, PJRT_LoadedExecutable_GetExecutable)?;
        let mut args = new_args::<sys::LoadedExecutableGetExecutableArgs>();
        args.loaded_executable = self.raw;
        // SAFETY: valid args for a live loaded executable.
        unsafe { plugin.call(get, &mut args, "PJRT_LoadedExecutable_GetExecutable") }?;
        let unloaded = UnloadedExecutable {
            plugin,
            raw: args.executable,
        };
        let serialize = api_fn!(plugin, PJRT_Executable_Serialize)?;
        let mut args = new_args::<sys::ExecutableSerializeArgs>();
        args.executable = unloaded.raw;
        // SAFETY: valid args for a live executable handle.
        unsafe { plugin.call(serialize, &mut args, "PJRT_Executable_Serialize") }?;
        let bytes = match args.serialized_bytes.is_null() {
            true => Vec::new(),
            // SAFETY: the plugin keeps `serialized_bytes_size` bytes there
            // until the deleter runs, below.
            false => unsafe {
                std::slice::from_raw_parts(
                    args.serialized_bytes.cast::<u8>(),
                    args.serialized_bytes_size,
                )
            }
            .to_vec(),
        };
        if let (Some(delete), false) = (
            args.serialized_executable_deleter,
            args.serialized_executable.is_null(),
        ) {
            // SAFETY: called once on the handle the plugin returned, as the
            // header asks; a plain C function that frees the bytes.
            unsafe { delete(args.serialized_executable) };
        }
        Ok(bytes)
    }

    /// The program as XLA optimized it (`PJRT_Executable_OptimizedProgram`):
    /// its format (`"hlo"` for a serialized `HloModuleProto`,
    /// `"hlo_with_config"` for an `HloModuleProtoWithConfig`, whose field 1
    /// is the module) and its bytes. For an SPMD program the module is the
    /// partitioned one and holds the shardings the partitioner chose for
    /// the parameters and results (see `hlo_sharding`).
    pub fn optimized_program(&self) -> Result<(String, Vec<u8>), PjrtError> {
        let plugin = &*self.client.plugin;
        let get = api_fn!(plugin, PJRT_LoadedExecutable_GetExecutable)?;
        let mut args = new_args::<sys::LoadedExecutableGetExecutableArgs>();
        args.loaded_executable = self.raw;
        // SAFETY: valid args for a live loaded executable.
        unsafe { plugin.call(get, &mut args, "PJRT_LoadedExecutable_GetExecutable") }?;
        let unloaded = UnloadedExecutable {
            plugin,
            raw: args.executable,
        };
        let optimized = api_fn!(plugin, PJRT_Executable_OptimizedProgram)?;
        let mut program = new_args::<sys::Program>();
        let mut args = new_args::<sys::ExecutableOptimizedProgramArgs>();
        args.executable = unloaded.raw;
        args.program = &mut program;
        // SAFETY: `program.code` is null, so the plugin only writes the
        // size and the format (a string it owns) into `program`.
        unsafe { plugin.call(optimized, &mut args, "PJRT_Executable_OptimizedProgram") }?;
        let mut code = vec![0u8; program.code_size];
        program.code = code.as_mut_ptr().cast();
        args.program = &mut program;
        // SAFETY: `code` holds the `code_size` bytes the first call asked
        // for and outlives the call, which writes at most that many.
        unsafe { plugin.call(optimized, &mut args, "PJRT_Executable_OptimizedProgram") }?;
        code.truncate(program.code_size);
        let format = match program.format.is_null() {
            true => String::new(),
            // SAFETY: the plugin owns `format_size` bytes at `format`,
            // valid while the executable is.
            false => String::from_utf8_lossy(unsafe {
                std::slice::from_raw_parts(program.format.cast::<u8>(), program.format_size)
            })
            .into_owned(),
        };
        Ok((format, code))
    }

    /// The argument indices PJRT must not donate: all of `0..num_args`
    /// but `donate` (sorted). Every argument not asked for is kept, even
    /// where the program declares input/output aliasing: PJRT donates by
    /// default whatever the program aliases.
    pub(super) fn non_donatable<'a>(
        &'a self,
        num_args: usize,
        donate: &[usize],
    ) -> std::borrow::Cow<'a, [i64]> {
        let all = |n: usize| (0..n as i64).collect::<Vec<i64>>();
        if donate.is_empty() {
            let cached = self.non_donatable.get_or_init(|| all(num_args));
            if cached.len() == num_args {
                return cached.as_slice().into();
            }
            // Another argument count (the plugin will say it is wrong).
            return all(num_args).into();
        }
        (0..num_args as i64)
            .filter(|i| donate.binary_search(&(*i as usize)).is_err())
            .collect::<Vec<i64>>()
            .into()
    }

    fn query_num_outputs(&self) -> Result<usize, PjrtError> {
        let plugin = &*self.client.plugin;
        let get = api_fn!(plugin, PJRT_LoadedExecutable_GetExecutable)?;
        let mut args = new_args::<sys::LoadedExecutableGetExecutableArgs>();
        args.loaded_executable = self.raw;
        // SAFETY: valid args for a live loaded executable.
        unsafe { plugin.call(get, &mut args, "PJRT_LoadedExecutable_GetExecutable") }?;
        let unloaded = UnloadedExecutable {
            plugin,
            raw: args.executable,
        };

        let count = api_fn!(plugin, PJRT_Executable_NumOutputs)?;
        let mut args = new_args::<sys::ExecutableNumOutputsArgs>();
        args.executable = unloaded.raw;
        // SAFETY: valid args for a live executable handle.
        unsafe { plugin.call(count, &mut args, "PJRT_Executable_NumOutputs") }?;
        Ok(args.num_outputs)
    }

    /// The client the program was compiled on (where its arguments live).
    pub fn client(&self) -> super::Client {
        super::Client::from_inner(self.client.clone())
    }

    /// The number of results the program returns (results are never tupled).
    pub fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    /// Runs the program on its device with `args` as parameters, waits for it
    /// to finish and returns one buffer per result, in order.
    ///
    /// Arguments must come from this executable's client. They are never
    /// donated: every argument stays valid and unchanged after the call
    /// (see [`execute_async_donating`](Self::execute_async_donating)).
    pub fn execute(&self, args: &[&Buffer]) -> Result<Vec<Buffer>, PjrtError> {
        let (results, done) = self.execute_async(args)?;
        done.wait()?;
        Ok(results)
    }

    /// Starts the program on its device with `args` as parameters and returns
    /// at once: one buffer per result, in order, and the event that fires
    /// when they are computed (carrying the execution's error, if any).
    ///
    /// The results may be used right away: PJRT orders every later use of
    /// them (another execution, a copy to the host) after the execution.
    /// Dropping the arguments or the results early is safe too; PJRT keeps
    /// the memory alive for the execution. Arguments are never donated.
    pub fn execute_async(&self, args: &[&Buffer]) -> Result<(Vec<Buffer>, Event), PjrtError> {
        self.execute_async_into(args, &[], |b| b)
    }

    /// [`execute_async`](Self::execute_async), donating the arguments at
    /// the positions in `donate` (sorted, distinct) to the results their
    /// parameters alias (`tf.aliasing_output` in the program text): the
    /// program writes those results into the donated memory. A donated
    /// argument is deleted by the call, whatever its outcome: reading it
    /// or passing it to another execution is the plugin's error
    /// ("deleted or donated"), and only dropping it is left. An argument
    /// whose parameter aliases no result is not donated (PJRT ignores it);
    /// an aliased one left out of `donate` stays valid, and the program
    /// writes that result to fresh memory.
    pub fn execute_async_donating(
        &self,
        args: &[&Buffer],
        donate: &[usize],
    ) -> Result<(Vec<Buffer>, Event), PjrtError> {
        self.execute_async_into(args, donate, |b| b)
    }

    /// [`execute_async`](Self::execute_async), handing each result to
    /// `wrap` as it is taken: the caller's list of results is the only one
    /// allocated.
    ///
    /// `donate` lists the arguments to donate, as in
    /// [`execute_async_donating`](Self::execute_async_donating).
    pub(crate) fn execute_async_into<T>(
        &self,
        args: &[&Buffer],
        donate: &[usize],
        wrap: impl FnMut(Buffer) -> T,
    ) -> Result<(Vec<T>, Event), PjrtError> {
        if let Some(i) = args.iter().position(|b| !b.same_client(&self.client)) {
            return Err(PjrtError::local(format!(
                "argument {i} belongs to a different PJRT client than the executable"
            )));
        }
        let arg_ptrs: SmallVec<[*mut sys::Buffer; 32]> = args.iter().map(|b| b.raw()).collect();
        // SAFETY: the handles are those of live buffers of this client,
        // borrowed for the call.
        unsafe { self.execute_raw(&arg_ptrs, donate, wrap) }
    }

    /// [`execute_async_into`](Self::execute_async_into) on raw argument
    /// handles (see `dispatch`).
    ///
    /// # Safety
    ///
    /// Each handle must be a live buffer of this executable's client for
    /// the duration of the call.
    pub(super) unsafe fn execute_raw<T>(
        &self,
        arg_ptrs: &[*mut sys::Buffer],
        donate: &[usize],
        mut wrap: impl FnMut(Buffer) -> T,
    ) -> Result<(Vec<T>, Event), PjrtError> {
        let plugin = &self.client.plugin;
        let execute = api_fn!(plugin, PJRT_LoadedExecutable_Execute)?;

        // One device: a list of argument lists and of output lists, each of
        // length one; the plugin fills the output slots and the event slot.
        let arg_lists = [arg_ptrs.as_ptr()];
        let mut outputs: SmallVec<[*mut sys::Buffer; 32]> = smallvec![null_mut(); self.num_outputs];
        let output_lists = [outputs.as_mut_ptr()];
        let mut done = [null_mut::<sys::Event>()];
        let non_donatable = self.non_donatable(arg_ptrs.len(), donate);

        let mut options = new_args::<sys::ExecuteOptions>();
        options.non_donatable_input_indices = non_donatable.as_ptr();
        options.num_non_donatable_input_indices = non_donatable.len();

        let mut call = new_args::<sys::LoadedExecutableExecuteArgs>();
        call.executable = self.raw;
        call.options = &mut options;
        call.argument_lists = arg_lists.as_ptr();
        call.num_devices = 1;
        call.num_args = arg_ptrs.len();
        call.output_lists = output_lists.as_ptr();
        call.device_complete_events = done.as_mut_ptr();
        // Null: run on the device(s) chosen at compile time.
        call.execute_device = null_mut();
        // SAFETY: every pointer refers to live locals sized as declared
        // (`num_outputs` slots, one event slot); argument buffers are live
        // and owned by this executable's client.
        unsafe { plugin.call(execute, &mut call, "PJRT_LoadedExecutable_Execute") }?;

        // Own the event and every result, even after an error, so nothing
        // leaks on failure.
        let done = Event::adopt(plugin, done[0], "PJRT_LoadedExecutable_Execute");
        // A static result's type and shape are known before the execution
        // completes (lazyxla's programs return only static results) and are
        // the same on every run, so they are asked once; for a dynamic one
        // the plugin waits for the execution before answering.
        let known = self.output_shapes.get();
        let mut first: Option<Vec<_>> = known.is_none().then(|| Vec::with_capacity(outputs.len()));
        let mut results = Vec::with_capacity(outputs.len());
        let mut error = None;
        for (k, &raw) in outputs.iter().enumerate().filter(|(_, raw)| !raw.is_null()) {
            let mut result = Buffer::adopt(&self.client, raw);
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
            if let Some(first) = &mut first {
                let shape = &result.shape;
                first.push(shape.dynamic_dims.is_empty().then(|| shape.clone()));
            }
            results.push(wrap(result));
        }
        if let Some(e) = error {
            return Err(e);
        }
        if results.len() != self.num_outputs {
            return Err(PjrtError::local(format!(
                "PJRT_LoadedExecutable_Execute returned fewer than the {} declared outputs",
                self.num_outputs
            )));
        }
        if let Some(first) = first {
            let _ = self.output_shapes.set(first);
        }
        Ok((results, done))
    }
}
