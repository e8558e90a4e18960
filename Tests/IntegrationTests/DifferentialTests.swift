import Foundation
import Glibc
import Testing
import TimerdCore

/// The same config through `timerctl simulate` and through the real `timerd` on a test clock gives the
/// same decisions: for each job, the same due fires and for each the same outcome (ran with the same run
/// number and result, skipped or missed with the same reason, queued, …), and the same stream of `WATCH`
/// events (fired, skipped, started, finished) as they happened.
///
/// How a scenario runs (``DifferentialRun``):
/// 1. timerd starts on the test clock (failpoint `test-clock`) at an interesting wall time; a `WATCH`
///    connection records every event with the host time it arrived, confirmed registered by a marker job.
/// 2. `--from` for simulate comes from the daemon's first fire, so both start from the same position:
///    - calendar jobs: the earliest due fire any job had, minus 1 ms (the daemon loaded its jobs before
///      it, so no job has a fire between its load and that instant in either run);
///    - `every=` jobs: the daemon's grid starts when it loads the job (first fire = load + interval), so
///      `--from` is the reference job's first fire minus its interval, and scheduled instants of interval
///      jobs are compared within ``DifferentialRun/intervalTolerance`` (they go through the monotonic
///      clock); calendar instants are compared exactly.
/// 3. Time: the test clock is an offset on the host's clock, so the daemon's wall clock before any step
///    is simulate's "true time line" (`--from` + elapsed). The offset is measured from the events
///    (`at` minus the host time each arrived: a lower bound off by the delivery latency, well under a
///    millisecond on an idle host). Clock steps (SIGUSR2 with a new time in the clock file) become
///    `--clock-step AT=OFFSET` with AT the true time the signal was sent and OFFSET the new time minus the
///    wall clock's reading then, so the wall clock after the step is the file's time in both.
/// 4. Where to look: simulate is run first to plan. Clock steps, the start of the compared event stream
///    and the snapshot instant U are put in quiet gaps, at least ``DifferentialRun/margin`` away from every
///    decision simulate makes (all decisions here fall on whole seconds, or on the daemon's load instant
///    plus whole seconds, so the gaps are half-seconds). The daemon's decisions come later than
///    simulate's by its lateness and the time to start a process (milliseconds on an idle host; the
///    margin leaves 400 ms for a machine starved by `make test` on 2 cores). Commands `sleep` whole
///    seconds and intervals are whole seconds, chosen so that a run never ends within a second of a fire
///    of the same job while compared (where they would tie, the order would be up to chance; the test
///    checks simulate's output for such ties and compares only before them).
/// 5. At U the test asks `WHY` for every job (the records as they stand then) and simulate runs
///    `--until U`: both must be the same lists, in order. The `WATCH` events from the first quiet instant
///    after the marker to U must be the same, job by job, as simulate's decisions in that span.
/// 6. Each scenario also runs simulate on a config with one deliberate change (another overlap policy,
///    `dst_gap`) and checks that the comparison then fails: a comparison that cannot fail proves nothing.
///
/// The scenarios run in parallel (about 12–17 s each, most of it waiting for the daemon's clock to reach
/// the fires under test); simulate itself takes milliseconds.
@Suite struct DifferentialTests {
    /// Jobs whose runs overlap the next fires, by each overlap policy, every 2 s across New Year.
    @Test func overlapPoliciesAgree() async throws {
        let run = try await DifferentialRun.drive(
            clockStart: "2026-12-31T23:59:56.050Z",
            config: """
                [job "skipper"]
                calendar = *-*-* *:*:00/2
                timezone = UTC
                overlap = skip
                command = sleep 3

                [job "queuer"]
                calendar = *-*-* *:*:00/2
                timezone = UTC
                overlap = queue
                command = sleep 5

                [job "allower"]
                calendar = *-*-* *:*:00/2
                timezone = UTC
                overlap = allow
                command = sleep 3

                """,
            runDurations: ["skipper=3s", "queuer=5s", "allower=3s"]
        ) { run in
            try run.start(reference: nil)
            // queuer's second run ends at the fire 10 s after the first one: compare before that.
            try run.finish(snapshotAfter: .seconds(9.2))
        }
        run.expectAgreement()
        run.expectDifference(when: "skipper runs alongside (overlap=allow)") {
            $0.replacingOccurrences(of: "overlap = skip", with: "overlap = allow")
        }
        run.expectSeen(["skipper": ["skipped"], "queuer": ["queued", "skipped", "ran"], "allower": ["ran"]])
        #expect(try run.recordsCrossing("2027-01-01T00:00:00Z"), "the span crosses New Year")
    }

