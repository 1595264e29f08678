//! Optional TLS (rustls) for the MCP listener (with its `/webhooks/*`) and the facade listener:
//! the certificate and key from PEM files, swapped in when the files change, and optionally client
//! certificates verified against a CA (`--tls-client-ca`, for the `mtls` mechanism). It must never
//! serve a certificate whose key does not match it, nor drop the working one when a changed pair
//! fails to load, nor pass on a client certificate the CA did not verify.

use arc_swap::ArcSwap;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// Longest a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the certificate chain and private key are read from (PEM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate chain, leaf first.
    pub cert: PathBuf,
    /// PKCS#8, PKCS#1 or SEC1 private key.
    pub key: PathBuf,
}

/// Why a certificate pair could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("{path}: bad PEM certificate: {detail}")]
    BadCertificate { path: PathBuf, detail: String },
    #[error("{path} holds no usable PEM private key: {detail}")]
    BadKey { path: PathBuf, detail: String },
    #[error("the key in {key} does not match the certificate in {cert}: {detail}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        detail: String,
    },
    #[error("TLS configuration refused: {0}")]
    Config(String),
    #[error("{path}: no usable CA certificate for client verification: {detail}")]
    BadClientCa { path: PathBuf, detail: String },
}

/// The certificate every handshake gets; swapped atomically on reload.
#[derive(Debug)]
struct Resolver(ArcSwap<CertifiedKey>);

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }
}

/// A TLS acceptor whose certificate can be reloaded.
pub struct Tls {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    resolver: Arc<Resolver>,
    acceptor: tokio_rustls::TlsAcceptor,
    /// Hash of the PEM files last loaded (or refused), so a file is only re-parsed on change.
    seen: Mutex<u64>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn fingerprint(cert: &[u8], key: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    cert.hash(&mut h);
    key.hash(&mut h);
    h.finish()
}

/// Parses a PEM pair and checks that the key belongs to the leaf certificate.
fn certified(
    files: &TlsFiles,
    provider: &CryptoProvider,
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<CertifiedKey, TlsError> {
    let certs = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::BadCertificate {
            path: files.cert.clone(),
            detail: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: files.cert.clone(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::BadKey {
        path: files.key.clone(),
        detail: e.to_string(),
    })?;
    CertifiedKey::from_der(certs, key, provider).map_err(|e| TlsError::Mismatch {
        cert: files.cert.clone(),
        key: files.key.clone(),
        detail: e.to_string(),
    })
}

/// A verifier of client certificates issued by the CA(s) in `path`; anonymous clients pass.
fn client_verifier(
    path: &Path,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    let bad = |detail: String| TlsError::BadClientCa {
        path: path.to_path_buf(),
        detail,
    };
    let pem = read(path)?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots
            .add(cert.map_err(|e| bad(e.to_string()))?)
            .map_err(|e| bad(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(bad("the file holds no PEM certificate".into()));
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| bad(e.to_string()))
}

impl Tls {
    /// Loads the pair; every problem is an error here, at start.
    pub fn load(files: TlsFiles) -> Result<Arc<Tls>, TlsError> {
        Tls::load_with(files, None)
    }

    /// Loads the pair and, with `client_ca` (PEM, one or more CA certificates), asks every
    /// client for a certificate: one the CA verifies is passed on (mtls), one it does not fails
    /// the handshake, and a client without one still connects (other mechanisms apply).
    pub fn load_with(files: TlsFiles, client_ca: Option<&Path>) -> Result<Arc<Tls>, TlsError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let (cert_pem, key_pem) = (read(&files.cert)?, read(&files.key)?);
        let key = certified(&files, &provider, &cert_pem, &key_pem)?;
        let resolver = Arc::new(Resolver(ArcSwap::from_pointee(key)));
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(path) => builder.with_client_cert_verifier(client_verifier(path, &provider)?),
        };
        let mut config = builder.with_cert_resolver(resolver.clone());
        // The listener serves both HTTP versions; ALPN lets the client pick.
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(Tls {
            seen: Mutex::new(fingerprint(&cert_pem, &key_pem)),
            files,
            provider,
            resolver,
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        }))
    }

    /// The TLS handshake on an accepted connection, bounded in time.
    pub async fn accept<S>(&self, stream: S) -> std::io::Result<tokio_rustls::server::TlsStream<S>>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(stream)).await {
            Ok(r) => r,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "TLS handshake timed out",
            )),
        }
    }

    /// Re-reads the files; swaps the certificate when they changed and load. `Ok(true)`: a new
    /// certificate is served; `Ok(false)`: nothing changed. A changed pair that fails keeps
    /// the previous certificate and is not retried until the files change again.
    pub fn reload(&self) -> Result<bool, TlsError> {
        let (cert_pem, key_pem) = (read(&self.files.cert)?, read(&self.files.key)?);
        let print = fingerprint(&cert_pem, &key_pem);
        {
            let Ok(mut seen) = self.seen.lock() else {
                return Ok(false);
            };
            if *seen == print {
                return Ok(false);
            }
            *seen = print;
        }
        let key = certified(&self.files, &self.provider, &cert_pem, &key_pem)?;
        self.resolver.0.store(Arc::new(key));
        Ok(true)
    }

    /// Polls the files every `every` and reloads on change (logged and counted).
    pub fn watch(self: Arc<Self>, every: Duration) -> JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let tls = self.clone();
                let outcome = tokio::task::spawn_blocking(move || tls.reload()).await;
                match outcome {
                    Ok(Ok(true)) => {
                        tracing::info!(cert = %self.files.cert.display(), "TLS certificate reloaded");
                        crate::ops::metrics::tls_reload(true);
                    }
                    Ok(Ok(false)) => {}
                    Ok(Err(e)) => {
                        tracing::error!(error = %e, "TLS certificate reload refused; the previous certificate stays");
                        crate::ops::metrics::tls_reload(false);
                    }
                    Err(e) => tracing::error!(error = %e, "TLS reload task failed"),
                }
            }
        })
    }
}
