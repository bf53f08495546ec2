//! A small JSON reader and writer for the control protocol's answers. The reader
//! (used by `electctl` and the tests) accepts standard JSON, bounded in depth, and never
//! panics on bad input; the writer ([`Obj`]) builds the daemon's answers, so no answer
//! escapes a string by hand.

use std::collections::BTreeMap;

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A non-negative integer written with digits only, exact up to `u64::MAX`: the
    /// boot clock's nanoseconds (`lease_until_ns`, `now_ns`) pass 2^53 after 104 days
    /// of uptime, where an `f64` rounds them.
    Int(u64),
    /// Any other number.
    Num(f64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Value>),
    /// An object.
    Obj(BTreeMap<String, Value>),
}

impl Value {
    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Obj(m) => m.get(key),
            _ => None,
        }
    }

    /// The value as an unsigned integer, if it is one.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(n) => Some(*n),
            Value::Num(n) if *n >= 0.0 && n.fract() == 0.0 && *n < 18_446_744_073_709_551_616.0 => {
                Some(*n as u64)
            }
            _ => None,
        }
    }

    /// The value as a string slice.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Arr(a) => Some(a),
            _ => None,
        }
    }

    /// True for `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

const MAX_DEPTH: usize = 32;

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, lit: &str) -> Result<(), String> {
        if self.s[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            Ok(())
        } else {
            Err(format!("expected '{lit}' at byte {}", self.i))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err("nested too deeply".into());
        }
        self.ws();
        match self.s.get(self.i) {
            None => Err("unexpected end".into()),
            Some(b'n') => self.eat("null").map(|_| Value::Null),
            Some(b't') => self.eat("true").map(|_| Value::Bool(true)),
            Some(b'f') => self.eat("false").map(|_| Value::Bool(false)),
            Some(b'"') => self.string().map(Value::Str),
            Some(b'[') => {
                self.i += 1;
                let mut v = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(Value::Arr(v));
                }
                loop {
                    v.push(self.value(depth + 1)?);
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Value::Arr(v));
                        }
                        _ => return Err(format!("expected ',' or ']' at byte {}", self.i)),
                    }
                }
            }
            Some(b'{') => {
                self.i += 1;
                let mut m = BTreeMap::new();
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Value::Obj(m));
                }
                loop {
                    self.ws();
                    let k = self.string()?;
                    self.ws();
                    self.eat(":")?;
                    let v = self.value(depth + 1)?;
                    m.insert(k, v);
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Value::Obj(m));
                        }
                        _ => return Err(format!("expected ',' or '}}' at byte {}", self.i)),
                    }
                }
            }
            Some(_) => self.number(),
        }
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.i;
        while self.i < self.s.len()
            && matches!(
                self.s[self.i],
                b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
            )
        {
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| "bad number")?;
        if text.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(n) = text.parse() {
                return Ok(Value::Int(n));
            }
        }
        text.parse()
            .map(Value::Num)
            .map_err(|_| format!("bad number at byte {start}"))
    }

    fn string(&mut self) -> Result<String, String> {
        self.eat("\"")?;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.i) else {
                return Err("unterminated string".into());
            };
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).map_err(|_| "bad UTF-8".into()),
                b'\\' => {
                    let Some(&e) = self.s.get(self.i) else {
                        return Err("bad escape".into());
                    };
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'u' => {
                            let hex = self.s.get(self.i..self.i + 4).ok_or("bad \\u escape")?;
                            let code = u32::from_str_radix(
                                std::str::from_utf8(hex).map_err(|_| "bad \\u")?,
                                16,
                            )
                            .map_err(|_| "bad \\u")?;
                            self.i += 4;
                            let ch = char::from_u32(code).unwrap_or('\u{fffd}');
                            out.extend_from_slice(ch.to_string().as_bytes());
                        }
                        _ => return Err("bad escape".into()),
                    }
                }
                c => out.push(c),
            }
        }
    }
}

/// Parses one JSON document.
pub fn parse(text: &str) -> Result<Value, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let v = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("trailing data at byte {}", p.i));
    }
    Ok(v)
}

/// Escapes `s` as a JSON string literal, quotes included.
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_string(&mut out, s);
    out
}

fn push_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Writes one JSON object, members in the order they are added.
#[derive(Clone, Debug)]
pub struct Obj {
    s: String,
    empty: bool,
}

impl Default for Obj {
    fn default() -> Self {
        Obj::new()
    }
}

impl Obj {
    /// An object with no members yet.
    pub fn new() -> Obj {
        Obj {
            s: String::from("{"),
            empty: true,
        }
    }

    fn key(&mut self, k: &str) {
        if !self.empty {
            self.s.push(',');
        }
        self.empty = false;
        push_string(&mut self.s, k);
        self.s.push(':');
    }

