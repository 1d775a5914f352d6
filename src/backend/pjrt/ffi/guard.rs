//! Calls into a plugin through the C++ guard (`guard.cc`), so that a C++
//! exception thrown inside XLA becomes a [`PjrtError`] instead of aborting
//! the process.
//!
//! Every fallible PJRT entry is called through [`Plugin::call`]; the rest of
//! this layer never calls one directly (a test below checks the sources).
//! Only `PJRT_Error_Destroy`, `PJRT_Error_Message` and `PJRT_Error_GetCode`,
//! which only read or free an error object, are called directly: they run
//! while an error is being taken apart, inside `Plugin::call` itself or in
//! an event's `OnReady` callback (`Event::drop_when_ready`).
//!
//! A plugin is C++ behind a C API, and XLA has thrown through it: its
//! compiler throws `std::length_error` (from an LLVM `SmallVector`) inside
//! `PJRT_Client_Compile` on a valid program that slices an empty range out
//! of a concatenate with an empty operand, and `absl::BadStatusOrAccess` on
//! a shape whose element count overflows, on both CPU plugins. An
//! exception that reaches a Rust frame aborts the process, so the
//! trampoline runs each entry inside `try`/`catch`. A caught exception is
//! a `PjrtError` naming the entry, the exception's demangled type and
//! `what()`, and that it is XLA's internal error to report upstream
//! (`code: None`: the plugin returned no `PJRT_Error`); the runtime turns
//! it into `Error::Compile` or `Error::Backend` as for any plugin error.
//! The plugins' frames unwind cleanly (their code has unwind tables and
//! cleanups; RSS and threads stay flat), and the client, its buffers and
//! executables stay usable: the next compile and step work
//! (`tests/xla_exceptions.rs`, which aborts without the guard). `guard.cc`
//! is linked against the system's libstdc++, the runtime the pip-installed
//! plugins use too, so their exception types are ours. The guard cannot
//! help with an exception thrown on a plugin's own thread or out of a
//! `noexcept` function: C++ terminates the process before any caller sees
//! it. The lowering still avoids the shapes known to throw (an empty value
//! is an empty constant), and inference rejects unrepresentable shapes
//! (`ir::infer::check_representable`), since the error says nothing about
//! the user's program.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::mem::MaybeUninit;

use super::{sys, PjrtError, Plugin};

/// `lazyxla_thrown` in `guard.cc`: the exception's type and message, each
/// NUL-terminated (truncated to fit).
#[repr(C)]
struct Thrown {
    type_name: [c_char; 256],
    what: [c_char; 2048],
}

type Entry = unsafe extern "C" fn(*mut c_void) -> *mut c_void;

extern "C" {
    /// Calls `entry(args)` inside `try`/`catch`; see `guard.cc`. Never
    /// unwinds (it catches everything but thread cancellation, which
    /// lazyxla never requests).
    fn lazyxla_pjrt_guarded_call(
        entry: Entry,
        args: *mut c_void,
        error: *mut *mut c_void,
        thrown: *mut Thrown,
    ) -> c_int;
}

impl Plugin {
    /// Calls the PJRT entry `f` (named `function`, for messages) on `args`
    /// and takes ownership of the error it returns. A C++ exception thrown
    /// inside the call is caught and returned as an error naming its type
    /// and message; it is XLA's internal error, not the caller's.
    ///
    /// # Safety
    /// The same as calling `f(args)` directly: `args` must be a valid,
    /// initialized argument struct for `f`, with every pointer in it valid
    /// for the duration of the call.
    pub(super) unsafe fn call<A>(
        &self,
        f: sys::Fallible<A>,
        args: &mut A,
        function: &str,
    ) -> Result<(), PjrtError> {
        // SAFETY: both are `extern "C"` functions of one pointer argument
        // returning one pointer; the argument and result types differ only
        // in their pointee, which does not change the calling convention.
        let entry = unsafe { std::mem::transmute::<sys::Fallible<A>, Entry>(f) };
        let mut error: *mut c_void = std::ptr::null_mut();
        // Written by the guard only when something was thrown.
        let mut thrown = MaybeUninit::<Thrown>::uninit();
        // SAFETY: the guard calls `entry(args)` once, which the caller made
        // valid, and writes `error` or `thrown`, both live locals.
        let outcome = unsafe {
            lazyxla_pjrt_guarded_call(
                entry,
                (args as *mut A).cast(),
                &mut error,
                thrown.as_mut_ptr(),
            )
        };
        if outcome == 0 {
            return self.check(error.cast::<sys::Error>(), function);
        }
        // SAFETY: a non-zero outcome means the guard filled `thrown` with
        // two NUL-terminated strings.
        let thrown = unsafe { thrown.assume_init_ref() };
        let text = |s: &[c_char]| {
            // SAFETY: NUL-terminated inside the array, as above.
            unsafe { CStr::from_ptr(s.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        };
        Err(PjrtError::local(format!(
            "{function}: the plugin threw a C++ exception ({}: {}). This is an internal \
             error of XLA (plugin {}), not of the program or of lazyxla; please report it \
             to XLA with the program. The call was abandoned; the client and every buffer \
             and executable made before it stay usable",
            text(&thrown.type_name),
            text(&thrown.what),
            self.path().display(),
        )))
    }
}

#[cfg(test)]
mod tests {
    /// The entries called directly (not through [`Plugin::call`]): they
    /// only read or free an error object.
    const DIRECT: &[&str] = &[
        "PJRT_Error_Destroy",
        "PJRT_Error_Message",
        "PJRT_Error_GetCode",
    ];

    /// Every function taken from the API table with `api_fn!` outside
    /// [`DIRECT`] is only ever handed to `Plugin::call`: its local name is
    /// never followed by `(` as a call. A textual check of this module's
    /// sources (tests excluded), enough for the binding style they use
    /// (`let f = api_fn!(..)?` or `if let Ok(f) = api_fn!(..)`).
    #[test]
    fn every_fallible_entry_is_called_through_the_guard() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backend/pjrt/ffi");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            for line in code.lines().filter(|l| l.contains("= api_fn!(")) {
                let (binding, call) = line.split_once("= api_fn!(").unwrap();
                let name = call.split([',', ')']).nth(1).unwrap().trim();
                if DIRECT.contains(&name) {
                    continue;
                }
                let local = binding
                    .trim()
                    .trim_start_matches("if let Ok(")
                    .trim_start_matches("let ")
                    .trim_end_matches(')')
                    .trim();
                assert!(
                    local.chars().all(|c| c.is_alphanumeric() || c == '_'),
                    "{}: cannot read the binding in {line:?}",
                    path.display()
                );
                let called = code.match_indices(&format!("{local}(")).any(|(at, _)| {
                    let before = code[..at].chars().next_back().unwrap_or(' ');
                    let other = before.is_alphanumeric() || matches!(before, '_' | '.' | ':');
                    !other && !code[..at].ends_with("fn ")
                });
                assert!(
                    !called,
                    "{}: {name} (bound as `{local}`) is called directly; call it through \
                     `Plugin::call` so a C++ exception becomes an error",
                    path.display()
                );
                checked += 1;
            }
        }
        assert!(
            checked > 20,
            "only {checked} entries found: the check reads nothing"
        );
    }
}
