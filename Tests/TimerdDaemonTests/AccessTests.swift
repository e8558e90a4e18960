import Synchronization
import Testing
import TimerdConfig
import TimerdCore
import TimerdProtocol
import TimerdSystem
@testable import TimerdDaemon

/// A fixed account table: alice (1001, group 1001, also in ops 2000), bob (1002), and root.
struct FakeAccounts: AccountDirectory {
    var users = [
        UserAccount(name: "root", uid: 0, gid: 0, home: "/root", shell: "/bin/sh"),
        UserAccount(name: "alice", uid: 1001, gid: 1001, home: "/home/alice", shell: "/bin/sh"),
        UserAccount(name: "bob", uid: 1002, gid: 1002, home: "/home/bob", shell: "/bin/sh"),
    ]
    var groups = [GroupAccount(name: "ops", gid: 2000, members: ["alice"]), GroupAccount(name: "bob", gid: 1002, members: [])]

    func user(uid: UInt32) throws(TimerdError) -> UserAccount? { users.first { $0.uid == uid } }
    func user(named name: String) throws(TimerdError) -> UserAccount? { users.first { $0.name == name } }
    func group(named name: String) throws(TimerdError) -> GroupAccount? { groups.first { $0.name == name } }
    func groups(of user: UserAccount) throws(TimerdError) -> [UInt32] {
        [user.gid] + groups.filter { $0.members.contains(user.name) && $0.gid != user.gid }.map(\.gid)
    }
}

@Suite struct AccessTests {
    let launcher = FakeLauncher()
    let sink = MemoryLogSink()
    let access: AccessControl
    let registry: Registry
    let clock = testClock()
    let alice = Client(uid: 1001, gid: 1001, pid: 10)
    let bob = Client(uid: 1002, gid: 1002, pid: 11)
    let root = Client(uid: 0, gid: 0, pid: 1)

    init() {
        var settings = AccessSettings()
        settings.userMaxJobs = 2
        settings.userMaxRunsPerMinute = 2
        settings.maxOutputMemory = 10
        access = AccessControl(settings)
        registry = Registry(launcher: launcher, log: Logger(sink: sink, minimum: .debug), maxRunning: 10,
                            baseEnvironment: [KeyValue("PATH", "/sbin:/bin"), KeyValue("HOME", "/root"), KeyValue("LANG", "C")],
                            access: access, clock: clock)
    }

    @Test func onlyTheOwnerAndRootChangeAJob() async throws {
        try await registry.add(spec("a", ["every": "1h", "command": "secret", "env": "K=v", "tag": "t"]), origin: .runtime, owner: alice)
        let name = try JobName("a")
        for change in [{ try await registry.cancel([name], by: bob) }, { try await registry.pause([name], by: bob) },
                       { try await registry.resume([name], mode: .now, by: bob) }, { _ = try await registry.runNow(name, by: bob) }] {
            await #expect(throws: TimerdError(.permissionDenied, "")) { try await change() }
        }
        #expect(await registry.jobNames(withTag: "t", changeableBy: bob).isEmpty)
        #expect(await registry.jobNames(withTag: "t", changeableBy: alice) == [name])
        #expect(await registry.jobNames(withTag: "t", changeableBy: root) == [name])
        try await registry.pause([name], by: alice)
        try await registry.resume([name], mode: .onSchedule, by: root)
        #expect(sink.all.joined(separator: "\n").contains("refused to change a, which belongs to uid 1001"))
    }

