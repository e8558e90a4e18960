import Foundation
import TimerdProtocol
import TimerdSystem

/// What every scenario needs: the binaries and where to put files.
struct Setup {
    var timerd: String
    var probe: String
    var out: String
    /// The bare C launcher (bench/launcher.c), run at each lateness load as the floor (nil: not run).
    var launcher: String? = nil

    /// `jobs`: config text appended after the `[daemon]` section.
    func daemon(_ name: String, maxRunning: Int = 64, jobs: String = "") throws -> BenchDaemon {
        try BenchDaemon(timerd: timerd, workDirectory: out, name: name, config: """
            # Written by timerd-bench for the \(name) scenario.
            [daemon]
            max_running = \(maxRunning)
            log = stderr

            """ + jobs)
    }
}

/// 1. N jobs each due every second, phases spread evenly over the second, each running the probe.
struct LatenessResult: Codable {
    var peer = "timerd"
    var jobs: Int
    var seconds: Double
    var expected_fires: Int
    /// `fired` events timerd reported in the window.
    var fired: Int
    /// Probe lines written in the window (commands that started).
    var starts: Int
    var register_seconds: Double
    /// Scheduled time → timer handler, as timerd measures it.
    var dispatch_ms: Summary?
    /// Scheduled time → command running, as the command observes it.
    var command_ms: Summary?
    var rss_kb: UInt64
    var watcher_dropped: Bool
    /// CPU time the scheduler itself used in the window (user + system, not its children), seconds.
    var cpu_seconds: Double? = nil
    /// The machine's one-minute load average at the end of the window.
    var load_average: Double? = nil
    /// How far timerd's schedule is from the launcher's (job i at i/N of the second), as `LIST` gives
    /// the jobs' next fires, at most (nil for the launcher, whose phases are exact by construction).
    var phase_error_ms: Double? = nil
    /// The windows the peers' time was cut into, taking turns (`runLateness`); nil from before turns.
    var turns: Int? = nil
    /// CPU time the hypervisor took from the machine over the windows (all CPUs), seconds.
    var stolen_seconds: Double? = nil
}

