import Foundation
import Glibc
import Synchronization
import Testing

/// Helpers for the hostile-client suite: the daemon seen from outside (/proc), background load threads, a
/// well-behaved probe client, and the fixture every hostile case shares.

// MARK: - The daemon seen from outside

extension Daemon {
    var pid: Int32 { process.processIdentifier }

    /// A `/proc/PID/status` field counted in kB (`VmRSS`, `VmHWM`), in bytes; 0 if the process is gone.
    func statusBytes(_ field: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            let number = line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first
            return (number.flatMap { Int($0) } ?? 0) * 1024
        }
        return 0
    }

    /// Resident memory now.
    var residentBytes: Int { statusBytes("VmRSS") }
    /// The most resident memory the daemon ever had (the kernel's high-water mark).
    var peakResidentBytes: Int { statusBytes("VmHWM") }

    /// The sockets the daemon holds open (`socket:[inode]`): its listener, its clients, and whatever it
    /// inherited. Unlike its descriptor count, this does not move with the pipes and pidfds of job runs.
    var openSockets: Set<String> {
        let directory = "/proc/\(pid)/fd"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return Set(entries.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + $0) }
            .filter { $0.hasPrefix("socket:") })
    }

    /// How many pipes the daemon holds open (`pipe:[inode]`): none of a run's once it has ended.
    var openPipes: Int {
        let directory = "/proc/\(pid)/fd"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return entries.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + $0) }
            .filter { $0.hasPrefix("pipe:") }.count
    }

    /// The daemon's soft and hard limits on open descriptors, from `/proc/PID/limits`.
    var openFileLimits: (soft: Int, hard: Int)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Max open files") }) else { return nil }
        let numbers = line.split(separator: " ").compactMap { Int($0) }
        return numbers.count >= 2 ? (numbers[0], numbers[1]) : nil
    }

    /// `STATS` decoded.
    func stats() throws -> [String: Any] {
        let reply = try request("STATS")
        guard reply.hasPrefix("OK {") else { throw HarnessError("STATS: \(reply)") }
        return try JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8)) as? [String: Any] ?? [:]
    }
}

/// A number the suite measured, printed for the report (`hostile: …` lines in the test output).
func measured(_ text: String) {
    print("hostile: \(text)")
}

func megabytes(_ bytes: Int) -> String {
    String(format: "%.1f MiB", Double(bytes) / 1_048_576)
}

// MARK: - Load threads

/// A client is used by one writer thread and one reader thread at most (`write` keeps no state; only
/// `readLine` touches the buffer).
extension Client: @unchecked Sendable {}

/// Threads running a hostile load. Each runs `body(index, load)` and should return once `load.running` is
/// false (or when its work is done); problems they find go to `problems`.
final class LoadThreads: Sendable {
    private let stopping = Atomic<Bool>(false)
    private let active: Atomic<Int>
    private let done = DispatchGroup()
    let problems = ProblemList()

