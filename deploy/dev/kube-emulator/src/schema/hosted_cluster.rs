//! The schema of a HostedCluster's `spec` (hypershift.openshift.io/v1beta1, the
//! `Default` feature set of HyperShift's generated CRD).
//!
//! Modelled in full: everything an AWS hosted cluster uses, and the small platforms
//! (`agent`, `ibmcloud`). Modelled shallowly: `configuration` (its ten sub-objects are
//! taken as objects, unchecked and unpruned, though the two rules on `network` and
//! `oauth` are evaluated). Not modelled (reported when present): `platform.azure`,
//! `platform.kubevirt`, `platform.powervs`, `secretEncryption.kms.azure`,
//! `secretEncryption.kms.ibmcloud`, `operatorConfiguration.ingressOperator`.
//!
//! Rules that compare with the old object (`oldSelf`: immutability, "cannot be removed")
//! are not evaluated: the checker sees one object.

use serde_json::{json, Value};

use super::common::{
    aws_filters, aws_resource_tags, local_ref, paused_until, release, string_map, toleration,
    PLATFORM_TYPES,
};
use super::formats;
use super::model::{
    all_of, any_of, boolean, get, has, int32, int_or_string, items, list, object, one_of, opaque,
    own_text, string, text, unmodelled, Node,
};

const AVAILABILITY_POLICIES: &[&str] = &["HighlyAvailable", "SingleReplica"];
const CAPABILITIES: &[&str] = &[
    "ImageRegistry",
    "openshift-samples",
    "Insights",
    "baremetal",
    "Console",
    "NodeTuning",
    "Ingress",
];

