//! Connecting to the management cluster: a plain URL (the local emulator), a
//! kubeconfig file, or whatever `kube` infers (in-cluster service account, then
//! `$KUBECONFIG` / `~/.kube/config`).

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};

/// Where the management cluster is. The URL wins over the kubeconfig; with neither,
/// the configuration is inferred.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeSettings {
    /// An API server URL used as is, without credentials (`http://127.0.0.1:56443`).
    pub url: Option<String>,
    pub kubeconfig: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("the Kubernetes URL {url:?} is not a valid URL")]
    Url {
        url: String,
        source: http::uri::InvalidUri,
    },
    #[error("reading the kubeconfig {}", path.display())]
    Kubeconfig {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error("no Kubernetes configuration found (in-cluster or kubeconfig)")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("building the Kubernetes client")]
    Client(#[from] kube::Error),
}

impl KubeSettings {
    /// Whether anything was configured explicitly.
    pub fn is_explicit(&self) -> bool {
        self.url.is_some() || self.kubeconfig.is_some()
    }

    /// A client for the configured cluster. Nothing is sent yet: an unreachable server
    /// shows up as a retryable failure of the first activity. A process that links more
    /// than one rustls crypto provider (the AWS SDK's and ring) must install one first.
    pub async fn connect(&self) -> Result<kube::Client, ConnectError> {
        let config = if let Some(url) = &self.url {
            let uri = url.parse().map_err(|source| ConnectError::Url {
                url: url.clone(),
                source,
            })?;
            kube::Config::new(uri)
        } else if let Some(path) = &self.kubeconfig {
            let kubeconfig =
                Kubeconfig::read_from(path).map_err(|source| ConnectError::Kubeconfig {
                    path: path.clone(),
                    source,
                })?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|source| ConnectError::Kubeconfig {
                    path: path.clone(),
                    source,
                })?
        } else {
            kube::Config::infer().await?
        };
        Ok(kube::Client::try_from(config)?)
    }
}
