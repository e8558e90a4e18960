import Foundation
import Glibc
import Testing

/// Hostile, sloppy and numerous clients against the real daemon: it answers every request with exactly one
/// line, keeps each connection usable after bad input, and never stalls or crashes.
@Suite struct RobustnessTests {
    /// An `ADD` line of exactly `length` bytes (without the newline).
    private func addLine(name: String, length: Int) -> String {
        let head = "ADD \(name) in=1h command='echo "
        let tail = "'"
        return head + String(repeating: "x", count: length - head.utf8.count - tail.utf8.count) + tail
    }

    @Test func oversizedLineIsRejectedAndTheConnectionGoesOn() throws {
        let daemon = try Daemon()
        let client = try Client(path: daemon.socket)

        // Far over the cap, followed on the same write by a good request.
        try client.write(addLine(name: "huge", length: 200_000) + "\nPING\n")
        let tooLong = try client.readLine()
        #expect(tooLong.hasPrefix("ERR line-too-long "), "\(tooLong.prefix(200))")
        #expect(try client.readLine() == "OK")

        // One byte over the cap.
        try client.write(addLine(name: "over", length: 65_537) + "\n")
        #expect(try client.readLine().hasPrefix("ERR line-too-long "))
        #expect(try client.request("PING") == "OK")

        // Exactly at the cap (with LF, and with CRLF: the terminator does not count) is a normal request.
        let exact = addLine(name: "exact", length: 65_536)
        #expect(exact.utf8.count == 65_536)
        #expect(try client.request(exact) == "OK")
        #expect(try client.request(addLine(name: "exactcr", length: 65_536) + "\r") == "OK")
        let options = try daemon.options("exact")
        #expect(options.contains { $0.hasPrefix("command=echo xxx") && $0.utf8.count == 65_536 - "ADD exact in=1h ".utf8.count - 2 })

        // An overlong line sent in many small pieces is rejected once, and the next line is fine.
        for _ in 0..<20 { try client.write(String(repeating: "y", count: 4_000)) }
        try client.write("\nSHOW exact\n")
        #expect(try client.readLine().hasPrefix("ERR line-too-long "))
        #expect(try client.readLine().hasPrefix("OK {"))

        #expect(try daemon.listNames() == ["exact", "exactcr"], "no overlong line created a job")
        #expect(try client.request("PING") == "OK")
        daemon.expectAlive()
    }

    @Test func badBytesGetAnErrorAndTheConnectionGoesOn() throws {
        let daemon = try Daemon()
        let client = try Client(path: daemon.socket)
        func send(_ bytes: [UInt8]) throws -> String {
            try client.write(bytes + [10])
            return try client.readLine()
        }

        #expect(try send([0x50, 0x49, 0x4E, 0x47, 0xFF]).hasPrefix("ERR bad-encoding "), "PING + 0xFF")
        #expect(try send(Array("SHOW caf".utf8) + [0xC3]).hasPrefix("ERR bad-encoding "), "truncated sequence")
        #expect(try send([0xC0, 0x80]).hasPrefix("ERR bad-encoding "), "overlong NUL")
        #expect(try send([0xED, 0xA0, 0x80]).hasPrefix("ERR bad-encoding "), "surrogate")
        #expect(try client.request("PING") == "OK")

        #expect(try client.request("SHOW 'abc").hasPrefix("ERR bad-quoting "))
        #expect(try client.request("ADD q every=1s command=\"echo hi").hasPrefix("ERR bad-quoting "))
        #expect(try client.request("SHOW abc\\").hasPrefix("ERR bad-quoting "))
        #expect(try client.request("PING") == "OK")

        #expect(try client.request("").hasPrefix("ERR missing-argument "))
        #expect(try client.request("   \t ").hasPrefix("ERR missing-argument "))
        #expect(try client.request("\r").hasPrefix("ERR missing-argument "))
        #expect(try client.request("PING\r") == "OK", "CRLF line endings work")

        let garbage: [[UInt8]] = [
            [0x00],
            [0x50, 0x49, 0x4E, 0x47, 0x00],            // PING NUL
            [0x00, 0x50, 0x49, 0x4E, 0x47],            // NUL PING
            [0x01, 0x02, 0x03, 0x1B, 0x5B, 0x32, 0x4A], // control characters and an escape sequence
            [0x7F, 0x08, 0x07],
            Array("SHOW a\u{0}b".utf8),
            Array("ADD x every=1s command='a\u{0}b'".utf8),
            Array("\u{1B}[31mPING".utf8),
            (0..<256).map { UInt8($0) }.filter { $0 != 10 },
        ]
        for bytes in garbage {
            let reply = try send(bytes)
            #expect(reply.hasPrefix("ERR "), "garbage \(bytes.prefix(12)) got \(reply)")
            #expect(try client.request("PING") == "OK", "the connection still works after \(bytes.prefix(12))")
        }
        #expect(try daemon.request("LIST") == "OK []", "no garbage created a job")
        daemon.expectAlive()
    }