    @Test func otherUsersSeeARedactedJob() async throws {
        try await registry.add(spec("a", ["every": "1h", "command": "secret", "env": "K=v", "meta": "m=1", "cwd": "/srv", "tag": "t"]),
                               origin: .runtime, owner: alice)
        _ = try await registry.runNow(JobName("a"), by: alice)
        launcher.finish(0, .failed, exitCode: 3, output: "out")
        await settle(registry)
        let full = try await registry.show(JobName("a"), viewer: alice)
        #expect(!full.redacted && full.owner_uid == 1001 && full.last_output == "out" && full.options.contains("command=secret"))
        let hidden = try await registry.show(JobName("a"), viewer: bob)
        #expect(hidden.redacted && hidden.owner_uid == 1001)
        #expect(hidden.options == ["every=1h", "tag=t"])
        #expect(hidden.last_output == nil && hidden.last_reason == nil)
        #expect(hidden.last_result == .failed && hidden.last_exit_code == 3)
        #expect(await registry.list(viewer: bob).map(\.redacted) == [true])
        #expect(await registry.list(viewer: root).map(\.redacted) == [false])
    }

    @Test func watchersOfAnotherUsersJobGetNoReasons() async throws {
        let seen = Mutex<[String: [String]]>([:])
        for (id, viewer, label) in [(1, bob, "bob"), (2, alice, "alice")] {
            await registry.addWatcher(id, filter: .all, viewer: viewer) { line in seen.withLock { $0[label, default: []].append(line) } }
        }
        try await registry.add(spec("a", ["every": "1h", "command": "secret"]), origin: .runtime, owner: alice)
        _ = try await registry.runNow(JobName("a"), by: alice)
        launcher.finish(0, .failed, exitCode: 3)
        await settle(registry)
        let finished = seen.withLock { $0 }.mapValues { $0.filter { $0.contains("\"event\":\"finished\"") } }
        #expect(finished["alice"]?.count == 1 && finished["alice"]?.first?.contains("\"reason\":\"test\"") == true)
        #expect(finished["bob"]?.count == 1 && finished["bob"]?.first?.contains("reason") == false)
        #expect(finished["bob"]?.first?.contains("\"exit_code\":3") == true)
    }

