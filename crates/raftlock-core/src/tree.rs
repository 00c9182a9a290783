//! Generic node writes: create, update (with compare-and-set), delete.
//!
//! The lock recipe's prefixes (`/locks`, `/elections`) are read-only here:
//! a queue's nodes change only through acquire/release, so no generic
//! write can orphan or reorder a waiter.

use std::ops::Bound;

use crate::command::{Effects, Response};
use crate::error::CoreError;
use crate::path::{ancestors, is_reserved, parent_of, validate_node_path, with_sequence};
use crate::state::{Outcome, StateMachine};
use crate::types::SessionId;

impl StateMachine {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn put(
        &mut self,
        path: &str,
        data: &[u8],
        session: Option<SessionId>,
        sequential: bool,
        expected_version: Option<u64>,
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        if let Some(id) = session {
            self.require_session(id)?;
        }
        check_writable(path)?;
        if sequential {
            if expected_version.is_some() {
                return Err(CoreError::Invalid(
                    "expected_version cannot be combined with a sequential create".into(),
                ));
            }
            let (path, next) = self.next_sequential_path(path)?;
            let outcome = self.create(path.clone(), data, session, revision, effects)?;
            // `create` made the parent if it was missing, so it exists now.
            if let Some(parent) = self.nodes.get_mut(parent_of(&path)) {
                parent.next_child_sequence = next;
            }
            return Ok(outcome);
        }
        let now = self.clock_ms;
        if let Some(node) = self.nodes.get_mut(path) {
            check_version(path, expected_version, node.version)?;
            node.data = data.into();
            node.version += 1;
            node.mod_revision = revision;
            node.meta.modified_ms = now;
            effects.written.push(path.to_string());
            return Ok(Outcome::changed(Response::Put {
                path: path.to_string(),
                created: false,
                version: node.version,
                create_revision: node.create_revision,
                mod_revision: revision,
                ephemeral_owner: node.ephemeral_owner,
            }));
        }
        match expected_version {
            None | Some(0) => self.create(path.to_string(), data, session, revision, effects),
            Some(_) => Err(CoreError::NotFound(path.to_string())),
        }
    }

    pub(crate) fn delete(
        &mut self,
        path: &str,
        expected_version: Option<u64>,
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        check_writable(path)?;
        let node = self
            .nodes
            .get(path)
            .ok_or_else(|| CoreError::NotFound(path.to_string()))?;
        check_version(path, expected_version, node.version)?;
        if self.has_children(path) {
            return Err(CoreError::NotEmpty(path.to_string()));
        }
        self.remove_node(path, revision, effects);
        Ok(Outcome::changed(Response::Deleted {
            path: path.to_string(),
        }))
    }

    /// Creates `path` and any missing ancestors (as empty persistent
    /// nodes), after checking no ancestor is ephemeral.
    fn create(
        &mut self,
        path: String,
        data: &[u8],
        owner: Option<SessionId>,
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        if let Some(ephemeral) = ancestors(&path).find(|a| {
            self.nodes
                .get(*a)
                .is_some_and(|n| n.ephemeral_owner.is_some())
        }) {
            return Err(CoreError::EphemeralParent(ephemeral.to_string()));
        }
        let missing: Vec<String> = ancestors(&path)
            .filter(|a| !self.nodes.contains_key(*a))
            .map(str::to_string)
            .collect();
        for ancestor in missing {
            self.insert_node(ancestor, &[], None, revision, effects);
        }
        self.insert_node(path.clone(), data, owner, revision, effects);
        Ok(Outcome::changed(Response::Put {
            path,
            created: true,
            version: 1,
            create_revision: revision,
            mod_revision: revision,
            ephemeral_owner: owner,
        }))
    }

    /// The next free `path-NNNNNNNNNN` under the parent's counter, and the
    /// counter value that follows it. Skips names a plain create took.
    fn next_sequential_path(&self, path: &str) -> Result<(String, u64), CoreError> {
        let parent = parent_of(path);
        let mut seq = self.nodes.get(parent).map_or(0, |p| p.next_child_sequence);
        let prefix = format!("{path}-");
        loop {
            let candidate = with_sequence(&prefix, seq);
            validate_node_path(&candidate)?;
            let next = seq
                .checked_add(1)
                .ok_or_else(|| CoreError::SequenceExhausted(parent.to_string()))?;
            if !self.nodes.contains_key(candidate.as_str()) {
                return Ok((candidate, next));
            }
            seq = next;
        }
    }

    pub(crate) fn has_children(&self, path: &str) -> bool {
        let prefix = format!("{path}/");
        self.nodes
            .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
            .next()
            .is_some_and(|(k, _)| k.starts_with(&prefix))
    }
}

pub(crate) fn check_writable(path: &str) -> Result<(), CoreError> {
    validate_node_path(path)?;
    if path == "/" {
        return Err(CoreError::Invalid("the root node cannot be written".into()));
    }
    if is_reserved(path) {
        return Err(CoreError::Invalid(format!(
            "{path} is inside a reserved prefix (/locks, /elections, /rwlocks, /semaphores): \
             use the lock, election, read-write lock and semaphore API"
        )));
    }
    Ok(())
}

/// Refuses a compare-and-set whose expected version is not the node's.
pub(crate) fn check_version(
    path: &str,
    expected: Option<u64>,
    actual: u64,
) -> Result<(), CoreError> {
    match expected {
        Some(expected) if expected != actual => Err(CoreError::VersionMismatch {
            path: path.to_string(),
            expected,
            actual,
        }),
        _ => Ok(()),
    }
}
