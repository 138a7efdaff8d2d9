//! The input of `hcpflow cluster create`: a YAML or JSON file in the shape of
//! `create_hosted_cluster`'s input (DESIGN.md §5), flags over it, defaults under it.
//!
//! Two conveniences the file may use and the CLI resolves before sending:
//! `pull_secret_file` and `ssh_public_key_file` (paths relative to the file). The
//! server validates the result and names every problem; the CLI only assembles it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde_json::{json, Map, Value};

pub const DEFAULT_REPLICAS: i32 = 2;
pub const DEFAULT_INSTANCE_TYPE: &str = "m6i.xlarge";

/// `hcpflow cluster create` flags; each overrides the file's field.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CreateFlags {
    /// A YAML or JSON file with the create input (DESIGN.md §5 shape).
    #[arg(short = 'f', long = "file")]
    pub file: Option<PathBuf>,
    #[arg(long)]
    pub name: Option<String>,
    /// Default: `<name>-` and 5 characters derived from the workflow id.
    #[arg(long)]
    pub infra_id: Option<String>,
    /// Default: us-east-1.
    #[arg(long)]
    pub region: Option<String>,
    /// The AWS account of the hosted cluster's objects, by its name in the server's
    /// `--aws-account` list. Default: the server's own.
    #[arg(long)]
    pub aws_account: Option<String>,
    /// The AWS account of the management side (the OIDC bucket, the management VPC).
    /// Default: the server's own.
    #[arg(long)]
    pub management_aws_account: Option<String>,
    /// Availability zones, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub zones: Option<Vec<String>>,
    #[arg(long)]
    pub base_domain: Option<String>,
    /// Public, PublicAndPrivate or Private (default Public).
    #[arg(long)]
    pub endpoint_access: Option<String>,
    /// Default: 10.0.0.0/16.
    #[arg(long)]
    pub vpc_cidr: Option<String>,
    #[arg(long)]
    pub oidc_bucket: Option<String>,
    /// The management cluster namespace of the HostedCluster (default clusters).
    #[arg(long)]
    pub namespace: Option<String>,
    /// The management VPC (PrivateLink; required unless Public).
    #[arg(long)]
    pub management_vpc_id: Option<String>,
    #[arg(long, value_delimiter = ',')]
    pub management_subnet_ids: Option<Vec<String>>,
    #[arg(long)]
    pub release_image: Option<String>,
    /// A file with the pull secret (it travels in the start request, sealed at intake:
    /// for dev stacks; production names a reference instead).
    #[arg(long, group = "pull_secret_source")]
    pub pull_secret: Option<PathBuf>,
    /// The pull secret in a Secret on the management cluster, `NAMESPACE/NAME[:KEY]`
    /// (key default `.dockerconfigjson`), read by the server for a tenant granted it.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME[:KEY]",
        group = "pull_secret_source"
    )]
    pub pull_secret_secret: Option<String>,
    /// The pull secret in AWS Secrets Manager, by ARN, read by the server for a tenant
    /// granted it.
    #[arg(long, value_name = "ARN", group = "pull_secret_source")]
    pub pull_secret_arn: Option<String>,
    /// A file with the SSH public key.
    #[arg(long)]
    pub ssh_key: Option<PathBuf>,
    /// One NodePool per zone, `<name>-<zone>`, with this many replicas (replaces the
    /// file's node_pools). Default 2 when neither gives node pools.
    #[arg(long)]
    pub node_pool_replicas: Option<i32>,
    /// The instance type of the generated NodePools.
    #[arg(long)]
    pub instance_type: Option<String>,
    /// Leave what was created when the create fails (default: roll it back).
    #[arg(long)]
    pub keep_on_failure: bool,
    /// A tag for every AWS object of the cluster, `KEY=VALUE` (repeatable; added to
    /// the file's `resource_tags`, a flag winning on the same key).
    #[arg(long = "resource-tag", value_name = "KEY=VALUE")]
    pub resource_tags: Vec<String>,
}

/// `NAMESPACE/NAME[:KEY]` as a `pull_secret_ref`.
fn kubernetes_secret_ref(text: &str) -> anyhow::Result<Value> {
    let (place, key) = match text.split_once(':') {
        Some((place, key)) => (place, Some(key)),
        None => (text, None),
    };
    let Some((namespace, name)) = place.split_once('/') else {
        bail!("--pull-secret-secret {text:?}: expected NAMESPACE/NAME[:KEY]");
    };
    let mut secret = json!({"namespace": namespace, "name": name});
    if let Some(key) = key {
        secret["key"] = key.into();
    }
    Ok(json!({"kubernetes": secret}))
}