/// Runs the lateness scenario for timerd and, with `setup.launcher`, the bare C launcher twice over (two
/// series of windows, "the floor against itself"), taking turns: `turns` windows each of
/// `seconds / turns`, in the order timerd, launcher, launcher again, launcher again, launcher, timerd,
/// timerd, … (so none always goes first, and each series' windows sit at the same places on average),
/// timerd's jobs paused (`PAUSE tag=bench`) while a launcher runs and the launcher stopped while
/// timerd's run. The host's speed changes over minutes, and back to back the peers measured different
/// machines: taking turns, they see the same mix of moments. Each turn but timerd's first opens after a
/// warm-up (`RESUME`, or a fresh launcher), and its probe lines are the ones appended between its
/// opening and its close. The launcher's second series is the same program measured the same way: how
/// far its p99 is from the first's is how far this run's noise alone moves a ratio.
func runLateness(_ setup: Setup, jobs: Int, seconds: Double, turns: Int) throws
    -> (timerd: LatenessResult, launcher: LatenessResult?, launcherAgain: LatenessResult?)
{
    precondition(turns > 0, "at least one turn")
    let name = "timerd-\(jobs)"
    let daemon = try setup.daemon(name, maxRunning: 1_000)
    defer { daemon.stop() }
    let timerdLines = ProbeLines(path: "\(setup.out)/\(name).probe-lines")
    let client = try BenchClient(socket: daemon.socket)
    // The launcher's schedule: job i due at i/N of every wall-clock second. An `every` grid starts when
    // timerd handles the ADD, so the ADDs go one at a time, each `start` computed as it is sent (pipelined,
    // job i's grid would start i ADDs after job 0's: with 1,000 jobs registered in 25 ms, the first 25 ms
    // of each second would carry two jobs a millisecond). A job handled more than 0.2 ms after its ADD was
    // sent (`LIST`'s next fire tells) is cancelled and added again, up to five rounds.
    let registerStart = Measure.now()
    var misplaced = Array(0..<jobs)
    var phaseError = 0.0
    for round in 0..<6 where !misplaced.isEmpty {
        for index in misplaced {
            if round > 0 { _ = try client.request("CANCEL b\(index)") }
            let start = startForPhase(Int64(index) * 1_000_000_000 / Int64(jobs))
            let reply = try client.request("ADD b\(index) every=1s start=\(start)ns tag=bench -- \(setup.probe) \(timerdLines.path) 1000000000 0")
            guard reply == "OK" else { throw BenchError("ADD b\(index): \(reply)") }
        }
        let errors = try phaseErrors(client, jobs: jobs)
        phaseError = errors.max() ?? 0
        misplaced = errors.indices.filter { errors[$0] > 0.2 }
    }
    let registerSeconds = Measure.seconds(since: registerStart)
    // After the jobs (`WATCH tag=T` of a tag no job has is an error), before their first fires (2 s on).
    let watcher = try FireWatcher(socket: daemon.socket, filter: "tag=bench")
    // Every job has fired at least once (first fires within 3 s) before the first window opens.
    Measure.sleep(seconds: 4)

    let window = seconds / Double(turns)
    var timerdTurn = LatenessTurns()
    var timerdPaused = false
    func timerdWindow() throws {
        if timerdPaused {
            let reply = try client.request("RESUME tag=bench")
            guard reply.hasPrefix("OK") else { throw BenchError("RESUME tag=bench: \(reply)") }
            // Each job fires once within the first second after RESUME.
            Measure.sleep(seconds: LatenessTurns.warmUp)
        }
        watcher.phase.set("window")
        try timerdTurn.measure(lines: timerdLines, process: daemon.probe, seconds: window)
        watcher.phase.set(nil)
        let reply = try client.request("PAUSE tag=bench")
        guard reply.hasPrefix("OK") else { throw BenchError("PAUSE tag=bench: \(reply)") }
        timerdPaused = true
    }
    let launcherLines = ProbeLines(path: "\(setup.out)/launcher-\(jobs).probe-lines")
    let againLines = ProbeLines(path: "\(setup.out)/launcher2-\(jobs).probe-lines")
    // The launcher's two series: their probe lines and their windows.
    let seriesLines = [launcherLines, againLines]
    var seriesTurns = [LatenessTurns(), LatenessTurns()]
    Measure.truncate("\(setup.out)/launcher-\(jobs).log")
    for turn in 0..<turns {
        let timerdFirst = turn % 2 == 0
        if timerdFirst { try timerdWindow() }
        if let launcher = setup.launcher {
            for series in timerdFirst ? [0, 1] : [1, 0] {
                try launcherWindow(setup, launcher: launcher, jobs: jobs, lines: seriesLines[series], seconds: window,
                                   turns: &seriesTurns[series])
            }
        }
        if !timerdFirst { try timerdWindow() }
    }
    let rss = try daemon.residentBytes() / 1024
    _ = try client.request("CANCEL tag=bench")
    try timerdTurn.writeSamples(from: timerdLines, to: "\(setup.out)/\(name).samples")
    let command = Measure.probeSamples("\(setup.out)/\(name).samples")
    let dispatch = watcher.samples
    try Measure.write(dispatch.map { String($0) }.joined(separator: "\n") + "\n", to: "\(setup.out)/\(name).dispatch")
    let timerd = LatenessResult(
        jobs: jobs, seconds: seconds, expected_fires: Int(Double(jobs) * seconds), fired: dispatch.count,
        starts: command.count, register_seconds: registerSeconds, dispatch_ms: Summary(milliseconds: dispatch),
        command_ms: Summary(milliseconds: command), rss_kb: rss, watcher_dropped: watcher.dropped.get(),
        cpu_seconds: timerdTurn.cpuSeconds, load_average: timerdTurn.loadAverage, phase_error_ms: phaseError,
        turns: turns, stolen_seconds: timerdTurn.stolenSeconds)
    guard setup.launcher != nil else { return (timerd, nil, nil) }
    func launcherResult(_ peer: String, _ name: String, _ lines: ProbeLines, _ turn: LatenessTurns) throws -> LatenessResult {
        try turn.writeSamples(from: lines, to: "\(setup.out)/\(name)-\(jobs).samples")
        let launched = Measure.probeSamples("\(setup.out)/\(name)-\(jobs).samples")
        return LatenessResult(
            peer: peer, jobs: jobs, seconds: seconds, expected_fires: Int(Double(jobs) * seconds), fired: launched.count,
            starts: launched.count, register_seconds: 0, dispatch_ms: nil, command_ms: Summary(milliseconds: launched),
            rss_kb: turn.residentKB, watcher_dropped: false, cpu_seconds: turn.cpuSeconds,
            load_average: turn.loadAverage, turns: turns, stolen_seconds: turn.stolenSeconds)
    }
    return (timerd, try launcherResult("bare C launcher", "launcher", launcherLines, seriesTurns[0]),
            try launcherResult("bare C launcher, again", "launcher2", againLines, seriesTurns[1]))
}

