//! Trapping definitions of the WASI functions that Rust's std (through wasi-libc) links in but
//! this guest never calls, so the component imports no WASI at all.
//!
//! NB: wasi-libc declares each WASI import as an undefined symbol `__wasm_import_*`; a
//! definition here resolves it at link time, and wasm-component-ld then finds no WASI import to
//! put in the component. The default guest only reaches these through std's default panic hook
//! (writing the message to stderr) and the allocation-failure message; either way the call would
//! end in a trap. Without them the component has no WASI import instead of 19, and a fresh
//! instance per call costs about 1.4 µs less (10.4 to 9.0 µs p50 in `make bench`,
//! docs/development.md, "Guest call benchmark"). A toolchain whose wasi-libc renames a symbol
//! brings the import back: the guest then still works, and only pays for the import again.

#![allow(missing_docs)]

use core::arch::wasm32::unreachable;

macro_rules! traps {
    ($($name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)?;)*) => {$(
        #[unsafe(no_mangle)]
        pub extern "C" fn $name($(_: $ty),*) $(-> $ret)? {
            unreachable()
        }
    )*};
}

traps! {
    __wasm_import_io_error_error_drop(a: i32);
    __wasm_import_poll_pollable_drop(a: i32);
    __wasm_import_poll_method_pollable_block(a: i32);
    __wasm_import_streams_input_stream_drop(a: i32);
    __wasm_import_streams_output_stream_drop(a: i32);
    __wasm_import_streams_method_output_stream_check_write(a: i32, b: i32);
    __wasm_import_streams_method_output_stream_write(a: i32, b: i32, c: i32, d: i32);
    __wasm_import_streams_method_output_stream_blocking_flush(a: i32, b: i32);
    __wasm_import_streams_method_output_stream_subscribe(a: i32) -> i32;
    __wasm_import_terminal_input_terminal_input_drop(a: i32);
    __wasm_import_terminal_output_terminal_output_drop(a: i32);
    __wasm_import_environment_get_environment(a: i32);
    __wasm_import_exit_exit(a: i32);
    __wasm_import_stdin_get_stdin() -> i32;
    __wasm_import_stdout_get_stdout() -> i32;
    __wasm_import_stderr_get_stderr() -> i32;
    __wasm_import_terminal_stdin_get_terminal_stdin(a: i32);
    __wasm_import_terminal_stdout_get_terminal_stdout(a: i32);
    __wasm_import_terminal_stderr_get_terminal_stderr(a: i32);
}
