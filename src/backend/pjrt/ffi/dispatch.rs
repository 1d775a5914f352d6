//! A thread of lazyxla's own that runs long programs of an inline CPU
//! client, so that the caller goes on recording while they run.
//!
//! A CPU client made with `asynchronous: false` runs each program inside
//! the execute call: no worker to wake and none to wake the caller for the
//! read, which saves a small step most of its dispatch cost. A long
//! program should still not hold up the thread that records the next
//! step, and its temporaries should not come from that thread's `malloc`
//! arena (glibc trims the main arena after each step and grows it again
//! on the next: measured, 30–48% on a 3 ms step). So the backend hands a
//! long program to this thread ([`execute`]) and gets its results back as
//! [`PendingBuffer`]s, which wait for the program on first use.
//!
//! Arguments are passed as raw handles, which must outlive the execution:
//! while any handed-over execution is queued or running, dropping a
//! [`Buffer`] on another thread queues its destruction behind them
//! ([`deferring`], [`defer`]); the thread destroys it once every execution
//! that could name it is done.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Instant;

use super::{sys, Buffer, Executable, PjrtError};

/// What the thread does, in the order it was asked.
enum Job {
    /// Run `exe` on `args` (raw handles kept alive as the module says),
    /// donating those at `donate`, and publish its results in `run`.
    Execute {
        exe: Arc<Executable>,
        args: Vec<RawBuffer>,
        donate: Vec<usize>,
        run: Arc<Run>,
        took_us: Arc<AtomicU64>,
    },
    /// Destroy a buffer dropped while executions were queued.
    Destroy(Buffer),
    /// Signal that every job before it is done.
    Barrier(Arc<Run>),
}

/// A buffer handle lent to the thread; see the module docs.
struct RawBuffer(*mut sys::Buffer);

// SAFETY: PJRT buffers may be used from any thread; the handle is kept
// alive by the deferred destruction the module docs describe.
unsafe impl Send for RawBuffer {}

/// Executions handed over and not yet returned; buffers dropped meanwhile
/// are destroyed by the thread ([`deferring`]).
static BUSY: AtomicUsize = AtomicUsize::new(0);

/// Set once the process exits: the thread then destroys nothing more (the
/// plugin's statics may be gone).
static EXITING: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// True on the dispatch thread, which destroys buffers directly.
    static ON_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// The queue of the thread; `None` when the thread could not start.
static QUEUE: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();

/// The queue of the thread, started on first use.
fn queue() -> Option<&'static Mutex<Sender<Job>>> {
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        let started = std::thread::Builder::new()
            .name("lazyxla-dispatch".to_string())
            .spawn(move || {
                ON_THREAD.with(|t| t.set(true));
                for job in rx {
                    match job {
                        Job::Execute {
                            exe,
                            args,
                            donate,
                            run,
                            took_us,
                        } => {
                            let start = Instant::now();
                            let raw: Vec<*mut sys::Buffer> = args.iter().map(|a| a.0).collect();
                            // SAFETY: the handles stay live (module docs).
                            let result = unsafe { exe.execute_raw(&raw, &donate, Some) }
                                .and_then(|(out, done)| done.wait().map(|()| out));
                            took_us.store(start.elapsed().as_micros() as u64, Ordering::Relaxed);
                            run.finish(result);
                            BUSY.fetch_sub(1, Ordering::SeqCst);
                        }
                        Job::Destroy(b) => {
                            if EXITING.load(Ordering::SeqCst) {
                                std::mem::forget(b);
                            }
                        }
                        Job::Barrier(done) => done.finish(Ok(Vec::new())),
                    }
                }
            });
        started.ok().map(|_| Mutex::new(tx))
    });
    queue.as_ref()
}

/// Hands `exe` on `args` to the thread; its results come as
/// [`PendingBuffer`]s of the returned run, and how long it took (µs) goes
/// to `took_us`.
///
/// # Safety
///
/// Each of `args` must be a live buffer of `exe`'s client, dropped (if at
/// all) only through [`Buffer`]'s `Drop`, which defers it as the module
/// docs say.
pub(in crate::backend::pjrt) unsafe fn execute(
    exe: &Arc<Executable>,
    args: &[&Buffer],
    donate: &[usize],
    took_us: &Arc<AtomicU64>,
) -> Result<Arc<Run>, PjrtError> {
    if let Some(i) = args.iter().position(|b| !b.same_client(&exe.client)) {
        return Err(PjrtError::local(format!(
            "argument {i} belongs to a different PJRT client than the executable"
        )));
    }
    let run = Arc::new(Run {
        state: Mutex::new(None),
        ready: Condvar::new(),
    });
    BUSY.fetch_add(1, Ordering::SeqCst);
    let job = Job::Execute {
        exe: exe.clone(),
        args: args.iter().map(|b| RawBuffer(b.raw())).collect(),
        donate: donate.to_vec(),
        run: run.clone(),
        took_us: took_us.clone(),
    };
    let sent = queue().is_some_and(|q| q.lock().is_ok_and(|q| q.send(job).is_ok()));
    if !sent {
        BUSY.fetch_sub(1, Ordering::SeqCst);
        return Err(PjrtError::local("the dispatch thread is not running"));
    }
    Ok(run)
}

