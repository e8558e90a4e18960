import Foundation
import Glibc
import Synchronization
import Testing
import TimerdCore
import TimerdProtocol

/// The sizes of the hostile loads (the whole suite aims at well under a minute on two busy cores).
private enum Size {
    /// Seeded random garbage on one connection: NULs, newlines, blank lines, overlong lines, invalid UTF-8,
    /// verbs followed by junk.
    static let garbageBytes = 4 << 20
    static let garbageSeed: UInt64 = 0x7131_3E5D_0BAD_F00D
    /// One request line this long before its newline.
    static let hugeLineBytes = 100 << 20
    /// Rounds of every invalid-UTF-8 request, pipelined.
    static let badEncodingRounds = 300
    /// Connections opened and left idle.
    static let idleConnections = 10_000
    /// `LIST` requests pipelined by a client that never reads, and the jobs that make each reply large.
    static let unreadLists = 100_000
    static let listJobs = 20
    /// Clients in a tight request loop, and for how long.
    static let busyClients = 50
    static let busySeconds = 3.0
    /// Clients killed mid-request, of each kind.
    static let killsPerKind = 4
}

/// Hostile clients against the real daemon. Every case starts timerd with a job that fires every 100 ms,
/// runs its load on background threads while a well-behaved client on fresh connections keeps getting
/// correct answers (PING, LIST, ADD, SHOW, CANCEL) within `HostileFixture.probeBound`, and ends by checking
/// that the same process is still up, the job fired on time throughout (`STATS` lateness), and resident
/// memory came back. Sizes are in `Size`; measured numbers are printed as `hostile: …` lines.
@Suite(.serialized) struct HostileClientTests {
    // MARK: - 1. Binary garbage

    @Test func binaryGarbageGetsOneErrorPerLine() throws {
        let fixture = try HostileFixture()
        let garbage = Garbage.make(bytes: Size.garbageBytes, seed: Size.garbageSeed)
        // What timerd must answer, from the framer and parser it uses itself: the code of each line's
        // error, or nil where the line parses (a verb and junk words) and the handler rejects it.
        var framer = LineFramer(maxLineBytes: Limits.maxLineBytes)
        let expected: [String?] = framer.append(garbage).map { event -> String? in
            switch event {
            case .tooLong:
                return TimerdError.Code.lineTooLong.rawValue
            case .line(let bytes):
                do throws(TimerdError) {
                    _ = try Request.parse(line: bytes)
                    return nil
                } catch {
                    return error.code.rawValue
                }
            }
        }
        #expect(framer.finish() == nil, "the garbage ends with a newline")
        let codes = Set(TimerdError.Code.allCases.map(\.rawValue))

        let client = try Client(path: fixture.daemon.socket)
        try fixture.loadStarts()
        let load = LoadThreads(threads: 2) { index, load in
            if index == 0 {
                do {
                    try client.write(garbage)
                    try client.write("PING\n")
                } catch {
                    load.problems.add("writing the garbage: \(error)")
                }
                return
            }
            var mismatches = 0
            for (line, code) in expected.enumerated() {
                let reply: String
                do {
                    reply = try client.readLine()
                } catch {
                    return load.problems.add("reply \(line) of \(expected.count): \(error)")
                }
                let got = reply.hasPrefix("ERR ") ? String(reply.dropFirst(4).prefix { $0 != " " }) : "(not ERR)"
                if !codes.contains(got) || (code != nil && got != code) {
                    mismatches += 1
                    if mismatches <= 5 { load.problems.add("line \(line): expected ERR \(code ?? "…"), got \(reply.prefix(200))") }
                }
            }
            if mismatches > 0 { load.problems.add("\(mismatches) of \(expected.count) replies were wrong") }
            let last = try? client.readLine()
            if last != "OK" { load.problems.add("PING after the garbage got \(last ?? "nothing")") }
        }
        fixture.probe(until: { load.finished })
        load.stop()
        #expect(try fixture.listNames() == ["tick"], "no garbage created a job")
        try fixture.checkAfterLoad("binary garbage")
        var histogram: [String: Int] = [:]
        for code in expected { histogram[code ?? "(parsed; rejected by the handler)", default: 0] += 1 }
        measured("binary garbage: \(megabytes(garbage.count)), \(expected.count) lines: \(histogram.sorted { $0.key < $1.key })")
    }

