//! A member whose log disk fails or fills up answers `503` with a code
//! naming the cause (docs/api.md: `disk_full`, `storage_failed`), on its
//! writes and on `/v1/health`; the rest of the cluster serves on. Faults
//! are injected at the durability barrier (`Node::fail_log_sync*`).

use crate::common::{eventually, TestCluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_with_a_full_or_failed_disk_answers_503_naming_the_cause() {
    let cluster = TestCluster::start().await;
    let leader = cluster.leader().await;
    let mut followers = (0..3).filter(|i| *i != leader);
    let (full, failed) = (
        followers.next().expect("a follower"),
        followers.next().expect("another follower"),
    );
    let session = cluster.open_session(leader, "disk-faults").await;
    cluster
        .acquire(leader, "held", &session, 1_000)
        .await
        .expect(200, "acquire before the faults");

    // One fault at a time: two failed members of three would leave no
    // majority for the write that makes the second one notice.
    cluster.node(full).fail_log_sync_out_of_space();
    cluster
        .acquire(leader, "first", &session, 1_000)
        .await
        .expect(200, "the leader and one follower are a majority");
    eventually("the full member to notice", || async {
        cluster.node(full).check_storage().is_err()
    })
    .await;
    cluster
        .acquire(full, "on-the-full-one", &session, 1_000)
        .await
        .expect_error(503, "disk_full", "a write on the full member");
    cluster.get(full, "/v1/health").await.expect_error(
        503,
        "disk_full",
        "health of the full member",
    );
    let other = cluster.open_session(leader, "other").await;
    cluster
        .acquire(leader, "held", &other, 0)
        .await
        .expect_error(409, "lock_held", "the lock held across the fault");

    cluster.node(failed).fail_log_sync();
    // No majority is left for writes now; a write only makes the barrier run.
    let _ = cluster.acquire(leader, "second", &session, 0).await;
    eventually("the failed member to notice", || async {
        cluster.node(failed).check_storage().is_err()
    })
    .await;
    cluster
        .acquire(failed, "on-the-failed-one", &session, 0)
        .await
        .expect_error(503, "storage_failed", "a write on the failed member");
    cluster.shutdown().await;
}
