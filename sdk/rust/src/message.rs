//! The message being routed, decoded lazily and without allocation.

use crate::table::{be32, read_entry, read_value, Table, Value};

/// The basic class's properties, in wire order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Property {
    ContentType = 0,
    ContentEncoding,
    Headers,
    DeliveryMode,
    Priority,
    CorrelationId,
    ReplyTo,
    Expiration,
    MessageId,
    Timestamp,
    Type,
    UserId,
    AppId,
    ClusterId,
}

const NUM_PROPS: usize = 14;

/// How many headers the index holds. Messages rarely carry more; for
/// those that do, the headers past these are scanned on a miss.
pub const MAX_INDEXED_HEADERS: usize = 32;

/// The flag bit announcing property `i`.
const fn prop_flag(i: usize) -> u16 {
    0x8000 >> i
}

/// The message being routed, as the broker received it: routing key, the
/// raw AMQP property list and the body, all borrowed from the route input
/// (`'a` is the route call).
///
/// Properties are decoded only when asked and the property list is
/// scanned at most once. The first header lookup reads the headers table
/// once and records where its entries start (up to
/// [`MAX_INDEXED_HEADERS`], sorted by name, in the message itself); later
/// lookups binary-search that index. Nothing allocates.
///
/// The headers and properties are present only when the plugin declares
/// [`Features::HEADERS`](crate::Features::HEADERS) or
/// [`Features::PROPERTIES`](crate::Features::PROPERTIES), the body only with
/// [`Features::BODY`](crate::Features::BODY); otherwise they read as absent.
#[derive(Clone, Debug)]
pub struct Message<'a> {
    key: &'a [u8],
    flags: u16,
    props: &'a [u8],
    body: &'a [u8],

    scanned: bool,
    offs: [i32; NUM_PROPS], // offset of each present property in props, -1 when absent

    indexed: bool,
    n_indexed: u8,
    headers: &'a [u8], // the headers table's entries, without the length
    index: [u32; MAX_INDEXED_HEADERS], // entry offsets in headers, sorted by name
    rest: u32,         // offset of the entries past the index; headers.len() when none
}

impl<'a> Message<'a> {
    /// A message from the parts the broker passes: routing key, property
    /// flags, raw property list and body. Tests build messages with it
    /// (and [`TableWriter`](crate::TableWriter) for the headers, see
    /// [`Message::encode_headers`]).
    pub fn new(routing_key: &'a [u8], flags: u16, props: &'a [u8], body: &'a [u8]) -> Message<'a> {
        Message {
            key: routing_key,
            flags,
            props,
            body,
            scanned: false,
            offs: [-1; NUM_PROPS],
            indexed: false,
            n_indexed: 0,
            headers: &[],
            index: [0; MAX_INDEXED_HEADERS],
            rest: 0,
        }
    }

    /// The property flags and property list of a message whose only
    /// property is the headers table `headers` (an encoded table, as
    /// `TableWriter::as_bytes` gives): pass them to [`Message::new`].
    pub fn encode_headers(headers: &[u8]) -> (u16, &[u8]) {
        (prop_flag(Property::Headers as usize), headers)
    }

    /// The key the message was published with, as bytes (AMQP does not
    /// require UTF-8).
    pub fn routing_key(&self) -> &'a [u8] {
        self.key
    }