impl CreateFlags {
    /// The create input: the file, then flags, then defaults.
    pub fn input(&self) -> anyhow::Result<Value> {
        let mut input = match &self.file {
            Some(path) => read_file(path)?,
            None => Map::new(),
        };
        let mut set = |key: &str, value: Option<Value>| {
            if let Some(value) = value {
                input.insert(key.to_owned(), value);
            }
        };
        set("name", self.name.clone().map(Value::from));
        set("infra_id", self.infra_id.clone().map(Value::from));
        set("region", self.region.clone().map(Value::from));
        set("zones", self.zones.clone().map(|z| json!(z)));
        set("base_domain", self.base_domain.clone().map(Value::from));
        set(
            "endpoint_access",
            self.endpoint_access.clone().map(Value::from),
        );
        set("vpc_cidr", self.vpc_cidr.clone().map(Value::from));
        set("oidc_bucket", self.oidc_bucket.clone().map(Value::from));
        set("namespace", self.namespace.clone().map(Value::from));
        set("release_image", self.release_image.clone().map(Value::from));
        set("aws_account", self.aws_account.clone().map(Value::from));
        set(
            "management_aws_account",
            self.management_aws_account.clone().map(Value::from),
        );
        if self.keep_on_failure {
            set("keep_on_failure", Some(Value::Bool(true)));
        }
        if let Some(path) = &self.ssh_key {
            set("ssh_public_key", Some(read_text(path, "SSH key")?.into()));
        }
        // A flag's pull secret replaces the file's, whichever form either takes.
        let pull_secret = if let Some(path) = &self.pull_secret {
            Some(("pull_secret", read_text(path, "pull secret")?.into()))
        } else if let Some(secret) = &self.pull_secret_secret {
            Some(("pull_secret_ref", kubernetes_secret_ref(secret)?))
        } else {
            self.pull_secret_arn.as_ref().map(|arn| {
                (
                    "pull_secret_ref",
                    json!({"aws_secrets_manager": {"arn": arn}}),
                )
            })
        };
        if let Some((field, value)) = pull_secret {
            input.remove("pull_secret");
            input.remove("pull_secret_ref");
            input.insert(field.to_owned(), value);
        }
        if !self.resource_tags.is_empty() {
            let mut tags = input
                .get("resource_tags")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            for given in &self.resource_tags {
                let Some((key, value)) = given.split_once('=') else {
                    bail!("--resource-tag {given:?}: expected KEY=VALUE");
                };
                tags.insert(key.to_owned(), value.into());
            }
            input.insert("resource_tags".into(), Value::Object(tags));
        }
        if self.management_vpc_id.is_some() || self.management_subnet_ids.is_some() {
            let mut management = input
                .get("management")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            if let Some(vpc) = &self.management_vpc_id {
                management.insert("vpc_id".into(), vpc.clone().into());
            }
            if let Some(subnets) = &self.management_subnet_ids {
                management.insert("subnet_ids".into(), json!(subnets));
            }
            input.insert("management".into(), Value::Object(management));
        }
        for (key, default) in [
            ("region", "us-east-1"),
            ("vpc_cidr", "10.0.0.0/16"),
            ("endpoint_access", "Public"),
        ] {
            input
                .entry(key.to_owned())
                .or_insert_with(|| default.into());
        }
        let no_pools = input
            .get("node_pools")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if self.node_pool_replicas.is_some() || no_pools {
            let pools = pool_per_zone(
                &input,
                self.node_pool_replicas.unwrap_or(DEFAULT_REPLICAS),
                self.instance_type
                    .as_deref()
                    .unwrap_or(DEFAULT_INSTANCE_TYPE),
            );
            if !pools.is_empty() {
                input.insert("node_pools".into(), Value::Array(pools));
            }
        }
        Ok(Value::Object(input))
    }
}

/// One NodePool per zone, as `hypershift create cluster aws` makes them.
fn pool_per_zone(input: &Map<String, Value>, replicas: i32, instance_type: &str) -> Vec<Value> {
    let Some(name) = input.get("name").and_then(Value::as_str) else {
        return Vec::new();
    };
    let zones = input.get("zones").and_then(Value::as_array);
    zones
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|zone| {
            json!({"name": format!("{name}-{zone}"), "zone": zone, "replicas": replicas,
                   "instance_type": instance_type})
        })
        .collect()
}

/// The file as an object, with `*_file` references read.
fn read_file(path: &Path) -> anyhow::Result<Map<String, Value>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the cluster file {}", path.display()))?;
    let value: Value = serde_yaml_ng::from_str(&text)
        .with_context(|| format!("{} is neither YAML nor JSON", path.display()))?;
    let Value::Object(mut input) = value else {
        bail!(
            "{} must hold a mapping of the create input's fields",
            path.display()
        );
    };
    let base = path.parent().unwrap_or(Path::new("."));
    for (reference, field, what) in [
        ("pull_secret_file", "pull_secret", "pull secret"),
        ("ssh_public_key_file", "ssh_public_key", "SSH key"),
    ] {
        match input.remove(reference) {
            None | Some(Value::Null) => {}
            Some(Value::String(file)) => {
                let text = read_text(&base.join(file), what)?;
                input.insert(field.to_owned(), text.into());
            }
            Some(_) => bail!("{}: {reference} must be a path", path.display()),
        }
    }
    Ok(input)
}

