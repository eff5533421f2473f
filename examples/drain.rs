//! A server that loses nothing when it is scaled in: plain requests and WebSocket sessions
//! behind [`DrainLayer`], drained on SIGTERM or Ctrl-C.
//!
//! ```text
//! cargo run --example drain --features axum,signal
//! curl 'http://127.0.0.1:3000/slow?seconds=4' &     # a request in flight
//! websocat ws://127.0.0.1:3000/ws                   # a session (any WebSocket client)
//! kill -TERM <pid>                                  # or Ctrl-C, which skips the delay
//! ```
//!
//! On the signal the drain is announced: `/ready` answers 503 and HTTP/1 responses close their
//! connections, while load balancers learn the pod is leaving (2 s here). Then it drains: new
//! requests get 503, the listener closes, each WebSocket gets Close 1001 ("going away") at its
//! moment within a 2 s spread, and the process exits 0 once nothing is left, or 1 at the 15 s
//! deadline. Each change of phase or count is printed as it happens.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use admit::drain::{Drain, DrainLayer, Outcome};
use axum::Router;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Query, State};
use axum::response::Response;
use axum::routing::{get, get_service};

#[derive(serde::Deserialize)]
struct Slow {
    seconds: Option<u64>,
}

async fn slow(Query(slow): Query<Slow>) -> String {
    let seconds = slow.seconds.unwrap_or(3);
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    format!("done after {seconds} s\n")
}

async fn ws(State(drain): State<Drain>, upgrade: WebSocketUpgrade) -> Response {
    // Counted from the upgrade request on: the session starts before its request ends.
    let session = drain.session();
    upgrade.on_upgrade(move |mut socket: WebSocket| async move {
        loop {
            tokio::select! {
                message = socket.recv() => match message {
                    Some(Ok(Message::Text(text))) => {
                        if socket.send(Message::Text(text)).await.is_err() {
                            return;
                        }
                    }
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                    Some(Ok(_)) => {}
                },
                () = session.reconnect() => {
                    let close = CloseFrame {
                        code: close_code::AWAY,
                        reason: "draining: reconnect".into(),
                    };
                    let _ = socket.send(Message::Close(Some(close))).await;
                    return;
                }
            }
        }
    })
}

/// Prints the phase and the counts whenever one changes.
async fn watch(drain: Drain) {
    let mut last = None;
    loop {
        let now = drain.snapshot();
        if last != Some(now) {
            println!(
                "{:<9} in flight {:>3}  sessions {:>3}  connections {:>3}",
                format!("{:?}", now.phase),
                now.in_flight,
                now.sessions,
                now.connections
            );
            last = Some(now);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::main]
async fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .map_or(Ok(SocketAddr::from(([127, 0, 0, 1], 3000))), |arg| {
            arg.parse()
        })?;
    let drain = Drain::builder()
        .propagation_delay(Duration::from_secs(2))
        .deadline(Duration::from_secs(15))
        .reconnect_spread(Duration::from_secs(2))
        .build()?;
    // Subscribed before the server reports ready.
    drain.handle_signals()?;

    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/slow", get(slow))
        .route("/ws", get(ws))
        .with_state(drain.clone())
        .layer(DrainLayer::new(drain.clone()))
        // Readiness (and metrics) outside the drain layer, so they answer while draining.
        .route("/ready", get_service(drain.readiness()));

    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!(
        "serving on http://{} (pid {}): GET /, /slow?seconds=N, /ws; SIGTERM or Ctrl-C drains",
        listener.local_addr()?,
        std::process::id()
    );
    tokio::spawn(watch(drain.clone()));
    let serve = axum::serve(drain.listener(listener), app)
        .with_graceful_shutdown(drain.stop_accepting())
        .into_future();
    // Never wait for the server alone: a half-sent request or an endless stream would hold it
    // past the deadline. And axum does not wait for WebSockets, so it may end first.
    let mut server = tokio::spawn(serve);
    let outcome = tokio::select! {
        outcome = drain.finished() => outcome,
        served = &mut server => {
            served??;
            drain.finished().await
        }
    };
    // Let the server send what it has written and close its connections, within a second.
    let _ = tokio::time::timeout(Duration::from_secs(1), server).await;
    println!("{outcome:?}");
    Ok(match outcome {
        Outcome::Drained { .. } => ExitCode::SUCCESS,
        Outcome::Expired { .. } => ExitCode::FAILURE,
    })
}
