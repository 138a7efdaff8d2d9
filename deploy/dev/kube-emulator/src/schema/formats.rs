//! Hand-written matchers for the regular expressions and CEL string functions the
//! HyperShift schemas use (the crate has no regex engine). Each function names the
//! expression it stands for; Go's RE2 semantics apply: `\d`, `\w` and `\s` are ASCII
//! classes, `.` does not match a newline, and `matches` in CEL finds the expression
//! anywhere unless it is anchored.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn all(s: &str, allowed: impl Fn(char) -> bool) -> bool {
    s.chars().all(allowed)
}

fn is_alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

fn is_lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn digits(s: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&s.len()) && all(s, |c| c.is_ascii_digit())
}

fn hex(s: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&s.len()) && all(s, |c| c.is_ascii_hexdigit())
}

/// First and last characters pass `edge`, the others pass `inner`; not empty.
fn framed(s: &str, edge: impl Fn(char) -> bool, inner: impl Fn(char) -> bool) -> bool {
    let chars: Vec<char> = s.chars().collect();
    match chars.as_slice() {
        [] => false,
        [only] => edge(*only),
        [first, middle @ .., last] => {
            edge(*first) && edge(*last) && middle.iter().all(|c| inner(*c))
        }
    }
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`: a lowercase RFC 1123 label of any length.
pub(super) fn lowercase_label(s: &str) -> bool {
    framed(s, is_lower_alnum, |c| is_lower_alnum(c) || c == '-')
}

/// `[a-fA-F0-9]{8}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{12}`,
/// unanchored: somewhere in `s`.
pub(super) fn contains_uuid(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.windows(36).any(|window| {
        window.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
    })
}

/// `^(?:[a-zA-Z0-9-]+\.)+[a-zA-Z]{2,}$`: dotted labels ending in an alphabetic TLD.
pub(super) fn domain(s: &str) -> bool {
    let labels: Vec<&str> = s.split('.').collect();
    match labels.split_last() {
        Some((tld, rest)) if !rest.is_empty() => {
            tld.len() >= 2
                && all(tld, |c| c.is_ascii_alphabetic())
                && rest
                    .iter()
                    .all(|l| !l.is_empty() && all(l, |c| is_alnum(c) || c == '-'))
        }
        _ => false,
    }
}

/// `^(?:(?:[a-zA-Z0-9-]+\.)+[a-zA-Z]{2,}|[a-zA-Z0-9-]+)$`: a domain or a single label.
pub(super) fn domain_or_label(s: &str) -> bool {
    domain(s) || (!s.is_empty() && all(s, |c| is_alnum(c) || c == '-'))
}

/// The `address` of a NodePort publishing strategy: a host name
/// (`^(([a-zA-Z0-9][-a-zA-Z0-9]*\.)+[a-zA-Z]{2,}|localhost)$`), a dotted quad
/// (`^((\d{1,3}\.){3}\d{1,3})$`) or an IPv6 address without an embedded IPv4 part.
pub(super) fn node_port_address(s: &str) -> bool {
    let host = s == "localhost" || {
        let labels: Vec<&str> = s.split('.').collect();
        match labels.split_last() {
            Some((tld, rest)) if !rest.is_empty() => {
                tld.len() >= 2
                    && all(tld, |c| c.is_ascii_alphabetic())
                    && rest
                        .iter()
                        .all(|l| l.starts_with(is_alnum) && all(l, |c| is_alnum(c) || c == '-'))
            }
            _ => false,
        }
    };
    let quad = {
        let parts: Vec<&str> = s.split('.').collect();
        parts.len() == 4 && parts.iter().all(|p| digits(p, 1, 3))
    };
    let v6 = !s.contains('.') && s.parse::<Ipv6Addr>().is_ok();
    host || quad || v6
}

/// `^((\d{1,3}\.){3}\d{1,3}/\d{1,2})$` or `^([0-9a-fA-F]{0,4}:){2,7}([0-9a-fA-F]{0,4})?/[0-9]{1,3}$`:
/// the loose CIDR shape HyperShift checks.
pub(super) fn loose_cidr(s: &str) -> bool {
    let Some((address, bits)) = s.split_once('/') else {
        return false;
    };
    let v4 = {
        let parts: Vec<&str> = address.split('.').collect();
        parts.len() == 4 && parts.iter().all(|p| digits(p, 1, 3)) && digits(bits, 1, 2)
    };
    let v6 = {
        let groups: Vec<&str> = address.split(':').collect();
        (3..=8).contains(&groups.len()) && groups.iter().all(|g| hex(g, 0, 4)) && digits(bits, 1, 3)
    };
    v4 || v6
}

/// `^(\w+\S+)$`: a word character, then at least one more character, no white space.
pub(super) fn release_image(s: &str) -> bool {
    let white = |c: char| matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c');
    s.chars().count() >= 2 && s.starts_with(|c: char| is_alnum(c) || c == '_') && !s.contains(white)
}

/// `^[0-9A-Za-z_.:/=+@-]+$`: an AWS tag key or value.
pub(super) fn aws_tag(s: &str) -> bool {
    !s.is_empty() && all(s, |c| is_alnum(c) || "_.:/=+@-".contains(c))
}

/// `^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}.*$` or one of `true`, `false`, `True`, `False`.
pub(super) fn paused_until(s: &str) -> bool {
    if ["true", "false", "True", "False"].contains(&s) {
        return true;
    }
    let shape = "dddd-dd-ddTdd:dd:dd";
    let bytes = s.as_bytes();
    bytes.len() >= shape.len()
        && shape.bytes().zip(bytes).all(|(want, got)| match want {
            b'd' => got.is_ascii_digit(),
            other => other == *got,
        })
        && !s[shape.len()..].contains('\n')
}

/// A lowercase DNS subdomain: labels of [`lowercase_label`] joined by dots.
fn subdomain(s: &str) -> bool {
    s.split('.').all(lowercase_label)
}

/// `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`:
/// a qualified name with an optional subdomain prefix (label and taint keys).
pub(super) fn qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, s),
    };
    prefix.is_none_or(subdomain)
        && name.chars().count() <= 63
        && framed(name, is_alnum, |c| is_alnum(c) || "-_.".contains(c))
}

/// `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`: empty, or alphanumeric at both ends.
pub(super) fn label_value(s: &str) -> bool {
    s.is_empty() || framed(s, is_alnum, |c| is_alnum(c) || "-_.".contains(c))
}

/// `^https://`.
pub(super) fn https(s: &str) -> bool {
    s.starts_with("https://")
}

