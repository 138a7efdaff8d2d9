//! Route53 activities: the cluster's private and local zones, the CNAME records of
//! PrivateLink, and the check of the public zone (a prerequisite).
//!
//! Every operation after a zone's create addresses it by the id the create returned
//! (hypershift-aws.md §5 "Zone name vs zone ID"): several zones of one name can exist.

pub mod public_zone;
pub mod records;
pub mod zone;

/// Route53 answers ids as `/hostedzone/Z123`; the id is the last part.
pub fn bare_zone_id(id: &str) -> &str {
    id.rsplit('/').next().unwrap_or(id)
}

/// Route53 names end with a dot; compare names without it, case-insensitively.
pub fn same_name(a: &str, b: &str) -> bool {
    a.trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_ids_and_names_compare_as_route53_spells_them() {
        assert_eq!(bare_zone_id("/hostedzone/Z0ABC"), "Z0ABC");
        assert_eq!(bare_zone_id("Z0ABC"), "Z0ABC");
        assert!(same_name("demo.example.com.", "Demo.example.com"));
        assert!(!same_name("demo.example.com.", "demo2.example.com"));
    }
}
