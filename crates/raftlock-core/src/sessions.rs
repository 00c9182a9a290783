//! Opening and ending sessions.

use crate::command::{Effects, Response};
use crate::error::CoreError;
use crate::state::{Outcome, StateMachine};
use crate::types::{Session, SessionId};

impl StateMachine {
    pub(crate) fn open_session(
        &mut self,
        id: SessionId,
        principal: Option<&str>,
        owner: &str,
        ttl_ms: u64,
    ) -> Result<Outcome, CoreError> {
        if ttl_ms == 0 {
            return Err(CoreError::Invalid("a session TTL must be positive".into()));
        }
        let opened = Response::SessionOpened { id, ttl_ms };
        if let Some(existing) = self.sessions.get(&id) {
            // A retried proposal: same id and parameters is the same open.
            let same = *existing.owner == *owner
                && existing.ttl_ms == ttl_ms
                && existing.principal.as_deref() == principal;
            return if same {
                Ok(Outcome::unchanged(opened))
            } else {
                Err(CoreError::SessionConflict(id))
            };
        }
        self.sessions.insert(
            id,
            Session {
                owner: owner.into(),
                ttl_ms,
                nodes: Default::default(),
                checkpoint_remaining_ms: None,
                principal: principal.map(Into::into),
            },
        );
        Ok(Outcome::changed(opened))
    }

    /// Close and expire end a session the same way: every node it owns is
    /// deleted (in path order, so replicas agree), then the session. A
    /// held lock with a lock-delay is held off instead (`lock_delay.rs`).
    pub(crate) fn end_session(
        &mut self,
        id: SessionId,
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        let owned: Vec<String> = self
            .require_session(id)?
            .nodes
            .iter()
            .map(|p| p.to_string())
            .collect();
        let mut deleted = Vec::with_capacity(owned.len());
        for path in owned {
            if !self.hold_off(&path, revision, effects) {
                self.remove_node(&path, revision, effects);
                deleted.push(path);
            }
        }
        self.kv.end_lease(id, revision);
        self.sessions.remove(&id);
        effects.ended_sessions.push(id);
        Ok(Outcome::changed(Response::SessionEnded { id, deleted }))
    }

    /// Sets (`Some`) or clears (`None`) lease checkpoints. Ids that no
    /// longer exist are skipped: the leader proposed them before an
    /// expiry or close that committed first.
    pub(crate) fn checkpoint_sessions(
        &mut self,
        updates: impl Iterator<Item = (SessionId, Option<u64>)>,
    ) -> Result<Outcome, CoreError> {
        let mut count = 0;
        for (id, remaining) in updates {
            if let Some(session) = self.sessions.get_mut(&id) {
                if session.checkpoint_remaining_ms != remaining {
                    session.checkpoint_remaining_ms = remaining;
                    count += 1;
                }
            }
        }
        let response = Response::SessionsCheckpointed { count };
        Ok(if count > 0 {
            Outcome::changed(response)
        } else {
            Outcome::unchanged(response)
        })
    }
}
