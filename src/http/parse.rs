//! The HTTP/1.1 of the metrics listener, pure: the request head parser (RFC 9112
//! sections 2 to 6, with this server's limits), the answer for each request, the
//! rendered answer, and the `metrics-listen` value. No socket, no clock but the Date
//! of an answer; the listener in `http.rs` drives it.

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

/// The longest request head (request line and header fields) accepted: 431 beyond.
pub const MAX_HEAD: usize = 8 * 1024;
/// The most header fields in one request: 431 beyond.
pub const MAX_FIELDS: usize = 100;
/// The longest request body read and discarded: 413 beyond.
pub const MAX_BODY: u64 = 64 * 1024;
/// The Content-Type of the metrics body: Prometheus text format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Parses the value of `metrics-listen`: `off`, or a literal socket address with a
/// port (`127.0.0.1:9477`, `[::1]:9477`, `0.0.0.0:9477`, `[::]:9477`).
pub fn parse_listen(s: &str) -> Result<Option<SocketAddr>, String> {
    if s == "off" {
        return Ok(None);
    }
    let a: SocketAddr = s.parse().map_err(|_| {
        format!(
            "'{s}' is not an address:port to listen on (IPv4 like 127.0.0.1:9477, IPv6 like [::1]:9477, a literal address, not a host name; or off)"
        )
    })?;
    if a.port() == 0 {
        return Err(format!("metrics-listen {s} needs a port other than 0"));
    }
    if a.ip().is_multicast() {
        return Err(format!(
            "metrics-listen {s}: {} is a multicast address",
            a.ip()
        ));
    }
    if let SocketAddr::V6(v6) = a {
        if v6.scope_id() != 0 {
            return Err(format!(
                "metrics-listen {s}: a scope (%) is not accepted; use a global, unique-local or loopback address"
            ));
        }
    }
    Ok(Some(a))
}

/// The request method, as far as this server cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// HEAD: the answer without its body.
    Head,
    /// Any other method (a valid token).
    Other,
}

/// A complete, valid request head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// The method.
    pub method: Method,
    /// The target is /metrics (origin or absolute form, with any query).
    pub metrics: bool,
    /// HTTP/1.0, or `Connection: close`: close after the answer.
    pub close: bool,
    /// The body's length (Content-Length; 0 without), at most `MAX_BODY`.
    pub body: u64,
}

/// What the bytes at the start of a connection's buffer hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not a complete head yet.
    Partial,
    /// A complete head, `len` bytes long (empty line included).
    Complete {
        /// The head.
        head: Head,
        /// Its length in bytes.
        len: usize,
    },
    /// A request refused with `code`; the connection closes after the answer.
    Refused {
        /// The status code.
        code: u16,
        /// Why, for the answer's body.
        why: &'static str,
    },
}

fn refused(code: u16, why: &'static str) -> Parsed {
    Parsed::Refused { code, why }
}

/// RFC 9110 token characters (methods, field names).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// True if the request target names /metrics: origin form (`/metrics?x`) or absolute
/// form (`http://host:9477/metrics`), which RFC 9112 section 3.2.2 says a server must
/// accept.
fn is_metrics(target: &[u8]) -> bool {
    let path = if target.starts_with(b"/") {
        target
    } else {
        let lower = target.to_ascii_lowercase();
        let Some(rest) = [&b"http://"[..], b"https://"]
            .iter()
            .find_map(|p| lower.strip_prefix(*p).map(|r| r.len()))
            .map(|n| &target[target.len() - n..])
        else {
            return false;
        };
        rest.iter()
            .position(|&b| b == b'/')
            .map_or(&[][..], |p| &rest[p..])
    };
    path.split(|&b| b == b'?').next() == Some(b"/metrics")
}

