//! AMQP field tables read in place, and a writer for the tables a plugin
//! answers with (info) or hands on (set-headers).

use alloc::vec::Vec;
use core::fmt;

/// An AMQP 0-9-1 field table, read in place: it keeps the encoded bytes
/// (with their big-endian 4-byte length) and decodes an entry only when
/// asked. Declare and binding arguments, policies, settings and message
/// headers are all tables.
///
/// A `Table` borrows its bytes: one from a [`Message`](crate::Message)
/// lives as long as the route call. [`OwnedTable`] is the copy the SDK
/// hands to `create`, `add_binding` and `policy_changed`, which the plugin
/// may keep. The default `Table` is absent: `is_valid` is false and `get`
/// finds nothing.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Table<'a> {
    raw: &'a [u8],
}

impl<'a> Table<'a> {
    /// A table over `raw`, an encoded table with its length prefix.
    pub const fn new(raw: &'a [u8]) -> Table<'a> {
        Table { raw }
    }

    /// Whether the table is present (it may still be empty).
    pub fn is_valid(&self) -> bool {
        self.raw.len() >= 4
    }

    /// The encoded table, length prefix included.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// The entries' bytes, without the length prefix; empty when the
    /// prefix claims more than there is.
    pub(crate) fn body(&self) -> &'a [u8] {
        if self.raw.len() < 4 {
            return &[];
        }
        let n = be32(self.raw) as usize;
        if n > self.raw.len() - 4 {
            return &[];
        }
        &self.raw[4..4 + n]
    }

    /// The value of the first entry named `name`.
    pub fn get<K: AsRef<[u8]> + ?Sized>(&self, name: &K) -> Option<Value<'a>> {
        let name = name.as_ref();
        self.iter().find(|(k, _)| *k == name).map(|(_, v)| v)
    }

    /// The entries in their encoded order, as (name, value). Iteration
    /// stops at the first entry that does not decode.
    pub fn iter(&self) -> TableIter<'a> {
        TableIter { rest: self.body() }
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// A copy the plugin may keep.
    pub fn to_owned(&self) -> OwnedTable {
        OwnedTable::from_raw(self.raw.to_vec())
    }
}

impl<'a> IntoIterator for Table<'a> {
    type Item = (&'a [u8], Value<'a>);
    type IntoIter = TableIter<'a>;
    fn into_iter(self) -> TableIter<'a> {
        self.iter()
    }
}

impl fmt::Debug for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (k, v) in self.iter() {
            m.entry(&Lossy(k), &v);
        }
        m.finish()
    }
}

/// Iterator over a table's entries.
#[derive(Clone, Debug)]
pub struct TableIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for TableIter<'a> {
    type Item = (&'a [u8], Value<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        let (name, value, n) = read_entry(self.rest)?;
        self.rest = &self.rest[n..];
        Some((name, value))
    }
}

/// Reads the entry at the start of `b` (a short-string name, then a
/// value): its name, its value and the bytes it took. `None` (and no
/// progress) when `b` is empty or does not hold a whole entry.
pub(crate) fn read_entry(b: &[u8]) -> Option<(&[u8], Value<'_>, usize)> {
    let k = *b.first()? as usize;
    if 1 + k > b.len() {
        return None;
    }
    let (v, n) = read_value(&b[1 + k..])?;
    Some((&b[1..1 + k], v, 1 + k + n))
}

/// A table the plugin owns: the arguments of a declaration or a binding,
/// a policy, the settings. Read it through [`OwnedTable::view`] (or the
/// shortcuts `get` and `iter`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct OwnedTable {
    raw: Vec<u8>,
}

impl OwnedTable {
    /// Takes an encoded table (length prefix included). Empty bytes make
    /// an absent table.
    pub fn from_raw(raw: Vec<u8>) -> OwnedTable {
        OwnedTable { raw }
    }

    /// The table as a borrowed view.
    pub fn view(&self) -> Table<'_> {
        Table { raw: &self.raw }
    }

    /// See [`Table::get`].
    pub fn get<K: AsRef<[u8]> + ?Sized>(&self, name: &K) -> Option<Value<'_>> {
        self.view().get(name)
    }

    /// See [`Table::iter`].
    pub fn iter(&self) -> TableIter<'_> {
        self.view().iter()
    }

    /// See [`Table::is_valid`].
    pub fn is_valid(&self) -> bool {
        self.view().is_valid()
    }

    /// The encoded table.
    pub fn raw(&self) -> &[u8] {
        &self.raw
    }
}

impl fmt::Debug for OwnedTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.view().fmt(f)
    }
}

/// An AMQP field array (`A`), read in place like a [`Table`].
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Array<'a> {
    raw: &'a [u8], // with the 4-byte length
}

