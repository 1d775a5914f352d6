// The one piece of C++ in lazyxla: a call into a PJRT plugin that stops a
// C++ exception at the C boundary.
//
// PJRT plugins are C++ behind a C API. XLA is not supposed to throw through
// it, but it has (PJRT_Client_Compile on a valid StableHLO program), and an
// exception that reaches a Rust frame aborts the process: Rust cannot catch
// a foreign exception and must not unwind through an `extern "C"` call.
// Only C++ can catch it, so every fallible PJRT entry is called from here.
//
// The plugins link the system's libstdc++ dynamically, as this file does, so
// both share one exception runtime and `catch (const std::exception&)` sees
// the plugin's exception types. A plugin that throws from a function it
// declared noexcept, or from one of its own threads, still terminates: no
// caller can catch that.

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <typeinfo>

// The GNU/LLVM C++ ABI (every PJRT plugin is built against one): demangled
// type names, the type of an exception caught by `...`, thread cancellation.
#include <cxxabi.h>

namespace {

// Copies `text` into `out` (capacity `cap` > 0), truncating, NUL-terminated.
void copy_text(char* out, std::size_t cap, const char* text) {
  if (text == nullptr) text = "";
  std::size_t n = std::strlen(text);
  if (n >= cap) n = cap - 1;
  std::memcpy(out, text, n);
  out[n] = '\0';
}

// The demangled name of `type` into `out`; the mangled one if demangling
// fails, "(unknown type)" without type information.
void copy_type_name(char* out, std::size_t cap, const std::type_info* type) {
  if (type == nullptr) {
    copy_text(out, cap, "(unknown type)");
    return;
  }
  int status = 0;
  char* readable = abi::__cxa_demangle(type->name(), nullptr, nullptr, &status);
  copy_text(out, cap, status == 0 && readable != nullptr ? readable : type->name());
  std::free(readable);
}

}  // namespace

extern "C" {

// What the guard reports about a caught exception. Rust's `Thrown` in
// guard.rs has the same layout.
struct lazyxla_thrown {
  char type_name[256];
  char what[2048];
};

// Every PJRT entry called through the guard has this shape:
// `PJRT_Error* PJRT_Xxx(PJRT_Xxx_Args*)`; argument and result are passed as
// untyped pointers, which has the same calling convention on every ABI
// PJRT runs on.
typedef void* (*lazyxla_pjrt_entry)(void* args);

// Calls `entry(args)`. Returns 0 when it returned (its `PJRT_Error*`, owned
// by the caller, in `*error`), 1 when it threw a `std::exception` and 2 when
// it threw anything else; on 1 and 2, `*thrown` describes the exception,
// `*error` is untouched, and the exception object is destroyed.
int lazyxla_pjrt_guarded_call(lazyxla_pjrt_entry entry, void* args, void** error,
                              lazyxla_thrown* thrown) {
  try {
    *error = entry(args);
    return 0;
  }
#ifdef __GLIBCXX__
  catch (abi::__forced_unwind&) {
    // Thread cancellation must run to its end, never be swallowed.
    throw;
  }
#endif
  catch (const std::exception& e) {
    copy_type_name(thrown->type_name, sizeof thrown->type_name, &typeid(e));
    copy_text(thrown->what, sizeof thrown->what, e.what());
    return 1;
  } catch (...) {
    copy_type_name(thrown->type_name, sizeof thrown->type_name,
                   abi::__cxa_current_exception_type());
    copy_text(thrown->what, sizeof thrown->what, "(not a std::exception: no message)");
    return 2;
  }
}

}  // extern "C"
