// Apache Curator's recipes, unmodified, against the members named on the
// command line (crates/raftlock-zookeeper/tests/curator.rs runs it against
// the ZooKeeper door of a three-member cluster). Each scenario opens
// several clients spread over the members and checks its recipe's promise.
//
// Member faults are asked of the controller on stdout ("CONTROL stop 2")
// and wait for its "done" on stdin; without a controller ("--no-faults")
// they are skipped, so the same program can be run against a real
// ZooKeeper to check the checks themselves.
//
// Prints "curator <scenario>: ok (<ms> ms)" per scenario and
// "curator suite: N passed, M failed" last; exits 1 if any failed.

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.nodes.PersistentNode;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;
import org.apache.curator.utils.ZookeeperFactory;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.client.HostProvider;
import org.apache.zookeeper.client.ZKClientConfig;

public final class CuratorSuite {
    private static List<InetSocketAddress> members;
    private static String connectString;
    private static boolean faults = true;
    private static final BufferedReader CONTROLLER =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    private static final long DEADLINE_MS = 30_000;

    /** A recipe's promise that did not hold. */
    static final class Broken extends RuntimeException {
        Broken(String what) {
            super(what);
        }
    }

    static void check(boolean holds, String what) {
        if (!holds) {
            throw new Broken(what);
        }
    }

