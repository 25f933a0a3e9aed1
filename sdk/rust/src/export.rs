//! What the exports that [`plugin!`](crate::plugin) defines call: one
//! dispatcher per instance, made on the first call from the plugin's
//! description function. Not part of the API.

use crate::dispatch::{Dispatcher, Export};
use crate::host::Global;
use crate::{Plugin, ABI_VERSION};

pub use crate::dispatch::Export as Call;

static DISPATCHER: Global<Option<Dispatcher>> = Global::new(None);

fn with<R>(init: fn() -> Plugin, f: impl FnOnce(&mut Dispatcher) -> R) -> R {
    let mut g = DISPATCHER.lock();
    if g.is_none() {
        *g = Some(Dispatcher::new(init()));
    }
    match g.as_mut() {
        Some(d) => f(d),
        None => unreachable!(),
    }
}

pub fn abi_version(init: fn() -> Plugin) -> i32 {
    // Describe the plugin now: a description function that panics fails
    // the load, not the first publish.
    with(init, |_| ());
    ABI_VERSION
}

pub fn buffer(init: fn() -> Plugin, size: i32) -> i32 {
    if size < 0 {
        return 0;
    }
    with(init, |d| {
        d.buffer(size as usize)
            .map_or(0, |b| b.as_mut_ptr() as usize as i32)
    })
}

/// Runs export `e` on the `n` input bytes and packs the output's address
/// and length as the ABI's result.
pub fn call(init: fn() -> Plugin, e: Export, n: i32) -> i64 {
    with(init, |d| {
        let out = d.dispatch(e, if n < 0 { usize::MAX } else { n as usize });
        if out.is_empty() {
            return 0;
        }
        ((out.as_ptr() as usize as u64) << 32 | out.len() as u64) as i64
    })
}

/// Defines the module's exports for the plugin that `$describe` (a
/// `fn() -> Plugin`) describes. Call it once, at the top of the plugin
/// crate:
///
/// ```ignore
/// warren_plugin::plugin!(describe);
/// ```
///
/// It exports `warren_abi_version`, `warren_buffer` and every export of
/// ABI 1.1 (the optional ones answer OK with nothing when the plugin has
/// nothing to say).
#[macro_export]
macro_rules! plugin {
    ($describe:path) => {
        const _: () = {
            use $crate::export::{call as __call, Call as __C};
            const __D: fn() -> $crate::Plugin = $describe;

            #[no_mangle]
            pub extern "C" fn warren_abi_version() -> i32 {
                $crate::export::abi_version(__D)
            }
            #[no_mangle]
            pub extern "C" fn warren_buffer(size: i32) -> i32 {
                $crate::export::buffer(__D, size)
            }
            #[no_mangle]
            pub extern "C" fn warren_describe(n: i32) -> i64 {
                __call(__D, __C::Describe, n)
            }
            #[no_mangle]
            pub extern "C" fn warren_validate_declare(n: i32) -> i64 {
                __call(__D, __C::ValidateDeclare, n)
            }
            #[no_mangle]
            pub extern "C" fn warren_create(n: i32) -> i64 {
                __call(__D, __C::Create, n)
            }
            #[no_mangle]
            pub extern "C" fn warren_delete(n: i32) -> i64 {
                __call(__D, __C::Delete, n)
            }
            #[no_mangle]
            pub extern "C" fn warren_validate_binding(n: i32) -> i64 {
                __call(__D, __C::ValidateBinding, n)
            }
            #[no_mangle]
            pub extern "C" fn warren_add_binding(n: i32) -> i64 {
                __call(__D, __C::AddBinding, n)
            }
            #[no_mangle]
            pub extern "C" fn warren_remove_bindings(n: i32) -> i64 {
                __call(__D, __C::RemoveBindings, n)
            }
            #[no_mangle]
            pub extern "C" fn warren_policy_changed(n: i32) -> i64 {
                __call(__D, __C::PolicyChanged, n)
            }
            #[no_mangle]
            pub extern "C" fn warren_route(n: i32) -> i64 {
                __call(__D, __C::Route, n)
            }
            #[no_mangle]
            pub extern "C" fn warren_info(n: i32) -> i64 {
                __call(__D, __C::Info, n)
            }
            #[no_mangle]
            pub extern "C" fn warren_idle(n: i32) -> i64 {
                __call(__D, __C::Idle, n)
            }
            #[no_mangle]
            pub extern "C" fn warren_settings_changed(n: i32) -> i64 {
                __call(__D, __C::SettingsChanged, n)
            }
        };
    };
}