    /// Berlin springs forward at 2026-03-29T01:00:00Z (02:00 CET → 03:00 CEST): a calendar job every
    /// 2 s local time goes straight from 01:59:58 CET to 03:00:00 CEST, a cron job at 02:30:00 (a local
    /// time that does not exist that day) runs at the change, and a calendar job in the lost hour does
    /// not run at all.
    @Test func aDSTChangeInBerlinAgrees() async throws {
        let run = try await DifferentialRun.drive(
            clockStart: "2026-03-29T00:59:54.050Z",
            config: """
                [job "berlin"]
                calendar = *-*-* *:*:00/2
                timezone = Europe/Berlin
                command = sleep 3

                [job "shifted"]
                cron = 0 30 2 * * *
                timezone = Europe/Berlin
                command = true

                [job "lost"]
                calendar = *-*-* 02:*:00/2
                timezone = Europe/Berlin
                command = true

                """,
            runDurations: ["berlin=3s"]
        ) { run in
            try run.start(reference: nil)
            try run.finish(snapshotAfter: .seconds(9.2))
        }
        run.expectAgreement()
        run.expectDifference(when: "the cron job skips the lost local time (dst_gap=skip)") {
            $0.replacingOccurrences(of: "cron = 0 30 2 * * *\n", with: "cron = 0 30 2 * * *\ndst_gap = skip\n")
        }
        run.expectSeen(["berlin": ["ran", "skipped"], "shifted": ["ran"]])
        let shifted = run.daemonRecords["shifted"] ?? []
        #expect(shifted.map { RFC3339.format($0.scheduled) } == ["2026-03-29T01:00:00.000000Z"], "\(shifted)")
        #expect(run.daemonRecords["lost"]?.isEmpty == true)
        #expect(try run.recordsCrossing("2026-03-29T01:00:00Z"), "the span crosses the change")
    }

    /// Interval jobs: the daemon's grid starts when it loads them, so `--from` is the load instant as the
    /// first fire gives it. Overlap skip and queue on a 2 s grid, and a quick job every second.
    @Test func intervalJobsAgree() async throws {
        let run = try await DifferentialRun.drive(
            clockStart: "2026-07-01T12:00:00.000Z",
            config: """
                [job "tick"]
                every = 1s
                command = true

                [job "slow"]
                every = 2s
                command = sleep 3

                [job "line"]
                every = 2s
                overlap = queue
                command = sleep 5

                """,
            runDurations: ["slow=3s", "line=5s"]
        ) { run in
            try run.start(reference: (job: "tick", every: .seconds(1)))
            // line's second run ends at its fire 12 s after the load: compare before that.
            try run.finish(snapshotAfter: .seconds(11.1))
        }
        run.expectAgreement()
        run.expectDifference(when: "line skips instead of queueing (overlap=skip)") {
            $0.replacingOccurrences(of: "overlap = queue", with: "overlap = skip")
        }
        run.expectSeen(["tick": ["ran"], "slow": ["ran", "skipped"], "line": ["ran", "queued", "skipped"]])
    }

    /// The wall clock is set 6 s forward (calendar jobs run once at once for the times jumped over, the
    /// rest counted missed), then 6 s back (times that come round again fire again).
    @Test func clockStepsAgree() async throws {
        let run = try await DifferentialRun.drive(
            clockStart: "2026-05-10T07:59:58.050Z",
            config: """
                [job "even"]
                calendar = *-*-* *:*:00/2
                timezone = UTC
                command = sleep 3

                [job "second"]
                calendar = *-*-* *:*:*
                timezone = UTC
                command = true

                """,
            runDurations: ["even=3s"]
        ) { run in
            try run.start(reference: nil)
            // While even's second run is going: the fires jumped over are missed, the latest one skipped.
            try run.step(after: .seconds(5.3), by: .seconds(6))
            try run.step(after: .seconds(4.3), by: .seconds(-6))
            try run.finish(snapshotAfter: .seconds(4.3))
        }
        run.expectAgreement()
        run.expectDifference(when: "even runs alongside (overlap=allow)") {
            $0.replacingOccurrences(of: "command = sleep 3", with: "overlap = allow\ncommand = sleep 3")
        }
        run.expectSeen(["even": ["ran", "skipped", "missed"], "second": ["ran", "missed"]])
        // The step back: `second` fired for some scheduled instants twice.
        let seconds = (run.daemonRecords["second"] ?? []).filter { $0.outcome == "ran" }.map(\.scheduled)
        #expect(Set(seconds).count < seconds.count, "times that came round again fired again: \(seconds)")
    }
}

