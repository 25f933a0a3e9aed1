//! The host functions (ABI.md, "Host functions"), and their stand-ins when
//! a plugin's code runs natively in its own tests.

use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;

use crate::table::OwnedTable;

/// A log level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Level {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

/// Writes a line to the broker's log, tagged with the plugin's name. The
/// broker keeps about 50 lines a second per plugin.
pub fn log(level: Level, msg: &str) {
    if !msg.is_empty() {
        imp::log(level as i32, msg.as_bytes());
    }
}

/// The host's monotonic clock: time since an arbitrary point, for
/// measuring intervals.
pub fn clock_monotonic() -> Duration {
    Duration::from_nanos(imp::clock_monotonic() as u64)
}

/// The host's wall clock: time since the Unix epoch.
pub fn clock_wall() -> Duration {
    Duration::from_nanos(imp::clock_wall() as u64)
}

/// Whether clients can declare exchanges of type `name` on the broker now:
/// a built-in type, or one of an enabled plugin, this one included (ABI
/// 1.1: a plugin calling it needs a 1.1 broker to load).
pub fn type_exists(name: &str) -> bool {
    !name.is_empty() && imp::type_exists(name.as_bytes())
}

/// The plugin's settings, as they are now (a copy: read it off the route
/// path). The broker's configuration gives them; an operator may change
/// them while the broker runs (see `Plugin::on_settings_changed`).
pub fn settings() -> OwnedTable {
    let mut s = SETTINGS.lock();
    if s.is_none() {
        *s = Some(imp::config());
    }
    OwnedTable::from_raw(s.as_ref().map(|v| v.to_vec()).unwrap_or_default())
}

/// Replaces the cached settings (warren_settings_changed, or a test).
pub(crate) fn set_cached_settings(raw: Option<Vec<u8>>) {
    *SETTINGS.lock() = raw;
}

static SETTINGS: Global<Option<Vec<u8>>> = Global::new(None);

/// A value shared by the exports: a plain cell behind a spin flag. A wasm
/// instance runs one call at a time, so the flag is never contended there;
/// natively it keeps parallel tests apart. It is Sync without asking its
/// value to be Send: the dispatcher it holds is only ever touched by the
/// exports, on the instance's one thread.
pub(crate) struct Global<T> {
    busy: AtomicBool,
    value: UnsafeCell<T>,
}

unsafe impl<T> Sync for Global<T> {}

impl<T> Global<T> {
    pub(crate) const fn new(v: T) -> Global<T> {
        Global {
            busy: AtomicBool::new(false),
            value: UnsafeCell::new(v),
        }
    }

    pub(crate) fn lock(&self) -> Guard<'_, T> {
        while self
            .busy
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            core::hint::spin_loop();
        }
        Guard { g: self }
    }
}

