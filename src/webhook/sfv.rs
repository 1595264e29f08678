//! The subset of HTTP Structured Field Values (RFC 8941/9651) signatures and digests use: dictionaries, inner lists, params.
//! It never panics on input and never guesses: a value it cannot parse is an error.
//!
//! Why kept rather than the `sfv` crate: signatures and digests need only dictionaries, inner
//! lists and parameters of RFC 8941 items; this parser and writer cover exactly that in about 250
//! lines with no dependency beyond base64, and the signature code (`sig.rs`, `binding/rest.rs`)
//! builds on its small types. Decimals are kept as written, so [`write_inner_list`] reproduces a
//! received Signature-Input member as sent. RFC 9651 dates and display strings are refused
//! (signature fields never carry them). Its speed against the crate has not been measured.
//! `sfv_differential.rs` holds it to the `sfv` crate in RFC 8941 mode: a table of valid and
//! invalid fields (accept/refuse and parsed values) and property tests over dictionaries the crate
//! serialises and over random field text.

use base64::Engine;
use base64::alphabet;
use base64::engine::general_purpose::STANDARD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// RFC 9651 §4.2.7: parsers SHOULD NOT fail on missing `=` padding or on non-zero pad bits.
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A bare item.
#[derive(Debug, Clone, PartialEq)]
pub enum Bare {
    Integer(i64),
    /// Kept as written (signatures never use decimals; they are parsed only to be skipped).
    Decimal(String),
    String(String),
    Token(String),
    Bytes(Vec<u8>),
    Boolean(bool),
}

/// Parameters, in order.
pub type Params = Vec<(String, Bare)>;

/// An item with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub bare: Bare,
    pub params: Params,
}

/// A dictionary member's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Member {
    Item(Item),
    InnerList(Vec<Item>, Params),
}

/// Why a field value is not a structured field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed structured field at byte {at}: {what}")]
pub struct SfvError {
    pub at: usize,
    pub what: &'static str,
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn err<T>(&self, what: &'static str) -> Result<T, SfvError> {
        Err(SfvError { at: self.i, what })
    }
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn sp(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
    }
    fn ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    fn key(&mut self) -> Result<String, SfvError> {
        let start = self.i;
        match self.peek() {
            Some(c) if c.is_ascii_lowercase() || c == b'*' => self.i += 1,
            _ => return self.err("expected a key"),
        }
        while let Some(c) = self.peek() {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || b"_-.*".contains(&c) {
                self.i += 1;
            } else {
                break;
            }
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn params(&mut self) -> Result<Params, SfvError> {
        let mut out: Params = Vec::new();
        while self.peek() == Some(b';') {
            self.i += 1;
            self.sp();
            let k = self.key()?;
            let v = if self.peek() == Some(b'=') {
                self.i += 1;
                self.bare()?
            } else {
                Bare::Boolean(true)
            };
            if let Some(slot) = out.iter_mut().find(|(ok, _)| *ok == k) {
                slot.1 = v;
            } else {
                out.push((k, v));
            }
        }
        Ok(out)
    }

    fn bare(&mut self) -> Result<Bare, SfvError> {
        match self.peek() {
            Some(b'"') => self.string(),
            Some(b':') => self.bytes(),
            Some(b'?') => {
                self.i += 1;
                match self.peek() {
                    Some(b'0') => {
                        self.i += 1;
                        Ok(Bare::Boolean(false))
                    }
                    Some(b'1') => {
                        self.i += 1;
                        Ok(Bare::Boolean(true))
                    }
                    _ => self.err("bad boolean"),
                }
            }
            Some(c) if c == b'-' || c.is_ascii_digit() => self.number(),
            Some(c) if c.is_ascii_alphabetic() || c == b'*' => {
                let start = self.i;
                while let Some(c) = self.peek() {
                    if c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&c) {
                        self.i += 1;
                    } else {
                        break;
                    }
                }
                Ok(Bare::Token(
                    String::from_utf8_lossy(&self.s[start..self.i]).into_owned(),
                ))
            }
            _ => self.err("expected an item"),
        }
    }

    fn number(&mut self) -> Result<Bare, SfvError> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let mut dot = false;
        while let Some(c) = self.peek() {
            if c.is_ascii_digit() {
                self.i += 1;
            } else if c == b'.' && !dot {
                dot = true;
                self.i += 1;
            } else {
                break;
            }
        }
        let text = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
        let digits = text.trim_start_matches('-');
        if digits.is_empty() || digits.starts_with('.') || digits.ends_with('.') {
            return self.err("bad number");
        }
        if dot {
            // sf-decimal = ["-"] 1*12DIGIT "." 1*3DIGIT
            let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
            if int.len() > 12 || frac.len() > 3 {
                return self.err("decimal too long");
            }
            return Ok(Bare::Decimal(text));
        }
        if digits.len() > 15 {
            return self.err("integer too long");
        }
        text.parse()
            .map(Bare::Integer)
            .or_else(|_| self.err("bad integer"))
    }