/// `^(https|s3)://.*`.
pub(super) fn https_or_s3(s: &str) -> bool {
    s.starts_with("https://") || s.starts_with("s3://")
}

/// `^https://sqs\.[a-z0-9-]+\.amazonaws\.com/[0-9]{12}/[a-zA-Z0-9_-]+(\.fifo)?$`.
pub(super) fn sqs_queue_url(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("https://sqs.") else {
        return false;
    };
    let Some((region, rest)) = rest.split_once(".amazonaws.com/") else {
        return false;
    };
    let Some((account, queue)) = rest.split_once('/') else {
        return false;
    };
    let queue = queue.strip_suffix(".fifo").unwrap_or(queue);
    !region.is_empty()
        && all(region, |c| is_lower_alnum(c) || c == '-')
        && digits(account, 12, 12)
        && !queue.is_empty()
        && all(queue, |c| is_alnum(c) || c == '_' || c == '-')
}

/// `^arn:(aws|aws-cn|aws-us-gov):iam::[0-9]{12}:role/` followed by `rest`.
fn role_arn(s: &str, rest: impl Fn(&str) -> bool) -> bool {
    ["aws", "aws-cn", "aws-us-gov"].iter().any(|partition| {
        s.strip_prefix("arn:")
            .and_then(|s| s.strip_prefix(partition))
            .and_then(|s| s.strip_prefix(":iam::"))
            .and_then(|s| s.get(..12).filter(|a| digits(a, 12, 12)).map(|_| &s[12..]))
            .and_then(|s| s.strip_prefix(":role/"))
            .is_some_and(&rest)
    })
}

/// `^arn:(aws|aws-cn|aws-us-gov):iam::[0-9]{12}:role\/.*$`.
pub(super) fn role_arn_any(s: &str) -> bool {
    role_arn(s, |rest| !rest.contains('\n'))
}

/// `^arn:(aws|aws-cn|aws-us-gov):iam::[0-9]{12}:role/.+$`.
pub(super) fn role_arn_named(s: &str) -> bool {
    role_arn(s, |rest| !rest.is_empty() && !rest.contains('\n'))
}

