//! Decoding the ABI's inputs, calling the plugin's types and exchanges, and
//! encoding their answers. Plain Rust: the wasm exports (`plugin!`) are
//! one-line shims over it, and tests drive it natively.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use crate::host;
use crate::message::Message;
use crate::result::RouteResult;
use crate::table::{be32, OwnedTable, TableWriter};
use crate::{
    Binding, BindingId, Checks, Declaration, DestKind, Error, Exchange, Plugin, PRECONDITION_FAILED,
};

const STATUS_OK: u8 = 0;
const STATUS_ERROR: u8 = 1;
const STATUS_FAULT: u8 = 2;
const ACTION_VIA: u8 = 1;
const ACTION_SET_HEADERS: u8 = 2;
const CHECK_VALIDATE_AS: u8 = 1;

/// The buffer the host writes inputs into, to start with; idle gives back
/// a buffer grown past `KEEP_BUFFER` for an outsized message.
const DEFAULT_BUFFER: usize = 64 << 10;
const KEEP_BUFFER: usize = 1 << 20;
/// Exchange ids are small (the host hands out the lowest free one).
const MAX_EXCHANGES: u32 = 1 << 24;

/// One of the module's exports that take an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Export {
    Describe,
    ValidateDeclare,
    Create,
    Delete,
    ValidateBinding,
    AddBinding,
    RemoveBindings,
    PolicyChanged,
    Route,
    Info,
    Idle,
    SettingsChanged,
}

/// The plugin's side of the ABI: the exchange buffer, the exchanges by
/// id, and the encoding of every answer. [`plugin!`](crate::plugin) keeps
/// one per instance; a plugin's tests make their own and drive it with the
/// bytes the host would send (see [`Dispatcher::call`]).
pub struct Dispatcher {
    input: Vec<u8>,
    state: State,
}

struct State {
    plugin: Plugin,
    // By id: the host's ids are small and dense, so a Vec serves.
    exch: Vec<Option<Box<dyn Exchange>>>,
    out: Vec<u8>,
    res: RouteResult,
    ids: Vec<BindingId>,
    checks: Checks,
}

impl core::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("plugin", &self.state.plugin)
            .field(
                "exchanges",
                &self.state.exch.iter().filter(|x| x.is_some()).count(),
            )
            .finish()
    }
}

impl Dispatcher {
    /// A dispatcher for the plugin `p`.
    pub fn new(p: Plugin) -> Dispatcher {
        Dispatcher {
            input: alloc::vec![0; DEFAULT_BUFFER],
            state: State {
                plugin: p,
                exch: Vec::new(),
                out: Vec::with_capacity(1024),
                res: RouteResult::new(),
                ids: Vec::new(),
                checks: Checks::default(),
            },
        }
    }

    /// The exchange buffer, grown to at least `size` bytes: what
    /// `warren_buffer` answers. `None` when it cannot grow that far.
    pub fn buffer(&mut self, size: usize) -> Option<&mut [u8]> {
        if size > self.input.len() {
            let more = size - self.input.len();
            if self.input.try_reserve_exact(more).is_err() {
                return None;
            }
            self.input.resize(size, 0);
        }
        Some(&mut self.input)
    }

    /// Writes `input` into the exchange buffer, as the host does, and runs
    /// export `e` on it: the output bytes (empty for "OK, nothing to say"),
    /// valid until the next call.
    pub fn call(&mut self, e: Export, input: &[u8]) -> &[u8] {
        match self.buffer(input.len()) {
            Some(buf) => buf[..input.len()].copy_from_slice(input),
            None => return self.state.fault("no buffer for the input"),
        }
        self.dispatch(e, input.len())
    }

    /// Runs export `e` on the first `n` bytes of the exchange buffer.
    pub fn dispatch(&mut self, e: Export, n: usize) -> &[u8] {
        let st = &mut self.state;
        if n > self.input.len() {
            let msg = format!(
                "input of {} bytes overruns the {}-byte buffer",
                n,
                self.input.len()
            );
            return st.fault(&msg);
        }
        let input = &self.input[..n];
        match e {
            Export::Route => st.route(input),
            Export::Describe => st.describe(),
            Export::ValidateDeclare => st.declaration(input, true),
            Export::Create => st.declaration(input, false),
            Export::Delete => st.delete(input),
            Export::ValidateBinding => st.binding(input, true),
            Export::AddBinding => st.binding(input, false),
            Export::RemoveBindings => st.remove_bindings(input),
            Export::PolicyChanged => st.policy_changed(input),
            Export::Info => st.info(input),
            Export::SettingsChanged => st.settings_changed(input),
            Export::Idle => {
                if let Some(f) = st.plugin.on_idle {
                    f();
                }
                if self.input.len() > KEEP_BUFFER {
                    self.input = alloc::vec![0; DEFAULT_BUFFER];
                }
                if st.out.capacity() > KEEP_BUFFER {
                    st.out = Vec::with_capacity(1024);
                }
                &[]
            }
        }
    }
}

