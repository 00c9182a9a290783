//! Path and name rules shared by the state machine and the HTTP edge.
//!
//! Canonical tree paths are absolute (`/a/b/c`). Lock and election names
//! are relative (`orders/42`) and live under reserved prefixes, so the lock
//! recipe owns its part of the tree and generic writes cannot corrupt a
//! queue.

use crate::error::CoreError;

/// Longest lock or election name, in bytes (docs/api.md).
pub const MAX_NAME_LEN: usize = 256;
/// Longest generic node path, in bytes, including the leading `/`.
pub const MAX_PATH_LEN: usize = 1024;
/// Where lock queues live in the tree.
pub const LOCKS_PREFIX: &str = "/locks";
/// Where election queues live in the tree.
pub const ELECTIONS_PREFIX: &str = "/elections";
/// Where read-write lock queues live in the tree (`shared.rs`).
pub const RWLOCKS_PREFIX: &str = "/rwlocks";
/// Where semaphore queues live in the tree (`shared.rs`).
pub const SEMAPHORES_PREFIX: &str = "/semaphores";
/// Name prefix of a queued lock node; the sequence number follows.
pub const QUEUE_NODE_PREFIX: &str = "lock-";
/// Digits of a zero-padded sequence suffix (ZooKeeper's width). Wider
/// numbers print in full; ordering inside the state machine is numeric,
/// never by string.
pub const SEQUENCE_DIGITS: usize = 10;

fn component_is_valid(component: &str) -> bool {
    !component.is_empty()
        && component != "."
        && component != ".."
        && component
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// A tree path's component, as ZooKeeper accepts it: any Unicode but
/// control characters (ZooKeeper's `\u0001`–`\u001f`, `\u007f`–`\u009f`),
/// private-use and special code points (`\ue000`–`\uf8ff`,
/// `\ufff0`–`\uffff`), and no `.`/`..` component. Lock and election names
/// keep the narrower set above: they appear in URLs, metrics and logs.
fn node_component_is_valid(component: &str) -> bool {
    !component.is_empty()
        && component != "."
        && component != ".."
        && component.chars().all(|c| {
            !c.is_control() && !('\u{e000}'..='\u{f8ff}').contains(&c) && c < '\u{fff0}'
                || c > '\u{ffff}'
        })
}

fn check_components(text: &str, what: &str, original: &str) -> Result<(), CoreError> {
    match text.split('/').find(|c| !component_is_valid(c)) {
        None => Ok(()),
        Some(bad) => Err(CoreError::BadName {
            name: original.to_string(),
            reason: format!(
                "{what} component {bad:?} is invalid: components are non-empty, not '.' or '..', and use only [A-Za-z0-9._:-]"
            ),
        }),
    }
}

/// Checks a lock or election name: 1–256 bytes of `[A-Za-z0-9._:-]` with
/// `/` separating non-empty components, no `.`/`..` component, no leading
/// or trailing `/`.
pub fn validate_lock_name(name: &str) -> Result<(), CoreError> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(CoreError::BadName {
            name: name.to_string(),
            reason: format!("must be 1 to {MAX_NAME_LEN} bytes long"),
        });
    }
    check_components(name, "name", name)
}

/// Checks a canonical node path such as `/config/db`. The root itself is
/// valid here; callers that write reject it separately.
pub fn validate_node_path(path: &str) -> Result<(), CoreError> {
    if path == "/" {
        return Ok(());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(CoreError::BadName {
            name: path.to_string(),
            reason: "a node path must start with '/'".to_string(),
        });
    };
    if path.len() > MAX_PATH_LEN {
        return Err(CoreError::BadName {
            name: path.to_string(),
            reason: format!("must be at most {MAX_PATH_LEN} bytes long"),
        });
    }
    match rest.split('/').find(|c| !node_component_is_valid(c)) {
        None => Ok(()),
        Some(bad) => Err(CoreError::BadName {
            name: path.to_string(),
            reason: format!(
                "path component {bad:?} is invalid: components are non-empty, not '.' or '..', \
                 and contain no control or private-use characters"
            ),
        }),
    }
}