/// One due fire and what became of it, as `WHY` gives it (and as simulate's decisions imply it).
struct DueFireRecord: Equatable, CustomStringConvertible {
    var scheduled: WallTime
    var outcome: String
    var run: Int?
    var result: String?
    var reason: String?

    var description: String {
        var text = "\(RFC3339.format(scheduled)) \(outcome)"
        if let run { text += " run \(run)" }
        if let result { text += " \(result)" }
        if let reason { text += " (\(reason))" }
        return text
    }
}

/// One decision of simulate's `--json` output, with its instant on the true time line.
struct SimulatedDecision {
    var at: WallTime
    var trueAt: WallTime
    var job: String?
    var event: String
    var scheduled: WallTime?
    var run: Int?
    var reason: String?
    var result: String?
    var count: Int
}

/// One `WATCH` event, with the host time it arrived and its instant on the true time line.
struct WatchedEvent {
    var line: String
    var at: WallTime
    var received: WallTime
    var job: String?
    var event: String
    var fields: [String: Any]
}

/// Reads a `WATCH` connection on its own thread until it is shut down.
final class WatchRecorder: @unchecked Sendable {
    private let client: Client
    private let lock = NSLock()
    private var items: [(line: String, received: WallTime)] = []
    private let done = DispatchSemaphore(value: 0)
    private var stopped = false

    init(socket: String) throws {
        client = try Client(path: socket)
        let reply = try client.request("WATCH")
        guard reply == #"OK {"watching":"all"}"# else { throw HarnessError("WATCH: \(reply)") }
        Thread.detachNewThread { [self] in
            while let line = try? client.readLine() {
                let now = hostNow()
                lock.lock()
                items.append((line, now))
                lock.unlock()
            }
            done.signal()
        }
    }

    var lines: [(line: String, received: WallTime)] {
        lock.lock()
        defer { lock.unlock() }
        return items
    }

    /// Ends the connection and waits for the reader to finish (once; later calls return at once).
    func stop() {
        lock.lock()
        let first = !stopped
        stopped = true
        lock.unlock()
        guard first else { return }
        Glibc.shutdown(client.fd, Int32(SHUT_RDWR))
        _ = done.wait(timeout: .now() + 20)
    }
}

/// Runs `body` on a thread of its own and returns what it returns (see ``DifferentialRun``).
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

/// Blocks the calling thread until the host's clock plus `offset` reaches `time` (sleeps, then the last
/// millisecond in steps of 100 µs).
func sleep(until time: WallTime, offset: Duration) {
    while true {
        let remaining = (time - (hostNow() + offset)).nanoseconds
        guard remaining > 0 else { return }
        usleep(useconds_t(max(100, min(remaining / 1_000 - 1_000, 100_000))))
    }
}

/// The host's wall clock (`CLOCK_REALTIME`), not the daemon's test clock.
func hostNow() -> WallTime {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return WallTime(seconds: Int64(spec.tv_sec), nanoseconds: Int64(spec.tv_nsec))
}

/// A config through a live daemon on a test clock and through `timerctl simulate`; see
/// ``DifferentialTests``.
///
/// Everything timed (starting the daemon, waiting for instants, clock steps, the snapshot) runs on a
/// thread of its own (``drive(clockStart:config:runDurations:_:)``): under `make test` other tests block
/// the few threads of the shared test pool, and a task waiting there was seen to resume 38 s late.
/// Unchecked `Sendable`: that thread hands the run over once it is done with it.
final class DifferentialRun: @unchecked Sendable {
    /// How far every clock step, the snapshot and the start of the compared event stream stay from any
    /// decision simulate makes: the daemon may be this late (timer lateness, process start, event
    /// delivery) before a comparison could go wrong. Milliseconds on an idle host; 400 ms leaves room for
    /// a starved one.
    static let margin = Duration.milliseconds(400)
    /// Scheduled instants of `every=` jobs come from the monotonic clock, read against the wall clock at
    /// each fire: microseconds apart on the host; 20 ms allows for the clocks being read apart.
    static let intervalTolerance = Duration.milliseconds(20)