impl<'a> Array<'a> {
    /// The array's values in order; iteration stops at the first value
    /// that does not decode.
    pub fn iter(&self) -> ArrayIter<'a> {
        let mut rest: &[u8] = &[];
        if self.raw.len() >= 4 {
            let n = be32(self.raw) as usize;
            if n <= self.raw.len() - 4 {
                rest = &self.raw[4..4 + n];
            }
        }
        ArrayIter { rest }
    }

    /// The encoded array, length prefix included.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }
}

impl fmt::Debug for Array<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Iterator over an array's values.
#[derive(Clone, Debug)]
pub struct ArrayIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for ArrayIter<'a> {
    type Item = Value<'a>;
    fn next(&mut self) -> Option<Value<'a>> {
        let (v, n) = read_value(self.rest)?;
        self.rest = &self.rest[n..];
        Some(v)
    }
}

/// One field value: its AMQP type octet and its encoded bytes, borrowed.
/// The `as_` methods convert it and answer `None` for a value of another
/// kind.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Value<'a> {
    kind: u8,
    data: &'a [u8], // strings and byte arrays: the content; 'F' and 'A': with the length
}

impl<'a> Value<'a> {
    pub(crate) const fn from_parts(kind: u8, data: &'a [u8]) -> Value<'a> {
        Value { kind, data }
    }

    /// The AMQP field type octet: `t` bool, `b` `B` `s` `u` `I` `i` `l`
    /// integers, `f` `d` floats, `D` decimal, `S` string, `x` bytes, `A`
    /// array, `T` timestamp, `F` table, `V` void (an argument given
    /// without a value).
    pub fn kind(&self) -> u8 {
        self.kind
    }

    /// Whether the value is void.
    pub fn is_void(&self) -> bool {
        self.kind == b'V'
    }

    /// A string value (`S`; properties that are short strings read as `S`
    /// too) that is valid UTF-8.
    pub fn as_str(&self) -> Option<&'a str> {
        if self.kind != b'S' {
            return None;
        }
        core::str::from_utf8(self.data).ok()
    }

    /// The bytes of a string or byte-array value.
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        match self.kind {
            b'S' | b'x' => Some(self.data),
            _ => None,
        }
    }

    /// A boolean value.
    pub fn as_bool(&self) -> Option<bool> {
        if self.kind != b't' {
            return None;
        }
        Some(self.data[0] != 0)
    }

    /// Any integer value as i64, and a timestamp as its seconds.
    pub fn as_int(&self) -> Option<i64> {
        let d = self.data;
        Some(match self.kind {
            b'b' => d[0] as i8 as i64,
            b'B' => d[0] as i64,
            b's' => i16::from_be_bytes([d[0], d[1]]) as i64,
            b'u' => u16::from_be_bytes([d[0], d[1]]) as i64,
            b'I' => be32(d) as i32 as i64,
            b'i' => be32(d) as i64,
            b'l' => be64(d) as i64,
            b'T' => {
                let u = be64(d);
                if u > i64::MAX as u64 {
                    return None;
                }
                u as i64
            }
            _ => return None,
        })
    }

    /// Any number as f64: floats, integers and decimals converted.
    pub fn as_float(&self) -> Option<f64> {
        match self.kind {
            b'f' => Some(f32::from_bits(be32(self.data)) as f64),
            b'd' => Some(f64::from_bits(be64(self.data))),
            b'D' => {
                // 10^scale is exact in an f64 up to 10^22, as Go's Pow10.
                let mut p = 1.0f64;
                for _ in 0..self.data[0] {
                    p *= 10.0;
                }
                Some(be32(&self.data[1..]) as i32 as f64 / p)
            }
            b'T' => None,
            _ => self.as_int().map(|i| i as f64),
        }
    }

    /// A nested table.
    pub fn as_table(&self) -> Option<Table<'a>> {
        if self.kind != b'F' {
            return None;
        }
        Some(Table { raw: self.data })
    }

    /// An array.
    pub fn as_array(&self) -> Option<Array<'a>> {
        if self.kind != b'A' {
            return None;
        }
        Some(Array { raw: self.data })
    }

    /// The value's encoded bytes, without the type octet (strings and
    /// byte arrays without their length, tables and arrays with it).
    pub fn raw(&self) -> &'a [u8] {
        self.data
    }

    /// Compares two values the way RabbitMQ's headers exchange does:
    /// numbers by value across integer and float types, strings and byte
    /// arrays by content within their kind, anything else by kind and
    /// encoding. A string never equals a number.
    pub fn equal(&self, w: &Value<'_>) -> bool {
        if self.is_number() && w.is_number() {
            if let (Some(a), Some(b)) = (self.as_int(), w.as_int()) {
                return a == b;
            }
            return self.as_float() == w.as_float();
        }
        self.kind == w.kind && self.data == w.data
    }

    fn is_number(&self) -> bool {
        matches!(
            self.kind,
            b'b' | b'B' | b's' | b'u' | b'I' | b'i' | b'l' | b'f' | b'd' | b'D'
        )
    }
}

