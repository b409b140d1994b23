//! HTTPS for `playdeck web --tls-cert FILE --tls-key FILE`: rustls on ring
//! (the TLS stack async-nats already brings). Handshakes run beside the
//! accept loop, each bounded in time, so a client that stalls its
//! handshake holds up nobody else.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;

/// How long a client has to finish its handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// Handshakes in progress at once; more wait to be accepted.
const HANDSHAKES: usize = 64;

/// The server's TLS settings from a certificate chain and its key, both
/// PEM; an error names the file and what it must hold.
pub fn config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            format!(
                "--tls-cert {}: {e} (a PEM file of the certificate chain, leaf first)",
                cert.display()
            )
        })?;
    if certs.is_empty() {
        return Err(format!(
            "--tls-cert {}: no certificate in it (a PEM file of the certificate chain, leaf first)",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        format!("--tls-key {}: {e} (a PEM file of the certificate's private key: PKCS#8, PKCS#1 or SEC1)", key.display())
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("--tls-cert/--tls-key: {e} (the key must be the certificate's)"))?;
    Ok(Arc::new(cfg))
}

/// Connections whose handshake is done.
pub struct TlsListener {
    done: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    _accepting: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, cfg: Arc<rustls::ServerConfig>) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(cfg);
        let (tx, done) = mpsc::channel(HANDSHAKES);
        let slots = Arc::new(tokio::sync::Semaphore::new(HANDSHAKES));
        let accepting = tokio::spawn(async move {
            loop {
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    return;
                };
                // Out of file descriptors and the like: a moment, again.
                let Ok((s, addr)) = tcp.accept().await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    if let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE, acceptor.accept(s)).await {
                        let _ = tx.send((tls, addr)).await;
                    }
                    drop(slot);
                });
            }
        });
        Ok(TlsListener {
            done,
            local,
            _accepting: accepting,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self._accepting.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.done.recv().await {
            Some(c) => c,
            // The accept loop is gone only when this listener is.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}