/// The file the probes of one peer append to over all its turns, and the lines of each window.
struct ProbeLines {
    let path: String

    init(path: String) {
        self.path = path
        Measure.truncate(path)
    }

    /// Lines appended so far (each probe writes one whole line with one `write`, O_APPEND).
    func count() -> Int {
        guard let bytes = try? FileSystem.readFile(path) else { return 0 }
        return bytes.reduce(0) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
    }
}

/// What one peer's windows add up to: which probe lines fell in them, its CPU time over them, the load
/// average at the end of the last.
struct LatenessTurns {
    /// From a `RESUME`, or a launcher's start (its first fires at the next whole second), to a window.
    static let warmUp = 1.5

    var windows: [Range<Int>] = []
    var cpuSeconds = 0.0
    /// CPU time the hypervisor took over the windows (`Measure.stolenSeconds`), nil if unknown.
    var stolenSeconds: Double? = 0
    var loadAverage: Double?
    var residentKB: UInt64 = 0

    mutating func measure(lines: ProbeLines, process: ProcessProbe, seconds: Double) throws {
        let first = lines.count()
        let cpuBefore = try process.cpuSeconds()
        let stolenBefore = Measure.stolenSeconds()
        Measure.sleep(seconds: seconds)
        cpuSeconds += try process.cpuSeconds() - cpuBefore
        if let before = stolenBefore, let after = Measure.stolenSeconds(), let sum = stolenSeconds {
            stolenSeconds = sum + after - before
        } else {
            stolenSeconds = nil
        }
        windows.append(first..<lines.count())
        loadAverage = Measure.loadAverage()
        residentKB = try process.residentBytes() / 1024
    }