impl fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            b'V' => f.write_str("void"),
            b't' => write!(f, "{}", self.data[0] != 0),
            b'S' => write!(f, "{:?}", Lossy(self.data)),
            b'x' => write!(f, "bytes{:?}", self.data),
            b'F' => self.as_table().unwrap_or_default().fmt(f),
            b'A' => self.as_array().unwrap_or_default().fmt(f),
            b'T' => write!(f, "timestamp({})", be64(self.data)),
            b'f' | b'd' | b'D' => write!(f, "{}", self.as_float().unwrap_or(0.0)),
            _ => write!(f, "{}", self.as_int().unwrap_or(0)),
        }
    }
}

/// Reads one value at `b` (type octet first): the value and the bytes it
/// took; `None` when `b` does not hold a whole value of a known type.
pub(crate) fn read_value(b: &[u8]) -> Option<(Value<'_>, usize)> {
    let kind = *b.first()?;
    let fixed = match kind {
        b't' | b'b' | b'B' => 1,
        b's' | b'u' => 2,
        b'I' | b'i' | b'f' => 4,
        b'l' | b'd' | b'T' => 8,
        b'D' => 5,
        b'V' => return Some((Value { kind, data: &[] }, 1)),
        b'S' | b'x' | b'A' | b'F' => {
            if b.len() < 5 {
                return None;
            }
            let n = be32(&b[1..]) as usize;
            if n > b.len() - 5 {
                return None;
            }
            let data = if kind == b'A' || kind == b'F' {
                &b[1..5 + n]
            } else {
                &b[5..5 + n]
            };
            return Some((Value { kind, data }, 5 + n));
        }
        _ => return None,
    };
    if b.len() < 1 + fixed {
        return None;
    }
    Some((
        Value {
            kind,
            data: &b[1..1 + fixed],
        },
        1 + fixed,
    ))
}

