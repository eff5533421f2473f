//! gRPC over TLS with certificates that rotate: the certificate, key and client CA files are
//! read again periodically, and each new connection is accepted with the newest valid set
//! (the handshake itself is the gRPC server's, within its connection cap and handshake
//! deadline: see [`GrpcLimits`](super::grpc::GrpcLimits)).
//!
//! cert-manager and Kubernetes' projected and Secret volumes replace those files in place
//! before the old certificate expires. [`ReloadingTls::reload`] reads them again; when they
//! changed and form a valid configuration, new handshakes use it, while connections already
//! open keep theirs (no call is dropped). A set that does not load (a half-written file, a key
//! that does not match) is reported and the previous one stays in force.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

/// The PEM files of a TLS server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain.
    pub cert: PathBuf,
    /// The certificate's private key.
    pub key: PathBuf,
    /// CA certificates that clients must present a certificate from (mutual TLS), if any.
    pub client_ca: Option<PathBuf>,
}

/// Why a set of TLS files does not make a server configuration.
#[derive(Debug)]
pub struct TlsError {
    /// The file at fault, if one is.
    pub path: Option<PathBuf>,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(path) => write!(f, "{}: {}", path.display(), self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for TlsError {}

/// A TLS server configuration that follows its files (TLS 1.2 and 1.3, ALPN `h2`, rustls with
/// the ring provider).
#[derive(Debug)]
pub struct ReloadingTls {
    files: TlsFiles,
    current: RwLock<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    /// The files' contents the configuration was made from.
    contents: Vec<Vec<u8>>,
    config: Arc<ServerConfig>,
}

impl ReloadingTls {
    /// Reads `files`.
    ///
    /// # Errors
    ///
    /// A file that cannot be read, holds no PEM certificate or key, or a set rustls refuses (a
    /// key that does not match the certificate, a client CA it cannot use).
    pub fn load(files: TlsFiles) -> Result<Self, TlsError> {
        let contents = read_all(&files)?;
        let config = server_config(&files, &contents)?;
        Ok(ReloadingTls {
            files,
            current: RwLock::new(Loaded { contents, config }),
        })
    }

    /// The configuration for the next handshake.
    pub fn config(&self) -> Arc<ServerConfig> {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(&current.config)
    }

    /// Reads the files again: `Ok(true)` if they changed and the new set is in force now,
    /// `Ok(false)` if they are unchanged.
    ///
    /// # Errors
    ///
    /// As [`load`](Self::load): the previous configuration stays in force.
    pub fn reload(&self) -> Result<bool, TlsError> {
        let contents = read_all(&self.files)?;
        if self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contents
            == contents
        {
            return Ok(false);
        }
        let config = server_config(&self.files, &contents)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Loaded { contents, config };
        Ok(true)
    }
}

/// The most bytes read of one PEM file: certificate chains and keys are a few KiB.
const MAX_PEM_BYTES: u64 = 1 << 20;

fn read_all(files: &TlsFiles) -> Result<Vec<Vec<u8>>, TlsError> {
    [
        Some(&files.cert),
        Some(&files.key),
        files.client_ca.as_ref(),
    ]
    .into_iter()
    .flatten()
    .map(|path| read_pem(path))
    .collect()
}

fn read_pem(path: &Path) -> Result<Vec<u8>, TlsError> {
    use std::io::Read;
    let failed = |message: String| TlsError {
        path: Some(path.to_owned()),
        message,
    };
    let file = std::fs::File::open(path).map_err(|error| failed(error.to_string()))?;
    let mut contents = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut contents)
        .map_err(|error| failed(error.to_string()))?;
    if contents.len() as u64 > MAX_PEM_BYTES {
        return Err(failed(format!("larger than {MAX_PEM_BYTES} bytes")));
    }
    Ok(contents)
}

/// The server configuration of the files' `contents` (in [`read_all`]'s order).
fn server_config(files: &TlsFiles, contents: &[Vec<u8>]) -> Result<Arc<ServerConfig>, TlsError> {
    let at = |path: &Path| {
        let path = path.to_owned();
        move |message: String| TlsError {
            path: Some(path),
            message,
        }
    };
    let certs = certificates(&contents[0]).map_err(at(&files.cert))?;
    let key = PrivateKeyDer::from_pem_slice(&contents[1])
        .map_err(|error| at(&files.key)(format!("no usable PEM private key: {error}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|error| TlsError {
            path: None,
            message: error.to_string(),
        })?;
    let builder = match (&files.client_ca, contents.get(2)) {
        (Some(path), Some(pem)) => {
            let mut roots = RootCertStore::empty();
            for certificate in certificates(pem).map_err(at(path))? {
                roots
                    .add(certificate)
                    .map_err(|error| at(path)(error.to_string()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|error| at(path)(error.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|error| at(&files.key)(format!("does not fit the certificate: {error}")))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("not PEM certificates: {error}"))?;
    if certificates.is_empty() {
        return Err("no PEM certificate in the file".to_owned());
    }
    Ok(certificates)
}