    /// The windows' lines, in order, as the peer's samples file (what the report reads).
    func writeSamples(from lines: ProbeLines, to path: String) throws {
        let all = (try? FileSystem.readFile(lines.path)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let split = all.split(separator: "\n", omittingEmptySubsequences: false)
        let kept = windows.flatMap { split[min($0.lowerBound, split.count)..<min($0.upperBound, split.count)] }
        try Measure.write(kept.map { $0 + "\n" }.joined(), to: path)
    }
}

/// How far each job's fires, as `LIST` gives their `next_fire`, are from the launcher's phases (job
/// `b<i>` at i/`jobs` of the second), in milliseconds, by job index.
func phaseErrors(_ client: BenchClient, jobs: Int) throws -> [Double] {
    let listed = try client.request("LIST tag=bench")
    guard listed.hasPrefix("OK "),
          let list = try JSONSerialization.jsonObject(with: Data(listed.utf8.dropFirst(3))) as? [[String: Any]],
          list.count == jobs else { throw BenchError("LIST tag=bench: \(listed.prefix(200))") }
    var errors = [Double](repeating: 0, count: jobs)
    for job in list {
        guard let name = job["name"] as? String, let index = Int(name.dropFirst()), errors.indices.contains(index),
              let next = job["next_fire"] as? String, let ns = HookCounter.nanoseconds(rfc3339: next) else {
            throw BenchError("LIST tag=bench: a job without a name or next_fire: \(job)")
        }
        let off = (ns % 1_000_000_000 - Int64(index) * 1_000_000_000 / Int64(jobs) + 1_500_000_000) % 1_000_000_000 - 500_000_000
        errors[index] = Double(abs(off)) / 1e6
    }
    return errors
}

/// 2. Many registered jobs: adding them (pipelined, and one connection per request), memory per job,
/// `LIST`, `CANCEL tag=`, and the lateness of a few fast jobs meanwhile.
struct ScaleResult: Codable {
    var jobs: Int
    var pipelined_seconds: Double
    var pipelined_adds_per_second: Double
    /// The same number of `ADD`s over 16 connections pipelining at once, from one client thread, to a
    /// daemon of their own.
    var pipelined_16_adds_per_second: Double?
    var per_client_seconds: Double
    var per_client_adds_per_second: Double
    var rss_before_kb: UInt64
    var rss_after_kb: UInt64
    var bytes_per_job: Double
    var list_seconds: Double
    var list_bytes: Int
    /// How long the first bytes of the `LIST` reply took (it is streamed), and the daemon's peak resident
    /// memory during the `LIST` (`VmHWM`, reset just before it).
    var list_first_byte_seconds: Double?
    var list_peak_rss_kb: UInt64?
    /// `timerctl --json list` (the timerctl beside timerd) to /dev/null, start to exit: the `LIST` as a
    /// user runs it (nil when there is no timerctl beside timerd).
    var timerctl_list_seconds: Double?
    var cancel_seconds: Double
    var fast_jobs: Int
    var fast_dispatch_ms: Summary?
    var fast_command_ms: Summary?
    /// The fast jobs' due → handler lateness during each step (pipelined, list, cancel, per-client).
    var fast_dispatch_ms_by_step: [String: Summary]
    /// What one armed Dispatch timer source costs by itself (`timerd-bench dispatch-timers N`): what
    /// timerd saves with its deadline queue (`docs/architecture.md`, "Timers").
    var dispatch_timer_bytes: Double
    /// Notifications the daemon sent to its `NOTIFY_SOCKET` (as under systemd) over the scenario, and the
    /// last status line among them: the status line is kept up to date throughout, as for systemd.
    var notifications: Int?
    var last_status: String?
}

func runScale(_ setup: Setup, jobs: Int) throws -> ScaleResult {
    // ADDs spread over 16 connections pipelining at once (group commit across connections), first, to a
    // daemon of their own that nothing else keeps busy meanwhile (the main one, later, removes 100,000
    // cancelled jobs behind its answer for a while). One client thread for all 16 connections.
    let pipelined16: Double
    do {
        let fresh = try setup.daemon("scale-16")
        defer { fresh.stop() }
        let connections = 16
        let shares = (0..<connections).map { connection in
            ((connection * jobs / connections)..<((connection + 1) * jobs / connections)).map { "ADD m\($0) every=1h tag=bulk -- /bin/true" }
        }
        let start = Measure.now()
        let errors = try MultiplexedPipeline.run(socket: fresh.socket, shares: shares)
        pipelined16 = Measure.seconds(since: start)
        if let failure = errors.first { throw BenchError("pipelined ADD over \(connections) connections failed: \(failure)") }
    }

    let daemon = try setup.daemon("scale")
    defer { daemon.stop() }
    let fastPath = "\(setup.out)/scale-fast.samples"
    Measure.truncate(fastPath)
    let client = try BenchClient(socket: daemon.socket)
    let fastJobs = 5
    for index in 0..<fastJobs {
        let reply = try client.request("ADD fast\(index) every=100ms tag=fast -- \(setup.probe) \(fastPath) 100000000 0")
        guard reply == "OK" else { throw BenchError("ADD fast\(index): \(reply)") }
    }
    // After the jobs: `WATCH tag=T` of a tag no job has is an error.
    let watcher = try FireWatcher(socket: daemon.socket, filter: "tag=fast")
    Measure.sleep(seconds: 1)
    Measure.truncate(fastPath)
    let rssBefore = try daemon.residentBytes()
    watcher.phase.set("pipelined")

    let lines = (0..<jobs).map { "ADD j\($0) every=1h tag=bulk -- /bin/true" }
    var start = Measure.now()
    let errors = try client.pipeline(lines)
    let pipelined = Measure.seconds(since: start)
    guard errors.isEmpty else { throw BenchError("pipelined ADD failed: \(errors[0])") }
    let rssAfter = try daemon.residentBytes()

    watcher.phase.set("list")
    try daemon.resetPeakResident()
    start = Measure.now()
    let (list, listFirstByte) = try client.requestTimingFirstByte("LIST")
    let listSeconds = Measure.seconds(since: start)
    let listPeak = try daemon.peakResidentBytes()
    guard list.hasPrefix("OK [") else { throw BenchError("LIST: \(list.prefix(200))") }

    watcher.phase.set("timerctl-list")
    let timerctlListSeconds = try timeTimerctlList(setup, socket: daemon.socket)

    watcher.phase.set("cancel")
    start = Measure.now()
    let cancel = try client.request("CANCEL tag=bulk")
    let cancelSeconds = Measure.seconds(since: start)
    guard cancel.hasPrefix("OK") else { throw BenchError("CANCEL tag=bulk: \(cancel.prefix(200))") }

    watcher.phase.set("per-client")
    start = Measure.now()
    for index in 0..<jobs {
        let reply = try BenchClient(socket: daemon.socket).request("ADD c\(index) every=1h tag=bulk -- /bin/true")
        guard reply == "OK" else { throw BenchError("ADD c\(index): \(reply)") }
    }
    let perClient = Measure.seconds(since: start)
    watcher.phase.set(nil)
    let notified = daemon.notify.received

    return ScaleResult(
        jobs: jobs, pipelined_seconds: pipelined, pipelined_adds_per_second: Double(jobs) / pipelined,
        pipelined_16_adds_per_second: Double(jobs) / pipelined16,
        per_client_seconds: perClient, per_client_adds_per_second: Double(jobs) / perClient,
        rss_before_kb: rssBefore / 1024, rss_after_kb: rssAfter / 1024,
        bytes_per_job: Double(rssAfter - min(rssAfter, rssBefore)) / Double(jobs),
        list_seconds: listSeconds, list_bytes: list.utf8.count, list_first_byte_seconds: listFirstByte,
        list_peak_rss_kb: listPeak / 1024, timerctl_list_seconds: timerctlListSeconds, cancel_seconds: cancelSeconds,
        fast_jobs: fastJobs, fast_dispatch_ms: Summary(milliseconds: watcher.samples),
        fast_command_ms: Summary(milliseconds: Measure.probeSamples(fastPath)),
        fast_dispatch_ms_by_step: watcher.samplesByPhase.get().compactMapValues { Summary(milliseconds: $0) },
        dispatch_timer_bytes: try dispatchTimerCost(jobs), notifications: notified.messages, last_status: notified.lastStatus)
}

/// Runs `timerctl --socket SOCKET --json list` with its output to /dev/null and times it, start to exit;
/// nil when there is no `timerctl` beside `timerd`.
func timeTimerctlList(_ setup: Setup, socket: String) throws -> Double? {
    let timerctl = FileSystem.directoryName(of: setup.timerd) + "/timerctl"
    guard FileSystem.isRegularFile(timerctl) else { return nil }
    let null = try FileDescriptor.openDevNull(.writeOnly)
    defer { try? null.close() }
    let start = Measure.now()
    let child = try Spawn.run(program: timerctl, arguments: ["--socket", socket, "--json", "list"], environment: [:], output: null)
    let status = try child.waitExit(blocking: true)
    let seconds = Measure.seconds(since: start)
    try? child.pidfd.close()
    guard status == .exited(0) else { throw BenchError("timerctl --json list: \(String(describing: status))") }
    return seconds
}

/// Runs `timerd-bench dispatch-timers N` and reads the bytes per timer it prints.
func dispatchTimerCost(_ count: Int) throws -> Double {
    let pipe = try FileDescriptor.makePipe()
    let child = try Spawn.run(
        program: try FileSystem.realPath("/proc/self/exe"), arguments: ["dispatch-timers", String(count)],
        environment: [:], output: pipe.write)
    try? pipe.write.close()
    let text = String(decoding: try pipe.read.readToEnd(), as: UTF8.self)
    try? pipe.read.close()
    _ = try? child.waitExit(blocking: true)
    try? child.pidfd.close()
    guard let bytes = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
        throw BenchError("dispatch-timers printed \(text)")
    }
    return bytes
}

