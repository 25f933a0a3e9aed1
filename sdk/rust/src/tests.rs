//! The SDK's unit tests, native: the dispatcher is driven with the bytes
//! the host sends, and its answers checked byte for byte against ABI.md.

use alloc::borrow::ToOwned;
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;
use core::time::Duration;
use std::alloc::{GlobalAlloc, Layout, System};

use crate::*;

// ---- allocation counting (per thread: tests run in parallel) ----

struct Counting;

std::thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn allocs() -> usize {
    ALLOCS.with(|c| c.get())
}

// ---- a test plugin ----

/// x-key: routes to the bindings whose key equals the routing key, in the
/// order they were added; routing key "via" holds the message, "refuse"
/// refuses it, "seen" records what the message carried.
struct KeyType;

#[derive(Default)]
struct KeyExchange {
    bindings: Vec<(BindingId, Vec<u8>)>,
    policy: Option<OwnedTable>,
}

impl ExchangeType for KeyType {
    fn name(&self) -> &str {
        "x-key"
    }
    fn validate_declare(&self, d: &Declaration, checks: &mut Checks) -> Result<(), Error> {
        match d.args.get("x-then") {
            None => Ok(()),
            Some(v) => match v.as_str() {
                Some(t) => {
                    checks.validate_as(t);
                    Ok(())
                }
                None => Err(Error::precondition_failed("x-then must be a string")),
            },
        }
    }
    fn create(&self, _: &Declaration) -> Result<Box<dyn Exchange>, Error> {
        Ok(Box::new(KeyExchange::default()))
    }
}

impl Exchange for KeyExchange {
    fn validate_binding(&self, b: &Binding, checks: &mut Checks) -> Result<(), Error> {
        if b.key == b"bad" {
            return Err(Error::new(ACCESS_REFUSED, "no"));
        }
        if b.key == b"check" {
            checks.validate_as("topic");
        }
        Ok(())
    }
    fn add_binding(&mut self, b: Binding) -> Result<(), Error> {
        self.bindings.push((b.id, b.key));
        Ok(())
    }
    fn remove_bindings(&mut self, ids: &[BindingId]) -> Result<(), Error> {
        self.bindings.retain(|(id, _)| !ids.contains(id));
        Ok(())
    }
    fn route(&mut self, m: &mut Message<'_>, r: &mut RouteResult) -> Result<(), Error> {
        match m.routing_key() {
            b"via" => r.via("direct", Duration::from_millis(1500)),
            b"delay" => {
                r.via("direct", Duration::from_millis(10));
                r.set_header("x-delay", -10i64);
                r.remove_header("gone");
            }
            b"headers-alone" => r.set_header("a", 1i32),
            b"headers-now" => {
                r.via("direct", Duration::ZERO);
                r.set_header("a", 1i32);
            }
            b"both" => {
                r.add(BindingId(1));
                r.via("direct", Duration::ZERO);
            }
            b"refuse" => return Err(Error::precondition_failed("bad \"order\" !")),
            b"seen" => {
                if m.flags() != 0x2000 || m.raw_properties() != [1, 2] || m.body() != b"{}" {
                    return Err(Error::precondition_failed("not the example's message"));
                }
            }
            key => {
                for (id, k) in &self.bindings {
                    if k.as_slice() == key {
                        r.add(*id);
                    }
                }
            }
        }
        Ok(())
    }
    fn policy_changed(&mut self, p: Option<&OwnedTable>) -> Result<(), Error> {
        self.policy = p.cloned();
        Ok(())
    }
    fn info(&self, w: &mut TableWriter) {
        w.put("bindings", self.bindings.len());
        if let Some(p) = &self.policy {
            w.put("policy", p);
        }
    }
}

fn plugin() -> Plugin {
    Plugin::new("key", "1.2.3")
        .features(Features::HEADERS | Features::BODY)
        .exchange_type(KeyType)
        .setting("max", SettingKind::Int, "the most")
}

// ---- records as the host writes them ----

fn str8(b: &mut Vec<u8>, s: &[u8]) {
    b.push(s.len() as u8);
    b.extend_from_slice(s);
}

