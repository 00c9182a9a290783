//! ACLs as ZooKeeper 3.8's server checks them before storing them, and
//! the ids `addauth digest` gives a connection. The door stores what it
//! accepts and `getACL` returns it; nothing is enforced: access is the
//! bearer tokens' grants (docs/zookeeper.md, ADR 0031).
//!
//! Validation follows ZooKeeper's server (its `fixupACL` and the `ip`
//! and `digest` providers' `isValid`), since clients learn from its
//! answers: duplicate entries (same permissions and id) are dropped,
//! first kept; an empty list is INVALIDACL; `world` takes only the id
//! `anyone`; `auth` becomes one entry per digest id the connection has
//! authenticated as, with the `auth` entry's permissions (none:
//! INVALIDACL; the expanded entries are not deduplicated again); a
//! `digest` id is two fields around one `:` (Java's
//! `split(":")`, so trailing empty fields do not count); an `ip` id is a
//! dotted IPv4 address, optionally `/bits` up to 32, numbers as Java's
//! `Integer.parseInt` reads them (3.8 has no IPv6 here); any other scheme
//! is INVALIDACL. Permissions are stored as given, unchecked, as
//! ZooKeeper does.

use base64::Engine;
use raftlock_core::{AclEntry, NodeAcl};
use sha1::{Digest, Sha1};

use crate::wire::{Acl, ErrorCode, Id};