/// A value to encode: what [`TableWriter::put`] and
/// [`RouteResult::set_header`](crate::RouteResult::set_header) take. The
/// `From` conversions pick the AMQP type RabbitMQ would (`i64` and `usize`
/// as `l`, `i32` as `I`, `&str` as `S`, `&[u8]` as `x`).
#[derive(Clone, Copy, Debug)]
pub enum Field<'a> {
    Void,
    Bool(bool),
    I8(i8),
    U8(u8),
    I16(i16),
    U16(u16),
    I32(i32),
    U32(u32),
    I64(i64),
    F32(f32),
    F64(f64),
    /// Decimal: scale, then the value (value × 10^-scale).
    Decimal(u8, i32),
    Str(&'a str),
    Bytes(&'a [u8]),
    /// Seconds since the Unix epoch.
    Timestamp(u64),
    Table(Table<'a>),
    Array(&'a [Field<'a>]),
    /// A value read from a table, re-encoded as it was.
    Value(Value<'a>),
}

macro_rules! field_from {
    ($($t:ty => $v:ident),*) => {$(
        impl<'a> From<$t> for Field<'a> {
            fn from(x: $t) -> Field<'a> { Field::$v(x) }
        }
    )*};
}
field_from!(bool => Bool, i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32, u32 => U32,
    i64 => I64, f32 => F32, f64 => F64, &'a str => Str, &'a [u8] => Bytes, Table<'a> => Table,
    Value<'a> => Value);

impl<'a> From<usize> for Field<'a> {
    fn from(x: usize) -> Field<'a> {
        Field::I64(if x as u64 > i64::MAX as u64 {
            i64::MAX
        } else {
            x as i64
        })
    }
}

impl<'a> From<&'a alloc::string::String> for Field<'a> {
    fn from(x: &'a alloc::string::String) -> Field<'a> {
        Field::Str(x)
    }
}

impl<'a> From<&'a OwnedTable> for Field<'a> {
    fn from(x: &'a OwnedTable) -> Field<'a> {
        Field::Table(x.view())
    }
}

/// Appends a value (its type octet and data) to `b`. Strings and byte
/// arrays longer than a u32 can count are cut.
pub(crate) fn append_field(b: &mut Vec<u8>, v: &Field<'_>) {
    match *v {
        Field::Void => b.push(b'V'),
        Field::Bool(x) => b.extend_from_slice(&[b't', x as u8]),
        Field::I8(x) => b.extend_from_slice(&[b'b', x as u8]),
        Field::U8(x) => b.extend_from_slice(&[b'B', x]),
        Field::I16(x) => {
            b.push(b's');
            b.extend_from_slice(&x.to_be_bytes())
        }
        Field::U16(x) => {
            b.push(b'u');
            b.extend_from_slice(&x.to_be_bytes())
        }
        Field::I32(x) => {
            b.push(b'I');
            b.extend_from_slice(&x.to_be_bytes())
        }
        Field::U32(x) => {
            b.push(b'i');
            b.extend_from_slice(&x.to_be_bytes())
        }
        Field::I64(x) => {
            b.push(b'l');
            b.extend_from_slice(&x.to_be_bytes())
        }
        Field::F32(x) => {
            b.push(b'f');
            b.extend_from_slice(&x.to_bits().to_be_bytes())
        }
        Field::F64(x) => {
            b.push(b'd');
            b.extend_from_slice(&x.to_bits().to_be_bytes())
        }
        Field::Decimal(scale, x) => {
            b.extend_from_slice(&[b'D', scale]);
            b.extend_from_slice(&x.to_be_bytes())
        }
        Field::Str(s) => append_long(b, b'S', s.as_bytes()),
        Field::Bytes(p) => append_long(b, b'x', p),
        Field::Timestamp(x) => {
            b.push(b'T');
            b.extend_from_slice(&x.to_be_bytes())
        }
        Field::Table(t) => {
            b.push(b'F');
            if t.is_valid() {
                b.extend_from_slice(t.raw())
            } else {
                b.extend_from_slice(&[0, 0, 0, 0])
            }
        }
        Field::Array(items) => {
            b.push(b'A');
            let start = b.len();
            b.extend_from_slice(&[0, 0, 0, 0]);
            for item in items {
                append_field(b, item);
            }
            let n = (b.len() - start - 4) as u32;
            b[start..start + 4].copy_from_slice(&n.to_be_bytes());
        }
        Field::Value(v) => {
            b.push(v.kind);
            if v.kind == b'S' || v.kind == b'x' {
                b.extend_from_slice(&(v.data.len() as u32).to_be_bytes());
            }
            b.extend_from_slice(v.data);
        }
    }
}

fn append_long(b: &mut Vec<u8>, kind: u8, p: &[u8]) {
    let p = &p[..p.len().min(u32::MAX as usize)];
    b.push(kind);
    b.extend_from_slice(&(p.len() as u32).to_be_bytes());
    b.extend_from_slice(p);
}

/// Appends one entry (name, value) to `b`; names are cut at 255 bytes.
pub(crate) fn append_entry(b: &mut Vec<u8>, name: &[u8], v: &Field<'_>) {
    let name = &name[..name.len().min(255)];
    b.push(name.len() as u8);
    b.extend_from_slice(name);
    append_field(b, v);
}

/// Builds a field table, entry by entry, in the order given: what an
/// exchange's `info` answers, and what tests make messages and arguments
/// with.
///
/// ```
/// use warren_plugin::TableWriter;
/// let mut w = TableWriter::new();
/// w.put("bindings", 3usize).put("mode", "exact");
/// assert_eq!(w.table().get("bindings").and_then(|v| v.as_int()), Some(3));
/// ```
#[derive(Clone, Debug)]
pub struct TableWriter {
    buf: Vec<u8>, // with the length prefix, kept up to date
}

impl Default for TableWriter {
    fn default() -> Self {
        TableWriter::new()
    }
}

impl TableWriter {
    /// An empty table.
    pub fn new() -> TableWriter {
        TableWriter {
            buf: alloc::vec![0, 0, 0, 0],
        }
    }

    /// Empties the table, keeping its buffer.
    pub fn clear(&mut self) {
        self.buf.truncate(4);
        self.buf[..4].copy_from_slice(&[0, 0, 0, 0]);
    }

    /// Appends an entry. Names longer than 255 bytes are cut.
    pub fn put<'v, V: Into<Field<'v>>>(&mut self, name: &str, value: V) -> &mut TableWriter {
        append_entry(&mut self.buf, name.as_bytes(), &value.into());
        let n = (self.buf.len() - 4) as u32;
        self.buf[..4].copy_from_slice(&n.to_be_bytes());
        self
    }

    /// Whether no entry was put.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == 4
    }

    /// The table so far.
    pub fn table(&self) -> Table<'_> {
        Table { raw: &self.buf }
    }

    /// The encoded table, length prefix included.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The table as an [`OwnedTable`].
    pub fn finish(self) -> OwnedTable {
        OwnedTable { raw: self.buf }
    }
}

pub(crate) fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

pub(crate) fn be64(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[..8]);
    u64::from_be_bytes(x)
}

/// Shows bytes as a string, replacing what is not UTF-8.
pub(crate) struct Lossy<'a>(pub &'a [u8]);

impl fmt::Debug for Lossy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match core::str::from_utf8(self.0) {
            Ok(s) => write!(f, "{:?}", s),
            Err(_) => write!(f, "{:?}", self.0),
        }
    }
}
