//! A hand-written HTTP/1.1 client for Prometheus' API, enough for one `GET` per connection.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An HTTP response's status and body.
#[derive(Debug, PartialEq)]
pub(super) struct Response {
    pub(super) status: u16,
    pub(super) body: Vec<u8>,
}

/// `GET target` on a fresh connection that asks to be closed, within `limit`.
pub(super) async fn http_get(
    addr: SocketAddr,
    target: &str,
    limit: Duration,
) -> io::Result<Response> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        let request = format!(
            "GET {target} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\n\
             Connection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        parse_response(&raw)
    };
    match tokio::time::timeout(limit, exchange).await {
        Ok(response) => response,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("GET {target}: no answer within {limit:?}"),
        )),
    }
}

/// Reads a whole HTTP/1.1 response: the body by `Transfer-Encoding: chunked`, else by
/// `Content-Length`, else up to the end of the connection.
fn parse_response(raw: &[u8]) -> io::Result<Response> {
    let head_end = find(raw, b"\r\n\r\n").ok_or_else(|| malformed("no end of the headers"))?;
    let head = std::str::from_utf8(&raw[..head_end]).map_err(|_| malformed("headers not UTF-8"))?;
    let rest = &raw[head_end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .strip_prefix("HTTP/1.")
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| malformed(&format!("status line {status_line:?}")))?;
    let mut chunked = false;
    let mut length = None;
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| malformed(&format!("header {line:?}")))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding") {
            // `chunked` is always the last coding when there is one.
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|coding| coding.trim().eq_ignore_ascii_case("chunked"));
        } else if name.eq_ignore_ascii_case("content-length") {
            let parsed: usize = value
                .parse()
                .map_err(|_| malformed(&format!("Content-Length {value:?}")))?;
            length = Some(parsed);
        }
    }
    let body = if chunked {
        dechunk(rest)?
    } else if let Some(length) = length {
        rest.get(..length)
            .ok_or_else(|| malformed("a body shorter than its Content-Length"))?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok(Response { status, body })
}

/// Decodes a chunked body; chunk extensions and trailers are ignored.
fn dechunk(mut raw: &[u8]) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = find(raw, b"\r\n").ok_or_else(|| malformed("no chunk size"))?;
        let size_line =
            std::str::from_utf8(&raw[..line_end]).map_err(|_| malformed("chunk size not UTF-8"))?;
        let size_hex = size_line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| malformed(&format!("chunk size {size_line:?}")))?;
        raw = &raw[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        let chunk = raw.get(..size).ok_or_else(|| malformed("a short chunk"))?;
        body.extend_from_slice(chunk);
        raw = raw[size..]
            .strip_prefix(b"\r\n")
            .ok_or_else(|| malformed("no CRLF after a chunk"))?;
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn malformed(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("a malformed HTTP response: {what}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_with_content_length() {
        let raw =
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 4\r\n\r\n{}{}";
        assert_eq!(
            parse_response(raw).expect("a response"),
            Response {
                status: 200,
                body: b"{}{}".to_vec()
            }
        );
        let short = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}";
        assert!(parse_response(short).is_err());
    }

    #[test]
    fn a_chunked_response() {
        let raw = b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n\
            3;ext=1\r\n{\"a\r\nB\r\n\": 1234567}\r\n0\r\nTrailer: x\r\n\r\n";
        assert_eq!(
            dechunk(b"3;ext=1\r\n{\"a\r\nB\r\n\": 1234567}\r\n0\r\n\r\n").expect("a body"),
            b"{\"a\": 1234567}"
        );
        assert_eq!(
            parse_response(raw).expect("a response"),
            Response {
                status: 400,
                body: b"{\"a\": 1234567}".to_vec()
            }
        );
        assert!(dechunk(b"3\r\n{}").is_err(), "a short chunk");
        assert!(dechunk(b"x\r\n").is_err(), "a bad size");
    }

    #[test]
    fn a_response_up_to_the_end_of_the_connection() {
        let raw = b"HTTP/1.0 503 Service Unavailable\r\n\r\nnot ready";
        assert_eq!(
            parse_response(raw).expect("a response"),
            Response {
                status: 503,
                body: b"not ready".to_vec()
            }
        );
        assert!(parse_response(b"SSH-2.0\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
    }
}
