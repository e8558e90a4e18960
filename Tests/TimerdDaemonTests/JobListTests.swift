import Synchronization
import Testing
import TimerdCore
import TimerdEngine
import TimerdProtocol
@testable import TimerdDaemon

/// `LIST` is described in slices (`JobList`): its payload is what the encoder would write for the jobs,
/// and jobs changing meanwhile are each listed whole, in name order.
@Suite struct JobListTests {
    let launcher = FakeLauncher()
    let clock = testClock()
    let registry: Registry

    init() {
        registry = Registry(launcher: launcher, log: Logger(sink: MemoryLogSink(), minimum: .debug), maxRunning: 4,
                            baseEnvironment: [], clock: clock)
    }

    static let alice = Client(uid: 1001, gid: 1001, pid: 1)

    @Test func thePayloadIsWhatTheEncoderWritesForEveryViewer() async throws {
        try await registry.add(spec("cron", ["cron": "0 3 * * *", "timezone": "Europe/Berlin", "command": "backup \"/srv\""]), origin: .runtime)
        try await registry.add(spec("config", ["every": "5s", "argv": "/bin/echo a/b", "tag": "t"]), origin: .config(file: "/etc/t.conf", line: 3))
        try await registry.add(spec("hers", ["in": "1h", "command": "secret", "env": "K=v", "tag": "t"]), origin: .runtime, owner: Self.alice)
        try await registry.add(spec("paused", ["every": "1m", "command": "true", "modes": "night"]), origin: .runtime)
        try await registry.pause([JobName("paused")])
        _ = try await registry.runNow(JobName("hers"), by: Self.alice)
        launcher.finish(0, .failed, exitCode: 3, output: "out\n\u{1}")
        await settle(registry)
        for viewer in [Client.daemon, Self.alice] {
            for tag in [nil, "t", "none"] as [String?] {
                let expected = Payload.encode(await registry.list(tag: tag, viewer: viewer))
                #expect(await JobList.json(registry, tag: tag, viewer: viewer) == expected)
            }
        }
        #expect(await JobList.json(registry, tag: "none", viewer: .daemon) == "[]")
    }

    @Test func jobsChangingMeanwhileAreListedWholeInNameOrder() async throws {
        let count = JobList.slice * 5
        func name(_ index: Int) -> String { "j" + String(repeating: "0", count: 5 - String(index).count) + String(index) }
        for index in 0..<count { try await registry.add(spec(name(index), ["every": "1h", "command": "true"]), origin: .runtime) }
        let registry = self.registry
        let listed = Mutex(0)
        // While LIST goes slice by slice, until it has listed three times: jobs are paused and resumed (a
        // paused job has no next fire, so a job described across two steps could show one state with the
        // other's fire), cancelled and added again.
        let changes = Task {
            repeat {
                for index in stride(from: 1, to: count, by: 10) {
                    let job = try JobName(name(index))
                    try await registry.pause([job])
                    try await registry.cancel([JobName(name(index + 1))])
                    try await registry.resume([job], mode: .onSchedule)
                    try await registry.add(spec(name(index + 1), ["every": "1h", "command": "true"]), origin: .runtime)
                }
            } while listed.withLock { $0 } < 3
        }
        var lists: [[JobInfo]] = []
        for _ in 0..<3 {
            lists.append(try Payload.decode([JobInfo].self, from: await JobList.json(registry, tag: nil, viewer: .daemon)))
            listed.withLock { $0 += 1 }
        }
        try await changes.value
        lists.append(try Payload.decode([JobInfo].self, from: await JobList.json(registry, tag: nil, viewer: .daemon)))
        for list in lists {
            #expect(zip(list, list.dropFirst()).allSatisfy { $0.name < $1.name }, "sorted, no name twice")
            for info in list {
                #expect((info.state == .paused) == (info.next_fire == nil), "\(info.name) described whole")
            }
            // Jobs nothing touched are always there.
            let names = Set(list.map(\.name))
            #expect(stride(from: 0, to: count, by: 10).allSatisfy { names.contains(name($0)) })
        }
        let last = try #require(lists.last)
        #expect(last.map(\.name) == (0..<count).map(name))
        #expect(!last.contains { $0.state == .paused })
    }
}
