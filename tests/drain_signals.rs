//! A child process serving with `Drain::handle_signals`, stopped by real signals: SIGTERM with
//! a request in flight lets the request finish and exits 0 before the deadline; a session that
//! never closes makes it exit 0 at the deadline, reporting what was left; a signal once the
//! drain refuses (SIGINT twice, SIGTERM three times) ends it at once with 128 plus the
//! signal's number, long before its deadline.
//!
//! Nothing waits a fixed time: the request in flight is answered only once the drain is
//! announced, and the child prints when it holds that request, when its drain is announced
//! and when it refuses, so the steps keep their order however loaded the machine is.
//!
//! The test binary runs itself as the child: `current_exe()` with [`CHILD`] set runs only
//! `child` (ignored in ordinary runs), which serves until its drain ends.

#![cfg(all(unix, feature = "http", feature = "axum", feature = "signal"))]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use admit::drain::{Drain, DrainLayer};
use axum::Router;
use axum::routing::{get, get_service};
use rustix::process::{Pid, Signal, kill_process};

/// Selects the child's case: `slow`, `stuck` or `forced`.
const CHILD: &str = "ADMIT_DRAIN_CHILD";
/// The `slow` child: it accepts this long after SIGTERM (the parent asks `/ready` within
/// it), and its drain may take this long (the parent waits `LIMIT` longer).
const SLOW: (Duration, Duration) = (Duration::from_secs(4), Duration::from_secs(20));
/// The `stuck` child, whose test waits for the whole deadline (SIGINT skips the delay).
const STUCK: (Duration, Duration) = (Duration::from_secs(2), Duration::from_secs(3));
/// The `forced` child, which a signal must end: its delay and deadline are far longer than the
/// test waits for it to exit (`SLOW.1 + LIMIT`), so neither can be what ends it.
const FORCED: (Duration, Duration) = (Duration::from_secs(300), Duration::from_secs(600));
const LIMIT: Duration = Duration::from_secs(30);

/// The child: serves `/slow` (which prints `in flight`, then answers once the drain is
/// announced), `/ready` and `/session` (a session that never closes) behind the drain, prints
/// its address once signals are handled, `announced` and `refusing` as its drain moves, and
/// the drain's outcome when it ends.
#[test]
#[ignore = "the child process of this file's tests, which run it themselves"]
fn child() {
    let Ok(case) = std::env::var(CHILD) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (delay, deadline) = match case.as_str() {
        "stuck" => STUCK,
        "forced" => FORCED,
        _ => SLOW,
    };
    runtime.block_on(async move {
        let drain = Drain::builder()
            .propagation_delay(delay)
            .deadline(deadline)
            .build()
            .unwrap();
        drain.handle_signals().expect("signals");
        let phases = drain.clone();
        tokio::spawn(async move {
            phases.announced().await;
            println!("\nannounced");
            phases.stop_accepting().await;
            println!("\nrefusing");
        });
        let sessions = drain.clone();
        let announced = drain.clone();
        let app = Router::new()
            .route(
                "/slow",
                get(move || {
                    println!("\nin flight");
                    let announced = announced.announced();
                    async move {
                        announced.await;
                        "slow"
                    }
                }),
            )
            .route(
                "/session",
                get(move || {
                    // Held forever: a client that never reconnects.
                    std::mem::forget(sessions.session());
                    async { "session" }
                }),
            )
            .layer(DrainLayer::new(drain.clone()))
            .route("/ready", get_service(drain.readiness()));
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        // On a line of its own: the test harness may have started the line.
        println!("\nlistening {} {case}", tcp.local_addr().unwrap());
        let serve =
            axum::serve(drain.listener(tcp), app).with_graceful_shutdown(drain.stop_accepting());
        let outcome = tokio::select! {
            outcome = drain.finished() => outcome,
            served = std::future::IntoFuture::into_future(serve) => {
                served.unwrap();
                drain.finished().await
            }
        };
        println!("\noutcome {outcome:?}");
    });
}

/// The child process, its address and its stdout lines.
struct Served {
    child: Child,
    addr: SocketAddr,
    lines: mpsc::Receiver<String>,
}

fn spawn(case: &str) -> Served {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, case)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    let listening = next_line(&lines, "listening ");
    let addr = listening
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    Served { child, addr, lines }
}

