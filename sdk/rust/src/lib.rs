//! The Rust guest SDK of Warren's routing ABI (`sdk/ABI.md`, version 1.1):
//! with it an exchange type is a plain Rust type, and the SDK provides the
//! module's exports, its buffers and the encoding.
//!
//! A plugin is a `cdylib` crate built for `wasm32-unknown-unknown`:
//!
//! ```text
//! cargo build --release --target wasm32-unknown-unknown
//! ```
//!
//! It describes itself in a function and names it in [`plugin!`], which
//! defines the exports (`warren_abi_version`, `warren_buffer`,
//! `warren_describe`, `warren_route`, ...):
//!
//! ```ignore
//! use warren_plugin::{plugin, Plugin, Features};
//!
//! fn describe() -> Plugin {
//!     Plugin::new("my-plugin", "1.0.0")   // the file is my-plugin.wasm
//!         .features(Features::HEADERS)
//!         .exchange_type(MyType)
//! }
//!
//! plugin!(describe);
//! ```
//!
//! An [`ExchangeType`] validates declares and creates one [`Exchange`] per
//! exchange of its type; the `Exchange` keeps its bindings and routes. The
//! broker runs several instances of the module and replays every exchange
//! and binding into each, so an exchange's state must follow from its
//! bindings, in the order they are added, alone: no randomness that
//! survives a call, no clock deciding where a binding goes.
//!
//! The route path of the SDK does not allocate once its buffers have grown
//! to the largest message and answer: the input is read in place, the
//! [`Message`] lives on the stack and the [`RouteResult`] and output
//! buffers are reused. `route` implementations should not allocate either.
//! A panic traps (wasm32 aborts on panic): the host reports the failure and
//! replaces the instance.
//!
//! The crate is `no_std` with `alloc`; the plugin crate brings the
//! allocator and panic handler (linking `std`, the default, does both).
//! Natively (`cargo test`) the host functions are stand-ins: see
//! [`native`].
#![no_std]
#![warn(missing_debug_implementations)]

extern crate alloc;
#[cfg(any(test, feature = "std"))]
extern crate std;

use alloc::borrow::Cow;
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

mod dispatch;
#[doc(hidden)]
pub mod export;
mod host;
mod message;
mod result;
mod table;

pub use dispatch::{Dispatcher, Export};
#[cfg(not(target_arch = "wasm32"))]
pub use host::native;
pub use host::{clock_monotonic, clock_wall, log, settings, type_exists, Level};
pub use message::{Message, Property, MAX_INDEXED_HEADERS};
pub use result::RouteResult;
pub use table::{Array, ArrayIter, Field, OwnedTable, Table, TableIter, TableWriter, Value};

/// The ABI version the SDK speaks: major 1, minor 1, as
/// `warren_abi_version` answers it.
pub const ABI_VERSION: i32 = 1 << 16 | 1;

/// The module's description: what `warren_describe` answers, and the
/// types and hooks the exports call.
pub struct Plugin {
    /// The plugin's name: its .wasm file's name without the extension,
    /// and what `warrenctl plugins enable` takes.
    pub name: String,
    /// The plugin's own version, free text.
    pub version: String,
    /// What route receives besides the routing key.
    pub features: Features,
    /// The exchange types, at least one.
    pub types: Vec<Box<dyn ExchangeType>>,
    /// The settings the plugin reads (broker.toml's
    /// `[plugins.settings.NAME]`); the broker refuses any others.
    pub settings: Vec<Setting>,
    /// Runs in `warren_idle`, off the route path, about once a second on an
    /// instance that was used: trim caches here.
    pub on_idle: Option<fn()>,
    /// Runs when an operator changed the settings in the running broker
    /// (ABI 1.1), with all of them; an error refuses the change.
    /// [`settings`] answers the new settings from then on, with or
    /// without it.
    pub on_settings_changed: Option<SettingsHook>,
}