    @Test func pipelinedRequestsGetOneReplyEachInOrder() throws {
        let daemon = try Daemon()
        let client = try Client(path: daemon.socket)

        try client.write(String(repeating: "PING\n", count: 500))
        for index in 0..<500 {
            let reply = try client.readLine()
            guard reply == "OK" else {
                Issue.record("reply \(index) to PING was \(reply)")
                break
            }
        }

        // A mix of verbs, successes and errors, in one write.
        var requests: [String] = []
        var expected: [(String) -> Bool] = []
        for i in 0..<100 {
            requests += ["ADD j\(i) in=1h command=true", "SHOW j\(i)", "FROB", "CANCEL j\(i)", "SHOW j\(i)", ""]
            expected += [
                { $0 == "OK" },
                { $0.hasPrefix("OK {") && $0.contains("\"name\":\"j\(i)\"") },
                { $0.hasPrefix("ERR unknown-verb ") },
                { $0 == "OK" },
                { $0.hasPrefix("ERR no-such-job ") },
                { $0.hasPrefix("ERR missing-argument ") },
            ]
        }
        requests += ["ADD last in=1h command=true", "LIST", "VERSION"]
        expected += [{ $0 == "OK" }, { $0.hasPrefix("OK [{") && $0.contains("\"name\":\"last\"") }, { $0.hasPrefix("OK {\"protocol\":1") }]
        try client.write(requests.map { $0 + "\n" }.joined())
        var mismatches = 0
        for (index, check) in expected.enumerated() {
            let reply = try client.readLine()
            if !check(reply) {
                mismatches += 1
                if mismatches <= 5 { Issue.record("reply \(index) to \"\(requests[index])\" was \(reply.prefix(200))") }
            }
        }
        #expect(mismatches == 0)
        // No extra reply is left over: the next request's reply is the next line.
        let show = try client.request("SHOW last")
        #expect(show.hasPrefix("OK {") && show.contains("\"name\":\"last\""), "\(show)")
        #expect(try daemon.listNames() == ["last"])
        daemon.expectAlive()
    }

    @Test func clientLeavingMidLineChangesNothing() throws {
        let daemon = try Daemon()
        do {
            let client = try Client(path: daemon.socket)
            try client.write("ADD half every=1s comm")
        }  // the client is closed here, mid-line
        eventually("the daemon noticed the client left mid-line") { daemon.log.contains("client left mid-line") }
        #expect(try daemon.request("SHOW half").hasPrefix("ERR no-such-job "))

        // The same with a whole request that merely lacks its newline: not a request.
        do {
            let client = try Client(path: daemon.socket)
            try client.write("ADD half2 every=1s command=true")
            client.shutdownWrite()
            #expect(throws: HarnessError.self, "no reply to an unterminated line") { try client.readLine() }
        }
        #expect(try daemon.request("LIST") == "OK []")
        daemon.expectAlive()
    }

