import raftlock

# Endpoints: $RAFTLOCK_ENDPOINTS, else `raftlock up`'s 127.0.0.1:7001-7003.
with raftlock.Client(timeout=5) as client:
    with client.lock("orders/42", timeout=5) as guard:
        print("holding orders/42 with fencing token", guard.fencing_token)
        # Pass the token to storage; stop at once if guard.lost is set.
        print("still ours:", client.fencing_check("orders/42", guard.fencing_token).valid)
    print("released; holder now:", client.lock_state("orders/42").holder)