    // MARK: - 2. A 100 MB line

    @Test func hundredMegabyteLineIsDiscardedNotBuffered() throws {
        let fixture = try HostileFixture()
        let daemon = fixture.daemon
        let peakBefore = daemon.peakResidentBytes
        let client = try Client(path: daemon.socket)
        // A real ADD, were it kept: the command is the 100 MB of x.
        let head = Array("ADD big in=1h command='echo ".utf8)
        let mebibyte = [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20)
        try fixture.loadStarts()
        // timerd answers once the line passes 64 KiB, while the client is still sending it.
        try client.write(head + mebibyte.dropFirst(head.count))
        let first = try client.readLine()
        #expect(first.hasPrefix("ERR line-too-long "), "\(first)")

        let load = LoadThreads(threads: 1) { _, load in
            do {
                for _ in 1..<(Size.hugeLineBytes >> 20) { try client.write(mebibyte) }
                try client.write("'\nPING\n")
                let next = try client.readLine()
                if next != "OK" { load.problems.add("the request after the 100 MB line got \(next.prefix(200))") }
            } catch {
                load.problems.add("sending the 100 MB line: \(error)")
            }
        }
        fixture.probe(until: { load.finished })
        load.stop()
        // The same connection goes on, and the line left nothing behind.
        #expect(try client.request("SHOW big").hasPrefix("ERR no-such-job "))
        #expect(try client.request("PING") == "OK")
        let growth = daemon.peakResidentBytes - max(peakBefore, fixture.baselineRSS)
        #expect(HostileFixture.sanitized || growth < 16 << 20, "peak RSS grew by \(megabytes(growth)) while a 100 MB line streamed through")
        measured("100 MB line: peak RSS grew by \(megabytes(max(0, growth)))")
        try fixture.checkAfterLoad("100 MB line")
    }

    // MARK: - 3. Invalid UTF-8

    /// Requests with invalid UTF-8 in every part a request has.
    private static let badEncoding: [(what: String, line: [UInt8])] = [
        ("verb: lone lead byte", Array("PIN".utf8) + [0xC7]),
        ("verb: overlong O", Array("SH".utf8) + [0xC1, 0x8F] + Array("W x".utf8)),
        ("name: Latin-1 é", Array("SHOW caf".utf8) + [0xE9]),
        ("name in ADD", Array("ADD j".utf8) + [0xFF] + Array(" every=1s command=true".utf8)),
        ("value", Array("ADD v every=1".utf8) + [0x80] + Array("s command=true".utf8)),
        ("key", Array("ADD k every=1h comm".utf8) + [0xE1] + Array("nd=x command=true".utf8)),
        ("command= bare", Array("ADD c every=1h command=echo".utf8) + [0xC3, 0x28]),
        ("command= single-quoted, truncated 4-byte form", Array("ADD c every=1h command='echo ".utf8) + [0xF0, 0x9F, 0x98] + [0x27]),
        ("command= double-quoted, surrogate", Array("ADD c every=1h command=\"echo ".utf8) + [0xED, 0xA0, 0x80] + [0x22]),
        ("command= after a backslash", Array("ADD c every=1h command=\"echo \\".utf8) + [0xFE] + [0x22]),
        ("argv: above U+10FFFF", Array("ADD c every=1h -- /bin/echo ".utf8) + [0xF4, 0x90, 0x80, 0x80]),
        ("env: overlong NUL", Array("ADD c every=1h env=A=".utf8) + [0xC0, 0x80] + Array(" command=true".utf8)),
        ("tag: overlong slash", Array("ADD c every=1h tag=".utf8) + [0xE0, 0x80, 0xAF] + Array(" command=true".utf8)),
        ("EXEC command", Array("EXEC start=1s command='".utf8) + [0xFF, 0xFE] + [0x27]),
        ("NEXT timezone", Array("NEXT every=1h timezone=Europe/".utf8) + [0xFF]),
        ("5-byte form after a good request", Array("PING ".utf8) + [0xF8, 0x88, 0x80, 0x80, 0x80]),
    ]