impl Plugin {
    /// A description with a name and a version, no features, no types yet.
    pub fn new(name: &str, version: &str) -> Plugin {
        Plugin {
            name: name.into(),
            version: version.into(),
            features: Features::NONE,
            types: Vec::new(),
            settings: Vec::new(),
            on_idle: None,
            on_settings_changed: None,
        }
    }

    /// Sets the features.
    pub fn features(mut self, f: Features) -> Plugin {
        self.features = f;
        self
    }

    /// Adds an exchange type.
    pub fn exchange_type<T: ExchangeType + 'static>(mut self, t: T) -> Plugin {
        self.types.push(Box::new(t));
        self
    }

    /// Declares a setting.
    pub fn setting(mut self, name: &str, kind: SettingKind, doc: &str) -> Plugin {
        self.settings.push(Setting {
            name: name.into(),
            kind,
            doc: doc.into(),
        });
        self
    }

    /// Sets the idle hook.
    pub fn on_idle(mut self, f: fn()) -> Plugin {
        self.on_idle = Some(f);
        self
    }

    /// Sets the settings-changed hook (ABI 1.1).
    pub fn on_settings_changed(mut self, f: SettingsHook) -> Plugin {
        self.on_settings_changed = Some(f);
        self
    }
}

impl fmt::Debug for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let types: Vec<&str> = self.types.iter().map(|t| t.name()).collect();
        f.debug_struct("Plugin")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("features", &self.features)
            .field("types", &types)
            .field("settings", &self.settings)
            .finish()
    }
}

/// The settings-changed hook: the new settings, all of them; an error
/// refuses the change.
pub type SettingsHook = fn(&OwnedTable) -> Result<(), Error>;

/// A bit set of what route receives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features(pub u32);

impl Features {
    pub const NONE: Features = Features(0);
    /// The property list, for the headers.
    pub const HEADERS: Features = Features(0x1);
    /// The property list.
    pub const PROPERTIES: Features = Features(0x2);
    /// The body.
    pub const BODY: Features = Features(0x4);
}

impl core::ops::BitOr for Features {
    type Output = Features;
    fn bitor(self, o: Features) -> Features {
        Features(self.0 | o.0)
    }
}

/// One declared setting.
#[derive(Clone, Debug)]
pub struct Setting {
    pub name: String,
    pub kind: SettingKind,
    pub doc: String,
}

/// The type a setting must have, as an AMQP field type octet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum SettingKind {
    Any = 0,
    Bool = b't',
    Int = b'l',
    Float = b'd',
    String = b'S',
    Array = b'A',
    Table = b'F',
}

/// One exchange type the plugin provides.
pub trait ExchangeType {
    /// The type clients declare, e.g. `x-content`.
    fn name(&self) -> &str;

    /// Checks a declare's arguments before the exchange exists. It may
    /// ask the broker to validate the declare as another type too, once it
    /// returned `Ok` ([`Checks::validate_as`], ABI 1.1).
    fn validate_declare(&self, d: &Declaration, checks: &mut Checks) -> Result<(), Error> {
        let _ = (d, checks);
        Ok(())
    }

    /// Makes the routing state of an exchange. It is also called for
    /// exchanges recovered after a restart, without `validate_declare`, so
    /// it must accept whatever `validate_declare` accepted.
    fn create(&self, d: &Declaration) -> Result<Box<dyn Exchange>, Error>;
}

/// The routing state of one exchange.
pub trait Exchange {
    /// Checks a binding before it is added; `b.id` is not assigned yet. It
    /// may ask the broker to validate the binding as an exchange of another
    /// type (with this exchange's declaration) would, once it returned
    /// `Ok` ([`Checks::validate_as`], ABI 1.1).
    fn validate_binding(&self, b: &Binding, checks: &mut Checks) -> Result<(), Error> {
        let _ = (b, checks);
        Ok(())
    }

    /// Adds a binding. It must accept what `validate_binding` accepted:
    /// after a restart bindings come back through `add_binding` alone, in
    /// the order they were first added.
    fn add_binding(&mut self, b: Binding) -> Result<(), Error>;

