//! Overload control: everything that keeps a member answering when more
//! is asked of it than it can do (docs/overload.md).
//!
//! - [`connection`]: the accept loop, header and body read deadlines;
//! - [`overflow`]: the connection cap, and the `503 overloaded` written to
//!   a connection past it;
//! - [`shedding`]: a lower cap while the member's runtime falls behind;
//! - [`admission`]: the requests-in-flight limit and its queue;
//! - [`limits`]: the cluster-protecting limits of sessions and waiters.

pub(crate) mod admission;
pub(crate) mod connection;
pub(crate) mod limits;
pub(crate) mod overflow;
pub(crate) mod shedding;
