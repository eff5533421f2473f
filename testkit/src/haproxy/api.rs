//! One exchange with HAProxy's runtime API: a command line written to the stats socket, and the
//! whole answer read back until HAProxy closes the connection.

use std::io;
use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::ApiError;
use crate::wait::NET_TIMEOUT;

/// The longest answer read: `show stat` takes about 1 KiB per server.
const MAX_ANSWER: u64 = 16 << 20;

/// How much of an answer the errors quote, in characters.
const QUOTE_LIMIT: usize = 512;

/// Sends `command` (one line, without its line feed) on the socket at `socket` and returns the
/// whole answer, within [`NET_TIMEOUT`].
pub(super) async fn exchange(socket: &Path, command: &str) -> Result<String, ApiError> {
    if command.contains(['\n', '\r']) {
        return Err(ApiError::InvalidName(command.to_owned()));
    }
    let io_error = |error: io::Error| ApiError::Io {
        command: command.to_owned(),
        error,
    };
    let exchange = async {
        let mut stream = UnixStream::connect(socket).await?;
        stream.write_all(format!("{command}\n").as_bytes()).await?;
        // Without `prompt`, HAProxy answers one command line and closes the connection.
        let mut answer = Vec::new();
        (&mut stream)
            .take(MAX_ANSWER + 1)
            .read_to_end(&mut answer)
            .await?;
        if answer.len() as u64 > MAX_ANSWER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("an answer longer than {MAX_ANSWER} bytes"),
            ));
        }
        Ok(String::from_utf8_lossy(&answer).into_owned())
    };
    match tokio::time::timeout(NET_TIMEOUT, exchange).await {
        Ok(answer) => answer.map_err(io_error),
        Err(_) => Err(io_error(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no whole answer within {NET_TIMEOUT:?}"),
        ))),
    }
}

/// `answer` without surrounding white space, cut to [`QUOTE_LIMIT`] characters (and `…`).
pub(super) fn quote(answer: &str) -> String {
    let answer = answer.trim();
    match answer.char_indices().nth(QUOTE_LIMIT) {
        Some((cut, _)) => format!("{}…", &answer[..cut]),
        None => answer.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use tokio::net::UnixListener;

    use super::*;
    use crate::process::TempDir;

    #[test]
    fn answers_are_quoted_trimmed_and_cut() {
        assert_eq!(quote("No such server.\n\n"), "No such server.");
        let long = "é".repeat(QUOTE_LIMIT + 10);
        let quoted = quote(&long);
        assert_eq!(quoted.chars().count(), QUOTE_LIMIT + 1);
        assert!(quoted.ends_with("é…"), "{quoted}");
    }

    #[tokio::test]
    async fn an_exchange_reads_until_the_socket_closes() {
        let dir = TempDir::new("haproxy-api").expect("a dir");
        let socket = dir.path().join("api.sock");
        let listener = UnixListener::bind(&socket).expect("bind the socket");
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("a connection");
            let mut line = vec![0; 64];
            let read = stream.read(&mut line).await.expect("the command");
            line.truncate(read);
            stream.write_all(b"New server ").await.expect("answer");
            stream.write_all(b"registered.\n\n").await.expect("answer");
            line
        });
        let answer = exchange(&socket, "add server be/s 127.0.0.1:1")
            .await
            .expect("an answer");
        assert_eq!(answer, "New server registered.\n\n");
        assert_eq!(
            server.await.expect("the server"),
            b"add server be/s 127.0.0.1:1\n"
        );

        // No socket at all: a closed listener could be refused or reset, depending on
        // whether a process forked by another test still holds its descriptor.
        match exchange(&dir.path().join("absent.sock"), "show info").await {
            Err(ApiError::Io { command, error }) => {
                assert_eq!(command, "show info");
                assert_eq!(error.kind(), io::ErrorKind::NotFound, "{error}");
            }
            other => panic!("not Io: {other:?}"),
        }
        assert!(matches!(
            exchange(&socket, "show info\nshow stat").await,
            Err(ApiError::InvalidName(_))
        ));
    }
}