/// A reader over a record. The first overrun sticks: later reads return
/// zeros, so a decoder checks `err` once at the end.
struct Reader<'a> {
    b: &'a [u8],
    off: usize,
    err: bool,
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8]) -> Reader<'a> {
        Reader {
            b,
            off: 0,
            err: false,
        }
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        if self.err || n > self.b.len() - self.off {
            self.err = true;
            return &[];
        }
        let p = &self.b[self.off..self.off + n];
        self.off += n;
        p
    }

    fn u8(&mut self) -> u8 {
        self.take(1).first().copied().unwrap_or(0)
    }

    fn u32(&mut self) -> u32 {
        let p = self.take(4);
        if p.len() < 4 {
            return 0;
        }
        u32::from_le_bytes([p[0], p[1], p[2], p[3]])
    }

    fn str8(&mut self) -> &'a [u8] {
        let n = self.u8() as usize;
        self.take(n)
    }

    fn table(&mut self) -> &'a [u8] {
        if self.err || self.b.len() - self.off < 4 {
            self.err = true;
            return &[];
        }
        let n = be32(&self.b[self.off..]) as usize;
        self.take(4 + n)
    }

    fn rest(&self) -> usize {
        self.b.len() - self.off
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn put_str8(out: &mut Vec<u8>, s: &[u8]) {
    let s = &s[..s.len().min(255)];
    out.push(s.len() as u8);
    out.extend_from_slice(s);
}

fn put_str16(out: &mut Vec<u8>, s: &[u8]) {
    let s = &s[..s.len().min(65535)];
    out.extend_from_slice(&(s.len() as u16).to_le_bytes());
    out.extend_from_slice(s);
}

impl State {
    fn fault(&mut self, text: &str) -> &[u8] {
        self.out.clear();
        self.out.push(STATUS_FAULT);
        put_str16(&mut self.out, text.as_bytes());
        &self.out
    }

    fn reply(&mut self, e: &Error) -> &[u8] {
        self.out.clear();
        self.out.push(STATUS_ERROR);
        self.out.extend_from_slice(&e.code.to_le_bytes());
        put_str16(&mut self.out, e.text.as_bytes());
        &self.out
    }

    /// The OK answer of a validation: nothing, or its checks (ABI 1.1).
    fn checks(&mut self) -> &[u8] {
        self.out.clear();
        let types = self.checks.validating_as();
        if types.is_empty() {
            return &self.out;
        }
        self.out.push(STATUS_OK);
        for t in types {
            self.out.push(CHECK_VALIDATE_AS);
            put_str8(&mut self.out, t.as_bytes());
        }
        &self.out
    }

    fn exchange(&mut self, id: u32) -> Option<&mut Box<dyn Exchange>> {
        self.exch.get_mut(id as usize).and_then(|x| x.as_mut())
    }

    fn describe(&mut self) -> &[u8] {
        let p = &self.plugin;
        let out = &mut self.out;
        out.clear();
        out.push(STATUS_OK);
        put_str8(out, p.name.as_bytes());
        put_str8(out, p.version.as_bytes());
        out.extend_from_slice(&p.features.0.to_le_bytes());
        out.push(p.types.len().min(255) as u8);
        for t in p.types.iter().take(255) {
            put_str8(out, t.name().as_bytes());
        }
        out.push(p.settings.len().min(255) as u8);
        for s in p.settings.iter().take(255) {
            out.push(s.kind as u8);
            put_str8(out, s.name.as_bytes());
            put_str16(out, s.doc.as_bytes());
        }
        out
    }

    /// validate_declare (validate) and create.
    fn declaration(&mut self, input: &[u8], validate: bool) -> &[u8] {
        let mut r = Reader::new(input);
        let id = r.u32();
        let vhost = r.str8();
        let name = r.str8();
        let typ = r.str8();
        let flags = r.u8();
        let args = r.table();
        if r.err {
            let msg = format!("definition record of {} bytes is truncated", input.len());
            return self.fault(&msg);
        }
        let t = match self
            .plugin
            .types
            .iter()
            .position(|t| t.name().as_bytes() == typ)
        {
            Some(i) => i,
            None => {
                let e = Error::new(
                    PRECONDITION_FAILED,
                    format!(
                        "plugin {} has no exchange type '{}'",
                        self.plugin.name,
                        text(typ)
                    ),
                );
                return self.reply(&e);
            }
        };
        let d = Declaration {
            vhost: text(vhost),
            name: text(name),
            exchange_type: text(typ),
            durable: flags & 0x1 != 0,
            auto_delete: flags & 0x2 != 0,
            internal: flags & 0x4 != 0,
            args: OwnedTable::from_raw(args.to_vec()),
        };
        if validate {
            self.checks.clear();
            return match self.plugin.types[t].validate_declare(&d, &mut self.checks) {
                Ok(()) => self.checks(),
                Err(e) => self.reply(&e),
            };
        }
        if id >= MAX_EXCHANGES {
            let msg = format!("exchange id {} out of range", id);
            return self.fault(&msg);
        }
        if self.exchange(id).is_some() {
            let msg = format!("exchange id {} created twice", id);
            return self.fault(&msg);
        }
        match self.plugin.types[t].create(&d) {
            Ok(x) => {
                if self.exch.len() <= id as usize {
                    self.exch.resize_with(id as usize + 1, || None);
                }
                self.exch[id as usize] = Some(x);
                self.out.clear();
                &self.out
            }
            Err(e) => self.reply(&e),
        }
    }

    fn delete(&mut self, input: &[u8]) -> &[u8] {
        let mut r = Reader::new(input);
        let id = r.u32();
        if r.err {
            return self.fault("delete record truncated");
        }
        if let Some(x) = self.exch.get_mut(id as usize) {
            if let Some(mut x) = x.take() {
                x.delete();
            }
        }
        self.out.clear();
        &self.out
    }

    /// validate_binding (validate) and add_binding.
    fn binding(&mut self, input: &[u8], validate: bool) -> &[u8] {
        let mut r = Reader::new(input);
        let xid = r.u32();
        let bid = r.u32();
        let kind = r.u8();
        let dest = r.str8();
        let key = r.str8();
        let args = r.table();
        if r.err {
            let msg = format!("binding record of {} bytes is truncated", input.len());
            return self.fault(&msg);
        }
        let dest_kind = match kind {
            0 => DestKind::Queue,
            1 => DestKind::Exchange,
            k => {
                let msg = format!("binding record: unknown destination kind {}", k);
                return self.fault(&msg);
            }
        };
        let b = Binding {
            id: BindingId(bid),
            dest_kind,
            destination: text(dest),
            key: key.to_vec(),
            args: OwnedTable::from_raw(args.to_vec()),
        };
        self.checks.clear();
        let x = match self.exch.get_mut(xid as usize) {
            Some(Some(x)) => x,
            _ => {
                let msg = format!("binding on unknown exchange id {}", xid);
                return self.fault(&msg);
            }
        };
        let res = if validate {
            x.validate_binding(&b, &mut self.checks)
        } else {
            x.add_binding(b)
        };
        match res {
            Ok(()) if validate => self.checks(),
            Ok(()) => {
                self.out.clear();
                &self.out
            }
            Err(e) => self.reply(&e),
        }
    }

    fn remove_bindings(&mut self, input: &[u8]) -> &[u8] {
        let mut r = Reader::new(input);
        let xid = r.u32();
        let n = r.u32() as usize;
        if r.err || n > r.rest() / 4 {
            let msg = format!("removal record of {} bytes is truncated", input.len());
            return self.fault(&msg);
        }
        let mut ids = core::mem::take(&mut self.ids);
        ids.clear();
        for _ in 0..n {
            ids.push(BindingId(r.u32()));
        }
        let res = self.exchange(xid).map(|x| x.remove_bindings(&ids));
        self.ids = ids;
        match res {
            None => {
                let msg = format!("remove on unknown exchange id {}", xid);
                self.fault(&msg)
            }
            Some(Err(e)) => self.reply(&e),
            Some(Ok(())) => {
                self.out.clear();
                &self.out
            }
        }
    }

    fn policy_changed(&mut self, input: &[u8]) -> &[u8] {
        let mut r = Reader::new(input);
        let xid = r.u32();
        let present = r.u8() != 0;
        let table = if present {
            Some(OwnedTable::from_raw(r.table().to_vec()))
        } else {
            None
        };
        if r.err {
            return self.fault("policy record truncated");
        }
        let res = match self.exchange(xid) {
            Some(x) => x.policy_changed(table.as_ref()),
            None => {
                let msg = format!("policy on unknown exchange id {}", xid);
                return self.fault(&msg);
            }
        };
        match res {
            Ok(()) => {
                self.out.clear();
                &self.out
            }
            Err(e) => self.reply(&e),
        }
    }

    fn info(&mut self, input: &[u8]) -> &[u8] {
        let mut r = Reader::new(input);
        let xid = r.u32();
        if r.err {
            return self.fault("info record truncated");
        }
        let mut w = TableWriter::new();
        if let Some(x) = self.exchange(xid) {
            x.info(&mut w);
        }
        self.out.clear();
        if !w.is_empty() {
            self.out.push(STATUS_OK);
            self.out.extend_from_slice(w.as_bytes());
        }
        &self.out
    }

    fn settings_changed(&mut self, input: &[u8]) -> &[u8] {
        if input.len() < 4 || be32(input) as usize != input.len() - 4 {
            let msg = format!("settings record of {} bytes is not a table", input.len());
            return self.fault(&msg);
        }
        let t = OwnedTable::from_raw(input.to_vec());
        if let Some(f) = self.plugin.on_settings_changed {
            if let Err(e) = f(&t) {
                return self.reply(&e);
            }
        }
        host::set_cached_settings(Some(input.to_vec()));
        self.out.clear();
        &self.out
    }

    /// The hot path: the record decoded in place, the message on the
    /// stack, the result and output buffers reused.
    fn route(&mut self, input: &[u8]) -> &[u8] {
        let n = input.len();
        if n < 5 {
            return self.fault("route record truncated");
        }
        let id = u32::from_le_bytes([input[0], input[1], input[2], input[3]]);
        let mut p = 5 + input[4] as usize;
        if n < p + 10 {
            return self.fault("route record truncated");
        }
        let key = &input[5..p];
        let flags = u16::from_le_bytes([input[p], input[p + 1]]);
        let pl =
            u32::from_le_bytes([input[p + 2], input[p + 3], input[p + 4], input[p + 5]]) as usize;
        p += 6;
        if pl > n - p - 4 {
            return self.fault("route record: property list overruns the record");
        }
        let props = &input[p..p + pl];
        p += pl;
        let bl = u32::from_le_bytes([input[p], input[p + 1], input[p + 2], input[p + 3]]) as usize;
        p += 4;
        if bl > n - p {
            return self.fault("route record: body overruns the record");
        }
        let body = &input[p..p + bl];

        let mut m = Message::new(key, flags, props, body);
        self.res.clear();
        let x = match self.exch.get_mut(id as usize) {
            Some(Some(x)) => x,
            _ => {
                let msg = format!("route on unknown exchange id {}", id);
                return self.fault(&msg);
            }
        };
        if let Err(e) = x.route(&mut m, &mut self.res) {
            return self.reply(&e);
        }
        if self.res.has_via {
            return self.via();
        }
        if !self.res.headers.is_empty() || self.res.header_err {
            return self.fault("route set headers without asking for via with a hold");
        }
        self.out.clear();
        if self.res.ids.is_empty() {
            return &self.out;
        }
        self.out.push(STATUS_OK);
        self.out
            .extend_from_slice(&(self.res.ids.len() as u32).to_le_bytes());
        for id in &self.res.ids {
            self.out.extend_from_slice(&id.to_le_bytes());
        }
        &self.out
    }

    /// Encodes a result that asked for another type.
    fn via(&mut self) -> &[u8] {
        let r = &self.res;
        if !r.ids.is_empty() {
            let msg = format!("route added bindings and asked for via '{}'", r.via);
            return self.fault(&msg);
        }
        if r.via.len() > 255 {
            return self.fault("route asked for via a type longer than 255 bytes");
        }
        if r.header_err {
            return self.fault("set_header: a header name longer than 255 bytes");
        }
        if !r.headers.is_empty() && r.hold < Duration::from_millis(1) {
            return self.fault("route set headers with via without a hold");
        }
        let hold = r.hold.as_millis().min(u64::MAX as u128) as u64;
        let out = &mut self.out;
        out.clear();
        out.extend_from_slice(&[STATUS_OK, 0, 0, 0, 0, ACTION_VIA]);
        out.extend_from_slice(&hold.to_le_bytes());
        put_str8(out, r.via.as_bytes());
        if !r.headers.is_empty() {
            out.push(ACTION_SET_HEADERS);
            out.extend_from_slice(&(r.headers.len() as u32).to_be_bytes());
            out.extend_from_slice(&r.headers);
        }
        out
    }
}
