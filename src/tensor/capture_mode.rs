//! Whether this thread is recording a captured step: set by `capture`,
//! read by code whose eager form would make a constant of the recording
//! (a per-call seed). The flag lives in the tensor layer so that layer
//! can read it without importing `capture`.

thread_local! {
    /// True while this thread runs a step function that `capture` records.
    static CAPTURE_RECORDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True while a captured step is being recorded on this thread, for code
/// whose eager form would make a constant of the recording (a per-call
/// seed). The flag lives here, below `capture`, so that the tensor layer
/// can read it.
pub(crate) fn capture_recording() -> bool {
    CAPTURE_RECORDING.with(|r| r.get())
}

/// Sets the flag of [`capture_recording`], returning its previous value.
pub(crate) fn set_capture_recording(on: bool) -> bool {
    CAPTURE_RECORDING.with(|r| r.replace(on))
}