/// The HTTP/1.x minor version of a request line's version, or the refusal.
fn version(v: &[u8]) -> Result<u8, Parsed> {
    match v {
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            if *major != b'1' {
                return Err(refused(505, "only HTTP/1.0 and HTTP/1.1 are served"));
            }
            // A later 1.x is answered as 1.1 (RFC 9110 section 6.2).
            Ok((minor - b'0').min(1))
        }
        _ => Err(refused(400, "malformed HTTP version")),
    }
}

/// Parses the request head at the start of `buf` (RFC 9112 sections 2 to 6). Only the
/// first `MAX_HEAD` bytes are looked at; a head not complete within them is refused.
pub fn parse_head(buf: &[u8]) -> Parsed {
    let window = &buf[..buf.len().min(MAX_HEAD)];
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut pos = 0;
    let mut end = None;
    while let Some(nl) = window[pos..].iter().position(|&b| b == b'\n') {
        let line = &window[pos..pos + nl];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        pos += nl + 1;
        if line.is_empty() {
            if lines.is_empty() {
                // Empty lines before a request line are ignored (RFC 9112 section 2.2).
                continue;
            }
            end = Some(pos);
            break;
        }
        if lines.len() > MAX_FIELDS {
            return refused(431, "too many header fields");
        }
        lines.push(line);
    }
    let Some(len) = end else {
        return if buf.len() >= MAX_HEAD {
            refused(431, "request head larger than 8 KiB")
        } else {
            Parsed::Partial
        };
    };
    let parts: Vec<&[u8]> = lines[0].split(|&b| b == b' ').collect();
    let [method, target, v] = parts[..] else {
        return refused(400, "malformed request line");
    };
    let minor = match version(v) {
        Ok(m) => m,
        Err(p) => return p,
    };
    if method.is_empty() || !method.iter().all(|&b| is_tchar(b)) {
        return refused(400, "malformed method");
    }
    if target.is_empty() || !target.iter().all(|&b| b.is_ascii_graphic()) {
        return refused(400, "malformed request target");
    }
    let mut close = minor == 0;
    let mut hosts = 0;
    let mut length: Option<u64> = None;
    for line in &lines[1..] {
        if matches!(line[0], b' ' | b'\t') {
            return refused(400, "obsolete line folding");
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return refused(400, "header field without a colon");
        };
        let (name, value) = (&line[..colon], trim_ows(&line[colon + 1..]));
        if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
            return refused(400, "malformed header field name");
        }
        if value.iter().any(|&b| b != b'\t' && (b < 0x20 || b == 0x7f)) {
            return refused(400, "control character in a header field");
        }
        if name.eq_ignore_ascii_case(b"host") {
            hosts += 1;
        } else if name.eq_ignore_ascii_case(b"connection") {
            close |= value
                .split(|&b| b == b',')
                .any(|t| trim_ows(t).eq_ignore_ascii_case(b"close"));
        } else if name.eq_ignore_ascii_case(b"content-length") {
            for v in value.split(|&b| b == b',').map(trim_ows) {
                let n = (!v.is_empty() && v.len() <= 19 && v.iter().all(u8::is_ascii_digit))
                    .then(|| std::str::from_utf8(v).ok()?.parse::<u64>().ok())
                    .flatten();
                let Some(n) = n else {
                    return refused(400, "malformed Content-Length");
                };
                if length.is_some_and(|l| l != n) {
                    return refused(400, "conflicting Content-Length");
                }
                length = Some(n);
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            return refused(
                501,
                "Transfer-Encoding is not supported: send no request body",
            );
        }
    }
    // RFC 9112 section 3.2: a 1.1 request without exactly one Host is refused.
    if minor == 1 && hosts != 1 {
        return refused(400, "an HTTP/1.1 request needs exactly one Host field");
    }
    let body = length.unwrap_or(0);
    if body > MAX_BODY {
        return refused(413, "request body larger than 64 KiB");
    }
    let method = match method {
        b"GET" => Method::Get,
        b"HEAD" => Method::Head,
        _ => Method::Other,
    };
    let head = Head {
        method,
        metrics: is_metrics(target),
        close,
        body,
    };
    Parsed::Complete { head, len }
}