/// Arms `count` Dispatch timers (due in an hour, each with its own handler, as timerd armed one per job
/// before its deadline queue) and prints the growth of resident memory per timer.
func dispatchTimers(_ count: Int) -> Never {
    func resident() -> UInt64 { (try? CurrentProcess.residentSetBytes()) ?? 0 }
    let queue = DispatchQueue(label: "timers")
    let before = resident()
    var timers: [any DispatchSourceTimer] = []
    timers.reserveCapacity(count)
    for index in 0..<count {
        let timer = DispatchSource.makeTimerSource(flags: .strict, queue: queue)
        timer.schedule(deadline: .now() + .seconds(3600), repeating: .never, leeway: .nanoseconds(0))
        timer.setEventHandler { print(index) }
        timer.resume()
        timers.append(timer)
    }
    // Arming happens on libdispatch's manager queue; give it a moment before reading.
    usleep(500_000)
    print(Double(resident() - before) / Double(count))
    exit(0)
}

/// 3. Sustained command runs per second: more fires offered than two cores can start. Each job is due
/// once a second (phases spread evenly), so a job never overlaps itself and no fire is skipped for
/// overlap; what cannot start on time starts late, and late past its next due time counts as missed.
struct ThroughputResult: Codable {
    var jobs: Int
    var offered_per_second: Double
    var seconds: Double
    var runs_ok: Int
    var runs_failed: Int
    var runs_per_second: Double
    var skipped: Int
    var max_running: Int
}

