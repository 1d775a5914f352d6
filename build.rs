//! Builds the C++ guard around PJRT calls (`src/backend/pjrt/ffi/guard.cc`):
//! the only code that can stop a C++ exception thrown inside a plugin
//! before it reaches Rust and aborts the process (DESIGN.md, "Crates and
//! hand-written parts").

fn main() {
    const GUARD: &str = "src/backend/pjrt/ffi/guard.cc";
    println!("cargo:rerun-if-changed={GUARD}");
    cc::Build::new()
        .cpp(true)
        .file(GUARD)
        .std("c++17")
        .warnings(true)
        .extra_warnings(true)
        .compile("lazyxla_pjrt_guard");
}