/// `^cr-[a-f0-9]{17}$`.
pub(super) fn capacity_reservation_id(s: &str) -> bool {
    s.strip_prefix("cr-").is_some_and(|id| {
        id.len() == 17 && all(id, |c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    })
}

/// `^[0-9]+(\.[0-9]+)?$`.
pub(super) fn decimal(s: &str) -> bool {
    match s.split_once('.') {
        Some((whole, fraction)) => digits(whole, 1, usize::MAX) && digits(fraction, 1, usize::MAX),
        None => digits(s, 1, usize::MAX),
    }
}

/// `([0-9]+(\.[0-9]*)?)|(\.[0-9]+)` at the start of `s`: every possible end.
fn unsigned_number_ends(s: &str) -> Vec<usize> {
    let b = s.as_bytes();
    let run = |from: usize| b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let mut ends = Vec::new();
    let whole = run(0);
    if whole > 0 {
        ends.extend(1..=whole);
        if b.get(whole) == Some(&b'.') {
            let fraction = run(whole + 1);
            ends.extend((0..=fraction).map(|n| whole + 1 + n));
        }
    } else if b.first() == Some(&b'.') {
        let fraction = run(1);
        ends.extend((1..=fraction).map(|n| 1 + n));
    }
    ends
}

/// The Kubernetes quantity pattern:
/// `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`.
pub(super) fn quantity(s: &str) -> bool {
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    unsigned_number_ends(unsigned).into_iter().any(|end| {
        let suffix = &unsigned[end..];
        if suffix.is_empty() {
            return true;
        }
        if ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].contains(&suffix) {
            return true;
        }
        if suffix.len() == 1 && "numkMGTPE".contains(suffix) {
            return true;
        }
        match suffix.strip_prefix(['e', 'E']) {
            Some(exponent) => {
                let exponent = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
                unsigned_number_ends(exponent).contains(&exponent.len())
            }
            None => false,
        }
    })
}

/// `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`: a Go duration without a sign.
pub(super) fn duration(s: &str) -> bool {
    let mut rest = s;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let whole = rest.chars().take_while(char::is_ascii_digit).count();
        if whole == 0 {
            return false;
        }
        rest = &rest[whole..];
        if let Some(after) = rest.strip_prefix('.') {
            let fraction = after.chars().take_while(char::is_ascii_digit).count();
            if fraction == 0 {
                return false;
            }
            rest = &after[fraction..];
        }
        let Some(unit) = ["ns", "us", "µs", "ms", "s", "m", "h"]
            .iter()
            .filter(|unit| rest.starts_with(**unit))
            .max_by_key(|unit| unit.len())
        else {
            return false;
        };
        rest = &rest[unit.len()..];
    }
    true
}

/// Go's `time.ParseDuration`, in whole seconds truncated toward zero (CEL's
/// `duration(s).getSeconds()`); `None` when `s` is not a duration.
pub(super) fn duration_seconds(s: &str) -> Option<i64> {
    let (negative, mut rest) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .count();
        let text = &rest[..number];
        if text.is_empty() || text == "." || text.matches('.').count() > 1 {
            return None;
        }
        let value: f64 = text.parse().ok()?;
        rest = &rest[number..];
        let unit = [
            ("ns", 1.0),
            ("us", 1e3),
            ("µs", 1e3),
            ("μs", 1e3),
            ("ms", 1e6),
            ("s", 1e9),
            ("m", 60e9),
            ("h", 3600e9),
        ]
        .iter()
        .filter(|(unit, _)| rest.starts_with(unit))
        .max_by_key(|(unit, _)| unit.len())
        .copied();
        let (unit, scale) = unit?;
        nanos += value * scale;
        rest = &rest[unit.len()..];
    }
    let seconds = (nanos / 1e9).trunc() as i64;
    Some(if negative { -seconds } else { seconds })
}

/// A prefix as CEL's `isCIDR` / `cidr()` accept it (Go's `netip.ParsePrefix`): the
/// address and the prefix length.
pub(super) fn parse_cidr(s: &str) -> Option<(IpAddr, u32)> {
    let (address, bits) = s.split_once('/')?;
    if bits.is_empty() || (bits.len() > 1 && bits.starts_with('0')) || !digits(bits, 1, 3) {
        return None;
    }
    let bits: u32 = bits.parse().ok()?;
    let address: IpAddr = if address.contains(':') {
        IpAddr::V6(address.parse::<Ipv6Addr>().ok()?)
    } else {
        IpAddr::V4(address.parse::<Ipv4Addr>().ok()?)
    };
    let max = if address.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some((address, bits))
}

