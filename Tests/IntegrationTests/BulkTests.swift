import Foundation
import Testing

/// `LIST` and `CANCEL tag=T` of more jobs than one slice, through the real daemon (`docs/protocol.md`,
/// "Many jobs"): a `LIST` reply is streamed and still one valid line, in order with the replies around it;
/// a `CANCEL` of many jobs is all or nothing, durable, and every job's `cancelled` event reaches watchers.
@Suite struct BulkTests {
    /// More jobs than several slices of a `LIST` (250) and of a cancel (500), and a reply (about 2 MB)
    /// larger than a connection queues (1 MiB), so the stream waits for the client.
    static let count = 3_000

    static func name(_ index: Int) -> String { "j" + String(format: "%05d", index) }

    /// Adds `count` jobs tagged `bulk` on one connection, pipelined, and checks each was added.
    static func addMany(_ daemon: Daemon, count: Int = count) throws {
        let client = try Client(path: daemon.socket)
        try client.write((0..<count).map { "ADD \(name($0)) every=1h tag=bulk command=true\n" }.joined())
        for index in 0..<count { #expect(try client.readLine() == "OK", "ADD \(name(index))") }
    }

    static func jobs(_ reply: String) throws -> [[String: Any]] {
        guard reply.hasPrefix("OK ") else { throw HarnessError("not OK: \(reply.prefix(200))") }
        return try #require(try JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8)) as? [[String: Any]])
    }

    /// How many jobs the log says were added: `added N jobs (runtime): …` lines and single-job lines.
    static func addedInLog(_ log: String) -> (jobs: Int, lines: Int) {
        var jobs = 0, lines = 0
        for line in log.split(separator: "\n") {
            if let range = line.range(of: "INFO added "), let count = Int(line[range.upperBound...].prefix { $0.isNumber }),
               line[range.upperBound...].contains(" jobs (runtime): ") {
                jobs += count
                lines += 1
            } else if line.contains(" added (runtime): ") {
                jobs += 1
                lines += 1
            }
        }
        return (jobs, lines)
    }

    @Test func aPipelinedBurstOfAddsIsLoggedInAFewLinesThatCountEveryJob() throws {
        let daemon = try Daemon()
        try Self.addMany(daemon)
        // Every job is counted once, in lines of many (the batches a connection's burst is taken in).
        #expect(eventually("the log to count every job") { Self.addedInLog(daemon.log).jobs == Self.count })
        let (jobs, lines) = Self.addedInLog(daemon.log)
        #expect(jobs == Self.count)
        #expect(lines < Self.count / 10, "\(lines) lines for \(Self.count) jobs")
        // One job on its own still gets its line with what it does.
        #expect(try daemon.request("ADD alone every=5m command=true") == "OK")
        #expect(daemon.logShows("job=alone added (runtime): every 5m: true"))
    }

    @Test func aLargeListIsOneValidLineInOrderWithTheRepliesAroundIt() throws {
        let daemon = try Daemon()
        try Self.addMany(daemon)
        #expect(try daemon.request("ADD a-first every=1h command=true") == "OK")
        let all = ["a-first"] + (0..<Self.count).map(Self.name)

        // Pipelined with other requests on one connection, and read slowly (the daemon waits for the
        // client): every reply in its place, the LIST whole.
        let client = try Client(path: daemon.socket)
        try client.write("PING\nLIST\nADD zz every=1h tag=bulk command=true\nLIST tag=bulk\nLIST tag=none\nLIST x\n")
        #expect(try client.readLine() == "OK")
        usleep(200_000)  // not a synchronisation: only lets the daemon's queue fill up before reading
        let listed = try Self.jobs(try client.readLine())
        #expect(listed.compactMap { $0["name"] as? String } == all)
        #expect(listed.allSatisfy { $0["state"] as? String == "scheduled" })
        #expect(try client.readLine() == "OK")
        let tagged = try Self.jobs(try client.readLine()).compactMap { $0["name"] as? String }
        #expect(tagged == Array(all.dropFirst()) + ["zz"])
        #expect(try client.readLine() == "OK []")
        #expect(try client.readLine().hasPrefix("ERR bad-argument "))

        // timerctl reads it, as JSON and as text.
        let json = try daemon.ctl("--json", "list")
        #expect(json.status == 0, "\(json.stderr)")
        let decoded = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(decoded.compactMap { $0["name"] as? String } == all + ["zz"])
        let text = try daemon.ctl("list")
        #expect(text.status == 0, "\(text.stderr)")
        let textNames = text.stdout.split(separator: "\n").dropFirst().compactMap { $0.split(separator: " ").first.map(String.init) }
        #expect(textNames == all + ["zz"])

        // A client that leaves in the middle of a reply: the daemon goes on.
        let leaving = try Client(path: daemon.socket)
        try leaving.write("LIST\n")
        var partial = [UInt8](repeating: 0, count: 4_096)
        #expect(recv(leaving.fd, &partial, partial.count, 0) > 0)
        leaving.close()
        #expect(try daemon.listNames().count == Self.count + 2)
        daemon.expectAlive()
    }

    @Test func aCancelOfManyJobsIsDurableAndEveryJobsEventIsSent() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let state = directory + "/state"
        var first: Daemon? = try Daemon(stateDirectory: state)
        let daemon = first!
        // Fewer than the others: their events (about 90 bytes each) must fit the 256 KiB a watcher may let
        // pile up, since timerd never waits for a watcher: with 3,000, a test process slowed down by a loaded
        // machine was dropped as a slow watcher ("connection closed by timerd"). Still four cancel slices.
        let count = 2_000
        try Self.addMany(daemon, count: count)
        #expect(try daemon.request("ADD other every=1h tag=keep command=true") == "OK")
        // A watcher of the tag: registered once it sees an event of the tag.
        let watcher = try Client(path: daemon.socket)
        #expect(try watcher.request("WATCH tag=bulk") == #"OK {"watching":"tag:bulk"}"#)
        var attempt = 0
        var registered = false
        while !registered {
            attempt += 1
            #expect(try daemon.request("ADD sync\(attempt) every=1h tag=bulk command=true") == "OK")
            registered = try WatchTests.event(try watcher.readLine())["job"] as? String == "sync\(attempt)"
        }
        let cancelled = Set((0..<count).map(Self.name) + (1...attempt).map { "sync\($0)" })

        let reply = try daemon.request("CANCEL tag=bulk")
        #expect(reply.hasPrefix("OK "), "\(reply.prefix(200))")
        let payload = try JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8)) as? [String: [String]]
        #expect(payload?["jobs"].map(Set.init) == cancelled)
        #expect(payload?["jobs"] == payload?["jobs"]?.sorted())
        #expect(try daemon.listNames() == ["other"])
        // Each job's event, though the jobs are gone from the table when the events are made.
        var seen: Set<String> = []
        while seen.count < cancelled.count {
            let event = try WatchTests.event(try watcher.readLine())
            guard event["event"] as? String == "cancelled", let job = event["job"] as? String else { continue }
            #expect(cancelled.contains(job), "\(job)")
            seen.insert(job)
        }
        // One job by name too.
        #expect(try daemon.request("ADD one every=1h tag=bulk command=true") == "OK")
        #expect(try daemon.request("CANCEL one") == "OK")
        var sawOne = false
        while !sawOne {
            let event = try WatchTests.event(try watcher.readLine())
            sawOne = event["event"] as? String == "cancelled" && event["job"] as? String == "one"
        }
        daemon.stop()
        first = nil

        let again = try Daemon(stateDirectory: state)
        #expect(try again.listNames() == ["other"])
    }

    /// A `CANCEL` of many jobs is answered once it is on disk, its jobs leaving the table behind the
    /// answer: every request after the `OK` finds them gone (`LIST`, `SHOW`, `STATS`, the tag), and an
    /// `ADD` of one of their names (the last to leave) waits for it to go, then adds a new job.
    @Test func everyRequestAfterTheOKOfACancelOfManyJobsFindsThemGone() throws {
        let daemon = try Daemon()
        try Self.addMany(daemon)
        #expect(try daemon.request("ADD other every=1h tag=keep command=true") == "OK")
        let last = Self.name(Self.count - 1)
        let client = try Client(path: daemon.socket)
        try client.write("CANCEL tag=bulk\nSTATS\nLIST\nSHOW \(last)\nLIST tag=bulk\nCANCEL tag=bulk\nADD \(last) every=1h command=true\nLIST\n")
        let cancelled = try client.readLine()
        #expect(cancelled.hasPrefix("OK {"), "\(cancelled.prefix(200))")
        let stats = try JSONSerialization.jsonObject(with: Data(try client.readLine().dropFirst(3).utf8)) as? [String: Any]
        #expect(stats?["jobs"] as? [String: Int] == ["scheduled": 1, "paused": 0, "finished": 0, "waiting": 0])
        #expect(try Self.jobs(try client.readLine()).compactMap { $0["name"] as? String } == ["other"])
        #expect(try client.readLine().hasPrefix("ERR no-such-job "))
        #expect(try client.readLine() == "OK []")
        let again = try client.readLine()
        #expect(again.hasPrefix("ERR ") || again == #"OK {"jobs":[]}"#, "\(again.prefix(200))")
        #expect(try client.readLine() == "OK")
        #expect(try Self.jobs(try client.readLine()).compactMap { $0["name"] as? String } == [last, "other"])
        daemon.expectAlive()
    }

    /// A `CANCEL` of many jobs is durable as one record of their names; their rows are deleted behind
    /// the `OK`. Killed (`kill -9`) after the `OK` with only the first slice's rows deleted (failpoint
    /// `hold-cancel-deletes`), the restarted daemon has none of them, the job that was not among them,
    /// and a job added after the `OK` with the name of one of them (its row deleted before its name was
    /// given back). Killed at once after an `OK` without the failpoint: none of them either.
    @Test func aCancelOfManyJobsKilledBeforeItsRowsAreDeletedRestoresNoneOfThem() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let state = directory + "/state"
        do {
            let daemon = try Daemon(environment: ["TIMERD_TEST_FAILPOINTS": "hold-cancel-deletes"], stateDirectory: state)
            try Self.addMany(daemon)
            #expect(try daemon.request("ADD other every=1h tag=keep command=true") == "OK")
            let reply = try daemon.request("CANCEL tag=bulk")
            #expect(reply.hasPrefix("OK {"), "\(reply.prefix(200))")
            // The first name: among the first slice, whose rows were deleted before its names went back.
            #expect(try daemon.request("ADD \(Self.name(0)) every=1h tag=again command=true") == "OK")
            #expect(try daemon.listNames() == [Self.name(0), "other"])
            daemon.stop(signal: SIGKILL)
        }
        do {
            let daemon = try Daemon(stateDirectory: state)
            #expect(try daemon.listNames() == [Self.name(0), "other"])
            // Once more without the failpoint, killed right after the OK: whatever was deleted by then.
            let client = try Client(path: daemon.socket)
            try client.write((0..<Self.count).map { "ADD k\($0) every=1h tag=more command=true\n" }.joined())
            for index in 0..<Self.count { #expect(try client.readLine() == "OK", "ADD k\(index)") }
            let reply = try daemon.request("CANCEL tag=more")
            #expect(reply.hasPrefix("OK {"), "\(reply.prefix(200))")
            daemon.stop(signal: SIGKILL)
        }
        let again = try Daemon(stateDirectory: state)
        #expect(try again.listNames() == [Self.name(0), "other"])
        #expect(try again.request("SHOW \(Self.name(0))").contains(#""tags":["again"]"#))
    }

    @Test func aCancelOfManyJobsThatCannotBeWrittenCancelsNone() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let state = directory + "/state", fault = directory + "/fault"
        let environment = ["TIMERD_TEST_FAILPOINTS": StorageFaultTests.failpoint, "TIMERD_TEST_STORE_FAULT_FILE": fault]
        var first: Daemon? = try Daemon(environment: environment, stateDirectory: state)
        let daemon = first!
        try Self.addMany(daemon)
        let all = (0..<Self.count).map(Self.name)

        _ = FileManager.default.createFile(atPath: fault, contents: nil)
        let refused = try daemon.request("CANCEL tag=bulk")
        #expect(refused.hasPrefix("ERR storage-unavailable "), "\(refused.prefix(200))")
        #expect(try daemon.listNames() == all)
        // A config job or a job of another user among them would refuse it the same way: checked whole.
        #expect(try daemon.request("CANCEL \(all[0]) \(all[1]) nope").hasPrefix("ERR no-such-job "))
        try FileManager.default.removeItem(atPath: fault)
        #expect(try daemon.listNames() == all)
        daemon.stop()
        first = nil

        let again = try Daemon(environment: environment, stateDirectory: state)
        #expect(try again.listNames() == all)
        #expect(try again.request("CANCEL tag=bulk").hasPrefix("OK "))
        #expect(try again.listNames() == [])
    }
}
