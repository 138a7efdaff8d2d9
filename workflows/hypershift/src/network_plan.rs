//! The subnet plan of a cluster VPC (hypershift-aws.md §1.2): in a /16, public subnets
//! are /20s from the base (`x.y.0.0/20`, `x.y.16.0/20`, ...), private ones /20s from the
//! middle (`x.y.128.0/20`, `x.y.144.0/20`, ...), one of each per zone, in zone order.

use std::net::Ipv4Addr;

/// At most eight zones fit: the public half holds eight /20s.
pub const MAX_ZONES: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneSubnets {
    pub zone: String,
    pub public_cidr: String,
    pub private_cidr: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("vpc_cidr {0:?} must be an IPv4 /16 such as 10.0.0.0/16")]
    NotSlash16(String),
    #[error("{0} zones given; a /16 holds at most {MAX_ZONES}")]
    TooManyZones(usize),
    #[error("no zones given")]
    NoZones,
    #[error("zone {0:?} is listed twice")]
    DuplicateZone(String),
}

/// Parses `a.b.0.0/16`, returning its first two octets.
pub fn parse_slash16(cidr: &str) -> Result<(u8, u8), PlanError> {
    let invalid = || PlanError::NotSlash16(cidr.to_owned());
    let (address, prefix) = cidr.split_once('/').ok_or_else(invalid)?;
    let address: Ipv4Addr = address.parse().map_err(|_| invalid())?;
    let [a, b, c, d] = address.octets();
    if prefix != "16" || c != 0 || d != 0 {
        return Err(invalid());
    }
    Ok((a, b))
}

/// The public and private subnet of every zone.
pub fn plan(vpc_cidr: &str, zones: &[String]) -> Result<Vec<ZoneSubnets>, PlanError> {
    let (a, b) = parse_slash16(vpc_cidr)?;
    if zones.is_empty() {
        return Err(PlanError::NoZones);
    }
    if zones.len() > MAX_ZONES {
        return Err(PlanError::TooManyZones(zones.len()));
    }
    for (index, zone) in zones.iter().enumerate() {
        if zones[..index].contains(zone) {
            return Err(PlanError::DuplicateZone(zone.clone()));
        }
    }
    Ok(zones
        .iter()
        .enumerate()
        .map(|(index, zone)| {
            let third = u8::try_from(index * 16).unwrap_or(u8::MAX);
            ZoneSubnets {
                zone: zone.clone(),
                public_cidr: format!("{a}.{b}.{third}.0/20"),
                private_cidr: format!("{a}.{b}.{}.0/20", third + 128),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zones(names: &[&str]) -> Vec<String> {
        names.iter().map(|z| (*z).to_owned()).collect()
    }

    #[test]
    fn three_zones_follow_the_hypershift_plan() {
        let plan = plan(
            "10.0.0.0/16",
            &zones(&["us-east-1a", "us-east-1b", "us-east-1c"]),
        )
        .unwrap();
        let cidrs: Vec<(&str, &str)> = plan
            .iter()
            .map(|z| (z.public_cidr.as_str(), z.private_cidr.as_str()))
            .collect();
        assert_eq!(
            cidrs,
            vec![
                ("10.0.0.0/20", "10.0.128.0/20"),
                ("10.0.16.0/20", "10.0.144.0/20"),
                ("10.0.32.0/20", "10.0.160.0/20")
            ]
        );
    }

    #[test]
    fn bad_plans_are_explained() {
        assert_eq!(
            plan("10.0.0.0/20", &zones(&["a"])),
            Err(PlanError::NotSlash16("10.0.0.0/20".into()))
        );
        assert!(plan("10.0.1.0/16", &zones(&["a"])).is_err());
        assert!(plan("not-a-cidr", &zones(&["a"])).is_err());
        assert_eq!(plan("10.0.0.0/16", &[]), Err(PlanError::NoZones));
        assert_eq!(
            plan("10.0.0.0/16", &zones(&["a", "b", "a"])),
            Err(PlanError::DuplicateZone("a".into()))
        );
        let nine: Vec<String> = (0..9).map(|n| format!("z{n}")).collect();
        assert_eq!(plan("10.0.0.0/16", &nine), Err(PlanError::TooManyZones(9)));
        let eight: Vec<String> = (0..8).map(|n| format!("z{n}")).collect();
        assert_eq!(
            plan("10.0.0.0/16", &eight).unwrap()[7].private_cidr,
            "10.0.240.0/20"
        );
    }
}