/// The next of `lines` that starts with `prefix`, within `LIMIT`.
fn next_line(lines: &mpsc::Receiver<String>, prefix: &str) -> String {
    loop {
        let line = lines.recv_timeout(LIMIT).expect(prefix);
        if line.starts_with(prefix) {
            return line;
        }
    }
}

impl Served {
    fn signal(&self, signal: Signal) {
        kill_process(Pid::from_child(&self.child), signal).unwrap();
    }

    /// Waits for the child's exit: its status and its outcome line. Kills a child that does
    /// not exit in time, so that a failed test leaves no process behind.
    fn exit(mut self) -> (std::process::ExitStatus, String) {
        let pid = Pid::from_child(&self.child);
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = sender.send(self.child.wait());
        });
        let Ok(status) = receiver.recv_timeout(SLOW.1 + LIMIT) else {
            let _ = kill_process(pid, Signal::KILL);
            panic!("the child did not exit within {:?}", SLOW.1 + LIMIT);
        };
        let status = status.unwrap();
        // Until the reader thread has read the whole pipe: the child has exited, so soon.
        let outcome = std::iter::from_fn(|| self.lines.recv_timeout(LIMIT).ok())
            .find(|line| line.starts_with("outcome "))
            .unwrap_or_default();
        (status, outcome)
    }
}

/// `GET path` on a new connection; with `close`, the client asks to close it after the answer
/// (otherwise only the server can).
fn send(addr: SocketAddr, path: &str, close: bool) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    let connection = if close { "Connection: close\r\n" } else { "" };
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: test\r\n{connection}\r\n"
    )
    .unwrap();
    stream
}

/// Everything the server sends until it closes the connection.
fn read_all(mut stream: TcpStream) -> String {
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.to_ascii_lowercase()
}

#[test]
fn sigterm_lets_a_slow_request_finish_and_exits_0() {
    let served = spawn("slow");
    let slow = send(served.addr, "/slow", false);
    next_line(&served.lines, "in flight");
    served.signal(Signal::TERM);
    // The answer, then the server's close: it was announced while the request ran.
    let slow = read_all(slow);
    assert!(slow.starts_with("http/1.1 200"), "{slow}");
    assert!(slow.contains("connection: close"), "{slow}");
    // Announced: still accepting, not ready.
    let ready = read_all(send(served.addr, "/ready", true));
    assert!(ready.starts_with("http/1.1 503"), "{ready}");
    let (status, outcome) = served.exit();
    assert!(status.success(), "{status:?}");
    assert!(outcome.contains("Drained"), "{outcome}");
}

#[test]
fn a_session_that_never_closes_ends_at_the_deadline() {
    let served = spawn("stuck");
    let session = read_all(send(served.addr, "/session", true));
    assert!(session.starts_with("http/1.1 200"), "{session}");
    // SIGINT skips the propagation delay.
    served.signal(Signal::INT);
    let (status, outcome) = served.exit();
    assert!(status.success(), "{status:?}");
    assert!(outcome.contains("Expired"), "{outcome}");
    assert!(outcome.contains("sessions: 1"), "{outcome}");
}

/// A child holding a session that never closes, moved by `signals` (after each, the line it
/// prints), then sent `last`: it exits with 128 plus `last`'s number, before its deadline.
fn a_signal_once_refusing_ends_the_process(signals: &[(Signal, &str)], last: Signal, code: i32) {
    let served = spawn("forced");
    let session = read_all(send(served.addr, "/session", true));
    assert!(session.starts_with("http/1.1 200"), "{session}");
    for &(signal, printed) in signals {
        served.signal(signal);
        next_line(&served.lines, printed);
    }
    let sent = std::time::Instant::now();
    served.signal(last);
    let (status, outcome) = served.exit();
    println!(
        "{last:?} after {signals:?}: exit {status:?} {:?} after the signal",
        sent.elapsed()
    );
    assert_eq!(status.code(), Some(code), "{status:?}");
    assert_eq!(outcome, "", "the drain never finished");
}

#[test]
fn a_second_sigint_ends_the_process_at_once() {
    a_signal_once_refusing_ends_the_process(&[(Signal::INT, "refusing")], Signal::INT, 130);
}

#[test]
fn a_third_sigterm_ends_the_process_at_once() {
    let signals = [(Signal::TERM, "announced"), (Signal::TERM, "refusing")];
    a_signal_once_refusing_ends_the_process(&signals, Signal::TERM, 143);
}