    @Test func invalidUTF8IsRejectedEverywhere() throws {
        let fixture = try HostileFixture()
        let daemon = fixture.daemon
        let lines = Self.badEncoding
        let round = Array(lines.map { $0.line + [10] }.joined())
        try fixture.loadStarts()
        let load = LoadThreads(threads: 1) { _, load in
            do {
                let client = try Client(path: daemon.socket)
                for _ in 0..<Size.badEncodingRounds {
                    try client.write(round)
                    for (what, _) in lines {
                        let reply = try client.readLine()
                        if !reply.hasPrefix("ERR bad-encoding ") { load.problems.add("\(what): \(reply.prefix(200))") }
                    }
                }
                let ping = try client.request("PING")
                if ping != "OK" { load.problems.add("PING after the bad lines got \(ping)") }
            } catch {
                load.problems.add("the invalid-UTF-8 client: \(error)")
            }
        }
        fixture.probe(until: { load.finished })
        load.stop()
        #expect(try fixture.listNames() == ["tick"], "no job was added from a line with invalid UTF-8, mangled or not")

        // Valid UTF-8 beyond ASCII goes through byte for byte, into the job and its command's output.
        let text = "café ✓ 🎉 日本"
        let output = daemon.directory + "/unicode.out"
        #expect(try fixture.request("ADD unicode in=10ms command=\"printf %s '\(text)' > \(output)\"") == "OK")
        #expect(try daemon.options("unicode").contains("command=printf %s '\(text)' > \(output)"))
        eventually("the command wrote its output") { FileManager.default.contents(atPath: output) == Data(text.utf8) }
        #expect(try fixture.request("ADD café in=1h command=true").hasPrefix("ERR bad-argument "), "a name must be ASCII")
        try fixture.checkAfterLoad("invalid UTF-8")
        measured("invalid UTF-8: \(lines.count * Size.badEncodingRounds) requests, every one ERR bad-encoding")
    }

    // MARK: - 4. 10,000 idle connections

    /// Opens `count` connections to the socket and keeps them until killed (all close at once then). A child
    /// of its own, not threads of the test process: 10,000 descriptors need more than the usual soft limit
    /// on open files, and that limit is the whole test process's, shared by every test running meanwhile.
    /// The child raises its own (and, as root, its hard limit where that is lower).
    private static let idleClient = """
        import resource, socket, sys
        path, count = sys.argv[1], int(sys.argv[2])
        need = count + 100
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard < need:
            hard = need
        if soft != resource.RLIM_INFINITY and soft < need:
            soft = need
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        held = []
        for _ in range(count):
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            held.append(s)
        sys.stdout.write("sent\\n")
        sys.stdout.flush()
        sys.stdin.read()
        """