func runThroughput(_ setup: Setup, jobs: Int, seconds: Double) throws -> ThroughputResult {
    let maxRunning = 256
    let daemon = try setup.daemon("throughput", maxRunning: maxRunning)
    defer { daemon.stop() }
    let client = try BenchClient(socket: daemon.socket)
    let errors = try client.pipeline((0..<jobs).map { index in
        "ADD t\(index) every=1s start=\(1_000_000_000 + index * 1_000_000_000 / jobs)ns tag=load -- /bin/true"
    })
    guard errors.isEmpty else { throw BenchError("ADD failed: \(errors[0])") }
    Measure.sleep(seconds: 3)
    let before = try stats(client)
    let start = Measure.now()
    Measure.sleep(seconds: seconds)
    let after = try stats(client)
    let elapsed = Measure.seconds(since: start)
    _ = try client.request("CANCEL tag=load")
    let ok = after.runs.ok - before.runs.ok
    return ThroughputResult(
        jobs: jobs, offered_per_second: Double(jobs), seconds: elapsed, runs_ok: ok,
        runs_failed: after.runs.failed - before.runs.failed, runs_per_second: Double(ok) / elapsed,
        skipped: after.skipped - before.skipped, max_running: maxRunning)
}

/// 3b. Sustained webhook requests per second, to a local nginx that answers 200 at once.
struct WebhookThroughputResult: Codable {
    var jobs: Int
    var offered_per_second: Double
    var seconds: Double
    var requests_ok: Int
    var requests_failed: Int
    var requests_per_second: Double
    var skipped: Int
    var max_threads: Int
}