/// An answer to give, in the order the requests came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The status code; 200 answers with the metrics body.
    pub code: u16,
    /// HEAD: the header fields without the body.
    pub head_only: bool,
    /// Close the connection after this answer.
    pub close: bool,
    /// Why, for the body of anything but 200.
    pub why: &'static str,
}

impl Reply {
    /// True when this answer carries the metrics body.
    pub fn wants_metrics(&self) -> bool {
        self.code == 200
    }

    /// The answer to a valid request.
    pub fn route(h: Head) -> Reply {
        let head_only = h.method == Method::Head;
        let (code, why) = match (h.metrics, h.method) {
            (true, Method::Get | Method::Head) => (200, ""),
            (true, Method::Other) => (405, "only GET and HEAD are allowed on /metrics"),
            (false, _) => (404, "not found: electd serves /metrics only"),
        };
        Reply {
            code,
            head_only: head_only && code != 405,
            close: h.close,
            why,
        }
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// An IMF-fixdate (RFC 9110 section 5.6.7): `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn http_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{weekday}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The bytes of an answer: status line, header fields, and the body unless HEAD.
pub fn render(reply: &Reply, metrics: Option<&str>) -> Vec<u8> {
    let text;
    let (ctype, body) = match metrics.filter(|_| reply.wants_metrics()) {
        Some(m) => (CONTENT_TYPE, m),
        None => {
            text = format!("{} {}\n", reply.code, reply.why);
            ("text/plain; charset=utf-8", text.as_str())
        }
    };
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nDate: {}\r\nServer: electd\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n",
        reply.code,
        reason(reply.code),
        http_date(SystemTime::now()),
        body.len()
    );
    if reply.code == 405 {
        out.push_str("Allow: GET, HEAD\r\n");
    }
    if reply.close {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    if !reply.head_only {
        out.push_str(body);
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn head(method: Method, metrics: bool, close: bool, body: u64) -> Head {
        Head {
            method,
            metrics,
            close,
            body,
        }
    }

    fn complete(req: &str) -> Head {
        match parse_head(req.as_bytes()) {
            Parsed::Complete { head, len } => {
                assert_eq!(len, req.len(), "{req:?}");
                head
            }
            other => panic!("{req:?}: {other:?}"),
        }
    }

    fn code(req: &[u8]) -> u16 {
        match parse_head(req) {
            Parsed::Refused { code, .. } => code,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(req)),
        }
    }

    #[test]
    fn requests_parse_with_crlf_or_bare_lf() {
        assert_eq!(
            complete("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            head(Method::Get, true, false, 0)
        );
        assert_eq!(
            complete("GET /metrics HTTP/1.1\nHost: x\n\n"),
            head(Method::Get, true, false, 0)
        );
        // Mixed, and empty lines before the request line are ignored.
        assert_eq!(
            complete("\r\n\nHEAD /metrics?x=1 HTTP/1.1\r\nhOsT:  x \nAccept: */*\r\n\n"),
            head(Method::Head, true, false, 0)
        );
        assert_eq!(
            complete("GET http://127.0.0.1:9477/metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            head(Method::Get, true, false, 0)
        );
        assert_eq!(
            complete("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
            head(Method::Get, false, false, 0)
        );
        assert_eq!(
            complete("GET /metrics/ HTTP/1.1\r\nHost: x\r\n\r\n"),
            head(Method::Get, false, false, 0)
        );
        assert_eq!(
            complete("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"),
            head(Method::Other, true, false, 5)
        );
        // A later request in the buffer is not part of this one.
        let two = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /x HTTP/1.1\r\n";
        assert!(matches!(parse_head(two), Parsed::Complete { len: 34, .. }));
    }

    #[test]
    fn keep_alive_by_default_in_1_1_close_in_1_0() {
        assert!(!complete("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").close);
        assert!(complete("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").close);
        assert!(
            complete("GET /metrics HTTP/1.1\r\nHost: x\r\nconnection: Upgrade, CLOSE\r\n\r\n")
                .close
        );
        assert!(
            complete("GET /metrics HTTP/1.0\r\n\r\n").close,
            "1.0 closes"
        );
        assert!(
            complete("GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").close,
            "1.0 closes, keep-alive or not"
        );
        // A later minor version is answered as 1.1.
        assert!(!complete("GET /metrics HTTP/1.9\r\nHost: x\r\n\r\n").close);
    }

    #[test]
    fn partial_heads_wait_for_more() {
        for p in [
            &b""[..],
            b"\r\n",
            b"GET /metrics HTTP/1.1",
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n",
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r",
        ] {
            assert_eq!(parse_head(p), Parsed::Partial, "{p:?}");
        }
    }

    #[test]
    fn malformed_requests_are_refused_with_the_right_code() {
        for (req, want) in [
            (&b"GARBAGE\r\n\r\n"[..], 400),
            (b"GET /metrics\r\n\r\n", 400),
            (b"GET  /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET /metrics HTTP/1.1 extra\r\nHost: x\r\n\r\n", 400),
            (b"GET /metrics HTTX/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET /metrics HTTP/11\r\nHost: x\r\n\r\n", 400),
            (b"G(T /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET /met\x01rics HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET /metrics HTTP/1.1\r\n\r\n", 400),
            (b"GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            (b"GET /metrics HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400),
            (b"GET /metrics HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", 400),
            (
                b"GET /metrics HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n",
                400,
            ),
            (b"GET /metrics HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n", 400),
            (b"GET /metrics HTTP/1.1\r\nHost: x\rY\r\n\r\n", 400),
            (
                b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
                400,
            ),
            (
                b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 2\r\n\r\n",
                400,
            ),
            (
                b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
                400,
            ),
            (
                b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 65537\r\n\r\n",
                413,
            ),
            (
                b"POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
                501,
            ),
            (b"GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n", 505),
            (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
            (b"GET /metrics HTTP/0.9\r\n\r\n", 505),
        ] {
            assert_eq!(code(req), want, "{:?}", String::from_utf8_lossy(req));
        }
        // Equal repeated lengths are one length.
        assert_eq!(
            complete("GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\n").body,
            3
        );
        assert_eq!(
            complete("GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 65536\r\n\r\n").body,
            MAX_BODY
        );
    }

    #[test]
    fn heads_over_the_limits_get_431() {
        // One long field: the head never ends within MAX_HEAD.
        let mut big = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: ".to_vec();
        big.resize(MAX_HEAD - 1, b'a');
        assert_eq!(parse_head(&big), Parsed::Partial, "one byte short");
        big.push(b'a');
        assert_eq!(code(&big), 431);
        // A complete head that ends just past the limit is refused too.
        big.extend_from_slice(b"\r\n\r\n");
        assert_eq!(code(&big), 431);
        // Too many small fields.
        let mut many = b"GET /metrics HTTP/1.1\r\nHost: x\r\n".to_vec();
        for i in 0..MAX_FIELDS {
            many.extend_from_slice(format!("X-{i}: 1\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(code(&many), 431);
        // Exactly MAX_FIELDS fields pass.
        let mut ok = b"GET /metrics HTTP/1.1\r\nHost: x\r\n".to_vec();
        for i in 1..MAX_FIELDS {
            ok.extend_from_slice(format!("X-{i}: 1\r\n").as_bytes());
        }
        ok.extend_from_slice(b"\r\n");
        assert!(matches!(parse_head(&ok), Parsed::Complete { .. }));
    }

    #[test]
    fn routes_and_rendered_answers() {
        let get = Reply::route(head(Method::Get, true, false, 0));
        assert_eq!((get.code, get.head_only, get.close), (200, false, false));
        let body = "# HELP x y\n# EOF\n";
        let text = String::from_utf8(render(&get, Some(body))).unwrap();
        let (h, b) = text.split_once("\r\n\r\n").unwrap();
        let h = format!("{h}\r\n");
        assert!(h.starts_with("HTTP/1.1 200 OK\r\n"), "{h}");
        assert!(
            h.contains(&format!("\r\nContent-Type: {CONTENT_TYPE}\r\n")),
            "{h}"
        );
        assert!(h.contains(&format!("\r\nContent-Length: {}\r\n", body.len())));
        assert!(h.contains("\r\nDate: ") && !h.contains("Connection"), "{h}");
        assert_eq!(b, body);
        // HEAD: the same fields, no body.
        let head_reply = Reply::route(head(Method::Head, true, true, 0));
        let text = String::from_utf8(render(&head_reply, Some(body))).unwrap();
        assert!(text.ends_with("\r\nConnection: close\r\n\r\n"), "{text}");
        assert!(text.contains(&format!("Content-Length: {}\r\n", body.len())));
        let nope = Reply::route(head(Method::Other, true, false, 0));
        assert_eq!(nope.code, 405);
        let text = String::from_utf8(render(&nope, None)).unwrap();
        assert!(text.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"));
        assert!(text.contains("\r\nAllow: GET, HEAD\r\n"), "{text}");
        assert!(text.ends_with("405 only GET and HEAD are allowed on /metrics\n"));
        assert_eq!(Reply::route(head(Method::Get, false, false, 0)).code, 404);
        assert_eq!(Reply::route(head(Method::Other, false, false, 0)).code, 404);
    }

    /// Mutated requests (bytes flipped, inserted, deleted, biased to the bytes HTTP
    /// gives meaning) never panic the parser, and a complete head lies within the
    /// buffer and the limit.
    #[test]
    fn mutated_requests_never_panic() {
        let seeds: [&[u8]; 4] = [
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            b"POST http://h/metrics?a HTTP/1.0\r\nContent-Length: 3, 3\r\n\r\nabc",
            b"HEAD /metrics HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\n\n",
            b"\r\nGET / HTTP/1.1\r\nHost:\t x \r\nX: y\r\n\r\n",
        ];
        let special = b"\r\n :,\t/0123456789HTP.\x00\x7f\xff";
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..200_000 {
            let mut b = seeds[i % seeds.len()].to_vec();
            for _ in 0..next() % 8 {
                let at = (next() as usize) % (b.len() + 1);
                let byte = if next() % 2 == 0 {
                    special[(next() as usize) % special.len()]
                } else {
                    next() as u8
                };
                match next() % 3 {
                    0 if at < b.len() => b[at] = byte,
                    1 => b.insert(at, byte),
                    _ if at < b.len() => {
                        b.remove(at);
                    }
                    _ => {}
                }
            }
            if let Parsed::Complete { head, len } = parse_head(&b) {
                assert!(len <= b.len() && len <= MAX_HEAD, "{b:?}");
                assert!(head.body <= MAX_BODY);
            }
        }
    }

    #[test]
    fn dates_are_imf_fixdates() {
        let at = |s| http_date(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        // RFC 9110's example.
        assert_eq!(at(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(at(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(at(4_102_444_799), "Thu, 31 Dec 2099 23:59:59 GMT");
    }

    #[test]
    fn listen_addresses() {
        assert_eq!(
            parse_listen("127.0.0.1:9477"),
            Ok(Some("127.0.0.1:9477".parse().unwrap()))
        );
        assert_eq!(
            parse_listen("[::1]:9477"),
            Ok(Some("[::1]:9477".parse().unwrap()))
        );
        assert_eq!(parse_listen("off"), Ok(None));
        for (bad, want) in [
            ("localhost:9477", "not an address:port"),
            ("127.0.0.1", "not an address:port"),
            ("::1:9477", "not an address:port"),
            ("[::1]", "not an address:port"),
            ("127.0.0.1:99999", "not an address:port"),
            ("127.0.0.1:0", "port other than 0"),
            ("239.1.2.3:9477", "multicast"),
        ] {
            let e = parse_listen(bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }
}