pub(crate) struct Guard<'a, T> {
    g: &'a Global<T>,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        unsafe { &*self.g.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        unsafe { &mut *self.g.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.g.busy.store(false, Ordering::Release);
    }
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use alloc::vec::Vec;

    #[link(wasm_import_module = "warren_v1")]
    extern "C" {
        #[link_name = "log"]
        fn warren_log(level: i32, ptr: *const u8, len: i32);
        #[link_name = "clock_monotonic"]
        fn warren_clock_monotonic() -> i64;
        #[link_name = "clock_wall"]
        fn warren_clock_wall() -> i64;
        #[link_name = "config"]
        fn warren_config(ptr: *mut u8, cap: i32) -> i32;
        #[link_name = "type_exists"]
        fn warren_type_exists(ptr: *const u8, len: i32) -> i32;
    }

    pub fn log(level: i32, msg: &[u8]) {
        unsafe { warren_log(level, msg.as_ptr(), msg.len() as i32) }
    }

    pub fn clock_monotonic() -> i64 {
        unsafe { warren_clock_monotonic() }
    }

    pub fn clock_wall() -> i64 {
        unsafe { warren_clock_wall() }
    }

    pub fn type_exists(name: &[u8]) -> bool {
        unsafe { warren_type_exists(name.as_ptr(), name.len() as i32) == 1 }
    }

    pub fn config() -> Vec<u8> {
        let mut buf: Vec<u8> = alloc::vec![0; 256];
        loop {
            let n = unsafe { warren_config(buf.as_mut_ptr(), buf.len() as i32) };
            if n < 0 {
                return alloc::vec![0, 0, 0, 0];
            }
            if n as usize <= buf.len() {
                buf.truncate(n as usize);
                return buf;
            }
            buf.resize(n as usize, 0);
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::native;
    use alloc::vec::Vec;

    pub fn log(level: i32, msg: &[u8]) {
        native::record_log(level, msg);
    }

    pub fn clock_monotonic() -> i64 {
        native::monotonic()
    }

    pub fn clock_wall() -> i64 {
        native::wall()
    }

    pub fn type_exists(name: &[u8]) -> bool {
        native::type_exists(name)
    }

    pub fn config() -> Vec<u8> {
        native::config()
    }
}

/// Stand-ins for the host functions when a plugin's code runs natively, in
/// its own tests (`cargo test`): the settings are what [`set_settings`]
/// gave, [`type_exists`](crate::type_exists) knows the built-in types and
/// what [`set_type`] adds, log lines are kept for [`take_logs`] (and
/// printed to stderr with the `std` feature), and the clocks are the
/// process's with `std`, else a counter and zero.
#[cfg(not(target_arch = "wasm32"))]
pub mod native {
    use super::Global;
    use alloc::string::String;
    use alloc::vec::Vec;

    static SETTINGS: Global<Option<Vec<u8>>> = Global::new(None);
    static TYPES: Global<Vec<(String, bool)>> = Global::new(Vec::new());
    static LOGS: Global<Vec<(i32, String)>> = Global::new(Vec::new());

    /// Sets the settings `settings()` answers (an encoded table; `None`:
    /// no settings), as the broker's configuration would.
    pub fn set_settings(raw: Option<&[u8]>) {
        *SETTINGS.lock() = raw.map(|r| r.to_vec());
        super::set_cached_settings(None);
    }

    /// Sets whether `type_exists(name)` reports the type as existing
    /// (`direct`, `fanout`, `topic` and `headers` do unless set otherwise).
    pub fn set_type(name: &str, exists: bool) {
        let mut t = TYPES.lock();
        t.retain(|(n, _)| n != name);
        t.push((name.into(), exists));
    }

    /// The lines logged so far, taken.
    pub fn take_logs() -> Vec<(i32, String)> {
        core::mem::take(&mut *LOGS.lock())
    }

    pub(crate) fn record_log(level: i32, msg: &[u8]) {
        let line = String::from_utf8_lossy(msg).into_owned();
        #[cfg(any(test, feature = "std"))]
        std::eprintln!("plugin log [{}]: {}", level, line);
        LOGS.lock().push((level, line));
    }

    pub(crate) fn config() -> Vec<u8> {
        SETTINGS
            .lock()
            .clone()
            .unwrap_or_else(|| alloc::vec![0, 0, 0, 0])
    }

    pub(crate) fn type_exists(name: &[u8]) -> bool {
        for (n, ok) in TYPES.lock().iter().rev() {
            if n.as_bytes() == name {
                return *ok;
            }
        }
        matches!(name, b"direct" | b"fanout" | b"topic" | b"headers")
    }

    #[cfg(any(test, feature = "std"))]
    pub(crate) fn monotonic() -> i64 {
        static START: Global<Option<std::time::Instant>> = Global::new(None);
        let t0 = *START.lock().get_or_insert_with(std::time::Instant::now);
        t0.elapsed().as_nanos() as i64
    }

    #[cfg(not(any(test, feature = "std")))]
    pub(crate) fn monotonic() -> i64 {
        use core::sync::atomic::{AtomicI64, Ordering};
        static TICKS: AtomicI64 = AtomicI64::new(0);
        TICKS.fetch_add(1, Ordering::Relaxed) + 1
    }

    #[cfg(any(test, feature = "std"))]
    pub(crate) fn wall() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64)
    }

    #[cfg(not(any(test, feature = "std")))]
    pub(crate) fn wall() -> i64 {
        0
    }
}
