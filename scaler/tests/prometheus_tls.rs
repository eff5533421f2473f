//! The Prometheus client over https with a cluster's own CA: trusted with `extra_roots` (the
//! binary's `--prometheus-ca-file`), refused without.

use std::sync::Arc;

use admit_scaler::prometheus::{ClientOptions, PrometheusClient, QueryErrorKind};
use admit_testkit::wait::bounded;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

const ANSWER: &str =
    r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"42"]}}"#;

/// A one-answer-per-connection https server for `localhost` on 127.0.0.1, its certificate
/// signed by a private CA; its URL and the CA's certificate.
async fn https_prometheus() -> (String, CertificateDer<'static>) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
    .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buffer = vec![0; 16 << 10];
                let _ = tls.read(&mut buffer).await;
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{ANSWER}",
                    ANSWER.len()
                );
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (format!("https://localhost:{port}"), ca.der().clone())
}

#[tokio::test]
async fn a_private_ca_is_trusted_only_when_given() {
    let (url, ca) = https_prometheus().await;
    let base: http::Uri = url.parse().unwrap();

    let trusting = PrometheusClient::new(ClientOptions {
        extra_roots: vec![ca],
        ..ClientOptions::default()
    });
    let answer = bounded(
        "a query over https",
        trusting.query(&base, &"up".into(), None),
    )
    .await
    .expect("the private CA is trusted");
    assert_eq!(answer.sample.value, 42.0);

    let default = PrometheusClient::new(ClientOptions::default());
    let error = bounded(
        "a query over https",
        default.query(&base, &"up".into(), None),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error.kind, QueryErrorKind::Unreachable { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("certificate"), "{error}");
}
