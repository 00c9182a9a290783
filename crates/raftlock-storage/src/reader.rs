//! The read-only log handle openraft gives to its replication tasks.

use std::fmt::Debug;
use std::marker::PhantomData;
use std::ops::RangeBounds;

use openraft::{
    ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader, RaftTypeConfig, StorageError,
};

use crate::segment::SegmentLog;

/// Reads log entries concurrently with the store's writes (the segment
/// files are read with `pread`, the index behind a read lock). Cheap to
/// clone.
pub struct SledLogReader<C: RaftTypeConfig> {
    log: SegmentLog<C::NodeId>,
    _config: PhantomData<C>,
}

impl<C: RaftTypeConfig> SledLogReader<C> {
    pub(crate) fn new(log: SegmentLog<C::NodeId>) -> Self {
        Self {
            log,
            _config: PhantomData,
        }
    }
}

impl<C: RaftTypeConfig> Clone for SledLogReader<C> {
    fn clone(&self) -> Self {
        Self::new(self.log.clone())
    }
}

impl<C: RaftTypeConfig> RaftLogReader<C> for SledLogReader<C> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        self.log
            .range::<C::Entry>(range)
            .map_err(|e| e.into_storage(ErrorSubject::Logs, ErrorVerb::Read))
    }
}