/// The `digest` id that `addauth digest <credentials>` gives a
/// connection, as ZooKeeper computes it: the user (the text before the
/// first `:`), `:`, and the base64 of the SHA-1 of the whole
/// `user:password` text.
pub(crate) fn digest_id(credentials: &[u8]) -> String {
    let text = String::from_utf8_lossy(credentials);
    let user = text.split_once(':').map_or(&*text, |(user, _)| user);
    let hash = Sha1::digest(text.as_bytes());
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

/// `acl` as ZooKeeper would store it for a connection authenticated as
/// the digest ids `authenticated`, or INVALIDACL.
pub(crate) fn fixup(acl: &[Acl], authenticated: &[String]) -> Result<Vec<AclEntry>, ErrorCode> {
    let mut unique: Vec<&Acl> = Vec::with_capacity(acl.len());
    for entry in acl {
        if !unique.contains(&entry) {
            unique.push(entry);
        }
    }
    if unique.is_empty() {
        return Err(ErrorCode::InvalidAcl);
    }
    let mut stored = Vec::with_capacity(unique.len());
    for entry in unique {
        let Id { scheme, id } = &entry.id;
        // The bits as given, negative ones included.
        let perms = entry.perms as u32;
        let valid = match scheme.as_str() {
            "world" => id == "anyone",
            "auth" => {
                if authenticated.is_empty() {
                    return Err(ErrorCode::InvalidAcl);
                }
                stored.extend(authenticated.iter().map(|id| AclEntry {
                    perms,
                    scheme: "digest".into(),
                    id: id.clone(),
                }));
                continue;
            }
            "digest" => valid_digest(id),
            "ip" => valid_ip(id),
            _ => false,
        };
        if !valid {
            return Err(ErrorCode::InvalidAcl);
        }
        stored.push(AclEntry {
            perms,
            scheme: scheme.clone(),
            id: id.clone(),
        });
    }
    Ok(stored)
}

/// A stored ACL as `getACL` answers it.
pub(crate) fn to_wire(acl: Option<&NodeAcl>) -> Vec<Acl> {
    NodeAcl::entries_of(acl)
        .into_iter()
        .map(|e| Acl::new(e.perms as i32, e.scheme, e.id))
        .collect()
}

/// `user:hash`: Java's `id.split(":")` gives two fields (trailing empty
/// fields are dropped, so `a:b:` passes and `a:` does not).
fn valid_digest(id: &str) -> bool {
    if !id.contains(':') {
        return false;
    }
    let mut fields: Vec<&str> = id.split(':').collect();
    while fields.last() == Some(&"") {
        fields.pop();
    }
    fields.len() == 2
}

/// `a.b.c.d` or `a.b.c.d/bits`.
fn valid_ip(id: &str) -> bool {
    let (address, bits) = match id.split_once('/') {
        Some((address, bits)) => (address, Some(bits)),
        None => (id, None),
    };
    let octets: Vec<&str> = address.split('.').collect();
    if octets.len() != 4
        || !octets
            .iter()
            .all(|o| java_int(o).is_some_and(|v| (0..=255).contains(&v)))
    {
        return false;
    }
    bits.is_none_or(|b| java_int(b).is_some_and(|v| (0..=32).contains(&v)))
}

/// Java's `Integer.parseInt` on ASCII: an optional sign, then at least
/// one decimal digit, within `i32`.
fn java_int(text: &str) -> Option<i32> {
    let digits = text
        .strip_prefix('+')
        .or_else(|| text.strip_prefix('-'))
        .unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    if significant.len() > 10 {
        return None;
    }
    let magnitude: i64 = if significant.is_empty() {
        0
    } else {
        significant.parse().ok()?
    };
    let value = if text.starts_with('-') {
        -magnitude
    } else {
        magnitude
    };
    i32::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(perms: u32, scheme: &str, id: &str) -> AclEntry {
        AclEntry {
            perms,
            scheme: scheme.into(),
            id: id.into(),
        }
    }

    #[test]
    fn digest_ids_are_zookeepers() {
        // What ZooKeeper's DigestAuthenticationProvider.generateDigest
        // gives for "bob:secret" (SHA-1, base64).
        assert_eq!(digest_id(b"bob:secret"), "bob:fyVmFCwVbTJYrznoSu1koqYEYF0=");
        // No colon: the whole text is the user and what is hashed.
        assert_eq!(digest_id(b"solo"), "solo:SfJXQf8Ntlp8QpCqc/NLTUo2RMY=");
    }

    #[test]
    fn zookeepers_schemes_and_shapes() {
        let ok = |a: Acl| fixup(&[a], &[]).is_ok();
        assert!(ok(Acl::new(31, "world", "anyone")));
        assert!(!ok(Acl::new(31, "world", "nobody")));
        assert!(ok(Acl::new(
            1,
            "digest",
            "bob:fyVmFCwVbTJYrznoSu1koqYEYF0="
        )));
        assert!(ok(Acl::new(1, "digest", "bob:x:")));
        assert!(ok(Acl::new(1, "digest", ":x")));
        for bad in ["bob", "bob:", "a:b:c", ":", "", "::x"] {
            assert!(!ok(Acl::new(1, "digest", bad)), "{bad}");
        }
        for good in [
            "127.0.0.1",
            "10.0.0.0/8",
            "0.0.0.0/0",
            "1.2.3.4/32",
            "+1.02.3.4",
            "-0.0.0.0",
        ] {
            assert!(ok(Acl::new(1, "ip", good)), "{good}");
        }
        for bad in [
            "300.1.1.1",
            "1.2.3",
            "1.2.3.4.5",
            "1.2.3.4/33",
            "1.2.3.4/",
            "1.2.3.4/-1",
            "1..3.4",
            "::1",
            "localhost",
            "1.2.3.4/8/8",
        ] {
            assert!(!ok(Acl::new(1, "ip", bad)), "{bad}");
        }
        assert!(!ok(Acl::new(31, "sasl", "bob")));
        assert!(!ok(Acl::new(31, "x509", "CN=bob")));
        assert!(!ok(Acl::new(31, "super", "")));
        assert_eq!(fixup(&[], &[]), Err(ErrorCode::InvalidAcl));
    }

    #[test]
    fn duplicates_go_and_perms_stay_as_given() {
        let open = Acl::new(31, "world", "anyone");
        let read = Acl::new(1, "world", "anyone");
        let odd = Acl::new(-1, "world", "anyone");
        let got = fixup(&[open.clone(), read.clone(), open, odd], &[]).expect("valid");
        assert_eq!(
            got,
            [
                entry(31, "world", "anyone"),
                entry(1, "world", "anyone"),
                entry(u32::MAX, "world", "anyone"),
            ]
        );
        let back = to_wire(NodeAcl::stored(&got).as_deref());
        assert_eq!(back[2].perms, -1);
        assert_eq!(to_wire(None), vec![Acl::open_unsafe()]);
    }

    #[test]
    fn auth_becomes_the_connections_digest_ids() {
        let auth = Acl::new(5, "auth", "");
        assert_eq!(
            fixup(std::slice::from_ref(&auth), &[]),
            Err(ErrorCode::InvalidAcl)
        );
        let ids = [digest_id(b"bob:secret"), digest_id(b"amy:pw")];
        let got = fixup(&[auth, Acl::new(1, "world", "anyone")], &ids).expect("valid");
        assert_eq!(
            got,
            [
                entry(5, "digest", "bob:fyVmFCwVbTJYrznoSu1koqYEYF0="),
                entry(5, "digest", &ids[1]),
                entry(1, "world", "anyone"),
            ]
        );
    }

    #[test]
    fn java_ints() {
        assert_eq!(java_int("0012"), Some(12));
        assert_eq!(java_int("+7"), Some(7));
        assert_eq!(java_int("-0"), Some(0));
        assert_eq!(java_int("2147483647"), Some(i32::MAX));
        assert_eq!(java_int("-2147483648"), Some(i32::MIN));
        assert_eq!(java_int("2147483648"), None);
        assert_eq!(java_int("00000000000000000001"), Some(1));
        assert_eq!(java_int("99999999999999999999"), None);
        for bad in ["", "+", "-", "1a", " 1", "1 ", "+-1"] {
            assert_eq!(java_int(bad), None, "{bad}");
        }
    }
}