    init(threads: Int, _ body: @escaping @Sendable (_ index: Int, _ load: LoadThreads) -> Void) {
        active = Atomic(threads)
        for index in 0..<threads {
            done.enter()
            let thread = Thread { [self] in
                body(index, self)
                active.subtract(1, ordering: .releasing)
                done.leave()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// False once `stop()` was called.
    var running: Bool { !stopping.load(ordering: .acquiring) }
    /// True once every thread returned.
    var finished: Bool { active.load(ordering: .acquiring) == 0 }

    /// Tells the threads to stop and waits (at most `timeout` seconds) for them; records their problems.
    func stop(timeout: Double = 30, sourceLocation: SourceLocation = #_sourceLocation) {
        stopping.store(true, ordering: .releasing)
        if done.wait(timeout: .now() + timeout) == .timedOut {
            Issue.record("the load threads did not stop within \(timeout)s", sourceLocation: sourceLocation)
        }
        for problem in problems.all.prefix(20) { Issue.record(Comment(rawValue: problem), sourceLocation: sourceLocation) }
        if problems.all.count > 20 { Issue.record("… and \(problems.all.count - 20) more problems", sourceLocation: sourceLocation) }
    }
}

// MARK: - The shared fixture

/// One hostile case: the real daemon with a job that fires every `tickInterval`, a well-behaved client that
/// probes it while a load runs, and the checks every case ends with (same PID, job on time, memory back).
final class HostileFixture {
    static let tickInterval = 0.1
    /// A well-behaved client's connect plus five requests must be answered within this, under any load.
    static let probeBound = 2.0
    /// The tick job's lateness (`STATS` `lateness_ms`, scheduled time → timer handler) must stay under this.
    static let latenessBoundMs = 250.0

    let daemon: Daemon
    let pid: Int32
    /// Resident memory once the tick job fires, before the load.
    private(set) var baselineRSS = 0
    /// Requests this fixture (setup and probes) sent, for telling them from the load's in `STATS`.
    private(set) var ownRequests = 0
    private(set) var probeTimes: [Double] = []
    private var probeCount = 0
    private var loadStart: (time: Date, runs: Int)?

    /// Starts the daemon with the tick job and `fillerJobs` more (each about 600 bytes of `LIST`).
    /// `softFileLimit` and `hardFileLimitAtLeast`: see `Daemon.init`.
    init(fillerJobs: Int = 0, softFileLimit: Int? = nil, hardFileLimitAtLeast: Int? = nil,
         sourceLocation: SourceLocation = #_sourceLocation) throws {
        daemon = try Daemon(softFileLimit: softFileLimit, hardFileLimitAtLeast: hardFileLimitAtLeast)
        pid = daemon.pid
        let tick = Int(Self.tickInterval * 1000)
        try #require(try daemon.request("ADD tick every=\(tick)ms -- /bin/true") == "OK", sourceLocation: sourceLocation)
        ownRequests += 1
        if fillerJobs > 0 {
            let client = try Client(path: daemon.socket)
            for index in 0..<fillerJobs {
                let reply = try client.request("ADD filler-\(index) in=1h command='echo \(String(repeating: "f", count: 200))'")
                try #require(reply == "OK", sourceLocation: sourceLocation)
            }
            ownRequests += fillerJobs
        }
        try eventually("the tick job fired 3 times") { try runs() >= 3 }
        baselineRSS = daemon.residentBytes
    }

    /// One request on a fresh connection, counted in `ownRequests`.
    func request(_ line: String) throws -> String {
        ownRequests += 1
        return try daemon.request(line)
    }

    /// The tick job's run count (one `SHOW`).
    func runs() throws -> Int {
        ownRequests += 1
        return try daemon.runs("tick")
    }

    /// `STATS` (one request).
    func stats() throws -> [String: Any] {
        ownRequests += 1
        return try daemon.stats()
    }

    /// The job names of `LIST` (one request).
    func listNames() throws -> [String] {
        ownRequests += 1
        return try daemon.listNames()
    }

    /// Marks the start of the load, for the on-time check.
    func loadStarts() throws {
        loadStart = (Date(), try runs())
    }

    /// A well-behaved client on a fresh connection: PING, LIST, ADD, SHOW and CANCEL, each answered
    /// correctly, all within `probeBound`. Returns the time it took.
    @discardableResult
    func probe(sourceLocation: SourceLocation = #_sourceLocation) -> Double {
        probeCount += 1
        let name = "probe-\(probeCount)"
        let start = Date()
        do {
            let client = try Client(path: daemon.socket)
            func ask(_ request: String, _ ok: (String) -> Bool) throws {
                ownRequests += 1
                let reply = try client.request(request)
                if !ok(reply) { Issue.record("well-behaved \(request) got \(reply.prefix(300))", sourceLocation: sourceLocation) }
            }
            try ask("PING") { $0 == "OK" }
            try ask("LIST") { $0.hasPrefix("OK [") && $0.contains("\"name\":\"tick\"") }
            try ask("ADD \(name) in=1h command=true") { $0 == "OK" }
            try ask("SHOW \(name)") { $0.hasPrefix("OK {") && $0.contains("\"name\":\"\(name)\"") }
            try ask("CANCEL \(name)") { $0 == "OK" }
        } catch {
            Issue.record("well-behaved client failed: \(error)", sourceLocation: sourceLocation)
        }
        let elapsed = Date().timeIntervalSince(start)
        probeTimes.append(elapsed)
        #expect(elapsed < Self.probeBound, "the well-behaved client waited \(elapsed)s", sourceLocation: sourceLocation)
        return elapsed
    }

    /// Probes again and again until `done()` holds (and at least `minimum` times), at most `timeout` seconds.
    func probe(until done: () -> Bool, minimum: Int = 3, timeout: Double = 60, sourceLocation: SourceLocation = #_sourceLocation) {
        let deadline = Date().addingTimeInterval(timeout)
        var count = 0
        while count < minimum || !done() {
            guard Date() < deadline else {
                Issue.record("the load did not end within \(timeout)s", sourceLocation: sourceLocation)
                return
            }
            probe(sourceLocation: sourceLocation)
            count += 1
        }
    }

    /// The tick job kept firing while the load ran: at least half the fires due since `loadStarts()`.
    func checkJobKeptFiring(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let loadStart = try #require(loadStart, "loadStarts() was not called", sourceLocation: sourceLocation)
        let elapsed = Date().timeIntervalSince(loadStart.time)
        let fired = try runs() - loadStart.runs
        let due = Int(elapsed / Self.tickInterval)
        #expect(fired >= due / 2, "the tick job ran \(fired) times in \(elapsed)s (\(due) fires due)", sourceLocation: sourceLocation)
    }

    /// Whether the binaries run under ThreadSanitizer or AddressSanitizer (`make test-tsan`/`test-asan`): their
    /// allocators keep freed memory (ASan's quarantine) and add shadow memory, so resident memory says
    /// nothing about timerd's own. Memory bounds are then measured and printed, not asserted.
    static let sanitized = ProcessInfo.processInfo.environment["TSAN_OPTIONS"] != nil
        || ProcessInfo.processInfo.environment["ASAN_OPTIONS"] != nil

    /// After the load: the same daemon process answers, the tick job was on time throughout, and resident
    /// memory comes back to within `rssSlack` bytes of the baseline.
    func checkAfterLoad(_ name: String, rssSlack: Int = 32 << 20, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(daemon.process.isRunning && daemon.pid == pid, "timerd died; log tail:\n\(daemon.log.suffix(3_000))",
                sourceLocation: sourceLocation)
        try #require(daemon.process.isRunning, sourceLocation: sourceLocation)
        try checkJobKeptFiring(sourceLocation: sourceLocation)
        probe(sourceLocation: sourceLocation)
        let lateness = try #require(try stats()["lateness_ms"] as? [String: Any], sourceLocation: sourceLocation)
        let p99 = lateness["p99"] as? Double ?? .infinity, max = lateness["max"] as? Double ?? .infinity
        let samples = lateness["samples"] as? Int ?? 0
        #expect(samples >= 3, sourceLocation: sourceLocation)
        #expect(p99 < Self.latenessBoundMs, "lateness p99 \(p99) ms", sourceLocation: sourceLocation)
        #expect(max < Self.latenessBoundMs, "lateness max \(max) ms", sourceLocation: sourceLocation)
        if !Self.sanitized {
            eventually(timeout: 10, "resident memory back within \(megabytes(rssSlack)) of the baseline \(megabytes(baselineRSS))") {
                daemon.residentBytes < baselineRSS + rssSlack
            }
        }
        let slowest = Int((probeTimes.max() ?? 0) * 1000)
        measured("\(name): lateness p99 \(p99) ms, max \(max) ms (\(samples) fires); well-behaved client: \(probeTimes.count) probes, "
            + "slowest \(slowest) ms; RSS baseline \(megabytes(baselineRSS)), peak \(megabytes(daemon.peakResidentBytes)), "
            + "after \(megabytes(daemon.residentBytes))")
    }
}

// MARK: - Child processes

/// A `python3` child that runs `script` with `arguments`, prints `sent` once it has done its hostile part,
/// and then waits on its stdin (a pipe the test holds) until it is killed. `@unchecked Sendable`: a load
/// thread may wait for `sent` while the test thread holds it; `kill` comes only after that thread finished.
final class PythonClient: @unchecked Sendable {
    let process = Process()
    private let stdin = Pipe()
    private let stdout = Pipe()

    init(script: String, arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", script] + arguments
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    /// Waits for the child's `sent` line (its hostile part is done); false if it exited instead.
    func waitUntilSent() -> Bool {
        let line = stdout.fileHandleForReading.readData(ofLength: 5)
        return String(decoding: line, as: UTF8.self) == "sent\n"
    }

    /// SIGKILL, then reap.
    func kill() {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}
