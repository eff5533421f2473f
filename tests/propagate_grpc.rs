//! A request's class through real tonic servers and clients on 127.0.0.1: gRPC metadata is the
//! class's header, read by `CriticalityHeader` behind `ScopeLayer`, and a tonic client behind
//! `PropagateLayer` sends the class in scope, its fallback, or the lower of either and the one
//! the caller set (or the caller's own, with `keep_existing`).

#![cfg(feature = "tonic")]

use std::sync::{Arc, Mutex};

use admit::criticality::Criticality;
use admit::middleware::propagate::{PropagateLayer, ScopeLayer, current};
use admit::middleware::{CriticalityFrom, CriticalityHeader};
use admit::shed::{ShedLayer, Shedder};
use admit_testkit::tonic::{check_only, connect, listen, spawn_server};
use admit_testkit::wait::bounded;
use tonic::transport::Server;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tower::{Layer, ServiceBuilder, ServiceExt, service_fn};

/// The class metadata and the class in scope of a check.
type Seen = (Option<String>, Option<Criticality>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_class_travels_in_grpc_metadata() {
    // What every check was sent and had in scope.
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let recorded = Arc::clone(&seen);
    let health = check_only(move |request| {
        let sent = request
            .metadata()
            .get("admit-criticality")
            .map(|value| value.to_str().unwrap().to_owned());
        recorded.lock().unwrap().push((sent, current()));
    });
    let shedder = Arc::new(Shedder::builder().build().unwrap());
    let (addr, incoming) = listen().await;
    let serve = Server::builder()
        .layer(
            ShedLayer::new(shedder)
                .inspect(CriticalityHeader::new())
                .grpc(),
        )
        .layer(ScopeLayer::new(CriticalityHeader::new()))
        .add_service(health)
        .serve_with_incoming(incoming);
    let server = spawn_server(addr, serve);
    let channel = connect(&server).await;
    let client = HealthClient::new(
        ServiceBuilder::new()
            .layer(PropagateLayer::new().with_fallback(Criticality::SheddablePlus))
            .service(channel.clone()),
    );
    let keeping = HealthClient::new(
        ServiceBuilder::new()
            .layer(PropagateLayer::new().keep_existing())
            .service(channel),
    );
    let check = |client: HealthClient<_>, class: Option<&'static str>| async move {
        let mut request = tonic::Request::new(HealthCheckRequest::default());
        if let Some(class) = class {
            request
                .metadata_mut()
                .insert("admit-criticality", class.parse().unwrap());
        }
        let mut client = client;
        bounded("check", client.check(request)).await.unwrap();
    };

    // Outside any request: the fallback.
    check(client.clone(), None).await;
    // Set by the caller: bounded by the fallback.
    check(client.clone(), Some("critical_plus")).await;
    // Set by the caller of a client that keeps it: kept, and capped by the server's reader.
    check(keeping, Some("critical_plus")).await;
    // Inside a request being served (here, a scope made by hand): its class.
    let inside = ScopeLayer::new(CriticalityFrom(|_: &()| Criticality::Sheddable)).layer(
        service_fn(move |()| {
            let client = client.clone();
            async move {
                check(client, None).await;
                Ok::<_, std::convert::Infallible>(())
            }
        }),
    );
    inside.oneshot(()).await.unwrap();

    let seen = seen.lock().unwrap().clone();
    let class = |sent: &str, in_scope| (Some(sent.to_owned()), Some(in_scope));
    assert_eq!(
        seen,
        [
            class("sheddable_plus", Criticality::SheddablePlus),
            class("sheddable_plus", Criticality::SheddablePlus),
            class("critical_plus", Criticality::Critical),
            class("sheddable", Criticality::Sheddable),
        ]
    );
    server.shutdown().await;
}
