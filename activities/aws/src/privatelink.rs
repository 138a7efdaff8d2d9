//! PrivateLink as hcpflow built it before the HyperShift operators owned it (kept so the
//! compensations recorded by those creates still run; new creates observe the
//! operators' instead: [`crate::observed_privatelink`]). From the guest VPC to the
//! hosted control plane (hypershift-aws.md §5):
//! in the management VPC an internal NLB and a VPC endpoint service; in the guest VPC a
//! security group and one interface endpoint with one subnet in every availability
//! zone, checked and waited for per zone, by zone id (zone names differ between
//! accounts).

pub mod endpoint_service;
pub mod interface_endpoint;
pub mod load_balancer;
pub mod security_group;
pub mod zone_offer;

/// The port the hosted API server listens on behind the NLB.
pub const API_SERVER_PORT: i32 = 6443;

/// An IAM ARN without its path (`arn:aws:iam::1:role/a/b/name` → `…:role/name`): the
/// form endpoint-service permissions accept as a principal.
pub fn without_iam_path(arn: &str) -> String {
    match arn.split_once(":role/") {
        Some((head, path_and_name)) => {
            let name = path_and_name.rsplit('/').next().unwrap_or(path_and_name);
            format!("{head}:role/{name}")
        }
        None => arn.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn principals_lose_their_iam_path() {
        assert_eq!(
            super::without_iam_path("arn:aws:iam::1:role/ops/x/demo-control-plane-operator"),
            "arn:aws:iam::1:role/demo-control-plane-operator"
        );
        assert_eq!(
            super::without_iam_path("arn:aws:iam::1:role/r"),
            "arn:aws:iam::1:role/r"
        );
    }
}