func runWebhookThroughput(_ setup: Setup, nginx: String, jobs: Int, seconds: Double) throws -> WebhookThroughputResult {
    let port = 18_000 + Int(getpid() % 1000)
    let prefix = "\(setup.out)/nginx"
    try FileSystem.makeDirectories(prefix + "/logs")
    try FileSystem.writeAtomically("\(prefix)/nginx.conf", """
        # Written by timerd-bench: a loopback server that answers every request with 200.
        daemon off;
        worker_processes 1;
        pid \(prefix)/nginx.pid;
        error_log \(prefix)/logs/error.log warn;
        events { worker_connections 4096; }
        http {
            access_log off;
            client_body_temp_path \(prefix)/body;
            proxy_temp_path \(prefix)/proxy;
            fastcgi_temp_path \(prefix)/fastcgi;
            uwsgi_temp_path \(prefix)/uwsgi;
            scgi_temp_path \(prefix)/scgi;
            keepalive_requests 1000000;
            server {
                listen 127.0.0.1:\(port);
                location / { return 200 "ok\\n"; }
            }
        }

        """)
    let output = try FileDescriptor.open("\(prefix)/logs/stderr.log", .writeOnly, options: [.create, .truncate])
    let server = try Spawn.run(program: nginx, arguments: ["-p", prefix, "-c", "\(prefix)/nginx.conf"], environment: [:], output: output)
    try? output.close()
    defer {
        _ = try? server.signal(.term)
        _ = try? server.waitExit(blocking: true)
        try? server.pidfd.close()
    }
    // nginx is up once its port accepts a connection.
    var ready = false
    for _ in 0..<500 where !ready {
        let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        ready = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        close(socket)
        if !ready { usleep(10_000) }
    }
    guard ready else { throw BenchError("nginx did not start; see \(prefix)/logs") }

    let daemon = try setup.daemon("webhooks", maxRunning: 1_000)
    defer { daemon.stop() }
    let client = try BenchClient(socket: daemon.socket)
    let errors = try client.pipeline((0..<jobs).map { index in
        "ADD w\(index) every=1s start=\(1_000_000_000 + index * 1_000_000_000 / jobs)ns tag=load webhook=http://127.0.0.1:\(port)/hook"
    })
    guard errors.isEmpty else { throw BenchError("ADD failed: \(errors[0])") }
    Measure.sleep(seconds: 3)
    let before = try stats(client)
    let start = Measure.now()
    var maxThreads = 0
    while Measure.seconds(since: start) < seconds {
        Measure.sleep(seconds: 0.5)
        maxThreads = max(maxThreads, (try? daemon.contextSwitches().count) ?? 0)
    }
    let after = try stats(client)
    let elapsed = Measure.seconds(since: start)
    _ = try client.request("CANCEL tag=load")
    let ok = after.runs.ok - before.runs.ok
    return WebhookThroughputResult(
        jobs: jobs, offered_per_second: Double(jobs), seconds: elapsed, requests_ok: ok,
        requests_failed: after.runs.failed + after.runs.timeout - before.runs.failed - before.runs.timeout,
        requests_per_second: Double(ok) / elapsed, skipped: after.skipped - before.skipped, max_threads: maxThreads)
}

func stats(_ client: BenchClient) throws -> DaemonStats {
    let reply = try client.request("STATS")
    guard reply.hasPrefix("OK ") else { throw BenchError("STATS: \(reply)") }
    return try Payload.decode(DaemonStats.self, from: String(reply.dropFirst(3)))
}

/// 4. Idle cost: memory right after start with no jobs, then memory and wake-ups with 100 hourly jobs
/// once the client that added them has gone (outside systemd: no watchdog).
struct IdleResult: Codable {
    var jobs: Int
    var seconds: Double
    /// Resident 2 s after start, before any job (issue #19's "empty config" row; nil in older results).
    var empty_rss_kb: UInt64?
    /// Resident 2 s after the jobs were added …
    var jobs_rss_kb: UInt64?
    /// Resident 2 s after start of another timerd whose config declares the same jobs (nil in older results).
    var config_jobs_rss_kb: UInt64?
    /// … and at the end of the idle window.
    var rss_kb: UInt64
    var threads: Int
    var context_switches: Int
    var wakeups_per_minute: Double
    /// The same measurement of a bare program with one idle Dispatch timer (`timerd-bench dispatch-idle`)…
    var baseline_wakeups_per_minute: Double
    var baseline_rss_kb: UInt64
    /// … and of the same program after one block ran on the global concurrent queue, as Swift
    /// concurrency's default executor does (`timerd-bench dispatch-idle global`).
    var baseline_global_wakeups_per_minute: Double
}