    @Test func tenThousandIdleConnections() throws {
        // As systemd starts a service: 1,024 descriptors (soft). timerd raises that to the hard limit.
        let fixture = try HostileFixture(softFileLimit: 1_024, hardFileLimitAtLeast: Size.idleConnections + 1_000)
        let daemon = fixture.daemon
        #expect(daemon.logShows("open files: soft limit raised from 1024 to "), "log:\n\(daemon.log)")
        let limits = try #require(daemon.openFileLimits)
        #expect(limits.soft == limits.hard && limits.soft > Size.idleConnections, "\(limits)")

        let socketsBefore = daemon.openSockets
        let rssBefore = daemon.residentBytes
        let started = Date()
        try fixture.loadStarts()
        let idle = try PythonClient(script: Self.idleClient, arguments: [daemon.socket, String(Size.idleConnections)])
        defer { idle.kill() }
        let allOpen = Atomic<Bool>(false)
        let opener = LoadThreads(threads: 1) { _, load in
            if idle.waitUntilSent() {
                allOpen.store(true, ordering: .releasing)
            } else {
                load.problems.add("the idle client ended before it had opened \(Size.idleConnections) connections")
            }
        }
        fixture.probe(until: { opener.finished })
        opener.stop()
        let opened = allOpen.load(ordering: .acquiring) ? Size.idleConnections : 0
        #expect(opened == Size.idleConnections)
        eventually(timeout: 30, "timerd accepted every connection") {
            daemon.openSockets.subtracting(socketsBefore).count >= opened
        }
        let openSeconds = Date().timeIntervalSince(started)
        // While all of them stay open.
        for _ in 0..<5 { fixture.probe() }
        try fixture.checkJobKeptFiring()
        let rssWith = daemon.residentBytes
        let perConnection = (rssWith - rssBefore) / max(opened, 1)
        #expect(HostileFixture.sanitized || perConnection < 16 << 10, "\(perConnection) bytes of RSS per idle connection")
        measured("10,000 idle connections: opened and accepted in \(Int(openSeconds * 1000)) ms; RSS \(megabytes(rssBefore)) → "
            + "\(megabytes(rssWith)), \(perConnection) bytes per connection; \(daemon.openSockets.count) sockets open")

        // All of them go at once: the client is killed.
        idle.kill()
        eventually(timeout: 30, "timerd closed the idle connections") {
            daemon.openSockets.isSubset(of: socketsBefore)
        }
        try fixture.checkAfterLoad("10,000 idle connections", rssSlack: max(32 << 20, rssWith - rssBefore))
    }

    // MARK: - 5. A client that never reads

    @Test func clientThatNeverReadsIsThrottled() throws {
        let fixture = try HostileFixture(fillerJobs: Size.listJobs)
        let daemon = fixture.daemon
        let replyBytes = try fixture.request("LIST").utf8.count + 1
        let peakBefore = daemon.peakResidentBytes
        let hog = try Client(path: daemon.socket)
        let requests = Array(repeatElement(Array("LIST\n".utf8), count: Size.unreadLists).joined())
        try fixture.loadStarts()
        let written = hog.writeUntilStalled(requests)
        #expect(written < requests.count, "timerd kept reading from a client that never reads")

        // What one connection may make timerd do before it stops: 64 queued requests, 1 MiB of replies
        // waiting, and what the kernel's socket buffers hold (a few hundred KiB).
        let bound = 64 + ((1 << 20) + (512 << 10)) / replyBytes
        func answeredForTheHog() throws -> Int {
            let requests = try fixture.stats()["requests"] as? Int ?? 0
            return requests - fixture.ownRequests
        }
        // Probe until the hog's count stops growing (three rounds in a row), or passes the bound.
        var answered = try answeredForTheHog(), stableRounds = 0
        let deadline = Date().addingTimeInterval(20)
        while stableRounds < 3, answered <= bound, Date() < deadline {
            fixture.probe()
            let now = try answeredForTheHog()
            stableRounds = now == answered ? stableRounds + 1 : 0
            answered = now
        }
        let growth = daemon.peakResidentBytes - max(peakBefore, fixture.baselineRSS)
        measured("never-reading client: \(written) of \(requests.count) request bytes taken, \(answered) LIST replies of "
            + "\(replyBytes) bytes made for it (bound \(bound)), peak RSS grew by \(megabytes(max(0, growth)))")
        // One 64 KiB read queues 13,107 LISTs: timerd handles none of them while 1 MiB of replies is unsent.
        #expect(answered <= bound, "timerd answered \(answered) requests of a client that reads nothing")
        #expect(HostileFixture.sanitized || growth < 8 << 20, "peak RSS grew by \(megabytes(growth)) for a client that reads nothing")

        // When it finally reads, its replies are whole and in order.
        hog.setBlocking()
        for index in 0..<50 {
            let reply = try hog.readLine()
            guard reply.hasPrefix("OK [{"), reply.contains("\"name\":\"filler-\(Size.listJobs - 1)\"") else {
                Issue.record("hog reply \(index): \(reply.prefix(200))")
                break
            }
        }
        _ = consume hog
        try fixture.checkAfterLoad("never-reading client")
    }

