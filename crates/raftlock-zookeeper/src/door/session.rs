//! ZooKeeper sessions are raftlock sessions (ADR 0018). A ZooKeeper
//! session id is an `i64` and its password 16 bytes; a raftlock session id
//! is 128 random bits. The password *is* the raftlock id, and the
//! ZooKeeper id is derived from it, so every member maps them the same way
//! with no table of its own: a client that reconnects to another member
//! presents both, and that member checks the id matches the password and
//! that the session is open in the replicated state.

use raftlock_core::SessionId;

/// The ZooKeeper session id of a raftlock session: its upper 64 bits,
/// made positive and odd so it is never 0 (which means "no session" on the
/// wire and "persistent" in a stat's `ephemeralOwner`).
pub fn zk_session_id(id: SessionId) -> i64 {
    let upper = (id.0 >> 64) as u64;
    ((upper & i64::MAX as u64) | 1) as i64
}

/// The password handed to the client: the raftlock id, big-endian.
pub fn password(id: SessionId) -> Vec<u8> {
    id.0.to_be_bytes().to_vec()
}

/// The raftlock session a reconnecting client names, if its id and
/// password agree (whether it is still open is for the state to say).
pub fn from_credentials(session_id: i64, passwd: &[u8]) -> Option<SessionId> {
    let bytes: [u8; 16] = passwd.try_into().ok()?;
    let id = SessionId(u128::from_be_bytes(bytes));
    (zk_session_id(id) == session_id).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_passwords_round_trip_and_never_collide_with_zero() {
        for raw in [
            0u128,
            1,
            u128::MAX,
            0x8000_0000_0000_0000_0000_0000_0000_0000,
        ] {
            let id = SessionId(raw);
            let zk = zk_session_id(id);
            assert!(zk > 0, "{raw:x} gave {zk}");
            assert_eq!(from_credentials(zk, &password(id)), Some(id));
        }
        let id = SessionId(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        assert_eq!(zk_session_id(id), 0x0123_4567_89ab_cdef);
        let mut wrong = password(id);
        wrong[15] ^= 1;
        // Another password names another (unopened) session, never this one.
        assert_ne!(from_credentials(zk_session_id(id), &wrong), Some(id));
        assert_eq!(from_credentials(zk_session_id(id) + 2, &password(id)), None);
        assert_eq!(from_credentials(zk_session_id(id), &[0; 15]), None);
    }
}
