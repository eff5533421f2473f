//! The scaler as a process: started on loopback ports, stopped by SIGTERM.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use admit_testkit::wait::bounded;
use rustix::process::{Pid, Signal, kill_process};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The binary under test.
pub const BINARY: &str = env!("CARGO_BIN_EXE_admit-scaler");
/// How long a started scaler may take to log its addresses, or a stopped one to exit.
const LIMIT: Duration = Duration::from_secs(30);

/// A running `admit-scaler serve` and what its log said.
pub struct Served {
    pub child: Child,
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    log: mpsc::Receiver<String>,
}

impl Served {
    /// Starts `serve` on loopback ports with `args`, and waits for its "serving" line.
    pub fn start(args: &[&str]) -> Served {
        Served::start_with(Command::new(BINARY), args)
    }

    /// [`start`](Self::start) through `command`, which runs the binary (in a cgroup, say).
    /// Without a `--shutdown-delay` in `args`, it stops at once at SIGTERM.
    pub fn start_with(mut command: Command, args: &[&str]) -> Served {
        let mut child = command
            .env("ADMIT_SCALER_SHUTDOWN_DELAY", "0s")
            .args([
                "serve",
                "--grpc-listen",
                "127.0.0.1:0",
                "--http-listen",
                "127.0.0.1:0",
            ])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("admit-scaler starts");
        let stderr = child.stderr.take().unwrap();
        let (sender, log) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        let line = loop {
            let line = log
                .recv_timeout(LIMIT)
                .unwrap_or_else(|error| panic!("no \"serving\" line: {error}"));
            if line.contains("serving") {
                break line;
            }
        };
        let address = |name: &str| -> SocketAddr {
            let start = line.find(&format!("{name}=")).expect(name) + name.len() + 1;
            line[start..]
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        Served {
            grpc: address("grpc"),
            http: address("http"),
            child,
            log,
        }
    }

    /// Sends SIGTERM, and returns at once.
    pub fn sigterm(&self) {
        kill_process(Pid::from_child(&self.child), Signal::TERM).expect("SIGTERM");
    }

    /// SIGTERM, then the exit status and every line logged since the start.
    pub fn terminate(mut self) -> (ExitStatus, Vec<String>) {
        self.sigterm();
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = sender.send(self.child.wait());
        });
        let status = receiver
            .recv_timeout(LIMIT)
            .expect("the scaler exits after SIGTERM")
            .expect("wait");
        // The reader stops at the log's end, once it has passed on every line the process
        // wrote before it exited.
        let mut lines = Vec::new();
        while let Ok(line) = self.log.recv_timeout(LIMIT) {
            lines.push(line);
        }
        (status, lines)
    }
}

/// `GET path` over HTTP/1.1: the status line and the body.
pub async fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut stream = bounded("connect", tokio::net::TcpStream::connect(addr))
        .await
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    bounded("the response", stream.read_to_string(&mut response))
        .await
        .unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}