/// CEL's `isURL` (Go's `url.ParseRequestURI` succeeds): an absolute URI or an absolute
/// path. An approximation of Go's parser: scheme syntax, control characters, the host
/// characters and port, and percent escapes.
pub(super) fn is_url(s: &str) -> bool {
    if s.is_empty() || s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    let escapes_ok = |part: &str| {
        let b = part.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' {
                if i + 2 >= b.len()
                    || !(b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit())
                {
                    return false;
                }
                i += 3;
            } else {
                i += 1;
            }
        }
        true
    };
    if s.starts_with('/') {
        return escapes_ok(s.split(['?']).next().unwrap_or(s));
    }
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && all(scheme, |c| is_alnum(c) || "+-.".contains(c));
    if !scheme_ok {
        return false;
    }
    let rest = rest.split('?').next().unwrap_or(rest);
    let Some(after) = rest.strip_prefix("//") else {
        // An opaque URI such as `mailto:x`, or a path.
        return escapes_ok(rest);
    };
    let (authority, path) = match after.find('/') {
        Some(i) => (&after[..i], &after[i..]),
        None => (after, ""),
    };
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host_ok = if let Some(literal) = host.strip_prefix('[') {
        match literal.split_once(']') {
            Some((_, port)) => {
                port.is_empty()
                    || port
                        .strip_prefix(':')
                        .is_some_and(|p| p.is_empty() || digits(p, 1, usize::MAX))
            }
            None => false,
        }
    } else {
        let (name, port) = match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        };
        port.is_none_or(|p| p.is_empty() || digits(p, 1, usize::MAX))
            && all(name, |c| {
                is_alnum(c) || "-._~!$&'()*+,;=%\"<>".contains(c) || !c.is_ascii()
            })
            && escapes_ok(name)
    };
    host_ok && escapes_ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matchers_follow_their_expressions() {
        assert!(lowercase_label("demo-x7k2p") && !lowercase_label("-a") && !lowercase_label("A"));
        assert!(contains_uuid("xx123e4567-e89b-12d3-a456-426614174000") && !contains_uuid("foo"));
        assert!(
            domain("example.com") && !domain("example") && !domain("a..com") && !domain("a.c1")
        );
        assert!(domain_or_label("example") && domain_or_label("sub.example.com"));
        assert!(node_port_address("10.0.0.1") && node_port_address("fd00::1"));
        assert!(node_port_address("api.example.com") && !node_port_address("-a.example.com"));
        assert!(loose_cidr("10.0.0.0/16") && loose_cidr("fd01::/48") && !loose_cidr("10.0.0.0"));
        assert!(release_image(
            "quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64"
        ));
        assert!(!release_image("a") && !release_image("-a") && !release_image("a b"));
        assert!(aws_tag("kubernetes.io/cluster/demo") && !aws_tag("a b") && !aws_tag(""));
        assert!(
            paused_until("2025-01-01T00:00:00Z") && paused_until("True") && !paused_until("yes")
        );
        assert!(qualified_name("node-role.kubernetes.io/infra") && qualified_name("infra"));
        assert!(!qualified_name("Example.com/infra") && !qualified_name("a/b/c"));
        assert!(label_value("") && label_value("a.b_c") && !label_value("a-"));
        assert!(sqs_queue_url(
            "https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo"
        ));
        assert!(!sqs_queue_url("https://sqs.us-east-1.amazonaws.com/1234/q"));
        assert!(
            role_arn_any("arn:aws:iam::123456789012:role/x")
                && role_arn_named("arn:aws-cn:iam::123456789012:role/x")
        );
        assert!(
            !role_arn_named("arn:aws:iam::123456789012:role/")
                && role_arn_any("arn:aws:iam::123456789012:role/")
        );
        assert!(
            capacity_reservation_id("cr-0123456789abcdef0")
                && !capacity_reservation_id("cr-0123456789ABCDEF0")
        );
        assert!(decimal("0.5") && decimal("3") && !decimal("1.") && !decimal(".5"));
        for good in [
            "8Gi", "1", "1.5", ".5", "+1e3", "100m", "1E", "1e-3", "1.e2",
        ] {
            assert!(quantity(good), "{good}");
        }
        for bad in ["", "Gi", "1Gb", "1e", "1.2.3", "--1", "1 Gi"] {
            assert!(!quantity(bad), "{bad}");
        }
        assert!(
            duration("15m")
                && duration("1h30m")
                && duration("1.5µs")
                && !duration("15")
                && !duration("1.m")
        );
        assert_eq!(duration_seconds("5m"), Some(300));
        assert_eq!(duration_seconds("299.9s"), Some(299));
        assert_eq!(duration_seconds("abc"), None);
        assert!(parse_cidr("10.0.0.0/8").is_some() && parse_cidr("fd98::/64").is_some());
        assert!(
            parse_cidr("10.0.0.0/33").is_none()
                && parse_cidr("010.0.0.0/8").is_none()
                && parse_cidr("10.0.0.0/08").is_none()
        );
        for good in [
            "https://kubernetes.default.svc",
            "https://a.b/c?d",
            "/abs",
            "mailto:x",
            "https://[::1]:6443/",
        ] {
            assert!(is_url(good), "{good}");
        }
        for bad in [
            "foo",
            "",
            "://x",
            "1http://x",
            "https://a b/",
            "https://x:port/",
            "https://x/%zz",
        ] {
            assert!(!is_url(bad), "{bad}");
        }
    }
}
