//! Handles the IR keeps for what it cannot name: the data of a data leaf
//! (the runtime's device data) and the tensor a gradient leaf stands for
//! (the tensor layer's). The IR only carries them; the layer that made a
//! handle resolves it (`runtime::device_data`, `autograd`).

use std::any::Any;
use std::sync::{Arc, LazyLock, Weak};

/// The data of an `Op::Data` leaf. Not part of the op's identity: two data
/// leaves of one dtype are the same op (a program is keyed by structure;
/// data are its arguments), so `Hash` writes nothing and `Eq` holds.
#[derive(Clone)]
pub(crate) struct LeafData(Arc<dyn Any + Send + Sync>);

/// The handle programs carry instead of their leaves' data (see
/// [`LeafData::detached`]).
static DETACHED: LazyLock<LeafData> = LazyLock::new(|| LeafData(Arc::new(())));

impl LeafData {
    /// A handle to `data`.
    pub fn new<T: Any + Send + Sync>(data: Arc<T>) -> LeafData {
        LeafData(data)
    }

    /// The handle a compiled program keeps in place of its leaves' data,
    /// so that no cache entry holds device memory alive: a program's data
    /// come as the arguments of each execution.
    pub fn detached() -> LeafData {
        DETACHED.clone()
    }

    /// The data, if it is a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }

    /// A shared handle of the data, if it is a `T`.
    pub fn shared<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.0.clone().downcast().ok()
    }

    /// The data for writing, if it is a `T` and nothing else holds it.
    pub fn get_mut<T: Any>(&mut self) -> Option<&mut T> {
        Arc::get_mut(&mut self.0)?.downcast_mut()
    }

    /// The data's address: two handles with the same address share data.
    pub fn ptr(&self) -> *const () {
        Arc::as_ptr(&self.0) as *const ()
    }
}

impl PartialEq for LeafData {
    fn eq(&self, _: &LeafData) -> bool {
        true
    }
}
impl Eq for LeafData {}
impl std::hash::Hash for LeafData {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}
impl std::fmt::Debug for LeafData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LeafData")
    }
}

/// The tensor a gradient leaf node stands for, held weakly: backward
/// accumulates into it if it is still alive.
#[derive(Clone, Debug)]
pub(crate) struct LeafTensor(Weak<dyn Any + Send + Sync>);

impl LeafTensor {
    /// A weak handle to `tensor`.
    pub fn new<T: Any + Send + Sync>(tensor: Weak<T>) -> LeafTensor {
        LeafTensor(tensor)
    }

    /// The tensor, if it is alive and a `T`.
    pub fn upgrade<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.0.upgrade()?.downcast().ok()
    }

    /// True when this stands for `tensor`.
    pub fn is<T>(&self, tensor: &Arc<T>) -> bool {
        std::ptr::eq(
            self.0.as_ptr() as *const (),
            Arc::as_ptr(tensor) as *const (),
        )
    }
}
