//! rust-key: an exchange type written with the Rust SDK. `x-rust-key`
//! routes a message to the bindings whose key equals its routing key, or,
//! when the exchange was declared with the argument `x-key-header`, equals
//! that header's value (a message without the header falls back to its
//! routing key).
//!
//! ```text
//! cargo build --release --target wasm32-unknown-unknown
//! ```
//!
//! builds target/wasm32-unknown-unknown/release/rust_key.wasm; install it
//! as rust-key.wasm in the broker's plugin directory.

use warren_plugin::{
    plugin, Binding, BindingId, Checks, Declaration, Error, Exchange, ExchangeType, Features,
    Message, Plugin, RouteResult, TableWriter,
};

fn describe() -> Plugin {
    Plugin::new("rust-key", "1.0.0")
        .features(Features::HEADERS)
        .exchange_type(KeyType)
}

plugin!(describe);

struct KeyType;

impl ExchangeType for KeyType {
    fn name(&self) -> &str {
        "x-rust-key"
    }

    fn validate_declare(&self, d: &Declaration, _: &mut Checks) -> Result<(), Error> {
        key_header(d).map(|_| ())
    }

    fn create(&self, d: &Declaration) -> Result<Box<dyn Exchange>, Error> {
        Ok(Box::new(KeyExchange {
            header: key_header(d)?,
            bindings: Vec::new(),
        }))
    }
}

/// The declare's x-key-header argument: none, or a string.
fn key_header(d: &Declaration) -> Result<Option<String>, Error> {
    match d.args.get("x-key-header") {
        None => Ok(None),
        Some(v) => match v.as_str() {
            Some(s) if !s.is_empty() => Ok(Some(s.to_string())),
            _ => Err(Error::precondition_failed(
                "x-key-header must be a non-empty string",
            )),
        },
    }
}

struct KeyExchange {
    header: Option<String>,
    bindings: Vec<(BindingId, Vec<u8>)>,
}

impl Exchange for KeyExchange {
    fn add_binding(&mut self, b: Binding) -> Result<(), Error> {
        self.bindings.push((b.id, b.key));
        Ok(())
    }

    fn remove_bindings(&mut self, ids: &[BindingId]) -> Result<(), Error> {
        self.bindings.retain(|(id, _)| !ids.contains(id));
        Ok(())
    }

    fn route(&mut self, m: &mut Message<'_>, r: &mut RouteResult) -> Result<(), Error> {
        let mut key = m.routing_key();
        if let Some(h) = &self.header {
            if let Some(v) = m.header(h.as_str()).and_then(|v| v.as_bytes()) {
                key = v;
            }
        }
        for (id, k) in &self.bindings {
            if k.as_slice() == key {
                r.add(*id);
            }
        }
        Ok(())
    }

    fn info(&self, w: &mut TableWriter) {
        w.put("bindings", self.bindings.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warren_plugin::{Dispatcher, Export};

    #[test]
    fn routes_by_key_or_header() {
        let mut args = TableWriter::new();
        args.put("x-key-header", "tenant");
        let d = Declaration {
            args: args.finish(),
            ..Declaration::default()
        };
        let mut x = KeyType.create(&d).unwrap();
        for (id, key) in [(1, "acme"), (2, "orders"), (3, "acme")] {
            let b = Binding {
                id: BindingId(id),
                dest_kind: warren_plugin::DestKind::Queue,
                destination: "q".into(),
                key: key.into(),
                args: Default::default(),
            };
            x.add_binding(b).unwrap();
        }
        let mut headers = TableWriter::new();
        headers.put("tenant", "acme");
        let (flags, props) = Message::encode_headers(headers.as_bytes());
        let mut r = RouteResult::new();
        x.route(&mut Message::new(b"orders", flags, props, b""), &mut r)
            .unwrap();
        assert_eq!(
            r.bindings().collect::<Vec<_>>(),
            [BindingId(1), BindingId(3)]
        );
        r.clear();
        x.route(&mut Message::new(b"orders", 0, b"", b""), &mut r)
            .unwrap();
        assert_eq!(r.bindings().collect::<Vec<_>>(), [BindingId(2)]);
    }

    #[test]
    fn refuses_a_bad_argument() {
        let mut args = TableWriter::new();
        args.put("x-key-header", 5i32);
        let d = Declaration {
            args: args.finish(),
            ..Declaration::default()
        };
        assert_eq!(
            KeyType
                .validate_declare(&d, &mut Checks::default())
                .unwrap_err()
                .code,
            406
        );
    }

    #[test]
    fn describes_itself() {
        let mut d = Dispatcher::new(describe());
        let out = d.call(Export::Describe, &[]);
        assert_eq!(&out[..10], b"\x00\x08rust-key");
    }
}