    @Test func userJobLimitCountsOnlyThatUsersJobs() async throws {
        try await registry.add(spec("a1", ["every": "1h", "command": "x"]), origin: .runtime, owner: alice)
        try await registry.add(spec("a2", ["every": "1h", "command": "x"]), origin: .runtime, owner: alice)
        await #expect(throws: TimerdError(.tooManyJobs, "")) {
            try await registry.add(spec("a3", ["every": "1h", "command": "x"]), origin: .runtime, owner: alice)
        }
        try await registry.add(spec("b1", ["every": "1h", "command": "x"]), origin: .runtime, owner: bob)
        try await registry.add(spec("r1", ["every": "1h", "command": "x"]), origin: .runtime, owner: root)
        try await registry.add(spec("r2", ["every": "1h", "command": "x"]), origin: .runtime, owner: root)
        try await registry.add(spec("r3", ["every": "1h", "command": "x"]), origin: .runtime, owner: root)
        // A cancelled job frees its place.
        try await registry.cancel([JobName("a1")], by: alice)
        try await registry.add(spec("a3", ["every": "1h", "command": "x"]), origin: .runtime, owner: alice)
    }

    @Test func runsPerMinuteLimitRunAndScheduledFires() async throws {
        // Every second: its scheduled fire comes before the bucket refills (2 runs a minute).
        try await registry.add(spec("a", ["every": "1s", "command": "x", "overlap": "allow"]), origin: .runtime, owner: alice)
        let name = try JobName("a")
        #expect(try await registry.runNow(name, by: alice) == "started")
        #expect(try await registry.runNow(name, by: alice) == "started")
        await #expect(throws: TimerdError(.rateLimited, "")) { try await registry.runNow(name, by: root) }
        await registry.fireScheduled(name, clock: clock)
        let info = try await registry.show(name)
        #expect(info.skipped == 1 && info.last_skip?.reason.contains("user_max_runs_per_minute") == true)
        // Root's jobs have no such limit.
        try await registry.add(spec("r", ["every": "1h", "command": "x", "overlap": "allow"]), origin: .runtime, owner: root)
        for _ in 0..<5 { #expect(try await registry.runNow(JobName("r")) == "started") }
    }

    @Test func runsOfAUsersJobRunAsThatUserWithoutRootsHomeAndPath() async throws {
        try await registry.add(spec("a", ["every": "1h", "command": "x", "env": "PATH=/mine"]), origin: .runtime, owner: alice)
        try await registry.add(spec("r", ["every": "1h", "command": "x"]), origin: .runtime, owner: root)
        try await registry.add(spec("u", ["every": "1h", "command": "x", "user": "bob", "group": "ops"]), origin: .config(file: "f", line: 1))
        _ = try await registry.runNow(JobName("a"))
        _ = try await registry.runNow(JobName("r"))
        _ = try await registry.runNow(JobName("u"))
        let (mine, roots, configured) = (launcher.request(0), launcher.request(1), launcher.request(2))
        #expect(mine.runAs == RunAs(user: .uid(1001), group: nil))
        #expect(mine.environment["HOME"] == nil && mine.environment["PATH"] == "/mine" && mine.environment["LANG"] == "C")
        #expect(roots.runAs == nil && roots.environment["HOME"] == "/root")
        #expect(configured.runAs == RunAs(user: .named("bob"), group: "ops"))
    }

    @Test func theLauncherResolvesTheAccountAtRunTime() throws {
        let accounts = FakeAccounts()
        let (alice, credentials) = try CommandRun.resolve(RunAs(user: .uid(1001), group: nil), accounts: accounts)
        #expect(alice.name == "alice" && alice.home == "/home/alice")
        #expect(credentials == Credentials(uid: 1001, gid: 1001, groups: [1001, 2000]))
        let (_, withGroup) = try CommandRun.resolve(RunAs(user: .named("bob"), group: "ops"), accounts: accounts)
        #expect(withGroup.gid == 2000 && withGroup.uid == 1002)
        for missing in [RunAs(user: .uid(4242), group: nil), RunAs(user: .named("mallory"), group: nil), RunAs(user: .named("bob"), group: "wheel")] {
            #expect(throws: TimerdError.self) { try CommandRun.resolve(missing, accounts: accounts) }
        }
    }

    @Test func heldOutputStaysUnderMaxOutputMemory() async throws {
        for name in ["a", "b"] {
            try await registry.add(spec(name, ["every": "1h", "command": "x"]), origin: .runtime, owner: root)
        }
        _ = try await registry.runNow(JobName("a"))
        launcher.finish(0, output: "123456")
        await settle(registry)
        #expect(try await registry.show(JobName("a")).last_output == "123456")
        _ = try await registry.runNow(JobName("b"))
        launcher.finish(1, output: "abcdef")
        await settle(registry)
        #expect(try await registry.show(JobName("a")).last_output == HeldOutputs.droppedOutput)
        #expect(try await registry.show(JobName("b")).last_output == "abcdef")
        #expect(sink.all.joined(separator: "\n").contains("max_output_memory (10 bytes) reached: dropped the held output of a"))
    }

    @Test func addingChecksTheAllowListAndWhoAJobMayRunAs() async throws {
        var settings = AccessSettings()
        settings.allowGroups = ["ops"]
        let handler = ControlHandler(registry: registry, access: AccessControl(settings), accounts: FakeAccounts(), reload: { ReloadSummary() })
        func add(_ line: String, as client: Client) async -> String {
            await handler.handle(.line(Array(line.utf8)), connection: 1, client: client).encode()
        }
        let daemonIsRoot = Client.daemonUID == 0
        let aliceReply = await add("ADD a every=1h command=x", as: alice)
        #expect(aliceReply == (daemonIsRoot ? "OK" : "ERR permission-denied timerd runs as uid \(Client.daemonUID), not root, so it cannot run jobs as uid 1001"))
        #expect(await add("ADD b every=1h command=x", as: bob).hasPrefix("ERR permission-denied user bob may not add jobs: not in allow_users or allow_groups"))
        #expect(await add("ADD c every=1h command=x", as: Client(uid: 4242, gid: 1, pid: 1)).hasPrefix("ERR permission-denied"))
        guard daemonIsRoot else { return }
        #expect(await add("ADD d every=1h command=x user=root", as: alice).hasPrefix("ERR permission-denied user=root: only root"))
        #expect(await add("ADD e every=1h command=x group=bob", as: alice).hasPrefix("ERR permission-denied group=bob: alice is not a member"))
        #expect(await add("ADD f every=1h command=x group=ops user=alice", as: alice) == "OK")
        #expect(await add("ADD g every=1h webhook=https://127.0.0.1:9/ ca_file=/root/ca.pem", as: alice).hasPrefix("ERR permission-denied ca_file="))
        #expect(await add("ADD g2 every=1h command=x log_file=/etc/cron.d/evil", as: alice).hasPrefix("ERR permission-denied log_file= is for root only"))
        #expect(await add("ADD h every=1h command=x user=mallory", as: root).hasPrefix("ERR bad-argument user: no such user"))
        #expect(await add("ADD i every=1h command=x user=bob", as: root) == "OK")
        #expect(await add("RELOAD", as: alice) == "ERR permission-denied only root may reload the config (RELOAD)")
        #expect(await add("MODE maintenance", as: alice) == "ERR permission-denied only root may switch the daemon's mode (MODE NAME)")
        #expect(await add("MODE", as: alice).hasPrefix("OK"))
    }

    /// Where runs' cgroups have every controller: users may tighten anything and loosen nothing, their
    /// ceilings hold, and a controller timerd lacks is named.
    @Test func resourceSettingsOfUsersOnlyTightenAndControllersAreNamed() async throws {
        var settings = AccessSettings()
        settings.userCeiling = try ResourceSettings(single: ["memory_max": "1G", "cpu_quota": "100%"])
        let registry = Registry(
            launcher: launcher, log: Logger(sink: sink, minimum: .debug), maxRunning: 10, baseEnvironment: [],
            access: AccessControl(settings), clock: clock,
            resourceSupport: RunResourceSupport(controllers: ["cpu", "memory", "pids"], own: "/sys/fs/cgroup/t.service"))
        let handler = ControlHandler(registry: registry, access: AccessControl(settings), accounts: FakeAccounts(), reload: { ReloadSummary() })
        func add(_ line: String, as client: Client) async -> String {
            await handler.handle(.line(Array(line.utf8)), connection: 1, client: client).encode()
        }
        // Anyone: io_weight needs the io controller, which this cgroup was not given.
        #expect(await add("ADD a every=1h io_weight=50 command=x", as: root).hasPrefix(
            "ERR bad-argument io_weight needs the io controller, which timerd's cgroup /sys/fs/cgroup/t.service was not given "
                + "(it has cpu, memory, pids;"))
        #expect(await add("ADD b every=1h cpu_weight=1000 memory_max=4G tasks_max=10 command=x", as: root) == "OK")
        guard Client.daemonUID == 0 else { return }
        for (options, message) in [
            ("cpu_weight=101", "cpu_weight=101: only root may give a run more than the default share (100)"),
            ("nice=-20", "nice=-20: only root may raise a run's priority"),
            ("ionice=realtime:3", "ionice=realtime:3: only root may give a run real-time I/O"),
            ("memory_max=2G", "memory_max=2G is above user_memory_max=1G, the most a job of a user other than root may have"),
            ("cpu_quota=150%", "cpu_quota=150% is above user_cpu_quota=100%"),
        ] {
            let reply = await add("ADD c every=1h \(options) command=x", as: alice)
            #expect(reply.hasPrefix("ERR permission-denied \(message)"), "\(options): \(reply)")
        }
        #expect(await add("ADD d every=1h cpu_weight=10 memory_max=512M cpu_quota=20% nice=19 command=x", as: alice) == "OK")
    }
}