    /** Polls `condition` until it holds or the deadline passes. */
    static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long end = System.currentTimeMillis() + DEADLINE_MS;
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() > end) {
                throw new Broken("timed out waiting for: " + what);
            }
            Thread.sleep(20);
        }
    }

    /** Asks the controller to stop or start a member (1-based). */
    static synchronized void control(String what) throws IOException {
        if (!faults) {
            return;
        }
        System.out.println("CONTROL " + what);
        System.out.flush();
        String answer = CONTROLLER.readLine();
        if (!"done".equals(answer)) {
            throw new IllegalStateException("controller answered " + answer + " to " + what);
        }
    }

    /**
     * Tries the members from `home` on, in order: ZooKeeper's own provider
     * shuffles them, and a scenario needs to know which client is where.
     */
    static final class HomeFirst implements HostProvider {
        private final List<InetSocketAddress> order = new ArrayList<>();
        private int next = 0;
        private int triedSinceConnected = 0;

        HomeFirst(int home) {
            for (int i = 0; i < members.size(); i++) {
                order.add(members.get((home + i) % members.size()));
            }
        }

        @Override
        public int size() {
            return order.size();
        }

        @Override
        public synchronized InetSocketAddress next(long spinDelay) {
            // As ZooKeeper's provider: a pause once every member was tried.
            if (triedSinceConnected >= order.size() && spinDelay > 0) {
                try {
                    Thread.sleep(spinDelay);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                triedSinceConnected = 0;
            }
            InetSocketAddress addr = order.get(next);
            next = (next + 1) % order.size();
            triedSinceConnected++;
            return addr;
        }

        @Override
        public synchronized void onConnected() {
            triedSinceConnected = 0;
        }

        @Override
        public boolean updateServerList(
                Collection<InetSocketAddress> servers, InetSocketAddress current) {
            return false;
        }
    }

    static final class HomeFirstFactory implements ZookeeperFactory {
        private final int home;

        HomeFirstFactory(int home) {
            this.home = home;
        }

        @Override
        public ZooKeeper newZooKeeper(
                String connect, int sessionTimeout, Watcher watcher, boolean canBeReadOnly)
                throws Exception {
            return new ZooKeeper(
                    connect, sessionTimeout, watcher, canBeReadOnly, new HomeFirst(home));
        }

        @Override
        public ZooKeeper newZooKeeper(
                String connect,
                int sessionTimeout,
                Watcher watcher,
                boolean canBeReadOnly,
                ZKClientConfig config)
                throws Exception {
            return new ZooKeeper(
                    connect, sessionTimeout, watcher, canBeReadOnly, new HomeFirst(home), config);
        }
    }

    /** A started client whose first member is `home` (0-based). */
    static CuratorFramework client(int home) throws InterruptedException {
        CuratorFramework c =
                CuratorFrameworkFactory.builder()
                        .connectString(connectString)
                        .sessionTimeoutMs(15_000)
                        .connectionTimeoutMs(5_000)
                        .retryPolicy(new ExponentialBackoffRetry(50, 29, 500))
                        .zookeeperFactory(new HomeFirstFactory(home))
                        .build();
        c.start();
        check(c.blockUntilConnected(20, TimeUnit.SECONDS), "client connected to member " + (home + 1));
        return c;
    }

    /** `n` clients, the i-th starting at member i mod 3. */
    static List<CuratorFramework> clients(int n) throws InterruptedException {
        List<CuratorFramework> cs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            cs.add(client(i % members.size()));
        }
        return cs;
    }

    static void closeAll(List<CuratorFramework> cs) {
        for (CuratorFramework c : cs) {
            c.close();
        }
    }

    /** Runs the tasks at once; rethrows the first failure. */
    static void runAll(List<Callable<Void>> tasks, Runnable whileRunning) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(tasks.size());
        try {
            List<Future<Void>> futures = new ArrayList<>();
            for (Callable<Void> task : tasks) {
                futures.add(pool.submit(task));
            }
            whileRunning.run();
            for (Future<Void> f : futures) {
                try {
                    f.get(60, TimeUnit.SECONDS);
                } catch (java.util.concurrent.ExecutionException e) {
                    if (e.getCause() instanceof Exception) {
                        throw (Exception) e.getCause();
                    }
                    throw e;
                }
            }
        } finally {
            pool.shutdownNow();
        }
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String text(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    /**
     * An unguarded read-modify-write of a counter node: only mutual
     * exclusion keeps every increment (a lost one shows in the total).
     */
    static void unguardedIncrement(CuratorFramework c, String path) throws Exception {
        long value = Long.parseLong(text(c.getData().forPath(path)));
        c.setData().forPath(path, bytes(Long.toString(value + 1)));
    }

    static long counterValue(CuratorFramework c, String path) throws Exception {
        return Long.parseLong(text(c.getData().forPath(path)));
    }

    // ---------------------------------------------------------------------

    /** InterProcessMutex: no two holders at once, no lost update, with a
     * member stopped mid-run; member 2's clients move on to another. */
    static void mutex() throws Exception {
        List<CuratorFramework> cs = clients(6);
        String counter = "/curator/mutex-counter";
        cs.get(0).create().creatingParentsIfNeeded().forPath(counter, bytes("0"));
        int rounds = 8;
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger granted = new AtomicInteger();
        AtomicReference<String> overlap = new AtomicReference<>();
        List<Callable<Void>> tasks = new ArrayList<>();
        for (CuratorFramework c : cs) {
            tasks.add(
                    () -> {
                        InterProcessMutex lock = new InterProcessMutex(c, "/curator/mutex");
                        for (int r = 0; r < rounds; r++) {
                            check(lock.acquire(45, TimeUnit.SECONDS), "mutex acquired in time");
                            try {
                                if (inside.incrementAndGet() != 1) {
                                    overlap.set("two holders at once");
                                }
                                unguardedIncrement(c, counter);
                                inside.decrementAndGet();
                            } finally {
                                lock.release();
                            }
                            granted.incrementAndGet();
                        }
                        return null;
                    });
        }
        try {
            runAll(
                    tasks,
                    () -> {
                        try {
                            await("a third of the grants", () -> granted.get() >= cs.size() * rounds / 3);
                            control("stop 2");
                        } catch (Exception e) {
                            throw new RuntimeException(e);
                        }
                    });
            check(overlap.get() == null, "mutex: " + overlap.get());
            check(granted.get() == cs.size() * rounds, "every grant: " + granted.get());
            long total = counterValue(cs.get(0), counter);
            check(total == cs.size() * rounds, "no lost update under the mutex: " + total);
        } finally {
            closeAll(cs);
            control("start 2");
        }
    }

    /** InterProcessReadWriteLock: a writer excludes readers and writers. */
    static void readWriteLock() throws Exception {
        List<CuratorFramework> cs = clients(5);
        AtomicInteger readers = new AtomicInteger();
        AtomicInteger writers = new AtomicInteger();
        AtomicInteger maxReaders = new AtomicInteger();
        AtomicReference<String> broken = new AtomicReference<>();
        String counter = "/curator/rw-counter";
        cs.get(0).create().creatingParentsIfNeeded().forPath(counter, bytes("0"));
        List<Callable<Void>> tasks = new ArrayList<>();
        for (int i = 0; i < cs.size(); i++) {
            CuratorFramework c = cs.get(i);
            boolean writer = i < 2;
            tasks.add(
                    () -> {
                        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(c, "/curator/rw");
                        for (int r = 0; r < 6; r++) {
                            if (writer) {
                                check(rw.writeLock().acquire(45, TimeUnit.SECONDS), "write lock in time");
                                try {
                                    if (writers.incrementAndGet() != 1 || readers.get() != 0) {
                                        broken.set("a writer beside another holder");
                                    }
                                    unguardedIncrement(c, counter);
                                    writers.decrementAndGet();
                                } finally {
                                    rw.writeLock().release();
                                }
                            } else {
                                check(rw.readLock().acquire(45, TimeUnit.SECONDS), "read lock in time");
                                try {
                                    int now = readers.incrementAndGet();
                                    maxReaders.accumulateAndGet(now, Math::max);
                                    if (writers.get() != 0) {
                                        broken.set("a reader beside a writer");
                                    }
                                    counterValue(c, counter);
                                    readers.decrementAndGet();
                                } finally {
                                    rw.readLock().release();
                                }
                            }
                        }
                        return null;
                    });
        }
        runAll(tasks, () -> {});
        check(broken.get() == null, "read-write lock: " + broken.get());
        long total = counterValue(cs.get(0), counter);
        check(total == 12, "no lost write under the write lock: " + total);
        closeAll(cs);
    }

    /** InterProcessSemaphoreV2: never more leases out than its limit. */
    static void semaphore() throws Exception {
        List<CuratorFramework> cs = clients(6);
        int limit = 2;
        AtomicInteger holders = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        List<Callable<Void>> tasks = new ArrayList<>();
        for (CuratorFramework c : cs) {
            tasks.add(
                    () -> {
                        InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(c, "/curator/sem", limit);
                        for (int r = 0; r < 5; r++) {
                            Lease lease = sem.acquire(45, TimeUnit.SECONDS);
                            check(lease != null, "a lease in time");
                            try {
                                most.accumulateAndGet(holders.incrementAndGet(), Math::max);
                                // A round trip while holding, so holders overlap.
                                c.checkExists().forPath("/curator/sem");
                                holders.decrementAndGet();
                            } finally {
                                sem.returnLease(lease);
                            }
                        }
                        return null;
                    });
        }
        runAll(tasks, () -> {});
        check(most.get() <= limit, "semaphore: " + most.get() + " leases out, limit " + limit);
        check(most.get() >= 1, "semaphore: leases were granted");
        closeAll(cs);
    }

    static List<String> leadersOf(List<LeaderLatch> latches) {
        List<String> out = new ArrayList<>();
        for (LeaderLatch l : latches) {
            if (l.hasLeadership()) {
                out.add(l.getId());
            }
        }
        return out;
    }

    /** Exactly one latch leads, and every latch names it as the leader. */
    static boolean oneAgreedLeader(List<LeaderLatch> latches) {
        List<String> leaders = leadersOf(latches);
        if (leaders.size() != 1) {
            return false;
        }
        try {
            for (LeaderLatch l : latches) {
                if (!l.getLeader().getId().equals(leaders.get(0))) {
                    return false;
                }
            }
        } catch (Exception e) {
            return false;
        }
        return true;
    }

    /** LeaderLatch: exactly one leader; the leader's member stopped, the
     * latches settle on one leader again; the leader leaves, another one. */
    static void leaderLatch() throws Exception {
        List<CuratorFramework> cs = clients(3);
        List<LeaderLatch> latches = new ArrayList<>();
        for (int i = 0; i < cs.size(); i++) {
            LeaderLatch l = new LeaderLatch(cs.get(i), "/curator/latch", "latch-" + i);
            l.start();
            latches.add(l);
        }
        await("one agreed leader", () -> oneAgreedLeader(latches));
        String first = leadersOf(latches).get(0);
        int firstIndex = Integer.parseInt(first.substring("latch-".length()));
        // The first leader's client started on member firstIndex + 1.
        int stopped = firstIndex + 1;
        control("stop " + stopped);
        try {
            leaderLatchAfterStop(cs, latches, firstIndex);
        } finally {
            for (LeaderLatch l : latches) {
                l.close();
            }
            closeAll(cs);
            control("start " + stopped);
        }
    }

    static void leaderLatchAfterStop(List<CuratorFramework> cs, List<LeaderLatch> latches, int firstIndex)
            throws Exception {
        for (int i = 0; i < cs.size(); i++) {
            if (i != firstIndex) {
                CuratorFramework c = cs.get(i);
                await("client on another member still connected", () -> c.getZookeeperClient().isConnected());
            }
        }
        await("one agreed leader after the stop", () -> oneAgreedLeader(latches));
        String second = leadersOf(latches).get(0);
        LeaderLatch leaving = latches.get(Integer.parseInt(second.substring("latch-".length())));
        leaving.close();
        latches.remove(leaving);
        await("one agreed leader after the leader left", () -> oneAgreedLeader(latches));
        check(!leadersOf(latches).get(0).equals(second), "a new leader after the leader left");
    }

    /** LeaderSelector: one leader at a time, taking turns with requeue. */
    static void leaderSelector() throws Exception {
        List<CuratorFramework> cs = clients(3);
        String counter = "/curator/selector-counter";
        cs.get(0).create().creatingParentsIfNeeded().forPath(counter, bytes("0"));
        AtomicInteger leading = new AtomicInteger();
        AtomicInteger terms = new AtomicInteger();
        AtomicReference<String> broken = new AtomicReference<>();
        int[] termsOf = new int[cs.size()];
        // Set once every selector led twice: later terms end at once, so
        // the count is final before the selectors close.
        java.util.concurrent.atomic.AtomicBoolean stopping = new java.util.concurrent.atomic.AtomicBoolean();
        List<LeaderSelector> selectors = new ArrayList<>();
        for (int i = 0; i < cs.size(); i++) {
            int me = i;
            CuratorFramework c = cs.get(i);
            LeaderSelector s =
                    new LeaderSelector(
                            c,
                            "/curator/selector",
                            new LeaderSelectorListenerAdapter() {
                                @Override
                                public void takeLeadership(CuratorFramework client) throws Exception {
                                    synchronized (stopping) {
                                        if (stopping.get()) {
                                            return;
                                        }
                                        if (leading.incrementAndGet() != 1) {
                                            broken.set("two leaders at once");
                                        }
                                    }
                                    unguardedIncrement(client, counter);
                                    synchronized (termsOf) {
                                        termsOf[me]++;
                                    }
                                    terms.incrementAndGet();
                                    leading.decrementAndGet();
                                }
                            });
            s.autoRequeue();
            selectors.add(s);
        }
        for (LeaderSelector s : selectors) {
            s.start();
        }
        await(
                "every selector led twice",
                () -> {
                    synchronized (termsOf) {
                        for (int t : termsOf) {
                            if (t < 2) {
                                return false;
                            }
                        }
                        return true;
                    }
                });
        synchronized (stopping) {
            stopping.set(true);
        }
        await("the last term over", () -> leading.get() == 0);
        for (LeaderSelector s : selectors) {
            s.close();
        }
        check(broken.get() == null, "leader selector: " + broken.get());
        long total = counterValue(cs.get(0), counter);
        check(total == terms.get(), "one leader at a time kept every increment: " + total + " of " + terms.get());
        closeAll(cs);
    }

    /** DistributedAtomicLong: concurrent increments reach the total. */
    static void atomicLong() throws Exception {
        List<CuratorFramework> cs = clients(6);
        int each = 12;
        List<Callable<Void>> tasks = new ArrayList<>();
        for (CuratorFramework c : cs) {
            tasks.add(
                    () -> {
                        DistributedAtomicLong n =
                                new DistributedAtomicLong(c, "/curator/atomic", new RetryNTimes(50, 5));
                        int done = 0;
                        while (done < each) {
                            AtomicValue<Long> r = n.increment();
                            if (r.succeeded()) {
                                check(r.postValue() == r.preValue() + 1, "an increment adds one");
                                done++;
                            }
                        }
                        return null;
                    });
        }
        runAll(tasks, () -> {});
        AtomicValue<Long> v =
                new DistributedAtomicLong(cs.get(1), "/curator/atomic", new RetryNTimes(3, 10)).get();
        check(v.succeeded() && v.postValue() == (long) cs.size() * each, "atomic long total: " + v.postValue());
        closeAll(cs);
    }

    /** PersistentNode: an ephemeral node it keeps, created again when
     * another client deletes it, gone when it closes. */
    static void persistentNode() throws Exception {
        List<CuratorFramework> cs = clients(3);
        String path = "/curator/pn/node";
        cs.get(0).create().creatingParentsIfNeeded().forPath("/curator/pn");
        PersistentNode pn = new PersistentNode(cs.get(0), CreateMode.EPHEMERAL, false, path, bytes("v1"));
        pn.start();
        check(pn.waitForInitialCreate(20, TimeUnit.SECONDS), "persistent node created");
        CuratorFramework other = cs.get(1);
        check("v1".equals(text(other.getData().forPath(path))), "another member sees the node");
        long firstOwner = other.checkExists().forPath(path).getEphemeralOwner();
        check(firstOwner != 0, "the node is ephemeral");
        other.delete().forPath(path);
        await(
                "the node created again",
                () -> {
                    try {
                        return other.checkExists().forPath(path) != null;
                    } catch (Exception e) {
                        return false;
                    }
                });
        pn.setData(bytes("v2"));
        CuratorFramework third = cs.get(2);
        await(
                "the new data seen on a third member",
                () -> {
                    try {
                        return "v2".equals(text(third.getData().forPath(path)));
                    } catch (Exception e) {
                        return false;
                    }
                });
        pn.close();
        await(
                "the node gone after close",
                () -> {
                    try {
                        return third.checkExists().forPath(path) == null;
                    } catch (Exception e) {
                        return false;
                    }
                });
        closeAll(cs);
    }

    /** CuratorCache (addWatch, persistent recursive): the cache follows
     * creates, changes and deletes made by clients on other members, at
     * every depth. */
    static void curatorCache() throws Exception {
        List<CuratorFramework> cs = clients(3);
        String root = "/curator/cache";
        cs.get(0).create().creatingParentsIfNeeded().forPath(root, bytes("root"));
        cs.get(0).create().forPath(root + "/before", bytes("b"));
        CuratorCache cache = CuratorCache.build(cs.get(0), root);
        AtomicInteger creates = new AtomicInteger();
        AtomicInteger changes = new AtomicInteger();
        AtomicInteger deletes = new AtomicInteger();
        java.util.concurrent.CountDownLatch initialized = new java.util.concurrent.CountDownLatch(1);
        cache.listenable()
                .addListener(
                        CuratorCacheListener.builder()
                                .forCreates(n -> creates.incrementAndGet())
                                .forChanges((before, after) -> changes.incrementAndGet())
                                .forDeletes(n -> deletes.incrementAndGet())
                                .forInitialized(initialized::countDown)
                                .build());
        cache.start();
        check(initialized.await(20, TimeUnit.SECONDS), "cache initialized");
        check(cache.get(root + "/before").isPresent(), "cache holds what was there");
        int createsBefore = creates.get();
        CuratorFramework a = cs.get(1);
        CuratorFramework b = cs.get(2);
        a.create().forPath(root + "/x", bytes("1"));
        b.create().forPath(root + "/x/deep", bytes("d"));
        b.create().creatingParentsIfNeeded().forPath(root + "/y/z/deeper", bytes("dd"));
        a.setData().forPath(root + "/x", bytes("2"));
        b.setData().forPath(root, bytes("root2"));
        a.delete().forPath(root + "/before");
        Map<String, String> expected = new TreeMap<>();
        expected.put(root, "root2");
        expected.put(root + "/x", "2");
        expected.put(root + "/x/deep", "d");
        expected.put(root + "/y", "");
        expected.put(root + "/y/z", "");
        expected.put(root + "/y/z/deeper", "dd");
        await(
                "the cache shows every change",
                () -> {
                    Map<String, String> seen = new TreeMap<>();
                    cache.stream()
                            .forEach(
                                    (ChildData d) ->
                                            seen.put(d.getPath(), d.getData() == null ? "" : text(d.getData())));
                    return seen.equals(expected);
                });
        // The listeners run after the cache's own map changes.
        await(
                "create, change and delete events",
                () -> creates.get() - createsBefore >= 5 && changes.get() >= 2 && deletes.get() >= 1);
        cache.close();
        closeAll(cs);
    }

    // ---------------------------------------------------------------------

    interface Scenario {
        void run() throws Exception;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: CuratorSuite host:port,host:port,... [--no-faults] [scenario...]");
            System.exit(2);
        }
        connectString = args[0];
        members = new ArrayList<>();
        for (String hp : connectString.split(",")) {
            int colon = hp.lastIndexOf(':');
            members.add(new InetSocketAddress(hp.substring(0, colon), Integer.parseInt(hp.substring(colon + 1))));
        }
        List<String> only = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            if (args[i].equals("--no-faults")) {
                faults = false;
            } else {
                only.add(args[i]);
            }
        }
        Map<String, Scenario> scenarios = new java.util.LinkedHashMap<>();
        scenarios.put("mutex", CuratorSuite::mutex);
        scenarios.put("read-write-lock", CuratorSuite::readWriteLock);
        scenarios.put("semaphore", CuratorSuite::semaphore);
        scenarios.put("leader-latch", CuratorSuite::leaderLatch);
        scenarios.put("leader-selector", CuratorSuite::leaderSelector);
        scenarios.put("atomic-long", CuratorSuite::atomicLong);
        scenarios.put("persistent-node", CuratorSuite::persistentNode);
        scenarios.put("curator-cache", CuratorSuite::curatorCache);
        int passed = 0;
        int failed = 0;
        for (Map.Entry<String, Scenario> s : scenarios.entrySet()) {
            if (!only.isEmpty() && !only.contains(s.getKey())) {
                continue;
            }
            long start = System.currentTimeMillis();
            try {
                s.getValue().run();
                passed++;
                System.out.println("curator " + s.getKey() + ": ok (" + (System.currentTimeMillis() - start) + " ms)");
            } catch (Throwable t) {
                failed++;
                System.out.println("curator " + s.getKey() + ": FAILED: " + t);
                t.printStackTrace(System.out);
            }
            System.out.flush();
        }
        System.out.println("curator suite: " + passed + " passed, " + failed + " failed");
        System.out.flush();
        System.exit(failed == 0 ? 0 : 1);
    }
}
