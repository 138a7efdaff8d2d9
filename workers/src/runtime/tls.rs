//! The process-wide TLS crypto provider.
//!
//! rustls picks its provider from its crate features, and refuses to guess when more
//! than one is compiled in: async-nats brings `ring`, the AWS SDK `aws-lc-rs`. A process
//! (or test) that links both installs one at start, before any TLS connection.

/// Installs `ring` as the process's default provider; a second call changes nothing.
pub fn install_crypto_provider() {
    // Err means a provider is installed already, which is all that is needed.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