/// Whether a buffer dropped now must be destroyed by the thread: some
/// execution handed over is queued or running, and this is another
/// thread.
pub(super) fn deferring() -> bool {
    BUSY.load(Ordering::SeqCst) > 0 && !ON_THREAD.with(Cell::get)
}

/// Queues `b`'s destruction behind the executions handed over (see
/// [`deferring`]).
pub(super) fn defer(b: Buffer) {
    let unsent = match queue().map(Mutex::lock) {
        Some(Ok(q)) => q.send(Job::Destroy(b)).err().map(|e| e.0),
        _ => Some(Job::Destroy(b)),
    };
    // No thread to run after: leak rather than free memory an execution
    // may still read.
    std::mem::forget(unsent);
}

/// Marks the process as exiting, so that the thread destroys nothing
/// more, and waits until it has done what was queued before (the exit
/// handler runs before the plugin's static destructors).
pub(in crate::backend::pjrt) fn exiting() {
    EXITING.store(true, Ordering::SeqCst);
    let Some(Some(queue)) = QUEUE.get() else {
        return;
    };
    let done = Arc::new(Run {
        state: Mutex::new(None),
        ready: Condvar::new(),
    });
    let sent = queue
        .try_lock()
        .is_ok_and(|q| q.send(Job::Barrier(done.clone())).is_ok());
    if sent {
        let _ = done.wait();
    }
}

/// One execution handed to the thread: its results once it is done.
pub struct Run {
    /// `None` while it runs; then its results (each taken by its
    /// [`PendingBuffer`] on first use) or its error.
    state: Mutex<Option<Result<Vec<Option<Buffer>>, PjrtError>>>,
    ready: Condvar,
}

impl Run {
    fn finish(&self, result: Result<Vec<Option<Buffer>>, PjrtError>) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        *state = Some(result);
        self.ready.notify_all();
    }

    /// Blocks until the program is done; its error, if it failed.
    pub fn wait(&self) -> Result<(), PjrtError> {
        let state = self.done();
        match &*state {
            Some(Err(e)) => Err(e.clone()),
            _ => Ok(()),
        }
    }

    fn done(&self) -> std::sync::MutexGuard<'_, Option<Result<Vec<Option<Buffer>>, PjrtError>>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while state.is_none() {
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state
    }
}

/// Result `index` of a [`Run`], taken from it on first use.
pub struct PendingBuffer {
    run: Arc<Run>,
    index: usize,
    buffer: OnceLock<Buffer>,
}

impl PendingBuffer {
    /// Result `index` of `run`.
    pub fn new(run: Arc<Run>, index: usize) -> PendingBuffer {
        PendingBuffer {
            run,
            index,
            buffer: OnceLock::new(),
        }
    }

    /// The buffer, once the program is done (waiting for it); its error
    /// when it failed.
    pub fn get(&self) -> Result<&Buffer, PjrtError> {
        if let Some(b) = self.buffer.get() {
            return Ok(b);
        }
        let mut state = self.run.done();
        // Taken and set under the run's lock, so a second caller finds it.
        if self.buffer.get().is_none() {
            match &mut *state {
                Some(Ok(out)) => match out.get_mut(self.index).and_then(Option::take) {
                    Some(b) => {
                        let _ = self.buffer.set(b);
                    }
                    None => {
                        return Err(PjrtError::local(format!(
                            "result {} of a dispatched execution is missing",
                            self.index
                        )))
                    }
                },
                Some(Err(e)) => return Err(e.clone()),
                None => {
                    return Err(PjrtError::local(
                        "a dispatched execution ended without results",
                    ))
                }
            }
        }
        drop(state);
        self.buffer
            .get()
            .ok_or_else(|| PjrtError::local("a dispatched result was not set"))
    }
}

impl std::fmt::Debug for PendingBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.buffer.get() {
            Some(b) => write!(f, "{b:?}"),
            None => write!(f, "PendingBuffer({})", self.index),
        }
    }
}

/// What an execution in flight completes with: the plugin's event, or a
/// run of the dispatch thread.
pub enum Completion {
    /// The plugin's completion event.
    Event(super::Event),
    /// An execution handed to the dispatch thread.
    Run(Arc<Run>),
}

impl Completion {
    /// Blocks until the execution is done; its error, if it failed.
    pub fn wait(self) -> Result<(), PjrtError> {
        match self {
            Completion::Event(e) => e.wait(),
            Completion::Run(r) => r.wait(),
        }
    }
}