    @Test func halfClosedClientStillGetsItsReplies() throws {
        let daemon = try Daemon()
        let client = try Client(path: daemon.socket)
        try client.write("ADD sw in=1h command=true\nSHOW sw\nPING\n")
        client.shutdownWrite()
        #expect(try client.readLine() == "OK")
        #expect(try client.readLine().hasPrefix("OK {"))
        #expect(try client.readLine() == "OK")
        #expect(throws: HarnessError.self, "timerd closes the connection once every reply is sent") { try client.readLine() }

        // Many requests then EOF: every one is still answered (through the reading pause).
        let many = try Client(path: daemon.socket)
        try many.write(String(repeating: "HELP\n", count: 300))
        many.shutdownWrite()
        for _ in 0..<300 { #expect(try many.readLine().hasPrefix("OK [")) }
        #expect(throws: HarnessError.self) { try many.readLine() }
        daemon.expectAlive()
    }

    @Test func fiftyClientsAtOnce() throws {
        let daemon = try Daemon()
        final class Clients: @unchecked Sendable { var all: [Client] = [] }
        let clients = Clients()
        // All connected at the same time before any of them talks.
        for _ in 0..<50 { clients.all.append(try Client(path: daemon.socket)) }
        let problems = ProblemList()
        DispatchQueue.concurrentPerform(iterations: 50) { i in
            let client = clients.all[i]
            func check(_ request: String, _ ok: (String) -> Bool) {
                do {
                    let reply = try client.request(request)
                    if !ok(reply) { problems.add("client \(i): \(request) → \(reply.prefix(200))") }
                } catch {
                    problems.add("client \(i): \(request) → \(error)")
                }
            }
            check("PING") { $0 == "OK" }
            check("ADD c\(i) every=1h command='echo \(i)'") { $0 == "OK" }
            check("SHOW c\(i)") { $0.hasPrefix("OK {") && $0.contains("\"name\":\"c\(i)\"") && $0.contains("command=echo \(i)") }
            check("PING") { $0 == "OK" }
            check("ADD c\(i) every=1h command=true") { $0.hasPrefix("ERR exists ") }
            check("PING") { $0 == "OK" }
            if i % 2 == 1 {
                check("CANCEL c\(i)") { $0 == "OK" }
                check("SHOW c\(i)") { $0.hasPrefix("ERR no-such-job ") }
            }
            check("PING") { $0 == "OK" }
        }
        for problem in problems.all { Issue.record(Comment(rawValue: problem)) }
        let names = try daemon.listNames()
        #expect(names == stride(from: 0, to: 50, by: 2).map { "c\($0)" }.sorted())
        #expect(names.count == 25)
        daemon.expectAlive()
    }

    @Test func clientThatNeverReadsDoesNotStallOthers() throws {
        let daemon = try Daemon()
        let hog = try Client(path: daemon.socket)
        let help = try daemon.request("HELP")
        // Far more replies than the daemon buffers for one connection (1 MiB) plus the kernel's buffers.
        let request = Array("HELP\n".utf8)
        let count = 2_000_000 / request.count
        let bytes = Array([[UInt8]](repeating: request, count: count).joined())
        let written = hog.writeUntilStalled(bytes)
        #expect(written < bytes.count, "timerd kept reading from a client that never reads (no backpressure)")

        // While the hog sits there, other clients are served.
        let other = try Client(path: daemon.socket)
        #expect(try other.request("PING") == "OK")
        #expect(try other.request("ADD free in=1h command=true") == "OK")
        #expect(try other.request("SHOW free").hasPrefix("OK {"))
        #expect(try daemon.request("PING") == "OK")

        // When the hog finally reads, its replies are there, in order and intact.
        hog.setBlocking()
        for index in 0..<200 {
            let reply = try hog.readLine()
            guard reply == help else {
                Issue.record("hog reply \(index) was \(reply.prefix(200))")
                break
            }
        }
        daemon.expectAlive()
    }

    @Test func manyShortRunsDoNotCrashTheDaemon() throws {
        // Runs starting and ending back to back, as fast as the minimum interval allows.
        let daemon = try Daemon()
        #expect(try daemon.request("ADD fast1 every=10ms command=true") == "OK")
        #expect(try daemon.request("ADD fast2 every=10ms -- /bin/echo hi") == "OK")
        eventually("200 runs") {
            let total = ((try? daemon.runs("fast1")) ?? 0) + ((try? daemon.runs("fast2")) ?? 0)
            return total >= 200 || !daemon.process.isRunning
        }
        #expect(daemon.process.isRunning, "timerd died while running short jobs; log tail:\n\(daemon.log.suffix(3_000))")
        #expect(try daemon.request("CANCEL fast1 fast2") == "OK")
        daemon.expectAlive()
    }

    @Test func sigtermAfterAbuseExitsCleanly() throws {
        let daemon = try Daemon()
        // Leave some connections in odd states: one mid-line, one half-closed, one idle, one with unread replies.
        let midLine = try Client(path: daemon.socket)
        try midLine.write("ADD x every=1s comm")
        let halfClosed = try Client(path: daemon.socket)
        try halfClosed.write("PING\n")
        halfClosed.shutdownWrite()
        let idle = try Client(path: daemon.socket)
        let unread = try Client(path: daemon.socket)
        try unread.write(String(repeating: "HELP\n", count: 100))
        #expect(try halfClosed.readLine() == "OK")
        #expect(try idle.request("PING") == "OK")
        daemon.expectAlive()

        let status = daemon.stop(signal: SIGTERM)
        #expect(status == 0, "log:\n\(daemon.log)")
        #expect(daemon.process.terminationReason == .exit)
        #expect(!FileManager.default.fileExists(atPath: daemon.socket), "the socket file is removed on exit")
        #expect(daemon.logShows("stopped"))
        #expect(throws: HarnessError.self, "the daemon is gone") { try Client(path: daemon.socket) }
    }
}