    /// The routing key as text, when it is UTF-8.
    pub fn routing_key_str(&self) -> Option<&'a str> {
        core::str::from_utf8(self.key).ok()
    }

    /// The body (with [`Features::BODY`](crate::Features::BODY)).
    pub fn body(&self) -> &'a [u8] {
        self.body
    }

    /// The property flags word as received.
    pub fn flags(&self) -> u16 {
        self.flags
    }

    /// The property list as received.
    pub fn raw_properties(&self) -> &'a [u8] {
        self.props
    }

    /// Records where each property starts. A list that does not decode
    /// ends the scan: the properties after the fault read as absent.
    fn scan(&mut self) {
        self.scanned = true;
        let p = self.props;
        let mut off = 0usize;
        for i in 0..NUM_PROPS {
            self.offs[i] = -1;
            if self.flags & prop_flag(i) == 0 {
                continue;
            }
            let start = off;
            let size = if i == Property::Headers as usize {
                if p.len() - off < 4 {
                    None
                } else {
                    let n = be32(&p[off..]) as usize;
                    if n > p.len() - off - 4 {
                        None
                    } else {
                        Some(4 + n)
                    }
                }
            } else if i == Property::DeliveryMode as usize || i == Property::Priority as usize {
                Some(1)
            } else if i == Property::Timestamp as usize {
                Some(8)
            } else if off < p.len() {
                Some(1 + p[off] as usize)
            } else {
                None
            };
            match size {
                Some(n) if n <= p.len() - off => off += n,
                _ => return, // this one and the rest stay -1
            }
            self.offs[i] = start as i32;
        }
    }

    /// One property as a value: short strings as `S`, delivery-mode and
    /// priority as `B`, the timestamp as `T`, the headers as `F`.
    pub fn property(&mut self, prop: Property) -> Option<Value<'a>> {
        let i = prop as usize;
        if self.flags & prop_flag(i) == 0 {
            return None;
        }
        if !self.scanned {
            self.scan();
        }
        let off = self.offs[i];
        if off < 0 {
            return None;
        }
        let p = &self.props[off as usize..];
        Some(match prop {
            Property::Headers => Value::from_parts(b'F', &p[..4 + be32(p) as usize]),
            Property::DeliveryMode | Property::Priority => Value::from_parts(b'B', &p[..1]),
            Property::Timestamp => Value::from_parts(b'T', &p[..8]),
            _ => Value::from_parts(b'S', &p[1..1 + p[0] as usize]),
        })
    }

    fn string(&mut self, prop: Property) -> Option<&'a str> {
        self.property(prop).and_then(|v| v.as_str())
    }

    /// The headers table; absent (not `is_valid`) when the message has none.
    pub fn headers(&mut self) -> Table<'a> {
        self.property(Property::Headers)
            .and_then(|v| v.as_table())
            .unwrap_or_default()
    }

    /// One header, the first of that name. The first call on a message
    /// indexes its headers in one pass; later calls binary-search the
    /// index, so reading several headers costs little more than one.
    pub fn header<K: AsRef<[u8]> + ?Sized>(&mut self, name: &K) -> Option<Value<'a>> {
        let name = name.as_ref();
        if !self.indexed {
            self.index_headers();
        }
        let h = self.headers;
        let index = &self.index[..self.n_indexed as usize];
        // The first indexed entry whose name is not less than name: the
        // sort is stable, so of equal names the first in the table.
        let at = index.partition_point(|&off| name_order(entry_name(h, off), name).is_lt());
        if at < index.len() && entry_name(h, index[at]) == name {
            let off = index[at] as usize;
            return read_value(&h[off + 1 + h[off] as usize..]).map(|(v, _)| v);
        }
        let mut b = &h[self.rest as usize..];
        while let Some((k, v, n)) = read_entry(b) {
            if k == name {
                return Some(v);
            }
            b = &b[n..];
        }
        None
    }

    /// Fills the header index from the headers table: one pass recording
    /// each entry's offset, then an insertion sort of the offsets by name
    /// (stable, and cheap for the few headers messages carry). Names are
    /// ordered by length first: most comparisons are then one integer
    /// comparison rather than a byte loop.
    fn index_headers(&mut self) {
        self.indexed = true;
        self.n_indexed = 0;
        let h = self.headers().body();
        self.headers = h;
        let mut off = 0usize;
        let mut n = 0usize;
        while n < MAX_INDEXED_HEADERS {
            match read_entry(&h[off..]) {
                Some((_, _, size)) => {
                    self.index[n] = off as u32;
                    n += 1;
                    off += size;
                }
                None => {
                    // The end, or an entry that does not decode: nothing
                    // past it is readable.
                    off = h.len();
                    break;
                }
            }
        }
        self.rest = off as u32;
        for i in 1..n {
            let x = self.index[i];
            let mut j = i;
            while j > 0 && name_order(entry_name(h, self.index[j - 1]), entry_name(h, x)).is_gt() {
                self.index[j] = self.index[j - 1];
                j -= 1;
            }
            self.index[j] = x;
        }
        self.n_indexed = n as u8;
    }

    pub fn content_type(&mut self) -> Option<&'a str> {
        self.string(Property::ContentType)
    }
    pub fn content_encoding(&mut self) -> Option<&'a str> {
        self.string(Property::ContentEncoding)
    }
    pub fn correlation_id(&mut self) -> Option<&'a str> {
        self.string(Property::CorrelationId)
    }
    pub fn reply_to(&mut self) -> Option<&'a str> {
        self.string(Property::ReplyTo)
    }
    pub fn expiration(&mut self) -> Option<&'a str> {
        self.string(Property::Expiration)
    }
    pub fn message_id(&mut self) -> Option<&'a str> {
        self.string(Property::MessageId)
    }
    /// The `type` property.
    pub fn message_type(&mut self) -> Option<&'a str> {
        self.string(Property::Type)
    }
    pub fn user_id(&mut self) -> Option<&'a str> {
        self.string(Property::UserId)
    }
    pub fn app_id(&mut self) -> Option<&'a str> {
        self.string(Property::AppId)
    }
    pub fn cluster_id(&mut self) -> Option<&'a str> {
        self.string(Property::ClusterId)
    }

    /// 2 for persistent messages, 1 or 0 otherwise.
    pub fn delivery_mode(&mut self) -> u8 {
        self.property(Property::DeliveryMode)
            .map_or(0, |v| v.raw()[0])
    }

    /// The message priority, 0 when absent.
    pub fn priority(&mut self) -> u8 {
        self.property(Property::Priority).map_or(0, |v| v.raw()[0])
    }

    /// The timestamp property in seconds since the Unix epoch.
    pub fn timestamp(&mut self) -> Option<i64> {
        self.property(Property::Timestamp).and_then(|v| v.as_int())
    }
}

/// The index's order of names: by length, then by bytes.
fn name_order(a: &[u8], b: &[u8]) -> core::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// The name of the entry at `off` of a table's entries (checked when the
/// index was built).
fn entry_name(h: &[u8], off: u32) -> &[u8] {
    let off = off as usize;
    &h[off + 1..off + 1 + h[off] as usize]
}
