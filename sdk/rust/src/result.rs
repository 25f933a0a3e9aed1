//! What a route decides.

use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use crate::table::{append_entry, Field, OwnedTable};
use crate::BindingId;

/// Collects what [`Exchange::route`](crate::Exchange::route) decides: the
/// bindings the message goes to, or [`via`](RouteResult::via) another
/// exchange type over this exchange's bindings, now or after a hold, with
/// headers to change on the held message
/// ([`set_header`](RouteResult::set_header), ABI 1.1).
///
/// The SDK keeps one and clears it before each route: its buffers keep
/// their capacity, so a route allocates nothing once they have grown to
/// the largest answer.
#[derive(Debug, Default)]
pub struct RouteResult {
    pub(crate) ids: Vec<u32>,
    pub(crate) via: String,
    pub(crate) hold: Duration,
    pub(crate) has_via: bool,
    /// SetHeader's entries, encoded as a table's body.
    pub(crate) headers: Vec<u8>,
    /// A header name over 255 bytes was given.
    pub(crate) header_err: bool,
}

impl RouteResult {
    /// An empty result.
    pub fn new() -> RouteResult {
        RouteResult::default()
    }

    /// Empties the result, keeping its capacity (the SDK does it before
    /// each route; tests reusing one call it).
    pub fn clear(&mut self) {
        self.ids.clear();
        self.via.clear();
        self.hold = Duration::ZERO;
        self.has_via = false;
        self.headers.clear();
        self.header_err = false;
    }

    /// Routes the message to binding `id`. Adding one twice is harmless.
    pub fn add(&mut self, id: BindingId) {
        self.ids.push(id.0);
    }

    /// Routes the message to every binding of `ids`.
    pub fn add_all(&mut self, ids: &[BindingId]) {
        self.ids.extend(ids.iter().map(|b| b.0));
    }

    /// Asks the broker to route the message with exchange type `typ` over
    /// this exchange's bindings, after holding it for `hold` (zero: at
    /// once, else counted in whole milliseconds); the broker keeps held
    /// messages durable and owns the timer. It is one or the other:
    /// bindings added to the same result fail the route.
    pub fn via(&mut self, typ: &str, hold: Duration) {
        self.via.clear();
        self.via.push_str(typ);
        self.hold = hold;
        self.has_via = true;
    }

    /// Sets a header of the message the broker holds and later routes
    /// (ABI 1.1): it replaces the header of the same name or adds one. It
    /// goes with [`via`](RouteResult::via) and a hold of at least a
    /// millisecond; otherwise the route fails.
    pub fn set_header<'v, V: Into<Field<'v>>>(&mut self, name: &str, value: V) {
        if name.len() > 255 {
            self.header_err = true;
            return;
        }
        append_entry(&mut self.headers, name.as_bytes(), &value.into());
    }

    /// Removes a header of the message the broker holds and later routes,
    /// as `set_header(name, Field::Void)`.
    pub fn remove_header(&mut self, name: &str) {
        self.set_header(name, Field::Void);
    }

    /// The number of binding ids added so far.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no binding was added.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The binding ids added so far, in order.
    pub fn bindings(&self) -> impl Iterator<Item = BindingId> + '_ {
        self.ids.iter().map(|&id| BindingId(id))
    }

    /// What `via` set: the type and the hold.
    pub fn via_type(&self) -> Option<(&str, Duration)> {
        if self.has_via {
            Some((&self.via, self.hold))
        } else {
            None
        }
    }

    /// What `set_header` and `remove_header` recorded, as a table
    /// (removals as void values); for tests. It allocates.
    pub fn header_changes(&self) -> OwnedTable {
        let mut raw = Vec::with_capacity(4 + self.headers.len());
        raw.extend_from_slice(&(self.headers.len() as u32).to_be_bytes());
        raw.extend_from_slice(&self.headers);
        OwnedTable::from_raw(raw)
    }
}
