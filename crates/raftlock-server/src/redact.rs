//! What a caller sees of the contract's views: the session ids of another
//! principal's holders, waiters and leaders are hidden (docs/api.md,
//! "Authentication"). One rule, applied entry by entry to every view.

use raftlock_api::election::{ElectionLine, ElectionView, LeaderView};
use raftlock_api::lock::{Holder, LockBody, LockLine, Waiter};
use raftlock_api::shared::{SharedHolder, SharedLine, SharedQueue, SharedWaiter};

use crate::auth::Caller;

/// A view, or part of one, as `caller` may see it.
pub(crate) trait Redact: Sized {
    /// The view with every session id `caller` may not see removed.
    fn redact(self, caller: &Caller) -> Self;
}

/// An entry that names a session and the principal that opened it.
macro_rules! session_entry {
    ($($entry:ty),*) => {$(
        impl Redact for $entry {
            fn redact(mut self, caller: &Caller) -> Self {
                self.session_id = caller
                    .visibility(self.principal.as_deref())
                    .redact(self.session_id);
                self
            }
        }
    )*};
}

session_entry!(Holder, Waiter, SharedHolder, SharedWaiter, LeaderView);

/// A view made of parts: each named field redacted.
macro_rules! view {
    ($($view:ty: $($field:ident),+;)*) => {$(
        impl Redact for $view {
            fn redact(mut self, caller: &Caller) -> Self {
                $(self.$field = self.$field.redact(caller);)+
                self
            }
        }
    )*};
}

view! {
    LockBody: holder, waiters;
    LockLine: holder;
    ElectionView: leader;
    ElectionLine: leader;
    SharedQueue: holders, waiters;
    SharedLine: holders;
}

impl<T: Redact> Redact for Option<T> {
    fn redact(self, caller: &Caller) -> Self {
        self.map(|entry| entry.redact(caller))
    }
}

impl<T: Redact> Redact for Vec<T> {
    fn redact(self, caller: &Caller) -> Self {
        self.into_iter().map(|entry| entry.redact(caller)).collect()
    }
}