fn definition(id: u32, typ: &str, args: &[u8]) -> Vec<u8> {
    let mut b = id.to_le_bytes().to_vec();
    str8(&mut b, b"/");
    str8(&mut b, b"x");
    str8(&mut b, typ.as_bytes());
    b.push(0x1);
    b.extend_from_slice(if args.is_empty() { &[0, 0, 0, 0] } else { args });
    b
}

fn binding(x: u32, id: u32, key: &str) -> Vec<u8> {
    let mut b = x.to_le_bytes().to_vec();
    b.extend_from_slice(&id.to_le_bytes());
    b.push(0);
    str8(&mut b, b"q");
    str8(&mut b, key.as_bytes());
    b.extend_from_slice(&[0, 0, 0, 0]);
    b
}

fn route_record(x: u32, key: &str, flags: u16, props: &[u8], body: &[u8]) -> Vec<u8> {
    let mut b = x.to_le_bytes().to_vec();
    str8(&mut b, key.as_bytes());
    b.extend_from_slice(&flags.to_le_bytes());
    b.extend_from_slice(&(props.len() as u32).to_le_bytes());
    b.extend_from_slice(props);
    b.extend_from_slice(&(body.len() as u32).to_le_bytes());
    b.extend_from_slice(body);
    b
}

fn ready() -> Dispatcher {
    let mut d = Dispatcher::new(plugin());
    assert_eq!(d.call(Export::Create, &definition(4, "x-key", &[])), b"");
    assert_eq!(d.call(Export::AddBinding, &binding(4, 3, "k.1")), b"");
    assert_eq!(d.call(Export::AddBinding, &binding(4, 2, "other")), b"");
    assert_eq!(d.call(Export::AddBinding, &binding(4, 1, "k.1")), b"");
    d
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

// ---- ABI.md, "A route call, byte by byte" ----

#[test]
fn abi_example_route_input_and_output() {
    let input = hex("04 00 00 00  03 6b 2e 31  00 20  02 00 00 00 01 02  02 00 00 00 7b 7d");
    assert_eq!(input.len(), 22);
    assert_eq!(input, route_record(4, "k.1", 0x2000, &[1, 2], b"{}"));
    let mut d = ready();
    assert_eq!(
        d.call(Export::Route, &input),
        hex("00  02 00 00 00  03 00 00 00  01 00 00 00").as_slice()
    );
    // The message is seen as the example describes it.
    assert_eq!(
        d.call(
            Export::Route,
            &route_record(4, "seen", 0x2000, &[1, 2], b"{}")
        ),
        b""
    );
}

#[test]
fn abi_example_via() {
    let mut d = ready();
    assert_eq!(
        d.call(Export::Route, &route_record(4, "via", 0, &[], &[])),
        hex("00 00 00 00 00  01  dc 05 00 00 00 00 00 00  06 64 69 72 65 63 74").as_slice()
    );
}

#[test]
fn abi_example_refusal() {
    let mut d = ready();
    let mut want = hex("01 96 01 0d 00");
    want.extend_from_slice(b"bad \"order\" !");
    assert_eq!(
        d.call(Export::Route, &route_record(4, "refuse", 0, &[], &[])),
        want.as_slice()
    );
}

#[test]
fn abi_version_is_1_1() {
    assert_eq!(ABI_VERSION, 0x0001_0001);
}

// ---- the other exports ----

#[test]
fn describe() {
    let mut d = Dispatcher::new(plugin());
    let mut want = vec![0u8];
    str8(&mut want, b"key");
    str8(&mut want, b"1.2.3");
    want.extend_from_slice(&5u32.to_le_bytes());
    want.push(1);
    str8(&mut want, b"x-key");
    want.push(1);
    want.push(b'l');
    str8(&mut want, b"max");
    want.extend_from_slice(&8u16.to_le_bytes());
    want.extend_from_slice(b"the most");
    assert_eq!(d.call(Export::Describe, &[]), want.as_slice());
}

#[test]
fn validate_declare_answers_checks() {
    let mut d = Dispatcher::new(plugin());
    let mut args = TableWriter::new();
    args.put("x-then", "topic");
    let out = d.call(
        Export::ValidateDeclare,
        &definition(u32::MAX, "x-key", args.as_bytes()),
    );
    assert_eq!(out, b"\x00\x01\x05topic");
    assert_eq!(
        d.call(Export::ValidateDeclare, &definition(u32::MAX, "x-key", &[])),
        b""
    );

    let mut bad = TableWriter::new();
    bad.put("x-then", 1i32);
    let out = d
        .call(
            Export::ValidateDeclare,
            &definition(u32::MAX, "x-key", bad.as_bytes()),
        )
        .to_vec();
    assert_eq!(out[..3], [1, 0x96, 0x01]);
    assert_eq!(&out[5..], b"x-then must be a string");

    let out = d
        .call(
            Export::ValidateDeclare,
            &definition(u32::MAX, "x-nope", &[]),
        )
        .to_vec();
    assert_eq!(out[0], 1);
    assert!(String::from_utf8_lossy(&out).contains("no exchange type 'x-nope'"));
}

#[test]
fn validate_binding_answers_checks_and_refusals() {
    let mut d = ready();
    assert_eq!(
        d.call(Export::ValidateBinding, &binding(4, u32::MAX, "ok")),
        b""
    );
    assert_eq!(
        d.call(Export::ValidateBinding, &binding(4, u32::MAX, "check")),
        b"\x00\x01\x05topic"
    );
    assert_eq!(
        d.call(Export::ValidateBinding, &binding(4, u32::MAX, "bad")),
        b"\x01\x93\x01\x02\x00no"
    );
    assert_eq!(
        d.call(Export::ValidateBinding, &binding(9, u32::MAX, "ok"))[0],
        2
    );
}

#[test]
fn remove_delete_policy_info() {
    let mut d = ready();
    let mut rm = 4u32.to_le_bytes().to_vec();
    rm.extend_from_slice(&1u32.to_le_bytes());
    rm.extend_from_slice(&3u32.to_le_bytes());
    assert_eq!(d.call(Export::RemoveBindings, &rm), b"");
    assert_eq!(
        d.call(Export::Route, &route_record(4, "k.1", 0, &[], &[])),
        hex("00 01 00 00 00 01 00 00 00").as_slice()
    );
    // A count past the record's end is a fault.
    rm[4] = 9;
    assert_eq!(d.call(Export::RemoveBindings, &rm)[0], 2);

    let mut policy = 4u32.to_le_bytes().to_vec();
    policy.push(1);
    let mut p = TableWriter::new();
    p.put("alternate-exchange", "ae");
    policy.extend_from_slice(p.as_bytes());
    assert_eq!(d.call(Export::PolicyChanged, &policy), b"");

    let info = d.call(Export::Info, &4u32.to_le_bytes()).to_vec();
    assert_eq!(info[0], 0);
    let t = Table::new(&info[1..]);
    assert_eq!(t.get("bindings").and_then(|v| v.as_int()), Some(2));
    let pol = t.get("policy").and_then(|v| v.as_table()).unwrap();
    assert_eq!(
        pol.get("alternate-exchange").and_then(|v| v.as_str()),
        Some("ae")
    );

    assert_eq!(d.call(Export::Delete, &4u32.to_le_bytes()), b"");
    assert_eq!(
        d.call(Export::Route, &route_record(4, "k.1", 0, &[], &[]))[0],
        2
    );
    // The id is free again.
    assert_eq!(d.call(Export::Create, &definition(4, "x-key", &[])), b"");
    assert_eq!(d.call(Export::Create, &definition(4, "x-key", &[]))[0], 2);
}

#[test]
fn route_faults() {
    let mut d = ready();
    assert_eq!(d.call(Export::Route, &[4, 0, 0])[0], 2);
    let mut r = route_record(4, "k", 0, &[1, 2, 3], &[]);
    r[8] = 200; // property list longer than the record
    assert_eq!(d.call(Export::Route, &r)[0], 2);
    assert_eq!(
        d.call(Export::Route, &route_record(7, "k", 0, &[], &[]))[0],
        2
    );
    assert_eq!(
        d.call(Export::Route, &route_record(4, "both", 0, &[], &[]))[0],
        2
    );
    assert_eq!(
        d.call(
            Export::Route,
            &route_record(4, "headers-alone", 0, &[], &[])
        )[0],
        2
    );
    assert_eq!(
        d.call(Export::Route, &route_record(4, "headers-now", 0, &[], &[]))[0],
        2
    );
    assert_eq!(
        d.call(Export::Route, &route_record(4, "nothing", 0, &[], &[])),
        b""
    );
}

#[test]
fn set_headers_follows_a_held_via() {
    let mut d = ready();
    let out = d
        .call(Export::Route, &route_record(4, "delay", 0, &[], &[]))
        .to_vec();
    let mut want = hex("00 00 00 00 00 01 0a 00 00 00 00 00 00 00 06");
    want.extend_from_slice(b"direct");
    want.push(2);
    let mut t = TableWriter::new();
    t.put("x-delay", -10i64).put("gone", Field::Void);
    want.extend_from_slice(t.as_bytes());
    assert_eq!(out, want);
}

#[test]
fn settings_and_settings_changed() {
    native::set_settings(None);
    assert_eq!(settings().raw(), &[0, 0, 0, 0]);
    let mut t = TableWriter::new();
    t.put("max", 5i64);
    native::set_settings(Some(t.as_bytes()));
    assert_eq!(settings().get("max").and_then(|v| v.as_int()), Some(5));

    fn refuse_big(s: &OwnedTable) -> Result<(), Error> {
        match s.get("max").and_then(|v| v.as_int()) {
            Some(n) if n > 100 => Err(Error::precondition_failed("max is at most 100")),
            _ => Ok(()),
        }
    }
    let mut d = Dispatcher::new(plugin().on_settings_changed(refuse_big));
    let mut big = TableWriter::new();
    big.put("max", 500i64);
    assert_eq!(d.call(Export::SettingsChanged, big.as_bytes())[0], 1);
    assert_eq!(settings().get("max").and_then(|v| v.as_int()), Some(5));
    let mut small = TableWriter::new();
    small.put("max", 7i64);
    assert_eq!(d.call(Export::SettingsChanged, small.as_bytes()), b"");
    assert_eq!(settings().get("max").and_then(|v| v.as_int()), Some(7));
    assert_eq!(d.call(Export::SettingsChanged, &[0, 0, 0, 9])[0], 2);
    native::set_settings(None);
}

#[test]
fn host_stand_ins() {
    assert!(type_exists("direct"));
    assert!(!type_exists("x-nowhere"));
    native::set_type("x-nowhere", true);
    assert!(type_exists("x-nowhere"));
    native::set_type("x-nowhere", false);
    assert!(!type_exists("x-nowhere"));
    let a = clock_monotonic();
    assert!(clock_monotonic() >= a);
    assert!(clock_wall() > Duration::from_secs(1_600_000_000));
}

#[test]
fn buffer_grows_and_idle_shrinks_it() {
    let mut d = Dispatcher::new(plugin());
    assert!(d.buffer(1 << 21).unwrap().len() >= 1 << 21);
    assert_eq!(d.call(Export::Idle, &[]), b"");
    assert!(d.buffer(0).unwrap().len() < 1 << 21);
    assert!(d.buffer(usize::MAX).is_none());
}

#[test]
fn route_does_not_allocate_once_warm() {
    let mut d = ready();
    let mut headers = TableWriter::new();
    headers.put("tenant", "acme").put("attempt", 1i32);
    let rec = route_record(4, "k.1", 0x2000, headers.as_bytes(), b"{}");
    let delay = route_record(4, "delay", 0, &[], &[]);
    for _ in 0..2 {
        d.call(Export::Route, &rec);
        d.call(Export::Route, &delay);
    }
    let before = allocs();
    for _ in 0..100 {
        assert_eq!(d.call(Export::Route, &rec)[0], 0);
        assert_eq!(d.call(Export::Route, &delay)[0], 0);
    }
    assert_eq!(allocs() - before, 0, "allocations on a warm route path");
}

// ---- messages ----

fn props_with(flags: u16, parts: &[&[u8]]) -> (u16, Vec<u8>) {
    (flags, parts.concat())
}

#[test]
fn message_properties() {
    let mut headers = TableWriter::new();
    headers.put("a", 1i32);
    let ts = 1_700_000_000u64.to_be_bytes();
    // content-type, headers, delivery-mode, priority, message-id, timestamp, app-id
    let (flags, props) = props_with(
        0x8000 | 0x2000 | 0x1000 | 0x0800 | 0x0080 | 0x0040 | 0x0008,
        &[
            b"\x10application/json",
            headers.as_bytes(),
            &[2],
            &[7],
            b"\x03m-1",
            &ts,
            b"\x03app",
        ],
    );
    let mut m = Message::new(b"rk", flags, &props, b"body");
    assert_eq!(m.routing_key(), b"rk");
    assert_eq!(m.routing_key_str(), Some("rk"));
    assert_eq!(m.content_type(), Some("application/json"));
    assert_eq!(m.content_encoding(), None);
    assert_eq!(m.delivery_mode(), 2);
    assert_eq!(m.priority(), 7);
    assert_eq!(m.message_id(), Some("m-1"));
    assert_eq!(m.timestamp(), Some(1_700_000_000));
    assert_eq!(m.app_id(), Some("app"));
    assert_eq!(m.reply_to(), None);
    assert_eq!(m.header("a").and_then(|v| v.as_int()), Some(1));
    assert_eq!(m.body(), b"body");

    // A list cut short: what fits reads, the rest is absent.
    let mut m = Message::new(b"", 0x8000 | 0x0400, b"\x02ok\x09short", &[]);
    assert_eq!(m.content_type(), Some("ok"));
    assert_eq!(m.correlation_id(), None);
    // Properties beyond the flags are absent.
    let mut m = Message::new(b"", 0, b"\x02ok", &[]);
    assert_eq!(m.content_type(), None);
    assert!(!m.headers().is_valid());
    assert_eq!(m.header("a"), None);
}

#[test]
fn header_index() {
    let mut t = TableWriter::new();
    t.put("zeta", 1i32)
        .put("alpha", "a")
        .put("mid", true)
        .put("alpha", "second")
        .put("", 5i32);
    let (flags, props) = Message::encode_headers(t.as_bytes());
    let mut m = Message::new(b"", flags, props, &[]);
    assert_eq!(
        m.header("alpha").and_then(|v| v.as_str()),
        Some("a"),
        "first of a name"
    );
    assert_eq!(m.header("zeta").and_then(|v| v.as_int()), Some(1));
    assert_eq!(m.header("mid").and_then(|v| v.as_bool()), Some(true));
    assert_eq!(m.header("").and_then(|v| v.as_int()), Some(5));
    assert_eq!(m.header("alph"), None);
    assert_eq!(m.header("zz"), None);
    assert_eq!(m.headers().len(), 5);
}

#[test]
fn header_index_past_its_capacity() {
    let mut t = TableWriter::new();
    let names: Vec<String> = (0..MAX_INDEXED_HEADERS + 8)
        .map(|i| std::format!("h{:02}", 99 - i))
        .collect();
    for (i, n) in names.iter().enumerate() {
        t.put(n, i as i32);
    }
    t.put("h99", -1i32); // a repeat: the first stays the answer
    let (flags, props) = Message::encode_headers(t.as_bytes());
    let mut m = Message::new(b"", flags, props, &[]);
    for (i, n) in names.iter().enumerate().rev() {
        assert_eq!(
            m.header(n.as_str()).and_then(|v| v.as_int()),
            Some(i as i64),
            "{}",
            n
        );
    }
    assert_eq!(m.header("h99").and_then(|v| v.as_int()), Some(0));
    assert_eq!(m.header("nope"), None);
}

#[test]
fn header_index_stops_at_a_bad_entry() {
    let mut raw = TableWriter::new();
    raw.put("ok", 1i32);
    let mut b = raw.as_bytes().to_vec();
    b.extend_from_slice(b"\x03bad?"); // unknown type octet
    let n = (b.len() - 4) as u32;
    b[..4].copy_from_slice(&n.to_be_bytes());
    let (flags, props) = Message::encode_headers(&b);
    let mut m = Message::new(b"", flags, props, &[]);
    assert_eq!(m.header("ok").and_then(|v| v.as_int()), Some(1));
    assert_eq!(m.header("bad"), None);
}

// ---- tables ----

#[test]
fn values() {
    let inner = {
        let mut w = TableWriter::new();
        w.put("n", 1u8);
        w.finish()
    };
    let arr = [Field::I32(1), Field::Str("two"), Field::Void];
    let mut w = TableWriter::new();
    w.put("t", true)
        .put("b", -3i8)
        .put("s", -300i16)
        .put("u", 65000u16)
        .put("I", -70000i32)
        .put("i", 4_000_000_000u32)
        .put("l", -5_000_000_000i64)
        .put("f", 1.5f32)
        .put("d", 2.25f64)
        .put("D", Field::Decimal(2, 12345))
        .put("S", "text")
        .put("x", &b"\x00\x01"[..])
        .put("T", Field::Timestamp(42))
        .put("F", &inner)
        .put("A", Field::Array(&arr))
        .put("V", Field::Void);
    let t = w.table();
    assert_eq!(t.len(), 16);
    let g = |k: &str| t.get(k).unwrap();
    assert_eq!(g("t").as_bool(), Some(true));
    assert_eq!(g("b").as_int(), Some(-3));
    assert_eq!(g("s").as_int(), Some(-300));
    assert_eq!(g("u").as_int(), Some(65000));
    assert_eq!(g("I").as_int(), Some(-70000));
    assert_eq!(g("i").as_int(), Some(4_000_000_000));
    assert_eq!(g("l").as_int(), Some(-5_000_000_000));
    assert_eq!(g("f").as_float(), Some(1.5));
    assert_eq!(g("d").as_float(), Some(2.25));
    assert_eq!(g("D").as_float(), Some(123.45));
    assert_eq!(g("S").as_str(), Some("text"));
    assert_eq!(g("x").as_bytes(), Some(&b"\x00\x01"[..]));
    assert_eq!(g("x").as_str(), None);
    assert_eq!(g("T").as_int(), Some(42));
    assert_eq!(g("T").as_float(), None);
    assert_eq!(
        g("F").as_table().unwrap().get("n").and_then(|v| v.as_int()),
        Some(1)
    );
    let items: Vec<Value<'_>> = g("A").as_array().unwrap().iter().collect();
    assert_eq!(items.len(), 3);
    assert_eq!(items[1].as_str(), Some("two"));
    assert!(items[2].is_void());
    assert!(g("V").is_void());
    assert_eq!(g("S").as_int(), None);

    // Equality as RabbitMQ's headers exchange compares.
    assert!(g("b").equal(&Value::from_parts(b'l', &(-3i64).to_be_bytes())));
    assert!(g("f").equal(&Value::from_parts(b'd', &1.5f64.to_bits().to_be_bytes())));
    assert!(!g("S").equal(&g("x")));
    assert!(!g("I").equal(&g("S")));

    // Re-encoding a value read from a table gives the same bytes.
    let mut again = TableWriter::new();
    for (k, v) in t.iter() {
        again.put(core::str::from_utf8(k).unwrap(), v);
    }
    assert_eq!(again.as_bytes(), w.as_bytes());
    assert_eq!(
        std::format!("{:?}", t.get("A").unwrap()),
        "[1, \"two\", void]"
    );
}

#[test]
fn tables_that_do_not_decode() {
    assert!(!Table::default().is_valid());
    assert_eq!(Table::default().get("a"), None);
    // Length past the end: empty.
    assert_eq!(Table::new(&[0, 0, 0, 9, 1]).len(), 0);
    // An entry cut short ends the iteration.
    let t = [0, 0, 0, 5, 1, b'a', b'I', 0, 0];
    assert_eq!(Table::new(&t).len(), 0);
    let s = [0, 0, 0, 6, 1, b'a', b'S', 0, 0, 9];
    assert_eq!(Table::new(&s).get("a"), None);
    assert_eq!(OwnedTable::default().view().raw(), &[] as &[u8]);
    let _ = "x".to_owned();
}
