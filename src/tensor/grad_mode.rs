//! Whether ops record what gradients need: off inside [`no_grad`]. The
//! recording (which inputs need a gradient) happens in the tensor layer;
//! the backward pass is `autograd`.

use std::cell::Cell;

thread_local! {
    static NO_GRAD_DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// True unless inside [`no_grad`].
#[track_caller]
pub(crate) fn grad_enabled() -> bool {
    NO_GRAD_DEPTH.with(|d| d.get() == 0)
}

/// Runs `f` without recording gradients (optimizer updates, evaluation).
///
/// ```
/// use lazyxla::Tensor;
/// let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
/// let y = lazyxla::no_grad(|| &w * 2.0);
/// assert!(!y.is_requires_grad());
/// ```
#[track_caller]
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

/// Runs `f` with gradients recorded, even inside [`no_grad`]: a backward
/// that differentiates a loop's body records its forward ops this way
/// (see `autograd::loops`).
#[track_caller]
pub(crate) fn enable_grad<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            NO_GRAD_DEPTH.with(|d| d.set(self.0));
        }
    }
    let _restore = Restore(NO_GRAD_DEPTH.with(|d| d.replace(0)));
    f()
}