    // MARK: - 6. 50 clients in a tight loop

    @Test func fiftyClientsInATightLoop() throws {
        let fixture = try HostileFixture(fillerJobs: 5)
        let daemon = fixture.daemon
        let answered = Counter()
        let deadline = Date().addingTimeInterval(Size.busySeconds)
        try fixture.loadStarts()
        let load = LoadThreads(threads: Size.busyClients) { index, load in
            do {
                let client = try Client(path: daemon.socket)
                var count = 0
                while load.running, Date() < deadline {
                    let reply: String
                    let ok: Bool
                    switch count % 3 {
                    case 0:
                        reply = try client.request("PING")
                        ok = reply == "OK"
                    case 1:
                        reply = try client.request("LIST")
                        ok = reply.hasPrefix("OK [{") && reply.contains("\"name\":\"filler-4\"")
                    default:
                        reply = try client.request("SHOW tick")
                        ok = reply.hasPrefix("OK {") && reply.contains("\"name\":\"tick\"")
                    }
                    if !ok { return load.problems.add("client \(index), request \(count): \(reply.prefix(200))") }
                    count += 1
                }
                answered.add(count)
            } catch {
                load.problems.add("client \(index): \(error)")
            }
        }
        fixture.probe(until: { load.finished }, minimum: 5)
        load.stop()
        let total = answered.value
        #expect(total > Size.busyClients * 3, "the busy clients got \(total) answers")
        measured("\(Size.busyClients) busy clients: \(total) requests answered in \(Size.busySeconds) s "
            + "(\(Int(Double(total) / Size.busySeconds))/s)")
        try fixture.checkAfterLoad("50 busy clients")
    }

    // MARK: - 7. Clients killed mid-request

    /// A client that does one hostile thing, says `sent`, and waits to be killed with SIGKILL:
    /// `half` sends half a line; `add` a whole ADD, killed before reading the reply; `owned` an
    /// `owner=connection` ADD with a reply to an earlier PING left unread (so timerd reads ECONNRESET, not
    /// end of file) and 3,000 `env=` options (a request that takes a while to parse); `flood` 2,000 LISTs,
    /// killed while timerd writes their replies.
    private static let killedClient = """
        import select, socket, sys
        path, kind, name = sys.argv[1], sys.argv[2], sys.argv[3].encode()
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(20)
        s.connect(path)
        def reply_waiting():
            select.select([s], [], [], 20)
        if kind == "half":
            s.sendall(b"ADD " + name + b" every=1s comm")
        elif kind == "add":
            s.sendall(b"ADD " + name + b" every=1h command=true\\n")
        elif kind == "owned":
            s.sendall(b"PING\\n")
            reply_waiting()
            env = b" ".join(b"env=V%d=%d" % (i, i) for i in range(3000))
            s.sendall(b"ADD " + name + b" every=1h owner=connection " + env + b" command=true\\n")
        elif kind == "flood":
            s.sendall(b"LIST\\n" * 2000)
            reply_waiting()
        sys.stdout.write("sent\\n")
        sys.stdout.flush()
        sys.stdin.read()
        """