    /// Removes bindings by id.
    fn remove_bindings(&mut self, ids: &[BindingId]) -> Result<(), Error>;

    /// Adds to `r` the bindings `m` goes to, or asks for another type with
    /// [`RouteResult::via`]. An error fails this publish only.
    fn route(&mut self, m: &mut Message<'_>, r: &mut RouteResult) -> Result<(), Error>;

    /// Hands the policy now in force; `None` when none applies any more.
    fn policy_changed(&mut self, policy: Option<&OwnedTable>) -> Result<(), Error> {
        let _ = policy;
        Ok(())
    }

    /// The exchange is deleted (the state is dropped right after).
    fn delete(&mut self) {}

    /// Figures for the admin API, e.g. `w.put("bindings", 3usize)`;
    /// nothing written, nothing shown.
    fn info(&self, w: &mut TableWriter) {
        let _ = w;
    }
}

/// What exchange.declare fixed about an exchange. The plugin may keep a
/// clone.
#[derive(Clone, Debug, Default)]
pub struct Declaration {
    pub vhost: String,
    pub name: String,
    pub exchange_type: String,
    pub durable: bool,
    pub auto_delete: bool,
    pub internal: bool,
    pub args: OwnedTable,
}

/// What a validation asks the broker to check after it (ABI 1.1). The SDK
/// hands an empty one to each `validate_declare` and `validate_binding`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checks {
    validate_as: Vec<String>,
}

impl Checks {
    /// Asks the broker to validate the same declare (or binding) as
    /// exchange type `typ` would: `typ`'s refusal is the client's answer,
    /// and a type the broker does not know is refused with 406. An
    /// exchange that hands messages to another type
    /// ([`RouteResult::via`]) uses it so that what that type would refuse
    /// is refused at once rather than when a message is routed.
    pub fn validate_as(&mut self, typ: &str) {
        self.validate_as.push(typ.into());
    }

    /// The types `validate_as` named, in order.
    pub fn validating_as(&self) -> &[String] {
        &self.validate_as
    }

    pub(crate) fn clear(&mut self) {
        self.validate_as.clear();
    }
}

/// Names a binding in a route's answer. The broker assigns it and may
/// reuse it once the binding is removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct BindingId(pub u32);

/// Where a binding leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DestKind {
    Queue,
    Exchange,
}

/// One binding of the exchange. The plugin may keep it.
#[derive(Clone, Debug)]
pub struct Binding {
    pub id: BindingId,
    pub dest_kind: DestKind,
    /// The queue's or exchange's name.
    pub destination: String,
    /// The binding key, as bytes (AMQP does not require UTF-8).
    pub key: Vec<u8>,
    pub args: OwnedTable,
}

impl Binding {
    /// The binding key as text, when it is UTF-8.
    pub fn key_str(&self) -> Option<&str> {
        core::str::from_utf8(&self.key).ok()
    }
}

/// An AMQP reply the client sees: a reply code and a text without the
/// code's name (the broker prefixes it: `PRECONDITION_FAILED - ...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub code: u16,
    pub text: Cow<'static, str>,
}

impl Error {
    /// An error with a code and a text (a literal costs no allocation;
    /// use `format!` for more).
    pub fn new<T: Into<Cow<'static, str>>>(code: u16, text: T) -> Error {
        Error {
            code,
            text: text.into(),
        }
    }

    /// 406 PRECONDITION_FAILED, the usual answer to a bad argument.
    pub fn precondition_failed<T: Into<Cow<'static, str>>>(text: T) -> Error {
        Error::new(PRECONDITION_FAILED, text)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code, self.text)
    }
}

/// Reply codes a plugin may use; any other becomes 541 at the broker.
pub const ACCESS_REFUSED: u16 = 403;
pub const NOT_FOUND: u16 = 404;
pub const RESOURCE_LOCKED: u16 = 405;
pub const PRECONDITION_FAILED: u16 = 406;
pub const INTERNAL_ERROR: u16 = 541;

#[cfg(test)]
mod tests;
