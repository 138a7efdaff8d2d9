//! An emulator per test, a kube-rs client for it, and the activities wired to it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hcpflow_engine::Keyring;
use hcpflow_kube::{KubeActivities, KubeSettings, Timing};
use hcpflow_kube_emulator::operator::Timing as OperatorTiming;
use hcpflow_kube_emulator::server::{start, Handle, Options};

/// A dev seal key: `k1`, 32 zero bytes.
pub(crate) const SEAL_KEY: &str = "k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

pub(crate) struct Stack {
    pub(crate) emulator: Handle,
    pub(crate) client: kube::Client,
    pub(crate) activities: KubeActivities,
    pub(crate) keyring: Arc<Keyring>,
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.emulator.stop();
    }
}

pub(crate) async fn stack() -> Stack {
    stack_keeping(1_000).await
}

/// A stack whose emulator keeps only the last `changes` changes for watches.
pub(crate) async fn stack_keeping(changes: usize) -> Stack {
    // Built with the rest of the workspace, rustls has both ring and aws-lc-rs and will
    // not choose: pick one, as the hcpflow binary does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let emulator = start(Options {
        listen: "127.0.0.1:0".parse().unwrap(),
        state_file: None,
        timing: OperatorTiming {
            step: Duration::from_millis(30),
            node: Duration::from_millis(60),
            deletion: Duration::from_millis(150),
        },
        event_log: changes,
    })
    .await
    .unwrap();
    let settings = KubeSettings {
        url: Some(emulator.url()),
        kubeconfig: None,
    };
    let client = settings.connect().await.unwrap();
    let keyring = Arc::new(Keyring::parse(SEAL_KEY).unwrap());
    let seal_keys = hcpflow_engine::SealKeys::new(Keyring::parse(SEAL_KEY).unwrap());
    let mut activities = KubeActivities::new(client.clone(), Some(Arc::new(seal_keys)));
    activities.timing = Timing {
        poll_interval: Duration::from_millis(25),
        delete_wait: Duration::from_secs(3),
    };
    Stack {
        emulator,
        client,
        activities,
        keyring,
    }
}

/// A name no other test uses.
pub(crate) fn unique(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id() % 10_000,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}