    fn string(&mut self) -> Result<Bare, SfvError> {
        self.i += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return self.err("unterminated string"),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(Bare::String(out));
                }
                Some(b'\\') => {
                    self.i += 1;
                    match self.peek() {
                        Some(c @ (b'"' | b'\\')) => {
                            out.push(c as char);
                            self.i += 1;
                        }
                        _ => return self.err("bad escape"),
                    }
                }
                Some(c) if (0x20..0x7f).contains(&c) => {
                    out.push(c as char);
                    self.i += 1;
                }
                Some(_) => return self.err("non-ASCII or control byte in string"),
            }
        }
    }

    fn bytes(&mut self) -> Result<Bare, SfvError> {
        self.i += 1;
        let start = self.i;
        while let Some(c) = self.peek() {
            if c == b':' {
                let b64 = &self.s[start..self.i];
                self.i += 1;
                return LENIENT
                    .decode(b64)
                    .map(Bare::Bytes)
                    .or_else(|_| self.err("bad base64 in byte sequence"));
            }
            self.i += 1;
        }
        self.err("unterminated byte sequence")
    }

    fn item(&mut self) -> Result<Item, SfvError> {
        let bare = self.bare()?;
        let params = self.params()?;
        Ok(Item { bare, params })
    }

    fn member(&mut self) -> Result<Member, SfvError> {
        if self.peek() != Some(b'(') {
            return self.item().map(Member::Item);
        }
        self.i += 1;
        let mut items = Vec::new();
        loop {
            self.sp();
            if self.peek() == Some(b')') {
                self.i += 1;
                let params = self.params()?;
                return Ok(Member::InnerList(items, params));
            }
            items.push(self.item()?);
            match self.peek() {
                Some(b' ' | b')') => {}
                _ => return self.err("expected a space or `)` in an inner list"),
            }
        }
    }
}

/// Parses a dictionary field value (several field lines joined with `,`).
pub fn dictionary(value: &str) -> Result<Vec<(String, Member)>, SfvError> {
    let mut p = Parser {
        s: value.as_bytes(),
        i: 0,
    };
    let mut out: Vec<(String, Member)> = Vec::new();
    p.sp();
    if p.peek().is_none() {
        return Ok(out);
    }
    loop {
        let k = p.key()?;
        let m = if p.peek() == Some(b'=') {
            p.i += 1;
            p.member()?
        } else {
            Member::Item(Item {
                bare: Bare::Boolean(true),
                params: p.params()?,
            })
        };
        if let Some(slot) = out.iter_mut().find(|(ok, _)| *ok == k) {
            slot.1 = m;
        } else {
            out.push((k, m));
        }
        p.ows();
        match p.peek() {
            None => return Ok(out),
            Some(b',') => {
                p.i += 1;
                p.ows();
                if p.peek().is_none() {
                    return p.err("trailing comma");
                }
            }
            _ => return p.err("expected `,` between members"),
        }
    }
}

/// Serialises a bare item (RFC 8941 §4.1).
pub fn write_bare(out: &mut String, b: &Bare) {
    match b {
        Bare::Integer(i) => out.push_str(&i.to_string()),
        Bare::Decimal(d) => out.push_str(d),
        Bare::String(s) => {
            out.push('"');
            for c in s.chars() {
                if c == '"' || c == '\\' {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push('"');
        }
        Bare::Token(t) => out.push_str(t),
        Bare::Bytes(b) => {
            out.push(':');
            out.push_str(&STANDARD.encode(b));
            out.push(':');
        }
        Bare::Boolean(true) => out.push_str("?1"),
        Bare::Boolean(false) => out.push_str("?0"),
    }
}

/// Serialises parameters (a `true` boolean is written as the bare key).
pub fn write_params(out: &mut String, params: &Params) {
    for (k, v) in params {
        out.push(';');
        out.push_str(k);
        if *v != Bare::Boolean(true) {
            out.push('=');
            write_bare(out, v);
        }
    }
}

/// Serialises an inner list with its parameters.
pub fn write_inner_list(items: &[Item], params: &Params) -> String {
    let mut out = String::from("(");
    for (n, it) in items.iter().enumerate() {
        if n > 0 {
            out.push(' ');
        }
        write_bare(&mut out, &it.bare);
        write_params(&mut out, &it.params);
    }
    out.push(')');
    write_params(&mut out, params);
    out
}

#[cfg(test)]
#[path = "sfv_differential.rs"]
mod differential;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_signature_input_and_round_trips() {
        let v = r#"sig1=("@method" "@authority" "content-digest");created=1618884473;keyid="k-1", sig2=("@path")"#;
        let d = dictionary(v).unwrap();
        assert_eq!(d.len(), 2);
        let Member::InnerList(items, params) = &d[0].1 else {
            panic!("inner list expected")
        };
        assert_eq!(items[1].bare, Bare::String("@authority".into()));
        assert_eq!(params[0], ("created".into(), Bare::Integer(1618884473)));
        assert_eq!(
            write_inner_list(items, params),
            r#"("@method" "@authority" "content-digest");created=1618884473;keyid="k-1""#
        );
    }

    #[test]
    fn parses_byte_sequences_and_tokens() {
        let d = dictionary("sha-256=:AAEC:, flag, t=abc;x=?0").unwrap();
        assert_eq!(
            d[0].1,
            Member::Item(Item {
                bare: Bare::Bytes(vec![0, 1, 2]),
                params: vec![]
            })
        );
        assert_eq!(
            d[1].1,
            Member::Item(Item {
                bare: Bare::Boolean(true),
                params: vec![]
            })
        );
        let Member::Item(t) = &d[2].1 else { panic!() };
        assert_eq!(t.bare, Bare::Token("abc".into()));
        assert_eq!(t.params, vec![("x".into(), Bare::Boolean(false))]);
    }

    #[test]
    fn refuses_malformed_values() {
        for bad in [
            "Sig=1",
            "a=(\"x\"",
            "a=:not base64!:",
            "a=\"unterminated",
            "a=1,",
            "a=1 b=2",
            "a=1234567890123456",
            "a=\"\u{e9}\"",
        ] {
            assert!(dictionary(bad).is_err(), "{bad} should be refused");
        }
    }
}