pub(super) fn spec() -> Node {
    object(vec![
        ("additionalTrustBundle", local_ref()),
        ("auditWebhook", local_ref()),
        ("autoNode", auto_node()),
        ("autoscaling", autoscaling()),
        ("capabilities", capabilities()),
        ("channel", string().min_len(1).max_len(100)),
        (
            "clusterID",
            string().min_len(36).max_len(36).text_rule(
                "clusterID must be an RFC4122 UUID value (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx in hexadecimal digits)",
                formats::contains_uuid,
            ),
        ),
        ("configuration", configuration()),
        ("controlPlaneRelease", release()),
        (
            "controllerAvailabilityPolicy",
            one_of(AVAILABILITY_POLICIES).default(json!("HighlyAvailable")),
        ),
        ("dns", dns()),
        ("etcd", etcd()),
        ("fips", boolean()),
        (
            "imageContentSources",
            list(
                object(vec![
                    ("mirrors", list(string().max_len(255)).max_items(255).set()),
                    ("source", string().max_len(255)),
                ])
                .required(&["source"]),
            )
            .max_items(255),
        ),
        (
            "infraID",
            string().min_len(1).max_len(253).text_rule(
                "infraID must consist of lowercase alphanumeric characters or '-', start and end with an alphanumeric character, and be between 1 and 253 characters",
                formats::lowercase_label,
            ),
        ),
        (
            "infrastructureAvailabilityPolicy",
            one_of(AVAILABILITY_POLICIES).default(json!("SingleReplica")),
        ),
        (
            "issuerURL",
            string()
                .max_len(255)
                .default(json!("https://kubernetes.default.svc"))
                .text_rule("issuerURL must be a valid absolute URL", formats::is_url),
        ),
        (
            "kubeAPIServerDNSName",
            string().max_len(253).text_rule(
                "kubeAPIServerDNSName must be a valid URL name (e.g., api.example.com)",
                |s| s.is_empty() || formats::domain_or_label(s),
            ),
        ),
        ("labels", string_map().max_props(20)),
        ("monitoring", monitoring()),
        ("networking", networking()),
        (
            "nodeSelector",
            string_map().rule("nodeSelector map can have at most 20 entries", |v| {
                Ok(v.as_object().map_or(0, |m| m.len()) <= 20)
            }),
        ),
        (
            "olmCatalogPlacement",
            one_of(&["management", "guest"]).default(json!("management")),
        ),
        ("operatorConfiguration", operator_configuration()),
        ("pausedUntil", paused_until(4)),
        ("platform", platform()),
        ("pullSecret", local_ref()),
        ("release", release()),
        ("secretEncryption", secret_encryption()),
        ("serviceAccountSigningKey", local_ref()),
        ("services", list(service_publishing()).max_items(6)),
        ("sshKey", local_ref()),
        ("tolerations", list(toleration()).max_items(25)),
        (
            "updateService",
            string().text_rule("updateService must be a valid absolute URL", formats::is_url),
        ),
    ])
    .required(&[
        "etcd",
        "networking",
        "platform",
        "pullSecret",
        "release",
        "services",
    ])
    .rule(
        "spec.services in body should have at least 4 items or 3 for IBMCloud",
        |s| {
            let count = items(s, "services")?.len();
            let platform = text(get(s, "platform")?, "type")?;
            Ok(count >= if platform == "IBMCloud" { 3 } else { 4 })
        },
    )
    .rule(
        "Azure managed platform (ARO HCP) requires OAuthServer to use Route",
        |s| {
            Ok(!is_azure(s)?
                || azure_authentication(s) == "WorkloadIdentities"
                || publishes(s, "OAuthServer", &["Route"])?)
        },
    )
    .rule(
        "Self-managed Azure requires OAuthServer to use Route or LoadBalancer",
        |s| {
            Ok(!is_azure(s)?
                || azure_authentication(s) != "WorkloadIdentities"
                || publishes(s, "OAuthServer", &["Route", "LoadBalancer"])?)
        },
    )
    .rule(
        "Azure platform requires Konnectivity to use Route service publishing strategy",
        |s| Ok(!is_azure(s)? || publishes(s, "Konnectivity", &["Route"])?),
    )
    .rule(
        "Azure platform requires Ignition to use Route service publishing strategy",
        |s| Ok(!is_azure(s)? || publishes(s, "Ignition", &["Route"])?),
    )
    .rule(
        "If serviceAccountSigningKey is set, issuerURL must be set",
        |s| Ok(has(s, "issuerURL") || !has(s, "serviceAccountSigningKey")),
    )
    .rule(
        "APIServer loadBalancer hostname cannot be in ClusterConfiguration.apiserver.servingCerts.namedCertificates[]",
        api_server_hostname_not_a_named_certificate,
    )
    .rule(
        "disableMultiNetwork can only be set to true when networkType is 'Other'",
        |s| {
            let disabled = network_operator(s)
                .and_then(|cno| cno.get("disableMultiNetwork"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            Ok(!disabled || text(get(s, "networking")?, "networkType")? == "Other")
        },
    )
    .rule(
        "ovnKubernetesConfig is forbidden when networkType is not OVNKubernetes",
        |s| {
            Ok(text(get(s, "networking")?, "networkType")? == "OVNKubernetes"
                || !network_operator(s).is_some_and(|cno| has(cno, "ovnKubernetesConfig")))
        },
    )
}

fn is_azure(spec: &Value) -> Result<bool, String> {
    Ok(text(get(spec, "platform")?, "type")? == "Azure")
}

/// `self.platform.?azure.azureAuthenticationConfig.azureAuthenticationConfigType.orValue("")`.
fn azure_authentication(spec: &Value) -> &str {
    spec.pointer("/platform/azure/azureAuthenticationConfig/azureAuthenticationConfigType")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Whether `service` is published by one of `types`.
fn publishes(spec: &Value, service: &str, types: &[&str]) -> Result<bool, String> {
    let checks: Vec<Result<bool, String>> = items(spec, "services")?
        .iter()
        .map(|s| {
            Ok(text(s, "service")? == service
                && types.contains(&text(get(s, "servicePublishingStrategy")?, "type")?))
        })
        .collect();
    any_of(&checks)
}

fn network_operator(spec: &Value) -> Option<&Value> {
    spec.pointer("/operatorConfiguration/clusterNetworkOperator")
}

fn api_server_hostname_not_a_named_certificate(spec: &Value) -> Result<bool, String> {
    let certificates = spec.pointer("/configuration/apiServer/servingCerts/namedCertificates");
    let checks: Vec<Result<bool, String>> = items(spec, "services")?
        .iter()
        .map(|s| {
            let strategy = get(s, "servicePublishingStrategy")?;
            let hostname = strategy.get("loadBalancer").map(|lb| text(lb, "hostname"));
            let named = || -> Result<bool, String> {
                let hostname = hostname.clone().unwrap_or(Ok(""))?;
                let certificates = certificates.and_then(Value::as_array);
                let matches: Vec<Result<bool, String>> = certificates
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .map(|cert| {
                        if !has(cert, "names") {
                            return Ok(false);
                        }
                        Ok(items(cert, "names")?
                            .iter()
                            .any(|n| n.as_str() == Some(hostname)))
                    })
                    .collect();
                any_of(&matches)
            };
            all_of(&[
                Ok(text(s, "service")? == "APIServer"),
                Ok(has(strategy, "loadBalancer")),
                hostname.clone().unwrap_or(Ok("")).map(|h| !h.is_empty()),
                Ok(certificates.is_some()),
                if certificates.is_some() {
                    named()
                } else {
                    Ok(false)
                },
            ])
        })
        .collect();
    any_of(&checks).map(|exists| !exists)
}

fn auto_node() -> Node {
    let karpenter = object(vec![
        (
            "aws",
            object(vec![(
                "roleARN",
                string().max_len(2048).text_rule(
                    "roleARN must be a valid AWS IAM role ARN (e.g. arn:aws:iam::123456789012:role/MyRole)",
                    formats::role_arn_named,
                ),
            )])
            .required(&["roleARN"]),
        ),
        ("platform", one_of(&["AWS"]).max_len(100)),
    ])
    .required(&["platform"])
    .rule(
        "aws is required when platform is AWS, and forbidden otherwise",
        |k| Ok((text(k, "platform")? == "AWS") == has(k, "aws")),
    );
    object(vec![(
        "provisionerConfig",
        object(vec![
            ("karpenter", karpenter),
            ("name", one_of(&["Karpenter"])),
        ])
        .required(&["name"])
        .rule(
            "karpenter is required when name is Karpenter, and forbidden otherwise",
            |p| Ok((text(p, "name")? == "Karpenter") == has(p, "karpenter")),
        ),
    )])
    .required(&["provisionerConfig"])
}

fn autoscaling() -> Node {
    let seconds = || int32().min(0).max(86400);
    object(vec![
        (
            "balancingIgnoredLabels",
            list(string().max_len(317)).max_items(64).rule(
                "Each balancingIgnoredLabels item must be a valid label key",
                |labels| {
                    Ok(labels.as_array().is_none_or(|l| {
                        l.iter()
                            .all(|l| l.as_str().is_some_and(formats::qualified_name))
                    }))
                },
            ),
        ),
        (
            "expanders",
            list(one_of(&["LeastWaste", "Priority", "Random"]))
                .min_items(1)
                .max_items(3),
        ),
        ("maxFreeDifferenceRatioPercent", int32().min(0).max(100)),
        (
            "maxNodeProvisionTime",
            string().max_len(100).pattern(
                r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$",
                formats::duration,
            ),
        ),
        ("maxNodesTotal", int32().min(0)),
        ("maxPodGracePeriod", int32().min(0)),
        ("podPriorityThreshold", int32()),
        (
            "scaleDown",
            object(vec![
                ("delayAfterAddSeconds", seconds()),
                ("delayAfterDeleteSeconds", seconds()),
                ("delayAfterFailureSeconds", seconds()),
                ("unneededDurationSeconds", seconds()),
                ("utilizationThresholdPercent", int32().min(0).max(100)),
            ]),
        ),
        (
            "scaling",
            one_of(&["ScaleUpOnly", "ScaleUpAndScaleDown"]).default(json!("ScaleUpAndScaleDown")),
        ),
    ])
    .rule(
        "scaleDown can only be set when scaling is ScaleUpAndScaleDown",
        |a| Ok(text(a, "scaling")? == "ScaleUpAndScaleDown" || !has(a, "scaleDown")),
    )
}

fn capabilities() -> Node {
    object(vec![
        (
            "disabled",
            list(one_of(CAPABILITIES)).max_items(25).rule(
                "Ingress capability can only be disabled if Console capability is also disabled",
                |d| {
                    let listed = |c: &str| d.as_array().is_some_and(|l| l.iter().any(|x| x == c));
                    Ok(!listed("Ingress") || listed("Console"))
                },
            ),
        ),
        ("enabled", list(one_of(CAPABILITIES)).max_items(25)),
    ])
    .default(json!({}))
    .rule(
        "Capabilities can not be both enabled and disabled at once.",
        |c| {
            if !(has(c, "enabled") && has(c, "disabled")) {
                return Ok(true);
            }
            let disabled = items(c, "disabled")?;
            Ok(items(c, "enabled")?.iter().all(|e| !disabled.contains(e)))
        },
    )
}

fn configuration() -> Node {
    object(vec![
        ("apiServer", opaque()),
        ("authentication", opaque()),
        ("featureGate", opaque()),
        ("image", opaque()),
        ("ingress", opaque()),
        (
            "network",
            opaque().rule(
                "cannot set networkDiagnostics.sourcePlacement and networkDiagnostics.targetPlacement when networkDiagnostics.mode is Disabled",
                |n| {
                    let Some(diagnostics) = n.get("networkDiagnostics") else {
                        return Ok(true);
                    };
                    Ok(diagnostics.get("mode").and_then(Value::as_str) != Some("Disabled")
                        || !has(diagnostics, "sourcePlacement")
                            && !has(diagnostics, "targetPlacement"))
                },
            ),
        ),
        (
            "oauth",
            opaque().rule(
                "spec.configuration.oauth.tokenConfig.accessTokenInactivityTimeout minimum acceptable token timeout value is 300 seconds",
                |o| {
                    let Some(timeout) = o.pointer("/tokenConfig/accessTokenInactivityTimeout")
                    else {
                        return Ok(true);
                    };
                    let timeout = own_text(timeout)?;
                    let seconds = formats::duration_seconds(timeout)
                        .ok_or_else(|| format!("invalid duration: {timeout:?}"))?;
                    Ok(seconds >= 300)
                },
            ),
        ),
        ("operatorhub", opaque()),
        ("proxy", opaque()),
        ("scheduler", opaque()),
    ])
}

fn dns() -> Node {
    fn domain_rule(s: &str) -> bool {
        s.is_empty() || formats::domain_or_label(s)
    }
    object(vec![
        (
            "baseDomain",
            string().max_len(253).text_rule(
                "baseDomain must be a valid domain name (e.g., example, example.com, sub.example.com)",
                domain_rule,
            ),
        ),
        (
            "baseDomainPrefix",
            string().max_len(253).text_rule(
                "baseDomainPrefix must be a valid domain name (e.g., example, example.com, sub.example.com)",
                domain_rule,
            ),
        ),
        ("privateZoneID", string().min_len(1).max_len(265)),
        ("publicZoneID", string().min_len(1).max_len(258)),
    ])
    .required(&["baseDomain"])
}

fn etcd() -> Node {
    let storage = object(vec![
        (
            "persistentVolume",
            object(vec![
                (
                    "size",
                    int_or_string()
                        .pattern(
                            r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
                            formats::quantity,
                        )
                        .default(json!("8Gi")),
                ),
                ("storageClassName", string().max_len(255)),
            ]),
        ),
        (
            "restoreSnapshotURL",
            list(string().max_len(1024))
                .max_items(1)
                .set()
                .rule(
                    "RestoreSnapshotURL shouldn't contain more than 1 entry",
                    |l| Ok(l.as_array().map_or(0, Vec::len) <= 1),
                )
                .rule(
                    "restoreSnapshotURL must be a valid URL with scheme https or s3",
                    |l| {
                        Ok(match l.as_array().and_then(|l| l.first()) {
                            None => true,
                            Some(first) => own_text(first).map(formats::https_or_s3)?,
                        })
                    },
                ),
        ),
        ("type", one_of(&["PersistentVolume"])),
    ])
    .required(&["type"]);
    object(vec![
        (
            "managed",
            object(vec![("storage", storage)]).required(&["storage"]),
        ),
        ("managementType", one_of(&["Managed", "Unmanaged"])),
        (
            "unmanaged",
            object(vec![
                (
                    "endpoint",
                    string().max_len(255).pattern("^https://", formats::https),
                ),
                (
                    "tls",
                    object(vec![("clientSecret", local_ref())]).required(&["clientSecret"]),
                ),
            ])
            .required(&["endpoint", "tls"]),
        ),
    ])
    .required(&["managementType"])
    .default(json!({
        "managed": {"storage": {"persistentVolume": {"size": "8Gi"}, "type": "PersistentVolume"}},
        "managementType": "Managed",
    }))
    .rule(
        "Only managed configuration must be set when managementType is Managed",
        |e| Ok((text(e, "managementType")? == "Managed") == has(e, "managed")),
    )
    .rule(
        "Only unmanaged configuration must be set when managementType is Unmanaged",
        |e| Ok((text(e, "managementType")? == "Unmanaged") == has(e, "unmanaged")),
    )
}

fn monitoring() -> Node {
    let metrics_set = || one_of(&["Telemetry", "SRE", "All"]);
    object(vec![
        (
            "metricsForwarding",
            object(vec![
                ("metricsSet", metrics_set()),
                ("mode", one_of(&["Forward", "None"])),
            ])
            .required(&["mode"]),
        ),
        ("metricsSet", metrics_set()),
    ])
    .min_props(1)
}

/// A CIDR in the loose shape the networking fields check.
fn cidr() -> Node {
    string().max_len(43).text_rule(
        "cidr must be a valid IPv4 or IPv6 CIDR notation (e.g., 192.168.1.0/24 or 2001:db8::/64)",
        formats::loose_cidr,
    )
}

fn networking() -> Node {
    let entry = |extra: Vec<(&'static str, Node)>| {
        let mut fields = vec![("cidr", cidr())];
        fields.extend(extra);
        object(fields).required(&["cidr"])
    };
    object(vec![
        ("allocateNodeCIDRs", one_of(&["Enabled", "Disabled"])),
        (
            "apiServer",
            object(vec![
                ("advertiseAddress", string().max_len(255)),
                ("allowedCIDRBlocks", list(cidr()).max_items(500).set()),
                ("port", int32()),
            ]),
        ),
        (
            "clusterNetwork",
            list(entry(vec![("hostPrefix", int32())]))
                .min_items(1)
                .max_items(2)
                .default(json!([{"cidr": "10.132.0.0/14"}])),
        ),
        (
            "machineNetwork",
            list(entry(Vec::new())).min_items(1).max_items(2),
        ),
        (
            "networkType",
            one_of(&["OpenShiftSDN", "Calico", "OVNKubernetes", "Other"])
                .default(json!("OVNKubernetes")),
        ),
        (
            "serviceNetwork",
            list(entry(Vec::new()))
                .min_items(1)
                .max_items(2)
                .default(json!([{"cidr": "172.31.0.0/16"}])),
        ),
    ])
    .default(json!({
        "clusterNetwork": [{"cidr": "10.132.0.0/14"}],
        "networkType": "OVNKubernetes",
        "serviceNetwork": [{"cidr": "172.31.0.0/16"}],
    }))
    .rule(
        "CIDR ranges in machineNetwork, clusterNetwork, and serviceNetwork must be unique and non-overlapping",
        |n| {
            let cidrs = |key: &str| -> Result<Vec<&Value>, String> {
                items(n, key)?.iter().map(|e| get(e, "cidr")).collect()
            };
            let apart = |a: &[&Value], b: &[&Value]| a.iter().all(|x| !b.contains(x));
            let cluster = cidrs("clusterNetwork")?;
            let service = cidrs("serviceNetwork")?;
            if !has(n, "machineNetwork") {
                return Ok(apart(&cluster, &service));
            }
            let machine = cidrs("machineNetwork")?;
            Ok(apart(&machine, &cluster) && apart(&machine, &service) && apart(&cluster, &service))
        },
    )
    .rule(
        "allocateNodeCIDRs can only be set to Enabled when networkType is 'Other'",
        |n| {
            Ok(n.get("allocateNodeCIDRs").and_then(Value::as_str) != Some("Enabled")
                || text(n, "networkType")? == "Other")
        },
    )
}

/// `int(text)`, failing as CEL's conversion does.
fn cel_int(text: &str) -> Result<i64, String> {
    text.parse()
        .map_err(|_| "type conversion error from 'string' to 'int'".to_owned())
}

/// The three rules on an OVN IPv4 subnet; `format_message` differs between fields.
fn ovn_ipv4_subnet(format_message: &'static str) -> Node {
    string()
        .min_len(9)
        .max_len(18)
        .rule(format_message, |v| {
            let s = own_text(v)?;
            let Some((address, bits)) = s.split_once('/') else {
                return Ok(false);
            };
            let octets: Vec<&str> = address.split('.').collect();
            let shape = octets.len() == 4
                && octets
                    .iter()
                    .all(|o| (1..=3).contains(&o.len()) && o.bytes().all(|b| b.is_ascii_digit()))
                && matches!(bits.parse::<u8>(), Ok(0..=32))
                && (bits.len() == 1 || !bits.starts_with('0'))
                && bits.bytes().all(|b| b.is_ascii_digit());
            if !shape {
                return Ok(false);
            }
            let values: Vec<Result<bool, String>> = octets
                .iter()
                .map(|o| cel_int(o).map(|n| (0..=255).contains(&n)))
                .collect();
            all_of(&values)
        })
        .rule("subnet must be in the range /0 to /30 inclusive", |v| {
            let s = own_text(v)?;
            let shape = s.rsplit_once('/').is_some_and(|(_, bits)| {
                !bits.is_empty() && bits.bytes().all(|b| b.is_ascii_digit())
            }) && !s.contains('\n');
            if !shape {
                return Ok(false);
            }
            let second = s.split('/').nth(1).unwrap_or("");
            Ok(cel_int(second)? <= 30)
        })
        .rule("first IP address octet must not be 0", |v| {
            let s = own_text(v)?;
            let lead = s.split('.').next().unwrap_or("");
            let shape = s.contains('.')
                && (1..=3).contains(&lead.len())
                && lead.bytes().all(|b| b.is_ascii_digit());
            if !shape {
                return Ok(false);
            }
            let first = s
                .split('/')
                .next()
                .unwrap_or("")
                .split('.')
                .next()
                .unwrap_or("");
            Ok(cel_int(first)? > 0)
        })
}

/// `isCIDR(self) && cidr(self).ip().family() == family`.
fn cidr_of_family(s: &str, family: u8) -> bool {
    formats::parse_cidr(s).is_some_and(|(ip, _)| (family == 4) == ip.is_ipv4())
}

/// `isCIDR(self) && cidr(self).prefixLength() <= max`.
fn cidr_prefix_at_most(s: &str, max: u32) -> bool {
    formats::parse_cidr(s).is_some_and(|(_, bits)| bits <= max)
}

fn ovn_ipv6_subnet(format_message: &'static str) -> Node {
    string()
        .min_len(3)
        .max_len(48)
        .text_rule(format_message, |s| cidr_of_family(s, 6))
        .text_rule("subnet must be in the range /0 to /125 inclusive", |s| {
            cidr_prefix_at_most(s, 125)
        })
}

fn operator_configuration() -> Node {
    let ovn = object(vec![
        (
            "ipv4",
            object(vec![
                (
                    "internalJoinSubnet",
                    ovn_ipv4_subnet(
                        "Subnet must be in a valid IPv4 CIDR format (e.g., 192.168.1.1/24)",
                    ),
                ),
                (
                    "internalTransitSwitchSubnet",
                    ovn_ipv4_subnet("Subnet must be in a valid IPv4 CIDR format"),
                ),
            ])
            .min_props(1),
        ),
        (
            "ipv6",
            object(vec![
                (
                    "internalJoinSubnet",
                    ovn_ipv6_subnet("Subnet must be in valid IPv6 CIDR format (e.g., fd98::/64)"),
                ),
                (
                    "internalTransitSwitchSubnet",
                    ovn_ipv6_subnet("Subnet must be in valid IPv6 CIDR format (e.g., fd97::/64)"),
                ),
            ])
            .min_props(1),
        ),
        ("mtu", int32().min(576).max(9216)),
        (
            "v4InternalSubnet",
            string()
                .min_len(9)
                .max_len(18)
                .text_rule("Subnet must be in a valid IPv4 CIDR format", |s| {
                    cidr_of_family(s, 4)
                })
                .text_rule("subnet must be in the range /0 to /30 inclusive", |s| {
                    cidr_prefix_at_most(s, 30)
                })
                .rule("first IP address octet must not be 0", |v| {
                    let s = own_text(v)?;
                    if !cidr_of_family(s, 4) {
                        return Ok(false);
                    }
                    Ok(cel_int(s.split('.').next().unwrap_or(""))? > 0)
                }),
        ),
        (
            "v6InternalSubnet",
            string()
                .min_len(4)
                .max_len(48)
                .text_rule("Subnet must be in valid IPv6 CIDR format", |s| {
                    cidr_of_family(s, 6)
                })
                .text_rule("subnet must be in the range /0 to /125 inclusive", |s| {
                    cidr_prefix_at_most(s, 125)
                }),
        ),
    ])
    .min_props(1)
    .rule(
        "internalJoinSubnet and internalTransitSwitchSubnet must not be the same",
        |o| Ok(!same_subnets(o, "ipv4")),
    )
    .rule(
        "ipv6 internalJoinSubnet and internalTransitSwitchSubnet must not be the same",
        |o| Ok(!same_subnets(o, "ipv6")),
    );
    object(vec![
        (
            "clusterNetworkOperator",
            object(vec![
                ("disableMultiNetwork", boolean().default(json!(false))),
                ("ovnKubernetesConfig", ovn),
            ]),
        ),
        ("ingressOperator", unmodelled()),
    ])
}

/// Whether the `family` block sets both subnets to the same value.
fn same_subnets(ovn: &Value, family: &str) -> bool {
    let Some(block) = ovn.get(family) else {
        return false;
    };
    match (
        block.get("internalJoinSubnet"),
        block.get("internalTransitSwitchSubnet"),
    ) {
        (Some(join), Some(transit)) => join == transit,
        _ => false,
    }
}

fn platform() -> Node {
    object(vec![
        (
            "agent",
            object(vec![("agentNamespace", string().max_len(63))]).required(&["agentNamespace"]),
        ),
        ("aws", aws()),
        ("azure", unmodelled()),
        ("ibmcloud", object(vec![("providerType", string())])),
        ("kubevirt", unmodelled()),
        ("powervs", unmodelled()),
        ("type", one_of(PLATFORM_TYPES).max_len(100)),
    ])
    .required(&["type"])
}

/// The seven role ARNs of `spec.platform.aws.rolesRef`.
const ROLES: &[&str] = &[
    "controlPlaneOperatorARN",
    "imageRegistryARN",
    "ingressARN",
    "kubeCloudControllerARN",
    "networkARN",
    "nodePoolManagementARN",
    "storageARN",
];

fn aws() -> Node {
    let shared_vpc_role = || {
        string().max_len(2048).pattern(
            r"^arn:(aws|aws-cn|aws-us-gov):iam::[0-9]{12}:role\/.*$",
            formats::role_arn_any,
        )
    };
    object(vec![
        (
            "additionalAllowedPrincipals",
            list(string().max_len(255)).max_items(25),
        ),
        (
            "cloudProviderConfig",
            object(vec![
                (
                    "subnet",
                    object(vec![
                        ("filters", aws_filters()),
                        ("id", string().max_len(255)),
                    ]),
                ),
                ("vpc", string().max_len(255)),
                ("zone", string().max_len(255)),
            ])
            .required(&["vpc"]),
        ),
        (
            "endpointAccess",
            one_of(&["Public", "PublicAndPrivate", "Private"]).default(json!("Public")),
        ),
        ("multiArch", boolean().default(json!(false))),
        ("region", string().max_len(255)),
        ("resourceTags", aws_resource_tags(true)),
        (
            "rolesRef",
            object(ROLES.iter().map(|r| (*r, string().max_len(2048))).collect()).required(ROLES),
        ),
        (
            "serviceEndpoints",
            list(
                object(vec![
                    ("name", string().max_len(255)),
                    (
                        "url",
                        string().max_len(2048).pattern("^https://", formats::https),
                    ),
                ])
                .required(&["name", "url"]),
            )
            .max_items(50),
        ),
        (
            "sharedVPC",
            object(vec![
                ("localZoneID", string().max_len(32)),
                (
                    "rolesRef",
                    object(vec![
                        ("controlPlaneARN", shared_vpc_role()),
                        ("ingressARN", shared_vpc_role()),
                    ])
                    .required(&["controlPlaneARN", "ingressARN"]),
                ),
            ])
            .required(&["localZoneID", "rolesRef"]),
        ),
        (
            "terminationHandlerQueueURL",
            string().max_len(512).pattern(
                r"^https://sqs\.[a-z0-9-]+\.amazonaws\.com/[0-9]{12}/[a-zA-Z0-9_-]+(\.fifo)?$",
                formats::sqs_queue_url,
            ),
        ),
    ])
    .required(&["region", "rolesRef"])
}

fn kms_arn() -> Node {
    object(vec![(
        "arn",
        string()
            .min_len(1)
            .max_len(2048)
            .text_rule("arn must start with 'arn:'", |s| s.starts_with("arn:")),
    )])
    .required(&["arn"])
}

fn secret_encryption() -> Node {
    object(vec![
        (
            "aescbc",
            object(vec![("activeKey", local_ref()), ("backupKey", local_ref())])
                .required(&["activeKey"]),
        ),
        (
            "kms",
            object(vec![
                (
                    "aws",
                    object(vec![
                        ("activeKey", kms_arn()),
                        (
                            "auth",
                            object(vec![("awsKms", string().max_len(2048))]).required(&["awsKms"]),
                        ),
                        ("backupKey", kms_arn()),
                        ("region", string().max_len(255)),
                    ])
                    .required(&["activeKey", "auth", "region"]),
                ),
                ("azure", unmodelled()),
                ("ibmcloud", unmodelled()),
                ("provider", one_of(&["IBMCloud", "AWS", "Azure"])),
            ])
            .required(&["provider"]),
        ),
        ("type", one_of(&["kms", "aescbc"])),
    ])
    .required(&["type"])
}

fn service_publishing() -> Node {
    let hostname = || {
        string().min_len(1).max_len(253).text_rule(
            "hostname must be a valid domain name (e.g., example.com)",
            formats::domain,
        )
    };
    let strategy = object(vec![
        ("loadBalancer", object(vec![("hostname", hostname())])),
        (
            "nodePort",
            object(vec![
                (
                    "address",
                    string().min_len(1).max_len(253).text_rule(
                        "address must be a valid hostname, IPv4, or IPv6 address",
                        formats::node_port_address,
                    ),
                ),
                ("port", int32()),
            ])
            .required(&["address"]),
        ),
        ("route", object(vec![("hostname", hostname())])),
        (
            "type",
            one_of(&["LoadBalancer", "NodePort", "Route", "None", "S3"]),
        ),
    ])
    .required(&["type"])
    .rule(
        "nodePort is required when type is NodePort, and forbidden otherwise",
        |s| Ok((text(s, "type")? == "NodePort") == has(s, "nodePort")),
    )
    .rule(
        "only route is allowed when type is Route, and forbidden otherwise",
        |s| {
            Ok(if text(s, "type")? == "Route" {
                !has(s, "nodePort") && !has(s, "loadBalancer")
            } else {
                !has(s, "route")
            })
        },
    )
    .rule(
        "only loadBalancer is required when type is LoadBalancer, and forbidden otherwise",
        |s| {
            Ok(if text(s, "type")? == "LoadBalancer" {
                !has(s, "nodePort") && !has(s, "route")
            } else {
                !has(s, "loadBalancer")
            })
        },
    )
    .rule(
        "None does not allowed any configuration for loadBalancer, nodePort, or route",
        |s| Ok(text(s, "type")? != "None" || unconfigured(s)),
    )
    .rule(
        "S3 does not allowed any configuration for loadBalancer, nodePort, or route",
        |s| Ok(text(s, "type")? != "S3" || unconfigured(s)),
    );
    object(vec![
        (
            "service",
            one_of(&[
                "APIServer",
                "OAuthServer",
                "OIDC",
                "Konnectivity",
                "Ignition",
                "OVNSbDb",
            ]),
        ),
        ("servicePublishingStrategy", strategy),
    ])
    .required(&["service", "servicePublishingStrategy"])
}

fn unconfigured(strategy: &Value) -> bool {
    !has(strategy, "nodePort") && !has(strategy, "route") && !has(strategy, "loadBalancer")
}
