//! Reverse-mode autograd over the lazy graph.

pub(crate) mod random;

use std::cell::Cell;

thread_local! {
    static NO_GRAD_DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// True unless inside [`no_grad`].
pub(crate) fn grad_enabled() -> bool {
    NO_GRAD_DEPTH.with(|d| d.get() == 0)
}

/// Runs `f` without recording gradients (optimizer updates, evaluation).
///
/// ```
/// let y = lazyxla::no_grad(|| 1 + 1);
/// assert_eq!(y, 2);
/// ```
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            NO_GRAD_DEPTH.with(|d| d.set(d.get() - 1));
        }
    }
    NO_GRAD_DEPTH.with(|d| d.set(d.get() + 1));
    let _restore = Restore;
    f()
}