fn read_text(path: &Path, what: &str) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the {what} from {}", path.display()))?;
    Ok(text.trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of one test's own, removed when the test ends, pass or fail.
    struct TempDir(PathBuf);

    impl std::ops::Deref for TempDir {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn temp_dir(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("hcpflow-spec-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    #[test]
    fn flags_override_the_file_and_files_are_read() {
        let dir = temp_dir("override");
        std::fs::write(dir.join("pull.json"), "{\"auths\": {}}\n").unwrap();
        std::fs::write(
            dir.join("cluster.yaml"),
            "name: demo\nregion: us-west-2\nzones: [us-east-1a, us-east-1b]\n\
             pull_secret_file: pull.json\nendpoint_access: PublicAndPrivate\n",
        )
        .unwrap();
        let flags = CreateFlags {
            file: Some(dir.join("cluster.yaml")),
            region: Some("us-east-1".into()),
            ..CreateFlags::default()
        };
        let input = flags.input().unwrap();
        assert_eq!(input["region"], "us-east-1", "the flag wins");
        assert_eq!(
            input["endpoint_access"], "PublicAndPrivate",
            "the file beats the default"
        );
        assert_eq!(
            input["vpc_cidr"], "10.0.0.0/16",
            "the default fills the gap"
        );
        assert_eq!(input["pull_secret"], "{\"auths\": {}}");
        assert!(input.get("pull_secret_file").is_none());
        let pools = input["node_pools"].as_array().unwrap();
        assert_eq!(pools.len(), 2);
        assert_eq!(pools[1]["name"], "demo-us-east-1b");
        assert_eq!(pools[1]["replicas"], DEFAULT_REPLICAS);
    }

    #[test]
    fn a_pull_secret_flag_replaces_the_files_in_whichever_form() {
        let dir = temp_dir("ref");
        std::fs::write(
            dir.join("cluster.yaml"),
            "name: demo\npull_secret: inline\n",
        )
        .unwrap();
        let flags = CreateFlags {
            file: Some(dir.join("cluster.yaml")),
            pull_secret_secret: Some("pull-secrets/team-a:config".into()),
            ..CreateFlags::default()
        };
        let input = flags.input().unwrap();
        assert!(input.get("pull_secret").is_none(), "{input}");
        assert_eq!(
            input["pull_secret_ref"],
            json!({"kubernetes": {"namespace": "pull-secrets", "name": "team-a", "key": "config"}})
        );
        let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:pull-AbCdEf";
        let flags = CreateFlags {
            file: Some(dir.join("cluster.yaml")),
            pull_secret_arn: Some(arn.into()),
            ..CreateFlags::default()
        };
        assert_eq!(
            flags.input().unwrap()["pull_secret_ref"]["aws_secrets_manager"]["arn"],
            arn
        );
        let flags = CreateFlags {
            pull_secret_secret: Some("no-slash".into()),
            ..CreateFlags::default()
        };
        assert!(flags
            .input()
            .unwrap_err()
            .to_string()
            .contains("NAMESPACE/NAME"));
    }

    #[test]
    fn the_files_node_pools_stay_unless_replicas_are_given() {
        let dir = temp_dir("pools");
        std::fs::write(
            dir.join("cluster.json"),
            r#"{"name": "a", "zones": ["z1"], "node_pools": [{"name": "p", "zone": "z1", "replicas": 5}]}"#,
        )
        .unwrap();
        let mut flags = CreateFlags {
            file: Some(dir.join("cluster.json")),
            ..CreateFlags::default()
        };
        assert_eq!(flags.input().unwrap()["node_pools"][0]["replicas"], 5);
        flags.node_pool_replicas = Some(3);
        let input = flags.input().unwrap();
        assert_eq!(input["node_pools"][0]["name"], "a-z1");
        assert_eq!(input["node_pools"][0]["replicas"], 3);
    }

    #[test]
    fn resource_tag_flags_add_to_the_files_tags() {
        let dir = temp_dir("tags");
        std::fs::write(
            dir.join("cluster.yaml"),
            "name: a\nresource_tags: {team: platform, tier: gold}\n",
        )
        .unwrap();
        let mut flags = CreateFlags {
            file: Some(dir.join("cluster.yaml")),
            resource_tags: vec!["tier=silver".into(), "owner=ops=1".into()],
            ..CreateFlags::default()
        };
        assert_eq!(
            flags.input().unwrap()["resource_tags"],
            json!({"team": "platform", "tier": "silver", "owner": "ops=1"})
        );
        flags.resource_tags = vec!["no-value".into()];
        let error = format!("{:#}", flags.input().unwrap_err());
        assert!(
            error.contains("--resource-tag \"no-value\": expected KEY=VALUE"),
            "{error}"
        );
    }

    #[test]
    fn a_missing_or_malformed_file_is_a_clear_error() {
        let dir = temp_dir("bad");
        let missing = CreateFlags {
            file: Some(dir.join("nope.yaml")),
            ..CreateFlags::default()
        };
        assert!(format!("{:#}", missing.input().unwrap_err()).contains("nope.yaml"));
        std::fs::write(dir.join("list.yaml"), "- a\n- b\n").unwrap();
        let list = CreateFlags {
            file: Some(dir.join("list.yaml")),
            ..CreateFlags::default()
        };
        assert!(format!("{:#}", list.input().unwrap_err()).contains("mapping"));
    }
}
