//! Scale-out: the roles in processes of their own — the API; two engines (workflow,
//! relay and timer); two activity workers — run 200 noop chains and two 3-zone clusters'
//! creates, then their destroys, while one process of each role is killed with SIGKILL
//! at a random point of the first cluster's workflow (and started again). Every
//! workflow ends as it should, each noop step is recorded once, and moto and the
//! emulator hold exactly one of everything after the creates and nothing after the
//! destroys.
//!
//! The points (event counts of the first cluster's workflow, and which role is killed
//! at each) are printed; `HCPFLOW_SCALE_OUT_POINTS=c1,c2,c3/d1,d2,d3` replays the counts.

use std::time::Duration;

use hcpflow_engine::{Event, WorkflowId};
use rand::seq::SliceRandom;
use serde_json::json;

use crate::cluster_crash::wait_for_progress;
use crate::cluster_support::{
    cluster_name, cluster_stack, create_input, env_with_key, holdings, prerequisites,
    wait_for_guest, Holdings,
};
use crate::support::{say, unique, Server};

const CHAINS: usize = 200;
const STEPS: u64 = 5;

/// The role sets of the processes: one API, two engines, two activity workers.
const ENGINE: &str = "workflow,relay,timer";

/// Three ascending event counts of a create (213 events) and of a destroy (145).
fn kill_points() -> ([usize; 3], [usize; 3]) {
    use rand::Rng;
    let parse = |part: &str| -> Option<[usize; 3]> {
        let points: Vec<usize> = part
            .split(',')
            .filter_map(|p| p.trim().parse().ok())
            .collect();
        let mut three: [usize; 3] = points.try_into().ok()?;
        three.sort_unstable();
        Some(three)
    };
    if let Ok(given) = std::env::var("HCPFLOW_SCALE_OUT_POINTS") {
        let parsed = given
            .split_once('/')
            .and_then(|(create, destroy)| Some((parse(create)?, parse(destroy)?)));
        return parsed.unwrap_or_else(|| {
            panic!("HCPFLOW_SCALE_OUT_POINTS={given:?}: expected c1,c2,c3/d1,d2,d3")
        });
    }
    let mut rng = rand::thread_rng();
    let mut draw = |most: usize| {
        let mut three = [0; 3].map(|_| rng.gen_range(3..=most));
        three.sort_unstable();
        three
    };
    (draw(200), draw(135))
}

/// The processes of the deployment.
struct Deployment {
    api: Server,
    engines: Vec<Server>,
    activities: Vec<Server>,
}