    @Test func clientsKilledMidRequest() throws {
        let fixture = try HostileFixture(fillerJobs: 5)
        let daemon = fixture.daemon
        let kinds = ["half", "add", "owned", "flood"]
        try fixture.loadStarts()
        let load = LoadThreads(threads: 1) { _, load in
            for round in 0..<Size.killsPerKind {
                for kind in kinds where load.running {
                    do {
                        let child = try PythonClient(script: Self.killedClient, arguments: [daemon.socket, kind, "\(kind)-\(round)"])
                        if !child.waitUntilSent() { load.problems.add("the \(kind) client ended before it sent") }
                        child.kill()
                    } catch {
                        load.problems.add("the \(kind) client: \(error)")
                    }
                }
            }
        }
        fixture.probe(until: { load.finished })
        load.stop()

        // Half lines were dropped when their clients died.
        eventually("timerd saw every half line go") {
            daemon.log.components(separatedBy: "client left mid-line").count - 1 >= Size.killsPerKind
        }
        let fillers = (0..<5).map { "filler-\($0)" }
        var names = try fixture.listNames()
        #expect(!names.contains { $0.hasPrefix("half-") })
        // A job bound to its connection goes with the killed client (docs/owners-tags-modes.md).
        // A read error (ECONNRESET: the client died with a reply unread) may close the connection while its ADD
        // is in flight: the registry hears of the close only after the ADD, so the job still goes.
        #expect(eventually(timeout: 3, "the owner=connection jobs of killed clients were cancelled") {
            (try? fixture.listNames().contains { $0.hasPrefix("owned-") }) == false
        })
        // Whatever a killed client did add is a whole job that can be shown and cancelled.
        names = try fixture.listNames()
        for name in names where !fillers.contains(name) && name != "tick" {
            #expect(name.hasPrefix("add-") || name.hasPrefix("owned-"), "unexpected job \(name)")
            #expect(try fixture.request("SHOW \(name)").hasPrefix("OK {\""), "\(name)")
            #expect(try fixture.request("CANCEL \(name)") == "OK", "\(name)")
            #expect(try fixture.request("SHOW \(name)").hasPrefix("ERR no-such-job "), "\(name)")
        }
        #expect(try fixture.listNames() == fillers + ["tick"])
        measured("killed clients: \(Size.killsPerKind * kinds.count) killed; jobs left by them: "
            + "\(names.filter { !fillers.contains($0) && $0 != "tick" })")
        try fixture.checkAfterLoad("killed clients")
    }
}

/// A count shared by load threads.
private final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func add(_ value: Int) { count.add(value, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

/// Seeded garbage for the binary-garbage case.
private enum Garbage {
    /// About `count` bytes, ending with a newline: runs of random bytes (newlines among them), NUL runs,
    /// blank lines and CRs, invalid UTF-8 sequences, control characters, lines over the 64 KiB cap, and
    /// verbs followed by junk words (no `=` and no `-`, so no option or argv can form; no WATCH or MODE).
    static func make(bytes count: Int, seed: UInt64) -> [UInt8] {
        var random = SplitMix64(state: seed)
        var out: [UInt8] = []
        out.reserveCapacity(count + 160_000)
        func below(_ limit: Int) -> Int { Int(random.next() % UInt64(limit)) }
        let verbs = ["ADD", "SHOW", "CANCEL", "PAUSE", "RESUME", "RUN", "HISTORY", "NEXT", "add", "Show"]
        let junk = Array("abcXYZ019_. \t'\"\\".utf8)
        let invalid: [[UInt8]] = [[0xFF], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x80], [0xE2, 0x82]]
        while out.count < count {
            switch below(16) {
            case 0..<8:
                for _ in 0...below(4_096) { out.append(UInt8(truncatingIfNeeded: random.next())) }
            case 8, 9:
                out += [UInt8](repeating: 0, count: below(512) + 1)
                if below(2) == 0 { out.append(10) }
            case 10:
                out += [10, 13, 10, 10]
            case 11:
                out += Array("PING ".utf8) + invalid[below(invalid.count)] + [10]
            case 12, 13:
                out += Array(verbs[below(verbs.count)].utf8)
                for _ in 0..<below(40) { out.append(junk[below(junk.count)]) }
                out.append(10)
            case 14:
                guard below(8) == 0 else { continue }
                for _ in 0..<(70_000 + below(80_000)) {
                    let byte = UInt8(truncatingIfNeeded: random.next())
                    out.append(byte == 10 ? 11 : byte)
                }
                out.append(10)
            default:
                out += [0x1B, 0x5B, 0x32, 0x4A, 0x07, 0x08, 0x7F, 0x01, 0x1B, 0x5D] + (below(2) == 0 ? [10] : [])
            }
        }
        out.append(10)
        return out
    }
}

/// SplitMix64: a small deterministic generator, so the garbage is the same on every run.
private struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
