"""The real kazoo 2.11 client over TLS with a bearer token as its digest.

Run by tests/kazoo.rs with the connect string of a three-member cluster
whose doors serve TLS and know one token, `jobs`, which may read and
write /jobs and below; argv: hosts, the CA file, the token. Checks that a
client without credentials is refused (NoAuthError), that a wrong token
fails authentication (AuthFailedError), and that kazoo's Lock recipe
works for authenticated clients inside the grant.
"""

import sys
import threading
import traceback

from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError, NoAuthError
from kazoo.recipe.lock import Lock

HOSTS, CA, TOKEN = sys.argv[1], sys.argv[2], sys.argv[3]
WAIT = 20.0


def client(auth=None):
    c = KazooClient(
        hosts=HOSTS,
        timeout=10.0,
        use_ssl=True,
        verify_certs=True,
        ca=CA,
        auth_data=auth,
    )
    c.start(timeout=WAIT)
    return c


def anonymous_is_refused():
    c = client()
    try:
        c.get("/jobs/x")
        raise AssertionError("an unauthenticated read was served")
    except NoAuthError:
        pass
    finally:
        c.stop()


def a_wrong_token_fails():
    c = client()
    try:
        c.add_auth("digest", "jobs:not-" + TOKEN)
        raise AssertionError("a wrong token was accepted")
    except AuthFailedError:
        pass
    finally:
        c.stop()


def outside_the_grant_is_refused(zk):
    try:
        zk.create("/other", b"")
        raise AssertionError("a create outside the grant was served")
    except NoAuthError:
        pass


def locks(n_clients=3, rounds=3):
    clients = [client([("digest", "jobs:" + TOKEN)]) for _ in range(n_clients)]
    guard = threading.Lock()
    inside = []
    errors = []

    def work(c, name):
        try:
            for _ in range(rounds):
                lock = Lock(c, "/jobs/lock", name)
                assert lock.acquire(timeout=WAIT), name + " got no lock"
                with guard:
                    inside.append(name)
                    assert len(inside) == 1, "two holders: %s" % inside
                with guard:
                    inside.remove(name)
                lock.release()
        except Exception as e:  # reported below, with the thread's name
            errors.append("%s: %r\n%s" % (name, e, traceback.format_exc()))

    threads = [threading.Thread(target=work, args=(c, "c%d" % i)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * rounds)
    assert not errors, errors
    outside_the_grant_is_refused(clients[0])
    clients[0].ensure_path("/jobs/app")
    clients[0].set("/jobs/app", b"v")
    data, _ = clients[1].get("/jobs/app")
    assert data == b"v", data
    for c in clients:
        c.stop()


def main():
    anonymous_is_refused()
    a_wrong_token_fails()
    locks()
    print("kazoo secure scenario: ok")


if __name__ == "__main__":
    main()