impl Deployment {
    /// Kills one process of each role, in a random order, each once `id` has the next
    /// number of events of `points`, and starts it again.
    async fn kill_each_role(&mut self, id: &str, points: [usize; 3]) {
        let mut roles = ["api", "engine", "activity"];
        roles.shuffle(&mut rand::thread_rng());
        say(&format!(
            "scale-out: kill -9 {roles:?} at {points:?} events of {id}"
        ));
        for (role, events) in roles.into_iter().zip(points) {
            wait_for_progress(&self.api, id, events).await;
            let process = match role {
                "api" => &mut self.api,
                "engine" => &mut self.engines[0],
                _ => &mut self.activities[0],
            };
            process.restart().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_roles_survive_kill_9_of_each_role() {
    let Some(stack) = cluster_stack("split_roles_survive_kill_9_of_each_role").await else {
        return;
    };
    // Five processes and two clusters: the heaviest test; it takes the stack alone so
    // that the tests waiting on the operator's deadlines do not run beside it.
    let _alone = crate::support::exclusive().await;
    let tag = unique("so").to_lowercase();
    let pre = prerequisites(&stack.moto, &tag).await;
    let prefix = unique("scale");
    let env = env_with_key(&stack, &format!("{prefix}-key"));
    let api = Server::start_worker(env.clone(), &prefix, "api", &[]).await;
    let mut engines = Vec::new();
    let mut activities = Vec::new();
    for _ in 0..2 {
        engines.push(Server::start_worker(env.clone(), &prefix, ENGINE, &[]).await);
        activities.push(Server::start_worker(env.clone(), &prefix, "activity", &[]).await);
    }
    let mut deployment = Deployment {
        api,
        engines,
        activities,
    };

    let chains: Vec<String> = (0..CHAINS).map(|n| format!("{prefix}-chain-{n}")).collect();
    for id in &chains {
        let reply = deployment
            .api
            .start_workflow("noop_chain", id, json!({"steps": STEPS, "sleep_ms": 40}))
            .await;
        assert_eq!(reply["ok"], true, "{reply}");
    }
    let names = [cluster_name("sa"), cluster_name("sb")];
    let creates: Vec<String> = names
        .iter()
        .map(|n| format!("{prefix}-{n}-create"))
        .collect();
    for (name, id) in names.iter().zip(&creates) {
        let reply = deployment
            .api
            .start_workflow("create_hosted_cluster", id, create_input(name, &pre, 1))
            .await;
        assert_eq!(reply["ok"], true, "{reply}");
    }
    let (create_points, destroy_points) = kill_points();
    say(&format!(
        "scale-out points: HCPFLOW_SCALE_OUT_POINTS={},{},{}/{},{},{}",
        create_points[0],
        create_points[1],
        create_points[2],
        destroy_points[0],
        destroy_points[1],
        destroy_points[2]
    ));
    deployment.kill_each_role(&creates[0], create_points).await;

    let api = &deployment.api;
    let mut infra_ids = Vec::new();
    for id in &creates {
        let status = api.wait_terminal(id, Duration::from_secs(300)).await;
        let described = api.api("describe", json!({"workflow_id": id})).await;
        assert_eq!(status, "completed", "{described}");
        infra_ids.push(
            described["workflow"]["output"]["infra_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    for id in &chains {
        assert_eq!(
            api.wait_terminal(id, Duration::from_secs(120)).await,
            "completed",
            "{id}"
        );
        assert_each_step_recorded_once(api, id, STEPS).await;
    }
    for (name, infra_id) in names.iter().zip(&infra_ids) {
        wait_for_guest(&stack.moto, infra_id).await;
        assert_eq!(
            holdings(&stack.moto, &stack.kube, name, infra_id, &pre).await,
            Holdings::one_cluster(),
            "{name} after kill -9 of each role at {create_points:?} events of a create"
        );
    }

    let destroys: Vec<String> = names
        .iter()
        .map(|n| format!("{prefix}-{n}-destroy"))
        .collect();
    for (name, id) in names.iter().zip(&destroys) {
        deployment
            .api
            .start_workflow("destroy_hosted_cluster", id, json!({"cluster": name}))
            .await;
    }
    deployment
        .kill_each_role(&destroys[0], destroy_points)
        .await;
    let api = &deployment.api;
    for id in &destroys {
        let status = api.wait_terminal(id, Duration::from_secs(300)).await;
        let described = api.api("describe", json!({"workflow_id": id})).await;
        assert_eq!(status, "completed", "{described}");
    }
    for (name, infra_id) in names.iter().zip(&infra_ids) {
        assert_eq!(
            holdings(&stack.moto, &stack.kube, name, infra_id, &pre).await,
            Holdings::default(),
            "{name} after kill -9 of each role at {destroy_points:?} events of a destroy"
        );
    }
    for process in deployment
        .engines
        .iter_mut()
        .chain(&mut deployment.activities)
        .chain([&mut deployment.api])
    {
        process.stop().await;
    }
}

/// The chain's history verifies, schedules its `steps` once each in order, and records
/// one outcome for each.
pub(crate) async fn assert_each_step_recorded_once(server: &Server, id: &str, steps: u64) {
    let workflow = WorkflowId::new(id.to_owned()).unwrap();
    server.store.verify_history(&workflow).await.unwrap();
    let history = server.store.read_full_history(&workflow).await.unwrap();
    let mut scheduled = Vec::new();
    let mut completed = Vec::new();
    for event in &history {
        match event.to_history_event().unwrap().event {
            Event::ActivityScheduled(s) if s.compensation_of.is_none() => {
                scheduled.push(s.input["step"].as_u64().unwrap_or(0));
            }
            Event::ActivityCompleted(c) => completed.push(c.scheduled_seq),
            _ => {}
        }
    }
    assert_eq!(scheduled, (1..=steps).collect::<Vec<_>>(), "{id}");
    let distinct: std::collections::BTreeSet<_> = completed.iter().collect();
    assert_eq!(
        distinct.len(),
        completed.len(),
        "{id}: an outcome recorded twice"
    );
    assert_eq!(completed.len() as u64, steps, "{id}");
}