    let clockDirectory: String
    let clockFile: String
    let daemon: Daemon
    let watch: WatchRecorder
    let runDurations: [String]
    let jobs: [String]
    /// Daemon wall clock minus host wall clock before any step (the test clock's offset).
    private(set) var offset = Duration.zero
    private(set) var from = WallTime(nanosecondsSinceEpoch: 0)
    /// `every=` jobs: their scheduled instants are compared within ``intervalTolerance``.
    private let intervalJobs: Set<String>
    /// When the marker's `added` event was emitted (true time): the watch saw everything after it.
    private(set) var watchedFrom = WallTime(nanosecondsSinceEpoch: 0)
    /// Clock steps as simulate takes them (true time, offset), and the wall time the file set.
    private(set) var steps: [(at: WallTime, offset: Duration, wall: WallTime)] = []
    private(set) var until = WallTime(nanosecondsSinceEpoch: 0)
    private(set) var snapshotTook = Duration.zero
    /// How long after each planned instant (steps, the snapshot) the test acted.
    private(set) var actedLate: [Duration] = []
    private(set) var daemonRecords: [String: [DueFireRecord]] = [:]
    private(set) var daemonEvents: [WatchedEvent] = []
    fileprivate(set) var simulated: [SimulatedDecision] = []
    private(set) var simulateText = ""

    /// Starts the daemon and runs `body` (the timed part of a scenario) on a thread of its own; then
    /// runs simulate over the span, and returns the run for the comparisons.
    static func drive(clockStart: String, config: String, runDurations: [String],
                      _ body: @escaping @Sendable (DifferentialRun) throws -> Void) async throws -> DifferentialRun {
        let run = try await onOwnThread {
            let run = try DifferentialRun(clockStart: clockStart, config: config, runDurations: runDurations)
            try body(run)
            return run
        }
        run.simulated = try run.simulate(until: run.until, text: true)
        return run
    }

    private init(clockStart: String, config: String, runDurations: [String]) throws {
        clockDirectory = try makeTemporaryDirectory()
        clockFile = clockDirectory + "/clock"
        try clockStart.write(toFile: clockFile, atomically: true, encoding: .utf8)
        // stop_grace = 0: the daemon stops at once at the end, killing the runs still going (simulate
        // reads the same file; the setting matters only when the daemon stops).
        let config = "[daemon]\nstop_grace = 0\n\n" + config
        daemon = try Daemon(config: config, environment: [
            "TIMERD_TEST_FAILPOINTS": "test-clock", "TIMERD_TEST_CLOCK_FILE": clockFile,
        ])
        watch = try WatchRecorder(socket: daemon.socket)
        self.runDurations = runDurations
        var jobs: [String] = []
        var intervalJobs: Set<String> = []
        for line in config.split(separator: "\n") {
            if line.hasPrefix("[job \"") { jobs.append(String(line.dropFirst(6).prefix { $0 != "\"" })) }
            if line.hasPrefix("every"), let job = jobs.last { intervalJobs.insert(job) }
        }
        self.jobs = jobs
        self.intervalJobs = intervalJobs
    }

    deinit {
        watch.stop()
        daemon.stop()
        removeTemporaryDirectory(clockDirectory)
    }

    /// The daemon's wall clock as it would read without steps: simulate's true time line.
    func trueNow() -> WallTime { hostNow() + offset }

    /// Waits until `condition` holds, checking every 2 ms, for at most `timeout` seconds; throws then.
    func poll(timeout: Double, _ what: String, _ condition: () throws -> Bool) throws {
        let deadline = hostNow() + .seconds(timeout)
        while try !condition() {
            guard hostNow() < deadline else { throw HarnessError("timed out after \(timeout)s waiting for \(what)") }
            usleep(2_000)
        }
    }

    /// The watched events so far, parsed.
    func events() -> [WatchedEvent] {
        watch.lines.compactMap { item in
            guard let object = try? JSONSerialization.jsonObject(with: Data(item.line.utf8)) as? [String: Any],
                  let atText = object["at"] as? String, let at = try? RFC3339.parse(atText),
                  let event = object["event"] as? String else { return nil }
            return WatchedEvent(line: item.line, at: at, received: item.received, job: object["job"] as? String, event: event,
                                fields: object)
        }
    }