func runIdle(_ setup: Setup, seconds: Double) throws -> IdleResult {
    let jobs = 100
    // The same jobs declared in the config: issue #19's 100-jobs row both ways.
    let configJobsRSS: UInt64 = try {
        let daemon = try setup.daemon("idle-config", jobs: (0..<jobs).map { "[job \"h\($0)\"]\nevery = 1h\ncommand = /bin/true\n\n" }.joined())
        defer { daemon.stop() }
        Measure.sleep(seconds: 2)
        return try daemon.residentBytes() / 1024
    }()
    let daemon = try setup.daemon("idle")
    defer { daemon.stop() }
    Measure.sleep(seconds: 2)
    let emptyRSS = try daemon.residentBytes() / 1024
    do {
        let client = try BenchClient(socket: daemon.socket)
        let errors = try client.pipeline((0..<jobs).map { "ADD h\($0) every=1h -- /bin/true" })
        guard errors.isEmpty else { throw BenchError("ADD failed: \(errors[0])") }
    }
    Measure.sleep(seconds: 2)
    let jobsRSS = try daemon.residentBytes() / 1024
    // Let the connection's end settle before counting: the Dispatch worker threads its requests woke
    // end after 5 s without work (each wakes once more to exit), so the minute counts the idle state.
    Measure.sleep(seconds: 6)
    let before = try daemon.contextSwitches()
    let start = Measure.now()
    Measure.sleep(seconds: seconds)
    let after = try daemon.contextSwitches()
    let elapsed = Measure.seconds(since: start)
    let switches = ProcessProbe.wakeups(from: before, to: after)
    let rss = try daemon.residentBytes() / 1024
    let baseline = try idleBaseline(seconds: seconds, global: false)
    let global = try idleBaseline(seconds: seconds, global: true)
    return IdleResult(
        jobs: jobs, seconds: elapsed, empty_rss_kb: emptyRSS, jobs_rss_kb: jobsRSS, config_jobs_rss_kb: configJobsRSS, rss_kb: rss, threads: after.count,
        context_switches: switches, wakeups_per_minute: Double(switches) * 60 / elapsed,
        baseline_wakeups_per_minute: baseline.wakeupsPerMinute, baseline_rss_kb: baseline.rssKB,
        baseline_global_wakeups_per_minute: global.wakeupsPerMinute)
}

/// Wake-ups of this program in `dispatch-idle` mode over `seconds`.
func idleBaseline(seconds: Double, global: Bool) throws -> (wakeupsPerMinute: Double, rssKB: UInt64) {
    let output = try FileDescriptor.openDevNull()
    defer { try? output.close() }
    let child = try Spawn.run(
        program: try FileSystem.realPath("/proc/self/exe"), arguments: ["dispatch-idle"] + (global ? ["global"] : []), environment: [:], output: output)
    let process = ProcessProbe(pid: child.pid)
    defer { child.killAndReap() }
    Measure.sleep(seconds: 3)
    let before = try process.contextSwitches()
    let start = Measure.now()
    Measure.sleep(seconds: seconds)
    let after = try process.contextSwitches()
    let elapsed = Measure.seconds(since: start)
    return (Double(ProcessProbe.wakeups(from: before, to: after)) * 60 / elapsed, try process.residentBytes() / 1024)
}

/// The bare program `idleBaseline` measures: one Dispatch timer due in an hour, then nothing (after one
/// empty block on the global concurrent queue if `global`).
func dispatchIdle(global: Bool) -> Never {
    let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "idle"))
    timer.schedule(deadline: .now() + .seconds(3600))
    timer.setEventHandler {}
    timer.resume()
    if global { DispatchQueue.global().async {} }
    while true { pause() }
}