/// True when `path` is a reserved queue prefix or lies below one.
pub fn is_reserved(path: &str) -> bool {
    [
        LOCKS_PREFIX,
        ELECTIONS_PREFIX,
        RWLOCKS_PREFIX,
        SEMAPHORES_PREFIX,
    ]
    .iter()
    .any(|prefix| {
        path == *prefix
            || path
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// The parent of a canonical path (`/a/b` → `/a`, `/a` → `/`).
pub fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The last component of a canonical path.
pub fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `path` followed by a zero-padded sequence number.
pub fn with_sequence(path: &str, seq: u64) -> String {
    format!("{path}{seq:0width$}", width = SEQUENCE_DIGITS)
}

/// The path to propose for a sequential create the client asked for at
/// `path`. The state machine names the node `<path>-<counter>`, while
/// ZooKeeper users write the separator themselves (`/queue/item-` names
/// `/queue/item-0000000000` there), so one trailing `-` is dropped here
/// rather than doubled. It is done before proposing, not in the state
/// machine, so log entries written by earlier versions replay to the names
/// they had (docs/api.md, "Nodes"). A last component that is only `-`
/// keeps it: dropping it would leave no name.
pub fn sequential_request_path(path: &str) -> &str {
    match path.strip_suffix('-') {
        Some(base) if !base.ends_with('/') => base,
        _ => path,
    }
}

/// Joins a parent and a child name.
pub fn join(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

/// Proper ancestors of a canonical path, outermost first, root excluded
/// (`/a/b/c` → `/a`, `/a/b`).
pub fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/')
        .map(|(i, _)| i)
        .filter(|&i| i > 0)
        .map(move |i| &path[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_names() {
        for good in ["a", "orders/42", "a.b_c:d-e/f", &"x".repeat(256)] {
            assert!(validate_lock_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "a//b",
            ".",
            "a/../b",
            "a/./b",
            "sp ace",
            "é",
            &"x".repeat(257),
        ] {
            assert!(validate_lock_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn node_paths() {
        for good in [
            "/",
            "/a",
            "/a/b-1",
            "/locks/x",
            "/a b",
            "/_c_9f__lock__0000000001",
            "/é/日本",
            "/a/.b",
            "/x\u{10000}",
        ] {
            assert!(validate_node_path(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "a",
            "/a/",
            "//a",
            "/a/..",
            "/a/.",
            "/a\u{0}",
            "/a\nb",
            "/a\u{7f}",
            "/a\u{9f}",
            "/a\u{e000}",
            "/a\u{fff0}",
        ] {
            assert!(validate_node_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn reserved_prefixes() {
        assert!(is_reserved("/locks"));
        assert!(is_reserved("/locks/a"));
        assert!(is_reserved("/elections/a/b"));
        assert!(is_reserved("/rwlocks/a"));
        assert!(is_reserved("/semaphores/a/b"));
        assert!(!is_reserved("/lockset"));
        assert!(!is_reserved("/a/locks"));
    }

    #[test]
    fn path_helpers() {
        assert_eq!(parent_of("/a/b"), "/a");
        assert_eq!(parent_of("/a"), "/");
        assert_eq!(base_name("/a/b"), "b");
        assert_eq!(with_sequence("/q/lock-", 42), "/q/lock-0000000042");
        assert_eq!(
            with_sequence("/q/n-", u64::MAX),
            "/q/n-18446744073709551615"
        );
        assert_eq!(sequential_request_path("/queue/item-"), "/queue/item");
        assert_eq!(sequential_request_path("/queue/item"), "/queue/item");
        assert_eq!(sequential_request_path("/queue/item--"), "/queue/item-");
        assert_eq!(sequential_request_path("/queue/-"), "/queue/-");
        assert_eq!(sequential_request_path("/-"), "/-");
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
        assert_eq!(ancestors("/a/b/c").collect::<Vec<_>>(), ["/a", "/a/b"]);
        assert_eq!(ancestors("/a").count(), 0);
    }
}