    /// Confirms the watch with a marker job, measures the test clock's offset, and finds `--from`:
    /// `reference` names an `every=` job (and its interval) whose first fire gives the load instant; nil:
    /// the earliest fire of any (calendar) job, minus 1 ms.
    func start(reference: (job: String, every: Duration)?) throws {
        let added = try daemon.request("ADD differential-marker at=2099-01-01T00:00:00Z command=true")
        guard added == "OK" else { throw HarnessError("ADD differential-marker: \(added)") }
        try poll(timeout: 10, "the watch to see the marker") { events().contains { $0.event == "added" } }
        guard let marker = events().first(where: { $0.event == "added" }) else { throw HarnessError("no added event") }
        watchedFrom = marker.at
        let referenceJob = reference?.job ?? jobs[0]
        try poll(timeout: 20, "\(referenceJob)'s first fire") { try !whyRecords(referenceJob).isEmpty }
        if let reference {
            guard let first = try whyRecords(reference.job).first else { throw HarnessError("\(reference.job) has not fired") }
            from = first.scheduled + (.zero - reference.every)
        } else {
            let firsts = try jobs.compactMap { try whyRecords($0).first?.scheduled }
            guard let earliest = firsts.min() else { throw HarnessError("no job has fired") }
            from = earliest + .milliseconds(-1)
        }
        measureOffset()
    }

    /// The test clock's offset: the largest `at` minus arrival over the events before any step (each
    /// is a lower bound; the best is off by the delivery latency alone).
    private func measureOffset() {
        let before = events().prefix { $0.event != "clock" }
        offset = before.map { $0.at - $0.received }.max() ?? .zero
    }

    /// Steps the daemon's wall clock by `by`, at the first quiet instant at least `after` past the
    /// previous step (or `--from`).
    func step(after: Duration, by: Duration) throws {
        measureOffset()
        let base = steps.last?.at ?? from
        let plan = try simulate(until: base + after + .seconds(6))
        let at = try quietInstant(after: base + after, in: plan)
        let wallBefore = steps.last.map { $0.wall + (at - $0.at) } ?? at
        let wall = wallBefore + by
        try RFC3339.format(wall).write(toFile: clockFile, atomically: true, encoding: .utf8)
        sleep(until: at, offset: offset)
        let sent = trueNow()
        daemon.signal(SIGUSR2)
        actedLate.append(sent - at)
        let previousWall = steps.last.map { $0.wall + (sent - $0.at) } ?? sent
        steps.append((sent, wall - previousWall, wall))
        let count = steps.count
        try poll(timeout: 10, "the daemon to report clock step \(count)") { events().filter { $0.event == "clock" }.count == count }
    }

    /// Takes the snapshot at the first quiet instant at least `snapshotAfter` past the last step (or
    /// `--from`): `WHY` of every job, then simulate `--until` then, and the watched events up to it.
    func finish(snapshotAfter: Duration) throws {
        let base = steps.last?.at ?? from
        let plan = try simulate(until: base + snapshotAfter + .seconds(6))
        let at = try quietInstant(after: base + snapshotAfter, in: plan)
        if let hazard = Self.firstTie(in: plan), at + Self.margin >= hazard {
            throw HarnessError("the snapshot at \(RFC3339.format(at)) is past a tie at \(RFC3339.format(hazard))")
        }
        let client = try Client(path: daemon.socket)
        sleep(until: at, offset: offset)
        let sent = trueNow()
        for job in jobs { daemonRecords[job] = try Self.records(fromWhy: try client.request("WHY \(job) limit=50")) }
        snapshotTook = trueNow() - sent
        actedLate.append(sent - at)
        until = sent
        // Every event before the snapshot has arrived once the marker's cancellation has.
        let cancelled = try daemon.request("CANCEL differential-marker")
        guard cancelled == "OK" else { throw HarnessError("CANCEL differential-marker: \(cancelled)") }
        try poll(timeout: 10, "the watch to see the marker cancelled") { events().contains { $0.event == "cancelled" } }
        watch.stop()
        daemonEvents = events()
    }

    /// The daemon's `WHY` records of `job`, oldest first.
    func whyRecords(_ job: String) throws -> [DueFireRecord] {
        try Self.records(fromWhy: try daemon.request("WHY \(job) limit=50"))
    }