    /// Adds `k` with a string value.
    pub fn str(mut self, k: &str, v: &str) -> Obj {
        self.key(k);
        push_string(&mut self.s, v);
        self
    }

    /// Adds `k` with an unsigned integer.
    pub fn num(mut self, k: &str, v: impl Into<u128>) -> Obj {
        self.key(k);
        self.s.push_str(&v.into().to_string());
        self
    }

    /// Adds `k` with a boolean.
    pub fn bool(mut self, k: &str, v: bool) -> Obj {
        self.key(k);
        self.s.push_str(if v { "true" } else { "false" });
        self
    }

    /// Adds `k` with `null`.
    pub fn null(mut self, k: &str) -> Obj {
        self.key(k);
        self.s.push_str("null");
        self
    }

    /// Adds `k` with a number, or `null` when there is none.
    pub fn opt_num<T: Into<u128>>(self, k: &str, v: Option<T>) -> Obj {
        match v {
            Some(v) => self.num(k, v),
            None => self.null(k),
        }
    }

    /// Adds `k` with a string, or `null` when there is none.
    pub fn opt_str(self, k: &str, v: Option<&str>) -> Obj {
        match v {
            Some(v) => self.str(k, v),
            None => self.null(k),
        }
    }

    /// Adds `k` with a boolean, or `null` when there is none.
    pub fn opt_bool(self, k: &str, v: Option<bool>) -> Obj {
        match v {
            Some(v) => self.bool(k, v),
            None => self.null(k),
        }
    }

    /// Adds `k` with an array of values already written as JSON (objects, say).
    pub fn arr<I: IntoIterator<Item = String>>(mut self, k: &str, items: I) -> Obj {
        self.key(k);
        self.s.push('[');
        for (i, v) in items.into_iter().enumerate() {
            if i > 0 {
                self.s.push(',');
            }
            self.s.push_str(&v);
        }
        self.s.push(']');
        self
    }

    /// Adds `k` with an array of strings.
    pub fn strs<'a, I: IntoIterator<Item = &'a str>>(self, k: &str, items: I) -> Obj {
        self.arr(k, items.into_iter().map(string))
    }

    /// The object's text.
    pub fn finish(mut self) -> String {
        self.s.push('}');
        self.s
    }

    /// The object's text as one answer line (newline-terminated).
    pub fn line(mut self) -> String {
        self.s.push_str("}\n");
        self.s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_escapes_and_keeps_the_order_of_members() {
        let line = Obj::new()
            .bool("ok", true)
            .num("to", 3u64)
            .opt_bool("to_fit", None)
            .str("note", "a\"b\\c\n")
            .strs("groups", ["a", "b"])
            .arr("objs", [Obj::new().null("x").finish()])
            .opt_num("n", Some(7u64))
            .opt_str("s", None)
            .line();
        assert_eq!(
            line,
            "{\"ok\":true,\"to\":3,\"to_fit\":null,\"note\":\"a\\\"b\\\\c\\u000a\",\"groups\":[\"a\",\"b\"],\"objs\":[{\"x\":null}],\"n\":7,\"s\":null}\n"
        );
        assert!(parse(line.trim_end()).is_ok());
        assert_eq!(Obj::new().finish(), "{}");
    }

    #[test]
    fn parses_a_status_line_and_refuses_garbage() {
        let v = parse(r#"{"id":1,"name":"a\"1","role":"leader","leader":null,"peers":[{"id":2,"heard_ms_ago":310}]}"#).unwrap();
        assert_eq!(v.get("id").and_then(Value::as_u64), Some(1));
        assert_eq!(v.get("name").and_then(Value::as_str), Some("a\"1"));
        assert!(v.get("leader").unwrap().is_null());
        assert_eq!(
            v.get("peers").and_then(Value::as_array).unwrap()[0]
                .get("heard_ms_ago")
                .and_then(Value::as_u64),
            Some(310)
        );
        // Past 2^53 (104 days of uptime in boot-clock nanoseconds) exactly, and up to
        // u64::MAX; beyond, a number that is not a u64.
        for n in [9_007_199_254_740_993u64, 31_557_600_000_000_001, u64::MAX] {
            let v = parse(&format!("{{\"lease_until_ns\":{n}}}")).unwrap();
            assert_eq!(v.get("lease_until_ns").and_then(Value::as_u64), Some(n));
        }
        assert_eq!(parse("18446744073709551616").unwrap().as_u64(), None);
        assert_eq!(parse("1e300").unwrap().as_u64(), None);
        assert_eq!(parse("2.5").unwrap().as_u64(), None);
        assert_eq!(parse("-1").unwrap().as_u64(), None);
        assert_eq!(parse("4.0").unwrap().as_u64(), Some(4));
        for bad in [
            "",
            "{",
            "[1,",
            "{\"a\" 1}",
            "nul",
            "\"abc",
            "{}x",
            &"[".repeat(100),
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