    static func records(fromWhy reply: String) throws -> [DueFireRecord] {
        guard reply.hasPrefix("OK ") else { throw HarnessError("WHY: \(reply)") }
        let array = try JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8)) as? [[String: Any]] ?? []
        return try array.reversed().map { object in
            DueFireRecord(
                scheduled: try RFC3339.parse(object["scheduled"] as? String ?? ""), outcome: object["outcome"] as? String ?? "?",
                run: object["run"] as? Int, result: object["result"] as? String, reason: object["reason"] as? String)
        }
    }

    // MARK: - simulate

    /// Runs `timerctl simulate --json` on the daemon's config file (or `config`) from `from` to `until`
    /// with the run durations and the clock steps so far. `text`: also keep the text form, for messages.
    func simulate(until: WallTime, config: String? = nil, text: Bool = false) throws -> [SimulatedDecision] {
        var path = daemon.configPath
        if let config {
            path = daemon.directory + "/mutant.conf"
            try config.write(toFile: path, atomically: true, encoding: .utf8)
        }
        var arguments = ["simulate", "--config", path, "--from", RFC3339.format(from), "--until", RFC3339.format(until)]
        for duration in runDurations { arguments += ["--run-duration", duration] }
        for step in steps {
            let sign = step.offset < .zero ? "-" : "+"
            let magnitude = step.offset < .zero ? .zero - step.offset : step.offset
            arguments += ["--clock-step", "\(RFC3339.format(step.at))=\(sign)\(magnitude.nanoseconds)ns"]
        }
        let timerctl = try Daemon.binary("timerctl")
        if text { simulateText = try Daemon.run(timerctl, arguments).stdout }
        let result = try Daemon.run(timerctl, arguments + ["--json"])
        guard result.status == 0 else { throw HarnessError("timerctl \(arguments.joined(separator: " ")): \(result.stderr)") }
        var stepIndex = 0
        var total = Duration.zero
        return try result.stdout.split(separator: "\n").map { line in
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw HarnessError("simulate: not an object: \(line)")
            }
            let at = try RFC3339.parse(object["at"] as? String ?? "")
            let event = object["event"] as? String ?? ""
            let job = object["job"] as? String
            if job == nil, event == "clock", stepIndex < steps.count {
                total = total + steps[stepIndex].offset
                stepIndex += 1
            }
            return SimulatedDecision(
                at: at, trueAt: at + (.zero - total), job: job, event: event,
                scheduled: try (object["scheduled"] as? String).map { text throws(TimerdError) in try RFC3339.parse(text) },
                run: object["run"] as? Int, reason: object["reason"] as? String, result: object["result"] as? String,
                count: object["count"] as? Int ?? 1)
        }
    }

    /// The first instant at or after `time` (true time line) at least ``margin`` from every decision in
    /// `plan`: the middle of the first gap wide enough, or `time` itself when it lies in one.
    func quietInstant(after time: WallTime, in plan: [SimulatedDecision]) throws -> WallTime {
        let times = plan.map(\.trueAt).sorted()
        var previous: WallTime?
        for next in times + [(times.last ?? time) + .seconds(3600)] {
            defer { previous = next }
            guard next > time else { continue }
            let low = previous.map { $0 + Self.margin } ?? time
            let high = next + (.zero - Self.margin)
            let middle = previous.map { $0 + .nanoseconds((next - $0).nanoseconds / 2) } ?? time
            let candidate = max(time, middle)
            if candidate >= low, candidate <= high { return candidate }
        }
        throw HarnessError("no quiet instant after \(RFC3339.format(time))")
    }

    /// The first instant where a run of a job ends within ``margin`` of a fire of the same job: from there
    /// on the daemon may take them in either order, so nothing after it is compared.
    /// (A run that takes no time ends at the fire that started it: that is no tie.)
    static func firstTie(in plan: [SimulatedDecision]) -> WallTime? {
        var starts: [String: WallTime] = [:]
        var ends: [(job: String, at: WallTime, started: WallTime?)] = []
        var fires: [String: [WallTime]] = [:]
        for decision in plan {
            guard let job = decision.job else { continue }
            switch decision.event {
            case "start": if let run = decision.run { starts["\(job)/\(run)"] = decision.trueAt }
            case "finish": ends.append((job, decision.trueAt, decision.run.flatMap { starts["\(job)/\($0)"] }))
            case "fire": fires[job, default: []].append(decision.trueAt)
            default: break
            }
        }
        var first: WallTime?
        for end in ends {
            for fire in fires[end.job] ?? [] where fire != end.started && abs((fire - end.at).nanoseconds) < margin.nanoseconds {
                first = min(first ?? fire, min(fire, end.at))
            }
        }
        return first
    }

    // MARK: - What simulate implies

    /// The `WHY` records simulate's decisions imply for `job`, oldest first, as they stand at the end.
    static func records(of job: String, in decisions: [SimulatedDecision]) -> [DueFireRecord] {
        var records: [DueFireRecord] = []
        /// The record a decision at a fire is about: the newest one with that scheduled instant still open.
        func open(_ scheduled: WallTime?, _ outcomes: Set<String>) -> Int? {
            records.indices.last { records[$0].scheduled == scheduled && outcomes.contains(records[$0].outcome) }
        }
        for decision in decisions where decision.job == job {
            switch decision.event {
            case "fire":
                if let scheduled = decision.scheduled { records.append(DueFireRecord(scheduled: scheduled, outcome: "fired")) }
            case "start":
                if let index = open(decision.scheduled, ["fired", "queued", "waiting", "held"]) {
                    records[index].outcome = "ran"
                    records[index].run = decision.run
                    records[index].reason = nil
                }
            case "skip":
                if let index = open(decision.scheduled, ["fired"]) {
                    records[index].outcome = "skipped"
                    records[index].reason = decision.reason
                }
            case "queue":
                if let index = open(decision.scheduled, ["fired"]) {
                    let waiting = decision.reason?.hasPrefix("fire waits for a run slot") == true
                    records[index].outcome = waiting ? "waiting" : "queued"
                    records[index].reason = decision.reason
                }
            case "hold":
                if let index = open(decision.scheduled, ["fired"]) {
                    records[index].outcome = "held"
                    records[index].reason = decision.reason
                }
            case "miss":
                if let scheduled = decision.scheduled {
                    let reason = decision.reason.map { decision.count == 1 ? $0 : "\($0) (\(decision.count) fires from this one on)" }
                    records.append(DueFireRecord(scheduled: scheduled, outcome: "missed", reason: reason))
                }
            case "finish":
                if let index = records.indices.last(where: { records[$0].run == decision.run && records[$0].outcome == "ran" }) {
                    records[index].result = decision.result
                }
            default:
                break
            }
        }
        return records
    }

    /// A job's `WATCH` events as comparable words: `fire TIME`, `skip REASON`, `start N`, `finish N RESULT`.
    static func watchWords(of job: String, in decisions: [SimulatedDecision], from start: WallTime, to end: WallTime)
        -> [(word: String, scheduled: WallTime?)] {
        decisions.filter { $0.job == job && $0.trueAt >= start && $0.trueAt <= end }.compactMap { decision in
            switch decision.event {
            case "fire": return ("fire", decision.scheduled)
            case "skip", "miss":
                let reason = decision.reason ?? ""
                return ("skip " + (decision.count == 1 ? reason : "\(decision.count) fires: \(reason)"), nil)
            case "start": return ("start \(decision.run ?? 0)", nil)
            case "finish": return ("finish \(decision.run ?? 0) \(decision.result ?? "")", nil)
            default: return nil  // queue and hold have no WATCH event
            }
        }
    }

    /// The daemon's `WATCH` events of `job` whose true time is in the span, as ``watchWords(of:in:from:to:)``.
    func watchWords(of job: String, from start: WallTime, to end: WallTime) -> [(word: String, scheduled: WallTime?)] {
        var stepIndex = 0
        var total = Duration.zero
        var words: [(word: String, scheduled: WallTime?)] = []
        for event in daemonEvents {
            if event.job == nil, event.event == "clock", stepIndex < steps.count {
                // The wall clock now reads the file's time at the step's true instant.
                total = steps[stepIndex].wall - steps[stepIndex].at
                stepIndex += 1
                continue
            }
            let trueAt = event.at + (.zero - total)
            guard event.job == job, trueAt >= start, trueAt <= end else { continue }
            switch event.event {
            case "fired":
                words.append(("fire", (event.fields["scheduled_at"] as? String).flatMap { try? RFC3339.parse($0) }))
            case "skipped": words.append(("skip " + (event.fields["reason"] as? String ?? ""), nil))
            case "started": words.append(("start \(event.fields["run"] as? Int ?? 0)", nil))
            case "finished":
                words.append(("finish \(event.fields["run"] as? Int ?? 0) \(event.fields["result"] as? String ?? "")", nil))
            default: break
            }
        }
        return words
    }

    // MARK: - Comparing

    func sameInstant(_ a: WallTime?, _ b: WallTime?, job: String) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        if intervalJobs.contains(job) { return abs((a - b).nanoseconds) <= Self.intervalTolerance.nanoseconds }
        return a == b
    }

    /// Every difference between the daemon and `decisions` (simulate's), in words.
    func differences(from decisions: [SimulatedDecision]) -> [String] {
        var problems: [String] = []
        for job in jobs {
            let expected = Self.records(of: job, in: decisions)
            let actual = daemonRecords[job] ?? []
            let same = expected.count == actual.count && zip(expected, actual).allSatisfy { e, a in
                sameInstant(e.scheduled, a.scheduled, job: job) && e.outcome == a.outcome && e.run == a.run && e.result == a.result
                    && e.reason == a.reason
            }
            if !same {
                problems.append("""
                    \(job): WHY records differ
                      simulate: \(expected.map(\.description).joined(separator: "\n            "))
                      timerd:   \(actual.map(\.description).joined(separator: "\n            "))
                    """)
            }
        }
        // The event stream, from the first quiet instant after the watch was confirmed.
        guard let start = try? quietInstant(after: watchedFrom + .milliseconds(1), in: decisions) else {
            return problems + ["no quiet instant after the marker"]
        }
        for job in jobs {
            let expected = Self.watchWords(of: job, in: decisions, from: start, to: until)
            let actual = watchWords(of: job, from: start, to: until)
            let same = expected.count == actual.count
                && zip(expected, actual).allSatisfy { $0.word == $1.word && sameInstant($0.scheduled, $1.scheduled, job: job) }
            if !same {
                func show(_ words: [(word: String, scheduled: WallTime?)]) -> String {
                    words.map { $0.scheduled.map { "fire \(RFC3339.format($0))" } ?? $0.word }.joined(separator: "\n            ")
                }
                problems.append("""
                    \(job): WATCH events from \(RFC3339.format(start)) to \(RFC3339.format(until)) differ
                      simulate: \(show(expected))
                      timerd:   \(show(actual))
                    """)
            }
        }
        return problems
    }

    /// simulate and the daemon made the same decisions.
    func expectAgreement(sourceLocation: SourceLocation = #_sourceLocation) {
        let problems = differences(from: simulated)
        if !problems.isEmpty {
            Issue.record("""
                \(problems.joined(separator: "\n"))
                --from \(RFC3339.format(from)) --until \(RFC3339.format(until)); steps \(steps.map { "\(RFC3339.format($0.at))=\($0.offset)" })
                simulate:
                \(simulateText)
                timerd's events:
                \(daemonEvents.map(\.line).joined(separator: "\n"))
                """, sourceLocation: sourceLocation)
        }
        // The snapshot is one instant only if WHY answered well inside the quiet gap around it, and the
        // steps and the snapshot are where they were planned only if the test acted on time.
        #expect(snapshotTook < Self.margin, "WHY took \(snapshotTook) to answer", sourceLocation: sourceLocation)
        #expect(actedLate.allSatisfy { $0 < .milliseconds(200) }, "the test acted late: \(actedLate)", sourceLocation: sourceLocation)
        #expect(simulated.contains { $0.job != nil }, "simulate decided nothing", sourceLocation: sourceLocation)
    }

    /// simulate on the config changed by `mutate` disagrees with the daemon: the comparison can fail.
    func expectDifference(when what: String, sourceLocation: SourceLocation = #_sourceLocation, _ mutate: (String) -> String) {
        do {
            let config = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
            let changed = mutate(config)
            #expect(changed != config, "the change (\(what)) did not apply", sourceLocation: sourceLocation)
            let decisions = try simulate(until: until, config: changed)
            #expect(!differences(from: decisions).isEmpty, "the comparison missed a wrong expectation: \(what)",
                    sourceLocation: sourceLocation)
        } catch {
            Issue.record("simulate on the changed config: \(error)", sourceLocation: sourceLocation)
        }
    }

    /// Each job's records include these outcomes (the scenario shows what it is meant to).
    func expectSeen(_ outcomes: [String: [String]], sourceLocation: SourceLocation = #_sourceLocation) {
        for (job, wanted) in outcomes {
            let seen = Set((daemonRecords[job] ?? []).map(\.outcome))
            #expect(Set(wanted).isSubset(of: seen), "\(job): wanted \(wanted), saw \(daemonRecords[job] ?? [])",
                    sourceLocation: sourceLocation)
        }
    }

    /// Whether the compared records have fires on both sides of `instant`.
    func recordsCrossing(_ instant: String) throws -> Bool {
        let time = try RFC3339.parse(instant)
        let all = daemonRecords.values.flatMap { $0 }.map(\.scheduled)
        return all.contains { $0 < time } && all.contains { $0 >= time }
    }
}
